// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/sandbox/oracle"
	"github.com/telesched/telesched/scheduler/estimate"
)

// phaseLabel names the scenario phase a pod belongs to.
const phaseLabel = "telesched.io/sandbox-phase"

// Scenario phases.
const (
	phaseWeb   = "web"
	phaseBurst = "burst"
	phaseGPU   = "gpu"
	phaseHeat  = "during-heat"
	phaseProbe = "probe"
	phaseAhead = "heat-ahead"
	// phaseFault is the heater's fan fault and the pods placed during it,
	// phaseCool its repair and the probe pod's binding after it (phases of
	// the scenario, in Result.Phases; no pod's label).
	phaseFault = "heat"
	phaseCool  = "cool"
)

// probePod is pinned to the heater: rejected while it is hot, scheduled
// once it cools.
const probePod = "pinned-to-heater"

// podSpec is one pod of the workload.
type podSpec struct {
	name, phase string
	cpu, memory string
	gpus        int64
	singleNUMA  bool
	nodeName    string // pinned through the hostname label
}

// workload is what both profiles schedule, in order, per phase.
func workload() map[string][]podSpec {
	w := map[string][]podSpec{}
	for i := range 8 {
		w[phaseWeb] = append(w[phaseWeb], podSpec{name: fmt.Sprintf("web-%d", i), phase: phaseWeb, cpu: "2", memory: "4Gi"})
	}
	for i := range 24 {
		w[phaseBurst] = append(w[phaseBurst], podSpec{name: fmt.Sprintf("burst-%02d", i), phase: phaseBurst, cpu: "1", memory: "1Gi"})
	}
	for i := range trainingPods {
		w[phaseGPU] = append(w[phaseGPU], podSpec{name: fmt.Sprintf("train-%d", i), phase: phaseGPU, cpu: "16", memory: "64Gi", gpus: trainingGPUs, singleNUMA: true})
	}
	for i := range 8 {
		w[phaseHeat] = append(w[phaseHeat], podSpec{name: fmt.Sprintf("api-%d", i), phase: phaseHeat, cpu: "2", memory: "2Gi"})
	}
	return w
}

// The GPU phase: trainingPods jobs of trainingGPUs GPUs each, each on one
// NUMA node. Two jobs give a fleet with two kinds of GPU node a choice the
// default profile makes by CPU and memory alone.
const (
	trainingPods = 2
	trainingGPUs = 4
)

var phases = []string{phaseWeb, phaseBurst, phaseGPU, phaseHeat}

func (p podSpec) pod(namespace, scheduler string) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(p.cpu), corev1.ResourceMemory: resource.MustParse(p.memory)}
	if p.gpus > 0 {
		req[gpuResource] = *resource.NewQuantity(p.gpus, resource.DecimalSI)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: namespace, Labels: map[string]string{phaseLabel: p.phase}},
		Spec: corev1.PodSpec{
			SchedulerName: scheduler,
			Containers:    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: req, Limits: limitsOf(req)}}},
		},
	}
	if p.singleNUMA {
		pod.Annotations = map[string]string{config.PodAnnotationNUMAPolicy: config.NUMAPolicySingleNUMANode}
	}
	if p.nodeName != "" {
		pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": p.nodeName}
	}
	return pod
}

// limitsOf is the GPU limit (extended resources need limit == request).
func limitsOf(req corev1.ResourceList) corev1.ResourceList {
	if q, ok := req[gpuResource]; ok {
		return corev1.ResourceList{gpuResource: q}
	}
	return nil
}

func (s *sandbox) createPods(ctx context.Context, namespace, scheduler string, specs []podSpec, gap time.Duration) error {
	for i, p := range specs {
		if i > 0 && gap > 0 {
			if err := sleep(ctx, gap); err != nil {
				return err
			}
		}
		if _, err := s.kube.CoreV1().Pods(namespace).Create(ctx, p.pod(namespace, scheduler), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", namespace, p.name, err)
		}
	}
	return nil
}

func (s *sandbox) waitBound(ctx context.Context, namespace string, specs []podSpec) error {
	return s.watch.waitFor(ctx, fmt.Sprintf("%d pods in %s to be scheduled", len(specs), namespace), func(v *view) bool {
		for _, p := range specs {
			if _, ok := v.bound[namespace+"/"+p.name]; !ok {
				return false
			}
		}
		return true
	})
}

func (s *sandbox) createNamespace(ctx context.Context, name string) error {
	_, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

// baseline schedules the whole workload with the default profile, records
// where it went, and deletes it. These pods do not run on the simulated
// nodes: they only show what the default profile would have chosen.
func (s *sandbox) baseline(ctx context.Context) error {
	if err := s.createNamespace(ctx, baselineNamespace); err != nil {
		return err
	}
	var all []podSpec
	w := workload()
	for _, ph := range phases {
		all = append(all, w[ph]...)
	}
	if err := s.createPods(ctx, baselineNamespace, "default-scheduler", all, 0); err != nil {
		return err
	}
	if err := s.waitBound(ctx, baselineNamespace, all); err != nil {
		return err
	}
	s.printf("      %d pods placed: %s\n", len(all), distribution(s.res.Baseline, ""))
	zero := int64(0)
	if err := s.kube.CoreV1().Pods(baselineNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := s.watch.waitFor(ctx, "the baseline's pods to be deleted", func(v *view) bool {
		for key := range v.bound {
			if strings.HasPrefix(key, baselineNamespace+"/") {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	s.res.ran("baseline")
	return nil
}

// waitPlaced waits for the scenario's pods to be bound, or refused by the
// racks' power budgets (refusedByBudget): those it names with the
// budgets' reasons, deletes and leaves out, so that a fleet whose budgets
// cannot hold the workload ends with a report, not a timeout. A pod
// pending for any other reason is waited for until the run's timeout.
func (s *sandbox) waitPlaced(ctx context.Context, specs []podSpec) error {
	created := time.Now()
	settle := budgetSettle(s.opts.Interval)
	var refused []Refusal
	err := s.watch.waitFor(ctx, fmt.Sprintf("%d pods in %s to be scheduled or refused by a PowerBudget", len(specs), demoNamespace), func(v *view) bool {
		quiet := created
		for key, p := range v.bound {
			if strings.HasPrefix(key, demoNamespace+"/") && p.At.After(quiet) {
				quiet = p.At
			}
		}
		var pending []podSpec
		for _, p := range specs {
			if _, ok := v.bound[demoNamespace+"/"+p.name]; !ok {
				pending = append(pending, p)
			}
		}
		if len(pending) == 0 {
			return true
		}
		var ok bool
		refused, ok = refusedByBudget(pending, s.res.Rejections, quiet, time.Now(), settle)
		return ok
	})
	if err != nil || len(refused) == 0 {
		return err
	}
	zero := int64(0)
	for _, r := range refused {
		s.printf("    %s refused: still pending %.0fs after the last binding, by %s\n      (the scheduler's last word: %s)\n", r.Pod, settle.Seconds(), strings.Join(r.Reasons, "; "), r.Message)
		if err := s.kube.CoreV1().Pods(demoNamespace).Delete(ctx, r.Pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", r.Pod, err)
		}
	}
	s.watch.update(func(*view) { s.res.Refused = append(s.res.Refused, refused...) })
	return nil
}

// refused reports whether the budgets refused a pod.
func (r *Result) refused(pod string) bool {
	for _, x := range r.Refused {
		if x.Pod == pod {
			return true
		}
	}
	return false
}

// waitJudged waits, at most a few intervals, for a phase's bindings to be
// judged against the samples the scheduler had (judgeBound), so that the
// phase's table shows those samples and the marginal watts learned from
// them.
func (s *sandbox) waitJudged(ctx context.Context, phase string) {
	waitCtx, cancel := context.WithTimeout(ctx, 5*s.opts.Interval)
	defer cancel()
	_ = s.watch.waitFor(waitCtx, phase+"'s bindings to be judged", func(v *view) bool {
		for _, b := range v.unjudged {
			if s.res.Placements[b.placement].Phase == phase {
				return false
			}
		}
		return true
	})
}

// scenario runs the workload with the telesched profile, phase by phase,
// and drives the heater's fault.
func (s *sandbox) scenario(ctx context.Context) error {
	if err := s.createNamespace(ctx, demoNamespace); err != nil {
		return err
	}
	w := workload()

	s.printf("\n  web: %d pods of 2 CPUs, one every half second\n", len(w[phaseWeb]))
	s.printf("    (ADDS: the watts the pod adds to its node, as the scheduler estimates them from the node's published curve / by the simulation's true curve)\n")
	if err := s.createPods(ctx, demoNamespace, s.opts.Profile, w[phaseWeb], 500*time.Millisecond); err != nil {
		return err
	}
	if err := s.waitPlaced(ctx, w[phaseWeb]); err != nil {
		return err
	}
	s.printPlacements(ctx, phaseWeb)
	s.res.ran(phaseWeb)

	s.printf("\n  burst: %d pods of 1 CPU at once, before any telemetry refresh\n", len(w[phaseBurst]))
	if err := s.createPods(ctx, demoNamespace, s.opts.Profile, w[phaseBurst], 0); err != nil {
		return err
	}
	if err := s.waitPlaced(ctx, w[phaseBurst]); err != nil {
		return err
	}
	s.printPlacements(ctx, phaseBurst)
	s.printf("    telesched: %s\n    default:   %s\n", distribution(s.res.Placements, phaseBurst), distribution(s.res.Baseline, phaseBurst))
	s.res.ran(phaseBurst)

	s.printf("\n  gpu: %d training pods, each asking for %d GPUs, 16 CPUs, 64Gi and %s: %s\n", len(w[phaseGPU]), trainingGPUs, config.PodAnnotationNUMAPolicy, config.NUMAPolicySingleNUMANode)
	if err := s.createPods(ctx, demoNamespace, s.opts.Profile, w[phaseGPU], 0); err != nil {
		return err
	}
	if err := s.waitPlaced(ctx, w[phaseGPU]); err != nil {
		return err
	}
	s.printPlacements(ctx, phaseGPU)
	s.res.ran(phaseGPU)

	if err := s.aheadPhase(ctx); err != nil {
		return err
	}

	if s.res.Heater == "" {
		why := "no node in this fleet has a fan fault"
		s.res.skip(phaseFault, why)
		s.res.skip(phaseCool, why)
		s.printf("\n  heat: %s; %d pods of 2 CPUs\n", why, len(w[phaseHeat]))
		if err := s.createPods(ctx, demoNamespace, s.opts.Profile, w[phaseHeat], 0); err != nil {
			return err
		}
		if err := s.waitPlaced(ctx, w[phaseHeat]); err != nil {
			return err
		}
		s.printPlacements(ctx, phaseHeat)
		return nil
	}
	return s.heatPhase(ctx, w[phaseHeat])
}

// heatPhase fails the heater's fan, places the heat phase's pods and a pod
// pinned to the heater, repairs the fan and waits for the pinned pod.
func (s *sandbox) heatPhase(ctx context.Context, pods []podSpec) error {
	name := s.res.Heater
	heater := s.nodes[name]
	crit := float64(heater.Spec.Host.CritMilliCelsius) / 1000
	s.printf("\n  heat: %s's fan fails (the model adds heat until the package reaches %.0f°C, past its %.0f°C critical limit)\n", name, crit+2, crit)
	heater.SetFaultHeat(heater.FaultHeatFor(crit + 2))
	var hotAt time.Time
	if err := s.watch.waitFor(ctx, name+" to report it is past its thermal limit", func(v *view) bool {
		if t := v.telemetry[name]; hot(t) && hotAt.IsZero() {
			hotAt = time.Now()
		}
		t := v.telemetry[name]
		return t != nil && t.HasLimit && t.HottestMilli >= t.LimitMilli
	}); err != nil {
		return err
	}
	s.read(func(v *view) { s.printf("    %s reports %s\n", name, describe(v.telemetry[name])) })
	probe := podSpec{name: probePod, phase: phaseProbe, cpu: "500m", memory: "512Mi", nodeName: name}
	s.printf("    now %d pods of 2 CPUs, and %s (nodeSelector: %s)\n", len(pods), probePod, name)
	if err := s.createPods(ctx, demoNamespace, s.opts.Profile, append(pods, probe), 0); err != nil {
		return err
	}
	if err := s.waitPlaced(ctx, pods); err != nil {
		return err
	}
	s.printPlacements(ctx, phaseHeat)
	if err := s.watch.waitFor(ctx, probePod+"'s FailedScheduling event", func(*view) bool { return len(s.res.Rejections[probePod]) > 0 }); err != nil {
		return err
	}
	s.res.ran(phaseFault)
	s.read(func(*view) {
		s.printf("    %s rejected:\n", probePod)
		for _, m := range s.res.Rejections[probePod] {
			s.printf("      %s\n", m)
		}
	})

	s.printf("\n  cool: %s's fan is repaired\n", name)
	heater.SetFaultHeat(0)
	var coolAt time.Time
	if err := s.watch.waitFor(ctx, name+" to cool below its limit", func(v *view) bool {
		if t := v.telemetry[name]; t != nil && !hot(t) {
			coolAt = time.Now()
			return true
		}
		return false
	}); err != nil {
		return err
	}
	if err := s.waitPlaced(ctx, []podSpec{probe}); err != nil {
		return err
	}
	if s.res.refused(probePod) {
		s.res.skip(phaseCool, probePod+" was refused by a PowerBudget after the node cooled")
		return nil
	}
	// Its binding is judged against the sample the scheduler had once the
	// next sample of the node arrives (an interval).
	if err := s.watch.waitFor(ctx, probePod+"'s binding to be judged", func(v *view) bool {
		for _, b := range v.unjudged {
			if b.key == demoNamespace+"/"+probePod {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	s.read(func(v *view) {
		p := v.bound[demoNamespace+"/"+probePod]
		s.res.ProbeScheduledAfterCooling = p.Node == name && p.At.After(hotAt)
		s.printf("    %s reported cool %.1fs after the repair began; %s scheduled on %s %.1fs later (%s), requeued by the telemetry update\n",
			name, coolAt.Sub(hotAt).Seconds(), probePod, p.Node, p.At.Sub(coolAt).Seconds(), p.Why)
	})
	s.res.ran(phaseCool)
	return nil
}

// aheadPod asks for enough CPUs to take a node past its limit - margin
// once it settles, though the node is cool now and the pod fits its CPUs
// and LoadAware's threshold.
const aheadPod = "too-hot-later"

// aheadModelWait bounds the wait for the target node's thermal model. The
// agent publishes one after 60 sample pairs of the sensor closest to its
// limit; when that sensor changes (the package and a core that read the
// same trade places), the model starts again, and a minute was not always
// enough (1 default-fleet run in 6, docs/benchmarks.md). Three minutes
// still fit the e2e test's 8.
const aheadModelWait = 3 * time.Minute

// aheadMaxUtilization keeps the heat-ahead pod under LoadAware's 80 %
// threshold, so only the thermal prediction can refuse it.
const aheadMaxUtilization = 0.77

// aheadTarget picks the CPU node (no GPUs, no fan fault) that a pod of the
// fewest whole CPUs would take, by the simulation's physics, 3°C past its
// limit - margin once it settles, within aheadMaxUtilization. False when
// no node can be.
func (s *sandbox) aheadTarget() (string, int, float64, bool) {
	best, bestCPUs, bestC := "", 0, 0.0
	for _, n := range s.sortedNodes() {
		if len(n.Spec.GPUs) > 0 || n.Spec.Name == s.res.Heater {
			continue
		}
		capacity := float64(n.Spec.Host.CPUs)
		limit := float64(n.Spec.Host.CritMilliCelsius)/1000 - float64(thermalMarginMilli)/1000
		u0 := n.Utilization()
		for c := 1; (u0 + float64(c)/capacity) <= aheadMaxUtilization; c++ {
			if t, _ := n.Spec.Steady(u0+float64(c)/capacity, 0); t >= limit+3 {
				if best == "" || c < bestCPUs {
					best, bestCPUs, bestC = n.Spec.Name, c, t
				}
				break
			}
		}
	}
	return best, bestCPUs, bestC, best != ""
}

// aheadPhase places a pod, pinned to a cool node, that would take the node
// past its limit - margin once it settles: EnergyAware's thermal model
// must refuse it. The pod is then deleted.
func (s *sandbox) aheadPhase(ctx context.Context) error {
	name, cpus, settles, ok := s.aheadTarget()
	if !ok {
		why := fmt.Sprintf("no CPU node in this fleet would settle past its limit - %d°C under a pod within %.0f%% CPU",
			thermalMarginMilli/1000, 100*aheadMaxUtilization)
		s.res.skip(phaseAhead, why)
		s.printf("\n  heat ahead: %s; skipped\n", why)
		return nil
	}
	// The phase is about the prediction: wait for the node's thermal model
	// (an agent withdraws one that stopped predicting, and relearns it).
	modelCtx, cancelModel := context.WithTimeout(ctx, aheadModelWait)
	defer cancelModel()
	if err := s.watch.waitFor(modelCtx, name+"'s thermal model", func(v *view) bool {
		t := v.telemetry[name]
		return t != nil && t.Models != nil && t.Models.HasThermal
	}); err != nil {
		if ctx.Err() != nil {
			return err
		}
		why := fmt.Sprintf("%s published no thermal model within %v", name, aheadModelWait)
		s.res.skip(phaseAhead, why)
		s.printf("\n  heat ahead: %s; skipped\n", why)
		return nil
	}
	// The pod is sized to the node's load by the simulation; the scheduler
	// also counts the pods placed there until a sample at least
	// estimate.Hold(interval) after they run retires
	// them. Wait for that, so only the thermal prediction can refuse it.
	var retiredBy time.Time
	s.read(func(v *view) {
		for _, p := range v.bound {
			if p.Node == name && p.At.After(retiredBy) {
				retiredBy = p.At
			}
		}
	})
	retiredBy = retiredBy.Add(estimate.Hold(s.opts.Interval) + s.opts.Interval)
	if err := s.watch.waitFor(ctx, name+"'s reservations to retire", func(v *view) bool {
		t := v.telemetry[name]
		return t != nil && t.SampleTime.After(retiredBy)
	}); err != nil {
		return err
	}
	s.read(func(v *view) {
		s.printf("\n  heat ahead: %s asks for %d CPUs on %s (nodeSelector), cool now (%s);\n    with it the node would settle at %.1f°C (the simulation's physics)\n",
			aheadPod, cpus, name, describe(v.telemetry[name]), settles)
	})
	pod := podSpec{name: aheadPod, phase: phaseAhead, cpu: fmt.Sprint(cpus), memory: "1Gi", nodeName: name}
	s.res.AheadRan = true
	s.res.ran(phaseAhead)
	if err := s.createPods(ctx, demoNamespace, s.opts.Profile, []podSpec{pod}, 0); err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := s.watch.waitFor(waitCtx, aheadPod+" to be refused on its predicted temperature, or placed", func(v *view) bool {
		if _, bound := v.bound[demoNamespace+"/"+aheadPod]; bound {
			return true
		}
		for _, m := range s.res.Rejections[aheadPod] {
			if strings.Contains(m, "predicted steady temperature") {
				return true
			}
		}
		return false
	})
	if err != nil && ctx.Err() != nil {
		return err
	}
	s.read(func(v *view) {
		if p, bound := v.bound[demoNamespace+"/"+aheadPod]; bound {
			s.printf("    %s was placed on %s (%s)\n", aheadPod, p.Node, p.Why)
			return
		}
		for _, m := range s.res.Rejections[aheadPod] {
			s.res.AheadRefused = s.res.AheadRefused || strings.Contains(m, "predicted steady temperature")
		}
		if s.res.AheadRefused {
			s.printf("    %s refused on its predicted temperature:\n", aheadPod)
		} else {
			s.printf("    %s NOT refused on its predicted temperature:\n", aheadPod)
		}
		for _, m := range s.res.Rejections[aheadPod] {
			s.printf("      %s\n", m)
		}
	})
	zero := int64(0)
	if err := s.kube.CoreV1().Pods(demoNamespace).Delete(ctx, aheadPod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return fmt.Errorf("deleting %s: %w", aheadPod, err)
	}
	return nil
}

func (s *sandbox) read(f func(v *view)) { s.watch.read(f) }

// printPlacements prints a phase's pods: node, the node's telemetry when
// the pod was bound, the watts the pod adds to it as the scheduler
// learned them and by the simulation's physics, and the default profile's
// choice.
func (s *sandbox) printPlacements(ctx context.Context, phase string) {
	s.waitJudged(ctx, phase)
	s.read(func(*view) {
		base := map[string]Placement{}
		for _, p := range s.res.Baseline {
			base[p.Pod] = p
		}
		tw := newTable(s.opts.Out)
		rows := 0
		for i := range s.res.Placements {
			p := &s.res.Placements[i]
			if p.Phase != phase {
				continue
			}
			why := p.Why
			if len(p.GPUs) > 0 {
				why += fmt.Sprintf("; GPUs %v, %s", p.GPUs, alignment(p.GPUsAligned))
			}
			def := base[p.Pod].Node
			if phase == phaseGPU && def != "" {
				def += ", " + alignment(base[p.Pod].GPUsAligned)
			}
			if rows++; rows == 1 {
				fmt.Fprintf(tw, "    POD\tNODE\tNODE WHEN PLACED\tADDS, LEARNED / TRUE\tDEFAULT PROFILE\n")
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", p.Pod, p.Node, why, marginalCell(p), def)
		}
		_ = tw.Flush()
	})
}

func alignment(ok bool) string {
	if ok {
		return "one NUMA node"
	}
	return "NOT on one NUMA node"
}

// fleetWatts estimates the simulated fleet's steady power running a
// placement's workload pods (cpuOnly: its CPU pods only), from each node's
// power curve and thermal response (see sandbox/sim).
func (s *sandbox) fleetWatts(ps []Placement, cpuOnly bool) float64 {
	return s.nodesWatts(ps, cpuOnly, nil)
}

// nodesWatts is fleetWatts over the nodes named (nil: every node).
func (s *sandbox) nodesWatts(ps []Placement, cpuOnly bool, only []string) float64 {
	w := workload()
	spec := map[string]podSpec{}
	for _, ph := range phases {
		for _, p := range w[ph] {
			spec[p.name] = p
		}
	}
	cpu := map[string]float64{}
	gpus := map[string]int{}
	for _, p := range ps {
		ps, ok := spec[p.Pod]
		if !ok || (cpuOnly && ps.gpus > 0) {
			continue // the probe, or a GPU pod
		}
		q := resource.MustParse(ps.cpu)
		cpu[p.Node] += float64(q.MilliValue())
		gpus[p.Node] += int(ps.gpus)
	}
	var total float64
	for name, n := range s.nodes {
		if only != nil && !slices.Contains(only, name) {
			continue
		}
		u := n.Spec.BaseUtilization + cpu[name]/float64(n.Spec.Host.CPUs*1000)
		total += n.Spec.EstimatedWatts(u, gpus[name])
	}
	return total
}

// work splits a placement's workload watts into its CPU pods' and what its
// GPU pods add.
func (s *sandbox) work(ps []Placement) Work {
	cpu := s.fleetWatts(ps, true)
	return Work{CPU: cpu - s.res.IdleWatts, GPU: s.fleetWatts(ps, false) - cpu}
}

func (s *sandbox) summary() {
	s.watch.update(func(v *view) { s.watch.judgeBound(v, true) })
	s.read(func(v *view) {
		res := s.res
		res.TeleschedWatts, res.DefaultWatts = s.fleetWatts(res.Placements, false), s.fleetWatts(res.Baseline, false)
		res.IdleWatts = s.fleetWatts(nil, false)
		res.TeleschedWork, res.DefaultWork = s.work(res.Placements), s.work(res.Baseline)
		placed := s.placedPods()
		closed := scenarioClosures(s.opts.Fleet)
		res.Oracle = s.oracleReport(placed, oracle.Options{Closed: closed})
		res.OracleOffGPU = s.oracleReport(placed, oracle.Options{CPUPodsOffGPUNodes: true, Closed: closed})
		if len(res.Refused) > 0 {
			whole := oracle.Solve(oracleFleet(s.opts.Fleet), oraclePods(workloadPods()), oracle.Options{Closed: closed})
			res.WorkloadInfeasible = whole.Infeasible
		}
		res.Marginal = marginalErrors(res.Placements)
		load := func(ps []Placement, node string) string {
			n, milli := 0, int64(0)
			for _, p := range ps {
				if p.Node == node && p.Phase != phaseProbe && p.Phase != phaseAhead {
					n++
					milli += p.PodCPUMilli
				}
			}
			return fmt.Sprintf("%d / %s", n, strings.TrimSuffix(fmt.Sprintf("%.1f", float64(milli)/1000), ".0"))
		}
		var names []string
		for name := range s.nodes {
			names = append(names, name)
		}
		sort.Strings(names)
		s.printf("  Pods / CPUs requested on each node: telesched's, the default profile's, and the oracles' (the cheapest placements, below):\n")
		tw := newTable(s.opts.Out)
		fmt.Fprintf(tw, "  NODE\tTELESCHED\tDEFAULT PROFILE\tORACLE\tORACLE, CPU PODS OFF GPU NODES\tPEAK TEMP\tTELEMETRY NOW\n")
		for _, name := range names {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%.0f°C\t%s\n", name, load(res.Placements, name), load(res.Baseline, name),
				load(res.Oracle.Placements, name), load(res.OracleOffGPU.Placements, name), res.PeakCelsius[name], describe(v.telemetry[name]))
		}
		_ = tw.Flush()

		if res.Heater != "" {
			s.printf("\n  Hot nodes avoided: %s peaked at %.0f°C; pods placed on a node while its telemetry had it at its limit: %d",
				res.Heater, res.HeaterPeakCelsius, len(res.HotPlacements))
			if len(res.HotPlacements) > 0 {
				s.printf(" (%s)", strings.Join(res.HotPlacements, "; "))
			}
			s.printf(".\n  %s was rejected while the node was hot and scheduled after it cooled: %v.\n", probePod, res.ProbeScheduledAfterCooling)
		}
		s.printf("  Heat ahead: pods placed where the node, with its pods, settles at or past its limit - %d°C: %d",
			thermalMarginMilli/1000, len(res.PredictedHotPlacements))
		if len(res.PredictedHotPlacements) > 0 {
			s.printf(" (%s)", strings.Join(res.PredictedHotPlacements, "; "))
		}
		s.printf("; nodes refused on their predicted steady temperature: %d times; %s refused on its prediction: %v.\n", res.PredictionRejections, aheadPod, res.AheadRefused)
		s.printf("  GPU pods: telesched put %s; the default profile %s; the oracle %s.\n", gpuPlacements(res.Placements), gpuPlacements(res.Baseline), gpuPlacements(res.Oracle.Placements))
		if len(res.Skipped) > 0 {
			var skipped []string
			for _, ph := range []string{phaseAhead, phaseFault, phaseCool} {
				if why, ok := res.Skipped[ph]; ok {
					skipped = append(skipped, ph+" ("+why+")")
				}
			}
			s.printf("  Phases skipped: %s.\n", strings.Join(skipped, "; "))
		}
		if len(res.Refused) > 0 {
			s.printf("  Refused by the racks' power budgets (%d pods, deleted; telesched's watts below leave them out, the default profile's do not):\n", len(res.Refused))
			for _, r := range res.Refused {
				s.printf("    %s (%s): %s\n", r.Pod, r.Phase, strings.Join(r.Reasons, "; "))
			}
		}
		s.printEnergy()
		if len(res.Racks) > 0 {
			s.printRacks()
		}
	})
}

// placedPods are the workload's pods that telesched placed: all of them
// but those the racks' budgets refused.
func (s *sandbox) placedPods() []podSpec {
	var out []podSpec
	for _, p := range workloadPods() {
		if !s.res.refused(p.name) {
			out = append(out, p)
		}
	}
	return out
}

// oracleReport runs the oracle on pods, the whole workload's watts and
// the CPU pods' apart, as workload watts. The caller holds the watcher's
// lock; IdleWatts is set.
func (s *sandbox) oracleReport(pods []podSpec, opts oracle.Options) OracleReport {
	fleet, in := oracleFleet(s.opts.Fleet), oraclePods(pods)
	all := oracle.Solve(fleet, in, opts)
	opts.CPUPodsObjective = true
	cpu := oracle.Solve(fleet, in, opts)
	r := OracleReport{LowerBound: all.LowerBound - s.res.IdleWatts, CPULowerBound: cpu.LowerBound - s.res.IdleWatts}
	if len(all.Unplaced) > 0 || len(cpu.Unplaced) > 0 {
		r.Unplaced, r.Infeasible = all.Unplaced, all.Infeasible || cpu.Infeasible
		if len(r.Unplaced) == 0 {
			r.Unplaced = cpu.Unplaced
		}
		r.Work, r.CPUWatts = Work{CPU: math.NaN(), GPU: math.NaN()}, math.NaN()
		return r
	}
	placements := func(nodes map[string]string) []Placement {
		var out []Placement
		for _, p := range pods {
			cpu, _ := resource.ParseQuantity(p.cpu)
			out = append(out, Placement{Pod: p.name, Phase: p.phase, Node: nodes[p.name], PodCPUMilli: cpu.MilliValue(), PodGPUs: p.gpus, GPUsAligned: p.singleNUMA})
		}
		return out
	}
	r.Placements = placements(all.Nodes)
	r.Work = s.work(r.Placements)
	r.CPUWatts = s.work(placements(cpu.Nodes)).CPU
	return r
}

// printEnergy prints each profile's workload watts beside the oracles',
// telesched's share of the achievable saving, and how well the scheduler
// learned the marginal watts it placed by. The caller holds the
// watcher's lock.
func (s *sandbox) printEnergy() {
	res := s.res
	t, d, o, off := res.TeleschedWork, res.DefaultWork, res.Oracle, res.OracleOffGPU
	placed := s.placedPods()
	if len(res.Refused) > 0 {
		// Compare like with like: the pods telesched placed, as each
		// profile and the oracle placed them.
		var ps []Placement
		for _, p := range res.Baseline {
			if !res.refused(p.Pod) {
				ps = append(ps, p)
			}
		}
		d = s.work(ps)
		s.printf("  The figures below are over the %d pods telesched placed (the default profile placed all %d: %.0f W of workload watts with the %d refused among them).\n",
			len(placed), len(workloadPods()), res.DefaultWork.Total(), len(res.Refused))
		if res.WorkloadInfeasible {
			s.printf("  No placement of all %d pods fits the constraints below, budgets included: the refusals were necessary (the oracle's lower bound; see sandbox/oracle).\n", len(workloadPods()))
		} else {
			s.printf("  A placement of all %d pods within the constraints below may exist: the oracle does not prove otherwise.\n", len(workloadPods()))
		}
	}
	s.printf("  Workload watts (fleet watts minus the fleet's %.0f W without the workload; the simulated nodes' true curves, leakage\n", res.IdleWatts)
	s.printf("  at the settled temperature included). The oracle is the cheapest placement of the same %d pods under the constraints\n", len(placed))
	s.printf("  telesched enforces (allocatable CPU, memory and GPUs; single-NUMA pods on one NUMA node; base load + requests within\n")
	s.printf("  LoadAware's %d%%; settling below limit - %d°C; racks within budget - reserve", configv1.DefaultLoadAwareArgs().CPUThresholdPercent, thermalMarginMilli/1000)
	if res.Heater != "" {
		s.printf(";\n  the %s pods off %s, past its limit while they were placed", phaseHeat, res.Heater)
	}
	s.printf("); its CPU pods may use GPU nodes' CPUs, as\n")
	s.printf("  TopologyFit only scores against that. SHARE is telesched's share of the achievable saving, (default - telesched) / (default - oracle):\n")
	tw := newTable(s.opts.Out)
	fmt.Fprintf(tw, "    \tTELESCHED\tDEFAULT PROFILE\tRATIO\tORACLE\tSHARE\tORACLE, CPU PODS OFF GPU NODES\tSHARE\n")
	fmt.Fprintf(tw, "    CPU pods\t%.0f W\t%.0f W\t%s\t%s\t%s\t%s\t%s\n", t.CPU, d.CPU, ratio(t.CPU, d.CPU),
		wattsCell(o.CPUWatts), s.shareCell(t.CPU, d.CPU, o.CPUWatts), wattsCell(off.CPUWatts), s.shareCell(t.CPU, d.CPU, off.CPUWatts))
	fmt.Fprintf(tw, "    GPU pods (on top)\t%.0f W\t%.0f W\t%s\t%s\t\t%s\t\n", t.GPU, d.GPU, ratio(t.GPU, d.GPU), wattsCell(o.Work.GPU), wattsCell(off.Work.GPU))
	fmt.Fprintf(tw, "    all\t%.0f W\t%.0f W\t%s\t%s\t%s\t%s\t%s\n", t.Total(), d.Total(), ratio(t.Total(), d.Total()),
		wattsCell(o.Work.Total()), s.shareCell(t.Total(), d.Total(), o.Work.Total()), wattsCell(off.Work.Total()), s.shareCell(t.Total(), d.Total(), off.Work.Total()))
	_ = tw.Flush()
	s.printf("  Fleet watts running the workload: telesched %.0f W, default profile %.0f W, oracle %s.\n", res.TeleschedWatts, d.Total()+res.IdleWatts, wattsCell(o.Work.Total()+res.IdleWatts))
	for _, x := range []struct {
		name string
		r    OracleReport
	}{{"oracle", o}, {"oracle with CPU pods off GPU nodes", off}} {
		switch {
		case x.r.Infeasible:
			s.printf("  The %s: no placement of every pod exists within the constraints (%s find no room, by the lower bound's relaxation; see sandbox/oracle).\n", x.name, strings.Join(x.r.Unplaced, ", "))
			continue
		case len(x.r.Unplaced) > 0:
			s.printf("  The %s found no placement of %s within the constraints (greedy and local search; not a proof that none exists).\n", x.name, strings.Join(x.r.Unplaced, ", "))
			continue
		}
		s.printf("  The %s is optimal within %s: no placement can be below %s (CPU pods) and %s (all) (see sandbox/oracle).\n", x.name,
			wattsCell(max(x.r.CPUWatts-x.r.CPULowerBound, x.r.Work.Total()-x.r.LowerBound, 0)), wattsCell(x.r.CPULowerBound), wattsCell(x.r.LowerBound))
	}
	m := res.Marginal
	s.printf("  Learned vs true marginal watts at telesched's placements (ADDS in the tables): median absolute error %s over %d placements (CPU pods %s over %d, GPU pods %s over %d).\n",
		percentCell(m.All), m.NAll, percentCell(m.CPU), m.NCPU, percentCell(m.GPU), m.NGPU)
}

// achievableFloor is the least achievable saving, as a share of the
// default profile's watts, for which the report gives telesched's share.
const achievableFloor = 0.05

// captured is telesched's share of the achievable saving, (def - tel) /
// (def - oracle); ok false where the achievable saving is under
// achievableFloor of def's watts (or unknown), where a share says little.
func captured(tel, def, oracle float64) (float64, bool) {
	if math.IsNaN(oracle) || def <= 0 || def-oracle < achievableFloor*def {
		return 0, false
	}
	return (def - tel) / (def - oracle), true
}

// shareCell is captured for the report, or what stands in its place.
func (s *sandbox) shareCell(tel, def, oracle float64) string {
	if math.IsNaN(oracle) {
		return "-"
	}
	if c, ok := captured(tel, def, oracle); ok {
		return fmt.Sprintf("%.0f%%", 100*c)
	}
	if def < oracle {
		return fmt.Sprintf("none to gain: oracle %.0f W above the default", oracle-def)
	}
	return fmt.Sprintf("achievable %.0f W < %.0f%% of %.0f W", def-oracle, 100*achievableFloor, def)
}

func wattsCell(w float64) string {
	if math.IsNaN(w) {
		return "-"
	}
	return fmt.Sprintf("%.0f W", w)
}

func percentCell(p float64) string {
	if math.IsNaN(p) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", p)
}

// printRacks prints each rack's budget, its peak measured watts over the
// run, and its watts running each profile's placement. The caller holds
// the watcher's lock.
func (s *sandbox) printRacks() {
	res := s.res
	s.printf("  Racks (PowerBudgets): the peak is the largest sum of the rack's published watts after the calibration sweep;\n  the profiles' watts are the rack running each placement, by the nodes' curves (the default profile ignores budgets):\n")
	tw := newTable(s.opts.Out)
	fmt.Fprintf(tw, "    BUDGET\tNODES\tBUDGET W\tLIMIT W\tPEAK MEASURED\tTELESCHED\tDEFAULT PROFILE\tEXCEEDED\n")
	for i := range res.Racks {
		r := &res.Racks[i]
		r.TeleschedWatts, r.DefaultWatts = s.nodesWatts(res.Placements, false, r.Nodes), s.nodesWatts(res.Baseline, false, r.Nodes)
		limit := r.BudgetWatts - r.ReserveWatts
		fmt.Fprintf(tw, "    %s\t%d\t%d\t%d\t%.0f W (%.0f%%)\t%.0f W\t%.0f W%s\t%v\n", r.Budget, len(r.Nodes), r.BudgetWatts, limit,
			r.PeakWatts, 100*r.PeakWatts/float64(r.BudgetWatts), r.TeleschedWatts, r.DefaultWatts, over(r.DefaultWatts, limit), r.PeakWatts > float64(r.BudgetWatts))
	}
	_ = tw.Flush()
	s.printf("  Nodes refused on a PowerBudget: %d times.\n", res.BudgetRejections)
}

// over marks watts past a limit.
func over(w float64, limit int64) string {
	if w > float64(limit) {
		return " (over)"
	}
	return ""
}

// gpuPlacements says where a placement put the GPU pods and whether each
// got its GPUs on one NUMA node.
func gpuPlacements(ps []Placement) string {
	var out []string
	for _, p := range ps {
		if p.Phase == phaseGPU {
			out = append(out, fmt.Sprintf("%s on %s (%s)", p.Pod, p.Node, alignment(p.GPUsAligned)))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// ratio is a / b to two places, "-" when b is not positive.
func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// PlacementOf is where the telesched profile put a pod.
func (r *Result) PlacementOf(pod string) (Placement, bool) {
	for _, p := range r.Placements {
		if p.Pod == pod {
			return p, true
		}
	}
	return Placement{}, false
}
