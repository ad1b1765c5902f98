// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/telesched/telesched/apis/config"
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

	if s.res.Heat.Node == "" {
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
	name := s.res.Heat.Node
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
		s.res.Heat.ProbeScheduledAfterCooling = p.Node == name && p.At.After(hotAt)
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
		if len(n.Spec.GPUs) > 0 || n.Spec.Name == s.res.Heat.Node {
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
	s.res.Ahead.Ran = true
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
			s.res.Ahead.Refused = s.res.Ahead.Refused || strings.Contains(m, "predicted steady temperature")
		}
		if s.res.Ahead.Refused {
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
