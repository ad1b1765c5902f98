// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/internal/heat"
	"github.com/telesched/telesched/sandbox/sim"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Namespaces of the two runs of the workload.
const (
	demoNamespace     = "demo"
	baselineNamespace = "baseline"
)

// thermalMarginMilli and absoluteLimitMilli are EnergyAware's defaults: a
// node this close to a sensor's limit is too hot, and a sensor without a
// limit is held against the absolute one.
var (
	thermalMarginMilli = int64(configv1.DefaultEnergyAwareArgs().ThermalMarginCelsius) * 1000
	absoluteLimitMilli = int64(configv1.DefaultEnergyAwareArgs().AbsoluteLimitCelsius) * 1000
)

// view is what the watcher has seen; read it under watcher.mu.
type view struct {
	telemetry map[string]*telemetry.Node
	bound     map[string]*Placement // namespace/pod
	// baselineGPUs marks, per node, the GPUs the baseline's pods would
	// hold, for their alignment (the baseline runs no pod).
	baselineGPUs map[string][]bool
	// samples are each node's latest NodeTelemetry versions, oldest
	// first, and unjudged the demo pods bound while the watcher may not yet
	// have seen every sample the scheduler had (see judgeBound).
	samples  map[string][]sample
	unjudged []boundPod
	// ended are the demo jobs whose work is done (jobEnds), which the
	// simulation deleted as their Job's controller would retire them.
	ended map[string]bool
}

// sample is one NodeTelemetry version as the watcher saw it.
type sample struct {
	rv  int64 // the object's resourceVersion
	hot bool
	why string // describe()
	// node is the version decoded; seen when the watcher got it (the
	// scheduler's cache gets it about then).
	node *telemetry.Node
	seen time.Time
}

// boundPod is a demo pod's binding, to be judged against the sample the
// scheduler had when it bound it.
type boundPod struct {
	key, node string
	rv        int64 // the pod's resourceVersion with spec.nodeName set
	placement int   // index in Result.Placements
}

// samplesKept bounds the versions kept per node: a binding is judged once
// a later version arrives, a few intervals at most.
const samplesKept = 32

// hot reports whether a node's telemetry has it too hot, by heat.Verdict
// with EnergyAware's defaults (throttling rejected, its margin and
// absolute limit): its CPUs throttle, or a sensor is within the margin of
// its limit (the absolute limit for a sensor that reports none).
func hot(n *telemetry.Node) bool {
	if n == nil {
		return false
	}
	tooHot, _ := heat.Verdict(n.Throttling, configv1.DefaultRejectThrottling, n.Headroom(absoluteLimitMilli), thermalMarginMilli)
	return tooHot
}

// watcher follows NodeTelemetry, pods and scheduling events, runs bound
// demo pods on their simulated nodes and records placements.
type watcher struct {
	nodes    map[string]*sim.Node
	res      *Result
	heater   string
	interval time.Duration // the agents' sampling interval
	// kube reports the pods the simulation runs as running, with ctx.
	kube kubernetes.Interface
	ctx  context.Context

	mu      sync.Mutex
	v       view
	changed chan struct{}

	// after runs the after-placement phases' pods (after.go).
	after afterPods
	// soak is what the soak's pods did (soak.go).
	soak soakLog
	// jobs says how long a demo job bound to a node runs, in the run's
	// seconds; nil or false: it runs to the end of the scenario.
	jobs func(pod, node string) (time.Duration, bool)
}

func startWatcher(ctx context.Context, cfg *rest.Config, nodes map[string]*sim.Node, heater string, interval time.Duration, res *Result) (*watcher, error) {
	w := &watcher{nodes: nodes, res: res, heater: heater, interval: interval, changed: make(chan struct{}),
		v: view{telemetry: map[string]*telemetry.Node{}, bound: map[string]*Placement{}, baselineGPUs: map[string][]bool{}, samples: map[string][]sample{}, ended: map[string]bool{}}}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	w.kube, w.ctx = kube, ctx
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	nt := dyn.Resource(telemetry.Resource)
	ntInformer := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return nt.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return nt.Watch(ctx, o)
		},
	}, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
	onTelemetry := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			if n, err := telemetry.Decode(u); err == nil {
				w.update(func(v *view) {
					v.telemetry[n.Name] = n
					if rv, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64); err == nil {
						h := append(v.samples[n.Name], sample{rv: rv, hot: hot(n), why: describe(n), node: n, seen: time.Now()})
						v.samples[n.Name] = h[max(0, len(h)-samplesKept):]
						w.judgeBound(v, false)
					}
					w.rackPeaks(v)
					if n.HasThermal {
						c := float64(n.HottestMilli) / 1000
						w.res.PeakCelsius[n.Name] = max(w.res.PeakCelsius[n.Name], c)
						if n.Name == w.heater {
							w.res.Heat.PeakCelsius = max(w.res.Heat.PeakCelsius, c)
						}
					}
				})
			}
		}
	}
	if _, err := ntInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: onTelemetry, UpdateFunc: func(_, obj any) { onTelemetry(obj) },
	}); err != nil {
		return nil, err
	}
	go ntInformer.RunWithContext(ctx)

	factory := informers.NewSharedInformerFactory(kube, 0)
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.onPod(obj) },
		UpdateFunc: func(_, obj any) { w.onPod(obj) },
		DeleteFunc: func(obj any) { w.onPodDelete(obj) },
	}); err != nil {
		return nil, err
	}
	events := factory.Core().V1().Events().Informer()
	if _, err := events.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.onEvent(obj) },
		UpdateFunc: func(_, obj any) { w.onEvent(obj) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("watching %v: not synced", typ)
		}
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), ntInformer.HasSynced) {
		return nil, fmt.Errorf("watching NodeTelemetry: not synced")
	}
	return w, nil
}

// update changes the view and wakes waiters.
func (w *watcher) update(f func(v *view)) {
	w.mu.Lock()
	f(&w.v)
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

// waitFor waits until cond holds on the view; what names it in errors.
func (w *watcher) waitFor(ctx context.Context, what string, cond func(v *view) bool) error {
	for {
		w.mu.Lock()
		ok, changed := cond(&w.v), w.changed
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-changed:
		case <-time.After(time.Second): // conditions on time, e.g. freshness
		}
	}
}

// read runs f on the view under the lock.
func (w *watcher) read(f func(v *view)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.v)
}

func (w *watcher) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if ok && pod.Namespace == afterNamespace {
		w.onAfterPod(pod)
		return
	}
	if ok && pod.Namespace == soakNamespace {
		w.onSoakPod(pod)
		return
	}
	if !ok || pod.Spec.NodeName == "" || (pod.Namespace != demoNamespace && pod.Namespace != baselineNamespace) {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	var uuids []string // the GPUs and MIG devices its claims got, read before the lock
	var claimGPUs, claimSlices int64
	if n := w.nodes[pod.Spec.NodeName]; n != nil && pod.Namespace == demoNamespace && len(pod.Spec.ResourceClaims) > 0 {
		uuids, claimGPUs, claimSlices = w.claimUUIDs(pod, n.Spec)
	}
	started := false
	defer func() {
		if started {
			go w.markRunning(pod)
		}
	}()
	w.update(func(v *view) {
		if _, seen := v.bound[key]; seen {
			return
		}
		p := &Placement{Pod: pod.Name, Phase: pod.Labels[phaseLabel], Node: pod.Spec.NodeName, At: time.Now()}
		p.PodCPUMilli, p.PodGPUs = podRequests(pod)
		tel := v.telemetry[p.Node]
		p.Why = describe(tel)
		v.bound[key] = p
		if pod.Namespace == demoNamespace {
			if rv, err := strconv.ParseInt(pod.ResourceVersion, 10, 64); err == nil {
				v.unjudged = append(v.unjudged, boundPod{key: key, node: p.Node, rv: rv, placement: len(w.res.Placements)})
			} else if hot(tel) {
				w.res.Heat.HotPlacements = append(w.res.Heat.HotPlacements, fmt.Sprintf("%s on %s at %s", pod.Name, p.Node, p.Why))
			}
			if n := w.nodes[p.Node]; n != nil {
				// A service keeps its requests over the node's CPU speed
				// busy (sized on the reference); a finite pod runs at its
				// requests (docs/energy-models.md).
				cpu := p.PodCPUMilli
				if p.Work, _ = estimate.WorkOf(pod); p.Work == estimate.WorkService {
					cpu = int64(math.Round(float64(cpu) / n.Spec.CPUPace()))
				}
				p.PodMIGSlices = podCounter.Of(pod).MIGSlices + claimSlices
				// What the pod adds by the simulation's physics, from the
				// node's load before it; and, until its binding is judged
				// against the sample the scheduler had, what the scheduler
				// would estimate from the latest sample.
				u, busy := n.Utilization(), n.BusyShare()
				req := simRequest(pod)
				req.UUIDs = uuids
				req.Pod = types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
				if len(uuids) > 0 && len(pod.Spec.ResourceClaims) > 0 && pod.Spec.ResourceClaims[0].ResourceClaimName != nil {
					req.Claim = *pod.Spec.ResourceClaims[0].ResourceClaimName
				}
				p.PodClaimGPUs = claimGPUs
				alloc := n.AddPodDevices(pod.UID, cpu, req)
				p.GPUs, p.Slices, p.Linked = alloc.GPUs, alloc.Slices, n.Spec.Linked(alloc.GPUs)
				p.TrueWatts, p.HasTrue = trueMarginal(n.Spec, u, busy, cpu, allocShare(n.Spec, alloc)), true
				p.SliceTrueWatts = sliceTrueWatts(n.Spec, alloc.Slices)
				if h := v.samples[p.Node]; len(h) > 0 {
					w.learn(v, p, len(w.res.Placements), &h[len(h)-1])
				}
				started = true
				p.GPUsAligned = aligned(n.Spec, append(slices.Clone(p.GPUs), sliceGPUs(p.Slices)...))
				// Where the node settles with every pod it now runs, by
				// the simulation's own physics (not the agent's model).
				p.SteadyCelsius, _ = n.Spec.Steady(n.Utilization(), n.Fault())
				limit := float64(n.Spec.Host.CritMilliCelsius)/1000 - float64(thermalMarginMilli)/1000
				if p.SteadyCelsius >= limit {
					w.res.Ahead.PredictedHotPlacements = append(w.res.Ahead.PredictedHotPlacements,
						fmt.Sprintf("%s on %s: settles at %.1f°C >= %.0f°C", pod.Name, p.Node, p.SteadyCelsius, limit))
				}
			}
			if w.jobs != nil {
				if d, ok := w.jobs(pod.Name, p.Node); ok {
					p.Queued = len(v.ended) > 0
					name := pod.Name
					time.AfterFunc(d, func() { w.endJob(name) })
				}
			}
			w.res.Placements = append(w.res.Placements, *p)
			w.judgeBound(v, false)
		} else {
			// The baseline does not run its pods; its GPU pods take the
			// GPUs the simulation would give them, after the baseline's
			// earlier GPU pods on the node.
			if _, gpus := podRequests(pod); gpus > 0 {
				if n := w.nodes[p.Node]; n != nil {
					if v.baselineGPUs[p.Node] == nil {
						v.baselineGPUs[p.Node] = make([]bool, len(n.Spec.GPUs))
					}
					p.GPUsAligned = aligned(n.Spec, sim.TakeGPUs(n.Spec, v.baselineGPUs[p.Node], int(gpus)))
				}
			}
			w.res.Baseline = append(w.res.Baseline, *p)
		}
	})
}

// endJob retires a demo job whose work is done: the simulation stops its
// load and deletes its pod (its Job's controller would leave it
// Succeeded, which the scheduler no longer counts either), and the
// placement records when.
func (w *watcher) endJob(name string) {
	if w.ctx.Err() != nil {
		return
	}
	key := demoNamespace + "/" + name
	w.update(func(v *view) {
		v.ended[key] = true
		for i := range w.res.Placements {
			if p := &w.res.Placements[i]; p.Pod == name && p.Ended.IsZero() {
				p.Ended = time.Now()
			}
		}
	})
	zero := int64(0)
	if err := w.kube.CoreV1().Pods(demoNamespace).Delete(w.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) && w.ctx.Err() == nil {
		klog.FromContext(w.ctx).Error(err, "retiring a finished job's pod", "pod", name)
	}
}

// running reports the demo jobs bound and not yet ended.
func (v *view) runningJobs(jobs []string) int {
	n := 0
	for _, name := range jobs {
		key := demoNamespace + "/" + name
		if _, ok := v.bound[key]; ok && !v.ended[key] {
			n++
		}
	}
	return n
}

// markRunning reports a pod the simulation started as running, as its
// kubelet would (phase Running, its containers started now): the
// scheduler counts a placed pod toward its node until a sample taken
// estimate.Hold after it saw the pod running.
func (w *watcher) markRunning(pod *corev1.Pod) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := w.kube.CoreV1().Pods(pod.Namespace).Get(w.ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodRunning
		cur.Status.StartTime = &now
		cur.Status.Conditions = append(cur.Status.Conditions,
			corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
		cur.Status.ContainerStatuses = nil
		for _, c := range cur.Spec.Containers {
			cur.Status.ContainerStatuses = append(cur.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		_, err = w.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(w.ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && w.ctx.Err() == nil {
		klog.FromContext(w.ctx).Error(err, "reporting a simulated pod running", "pod", klog.KObj(pod))
	}
}

// judgeBound judges each demo pod's binding against the node's sample the
// scheduler had when it bound it: the newest NodeTelemetry version written
// before the binding (resourceVersions of one etcd are ordered). The
// watcher's two informers can deliver a binding before the sample that
// allowed it, so a binding waits until a later version of its node's
// object has arrived, or until final (the summary), when the newest seen
// counts. A pod bound while that sample had its node hot counts in
// HotPlacements; its Why becomes that sample's.
func (w *watcher) judgeBound(v *view, final bool) {
	kept := v.unjudged[:0]
	for _, b := range v.unjudged {
		h := v.samples[b.node]
		if !final && (len(h) == 0 || h[len(h)-1].rv < b.rv) {
			kept = append(kept, b)
			continue
		}
		var had *sample
		for i := range h {
			if h[i].rv < b.rv {
				had = &h[i]
			}
		}
		if had == nil {
			continue // no telemetry before the binding: not a hot placement
		}
		p := &w.res.Placements[b.placement]
		p.Why = had.why
		if p.HasTrue {
			w.learn(v, p, b.placement, had)
		}
		if bp := v.bound[b.key]; bp != nil {
			bp.Why, bp.LearnedWatts, bp.HasLearned = had.why, p.LearnedWatts, p.HasLearned
			bp.SliceLearnedWatts, bp.HasSliceLearned = p.SliceLearnedWatts, p.HasSliceLearned
		}
		if had.hot {
			w.res.Heat.HotPlacements = append(w.res.Heat.HotPlacements, fmt.Sprintf("%s on %s at %s", p.Pod, p.Node, p.Why))
		}
	}
	v.unjudged = kept
}

// learn sets a placement's learned marginal watts as the scheduler
// estimated them with sample had of its node: the pods placed there before
// it (index before in Result.Placements) count while had was seen less
// than the reservation hold after them, unless deleted since, and taken
// less than estimate.ShownAfterIntervals after them (the energy ranking's
// load, estimate.Slot.UnseenCPUMilli).
func (w *watcher) learn(v *view, p *Placement, before int, had *sample) {
	var taken time.Time
	if had.node != nil {
		taken = had.node.SampleTime
	}
	reserved := unseenMilli(w.res.Placements[:before], p.Node, had.seen, estimate.Hold(w.interval), taken, w.interval, func(pod string) bool {
		_, ok := v.bound[demoNamespace+"/"+pod]
		return ok
	})
	// What the scheduler expects the pod to keep busy: a service its
	// requests over the node's published speed (estimate.Busy).
	d := estimate.Demand{CPUMilli: p.PodCPUMilli, GPUs: p.PodGPUs, MIGSlices: p.PodMIGSlices, ClaimGPUs: p.PodClaimGPUs}
	if had.node != nil {
		d = estimate.Busy(had.node, d, p.Work)
	}
	p.LearnedWatts, p.HasLearned = learnedMarginal(had.node, d, reserved)
	if len(p.Slices) > 0 && had.node != nil {
		p.SliceLearnedWatts = estimate.PodGPUWatts(had.node, estimate.Demand{GPUs: p.PodGPUs, MIGSlices: p.PodMIGSlices}) / float64(len(p.Slices))
		p.HasSliceLearned = true
	}
}

// unseenMilli is the CPU of the pods placed on node that the scheduler
// ranks the node's curve from above a sample taken at taken, of a node
// sampled every interval, and seen at seen: still reserved (placed less
// than hold before seen, and still bound) and not shown by the sample
// (estimate.SampleShows; a zero taken shows none).
func unseenMilli(placed []Placement, node string, seen time.Time, hold time.Duration, taken time.Time, interval time.Duration, bound func(pod string) bool) int64 {
	var milli int64
	for i := range placed {
		p := &placed[i]
		if p.Node == node && seen.Sub(p.At) < hold && (taken.IsZero() || !estimate.SampleShows(taken, p.At, interval)) && bound(p.Pod) {
			milli += p.PodCPUMilli
		}
	}
	return milli
}

func (w *watcher) onPodDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.Namespace == afterNamespace {
		w.onAfterDelete(pod)
		return
	}
	if pod.Namespace == soakNamespace {
		w.onSoakDelete(pod)
		return
	}
	if n := w.nodes[pod.Spec.NodeName]; n != nil && pod.Namespace == demoNamespace {
		n.RemovePod(pod.UID)
	}
	w.update(func(v *view) { delete(v.bound, pod.Namespace+"/"+pod.Name) })
}

func (w *watcher) onEvent(obj any) {
	ev, ok := obj.(*corev1.Event)
	if ok && ev.InvolvedObject.Namespace == afterNamespace {
		w.onAfterEvent(ev)
		return
	}
	if ok && ev.InvolvedObject.Namespace == soakNamespace {
		w.onSoakEvent(ev)
		return
	}
	if !ok || ev.Reason != "FailedScheduling" || ev.InvolvedObject.Namespace != demoNamespace {
		return
	}
	w.update(func(*view) {
		for _, m := range w.res.Rejections[ev.InvolvedObject.Name] {
			if m == ev.Message {
				return
			}
		}
		w.res.Rejections[ev.InvolvedObject.Name] = append(w.res.Rejections[ev.InvolvedObject.Name], ev.Message)
		if strings.Contains(ev.Message, "predicted steady temperature") {
			w.res.Ahead.PredictionRejections++
		}
		if strings.Contains(ev.Message, "PowerBudget ") {
			w.res.BudgetRejections++
		}
	})
}

// rackPeaks keeps each rack's peak watts: the sum of its nodes' latest
// published watts, once every node of the rack has published some. The
// caller holds w.mu.
func (w *watcher) rackPeaks(v *view) {
	for i := range w.res.Racks {
		r := &w.res.Racks[i]
		var sum float64
		for _, name := range r.Nodes {
			n := v.telemetry[name]
			if n == nil || !n.HasPower {
				sum = -1
				break
			}
			sum += float64(n.Watts)
		}
		r.PeakWatts = max(r.PeakWatts, sum)
	}
}

// podRequests is a pod's CPU (milli) and GPU requests.
func podRequests(pod *corev1.Pod) (cpuMilli, gpus int64) {
	for _, c := range pod.Spec.Containers {
		cpuMilli += c.Resources.Requests.Cpu().MilliValue()
		if q, ok := c.Resources.Requests[gpuResource]; ok {
			gpus += q.Value()
		}
	}
	return cpuMilli, gpus
}

// aligned reports whether GPUs share one NUMA node.
func aligned(spec sim.NodeSpec, gpus []int) bool {
	if len(gpus) == 0 {
		return false
	}
	for _, g := range gpus {
		if spec.GPUs[g].NUMANode != spec.GPUs[gpus[0]].NUMANode {
			return false
		}
	}
	return true
}

// sliceGPUs are the GPUs that MIG devices sit on: a pod of MIG devices is
// NUMA-aligned when their GPUs share a NUMA node.
func sliceGPUs(devices []sim.Slice) []int {
	gpus := make([]int, len(devices))
	for i, d := range devices {
		gpus[i] = d.GPU
	}
	return gpus
}

// alignedSlots is how many pods of count GPUs each a node can hold with
// every pod's GPUs on one NUMA node.
func alignedSlots(spec sim.NodeSpec, count int) int {
	if count <= 0 {
		return 0
	}
	slots := 0
	for _, n := range gpusPerNUMA(spec) {
		slots += n / count
	}
	return slots
}

// gpusPerNUMA counts, per NUMA node, the GPUs the GPU resource counts
// whole (sim.NodeSpec.WholeGPUs).
func gpusPerNUMA(spec sim.NodeSpec) map[int]int {
	per := map[int]int{}
	if spec.DRA {
		return per
	}
	for _, g := range spec.GPUs {
		if g.MIG == nil {
			per[g.NUMANode]++
		}
	}
	return per
}

// describe is a node's telemetry in a few words.
func describe(n *telemetry.Node) string {
	if n == nil {
		return "no telemetry"
	}
	var parts []string
	if n.HasCPU {
		parts = append(parts, fmt.Sprintf("cpu %d%%", n.CPUPercent))
	}
	if n.HasThermal {
		t := fmt.Sprintf("%.0f°C", float64(n.HottestMilli)/1000)
		if n.HasLimit {
			t += fmt.Sprintf(" (limit %.0f°C)", float64(n.LimitMilli)/1000)
		}
		parts = append(parts, t)
	}
	if n.HasPower {
		p := fmt.Sprintf("%dW", n.Watts)
		// The curve's slope at the node's load: what one more busy core
		// costs there.
		if w, ok := perBusyCore(n); ok {
			p += fmt.Sprintf(", +%.1fW per busy core (%s)", w, n.Models.CurveBasis)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// distribution counts placements per node, in node order.
func distribution(ps []Placement, phase string) string {
	count := map[string]int{}
	for _, p := range ps {
		if phase == "" || p.Phase == phase {
			count[p.Node]++
		}
	}
	var names []string
	for n := range count {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, count[n]))
	}
	return strings.Join(parts, ", ")
}
