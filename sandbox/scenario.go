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
	"github.com/telesched/telesched/sandbox/oracle"
	"github.com/telesched/telesched/sandbox/sim"
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
	mig         map[string]int // MIG devices per profile (gpu_phase.go)
	claimGPUs   int64          // GPUs of a DRA ResourceClaim (dra.go)
	claimMIG    string         // the profile of one MIG device of a DRA ResourceClaim (dra.go)
	singleNUMA  bool
	nodeName    string // pinned through the hostname label
	// wholeGPUs keeps the pod off nodes whose GPU resource is MIG
	// devices (migStrategyLabel single).
	wholeGPUs bool
	// workSeconds is a finite pod's work: the seconds it runs at its
	// requests on the reference (annotated telesched.io/work: finite);
	// 0 for a service, which does its work at a fixed rate
	// (docs/energy-models.md, "Energy for the same work").
	workSeconds float64
}

// claimed reports whether the pod's devices come from a DRA
// ResourceClaim (claimOf).
func (p podSpec) claimed() bool { return p.claimGPUs > 0 || p.claimMIG != "" }

// The scenario's work: its services (the CPU pods) do an hour's work
// (serviceHorizon, oracle.DefaultHorizon); a training job an hour on four
// reference GPUs (A100 80GB); a unit phase's GPU job half an hour on its
// devices' reference.
const (
	serviceHorizon      = oracle.DefaultHorizon
	trainingWorkSeconds = 3600
	unitsWorkSeconds    = 1800
)

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
		w[phaseGPU] = append(w[phaseGPU], podSpec{name: fmt.Sprintf("train-%d", i), phase: phaseGPU, cpu: "16", memory: "64Gi", gpus: trainingGPUs, singleNUMA: true,
			workSeconds: trainingWorkSeconds})
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
	for profile, n := range p.mig {
		req[migResource(profile)] = *resource.NewQuantity(int64(n), resource.DecimalSI)
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
	if p.workSeconds > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[estimate.WorkAnnotation] = estimate.WorkFinite.String()
	}
	if p.nodeName != "" {
		pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": p.nodeName}
	}
	if p.wholeGPUs {
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: migStrategyLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{sim.MIGSingle},
			}}}},
		}}}
	}
	if p.claimed() {
		withClaim(pod, p)
	}
	return pod
}

// limitsOf is the GPU and MIG limits (extended resources need limit ==
// request).
func limitsOf(req corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range req {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}

func (s *sandbox) createPods(ctx context.Context, namespace, scheduler string, specs []podSpec, gap time.Duration) error {
	for i, p := range specs {
		if i > 0 && gap > 0 {
			if err := sleep(ctx, gap); err != nil {
				return err
			}
		}
		if p.claimed() {
			if _, err := s.kube.ResourceV1().ResourceClaims(namespace).Create(ctx, claimOf(p, namespace), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating ResourceClaim %s/%s: %w", namespace, p.name, err)
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

// baseline schedules the whole workload (the unit phase's pods included)
// with the default profile, records
// where it went, and deletes it. These pods do not run on the simulated
// nodes: they only show what the default profile would have chosen.
func (s *sandbox) baseline(ctx context.Context) error {
	if err := s.createNamespace(ctx, baselineNamespace); err != nil {
		return err
	}
	// The unit phase's pods too, so that the GPU pods' watts compare like
	// with like.
	all := allPods(s.opts.Fleet)
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
	// Its claims too: an allocated claim holds its devices.
	if err := s.releaseClaims(ctx, baselineNamespace); err != nil {
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

// endsInRun: the run ends the pod when its work is done (jobEnds): the
// GPU phase's training jobs.
func (p podSpec) endsInRun() bool { return p.phase == phaseGPU && p.workSeconds > 0 }

// jobEnds says how long a training job of the GPU phase runs on a node,
// in the run's seconds: its work over its devices' pace there (the
// oracle's figure, oracle.Placed.Seconds), WorkSpeedup times faster. The
// unit phase's jobs and every other pod run to the end of the scenario
// (the report still counts a unit job's energy until its work is done).
func (s *sandbox) jobEnds() func(pod, node string) (time.Duration, bool) {
	specs := map[string]podSpec{}
	for _, p := range workloadPods() {
		if p.endsInRun() {
			specs[p.name] = p
		}
	}
	fleet := oracleFleet(s.opts.Fleet)
	return func(pod, node string) (time.Duration, bool) {
		p, ok := specs[pod]
		if !ok {
			return 0, false
		}
		sec, ok := oracle.Place(fleet, oraclePods([]podSpec{p}), map[string]string{pod: node}).Seconds()[pod]
		if !ok {
			return 0, false
		}
		return time.Duration(sec / s.opts.WorkSpeedup * float64(time.Second)), true
	}
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
	var jobs []string
	for _, p := range specs {
		if p.endsInRun() {
			jobs = append(jobs, p.name)
		}
	}
	err := s.watch.waitFor(ctx, fmt.Sprintf("%d pods in %s to be scheduled or refused by a PowerBudget", len(specs), demoNamespace), func(v *view) bool {
		quiet := created
		for key, p := range v.bound {
			if strings.HasPrefix(key, demoNamespace+"/") && p.At.After(quiet) {
				quiet = p.At
			}
		}
		for i := range s.res.Placements {
			if e := s.res.Placements[i].Ended; e.After(quiet) {
				quiet = e
			}
		}
		var pending []podSpec
		for _, p := range specs {
			key := demoNamespace + "/" + p.name
			if _, ok := v.bound[key]; !ok && !v.ended[key] {
				pending = append(pending, p)
			}
		}
		if len(pending) == 0 {
			return true
		}
		if v.runningJobs(jobs) > 0 {
			// A job running may free what a pending pod waits for
			// (a rack's budget, GPUs) when its work is done.
			return false
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

// waitSampled waits until the node of each running pod of a phase has
// published a sample that retires the pod's reservation in the
// scheduler's book: one taken estimate.Hold after the pod ran (the
// simulation runs a pod as it binds), seen an interval later. Until then
// the book counts the pod's watts on top of samples that may show them
// already, so pods that come sooner find its rack fuller than it is: a
// training job's thousands of watts close the rack to a 2-CPU pod for
// those seconds, and the pod stays where it went instead. The heat phase
// waits that long anyway where it waits for a node's fault; this gives a
// fleet without one the same order of events. It waits at most
// budgetSettle (a node whose load has settled publishes at its
// heartbeat), then goes on and says so.
func (s *sandbox) waitSampled(ctx context.Context, phase string) {
	after := estimate.Hold(s.opts.Interval) + s.opts.Interval
	start := time.Now()
	waitCtx, cancel := context.WithTimeout(ctx, budgetSettle(s.opts.Interval))
	defer cancel()
	err := s.watch.waitFor(waitCtx, "the "+phase+" pods' nodes to publish a sample after them", func(v *view) bool {
		return sampledAfter(v, s.res.Placements, phase, after)
	})
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		s.printf("    the %s pods' nodes published no sample %s after their binding within %.0fs; going on\n", phase, after, time.Since(start).Seconds())
		return
	}
	s.printf("    first, %.0fs until the %s pods' nodes published a sample %s after their binding (until then the scheduler counts their watts on top of their nodes' samples)\n", time.Since(start).Seconds(), phase, after)
}

// sampledAfter reports whether the node of every running pod of phase
// (its placement not Ended) has a sample the watcher saw at least after
// the pod was bound.
func sampledAfter(v *view, placements []Placement, phase string, after time.Duration) bool {
	for i := range placements {
		p := &placements[i]
		if p.Phase != phase || !p.Ended.IsZero() {
			continue
		}
		if h := v.samples[p.Node]; len(h) == 0 || h[len(h)-1].seen.Before(p.At.Add(after)) {
			return false
		}
	}
	return true
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

	if err := s.unitsPhase(ctx); err != nil {
		return err
	}

	s.printf("\n  gpu: %d training pods, each asking for %d GPUs, 16 CPUs, 64Gi and %s: %s\n", len(w[phaseGPU]), trainingGPUs, config.PodAnnotationNUMAPolicy, config.NUMAPolicySingleNUMANode)
	// The unit phase's watts in its nodes' samples, and the linked-pair
	// step's gone from them, before the jobs come (as the heat phase waits
	// for the jobs' below).
	s.waitSampled(ctx, phaseUnits)
	s.watch.update(func(*view) { s.res.JobsCreated = time.Now() })
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
		s.waitSampled(ctx, phaseGPU)
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

func (s *sandbox) read(f func(v *view)) { s.watch.read(f) }
