// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package loadaware is the LoadAware plugin: it filters out nodes whose
// estimated CPU or memory utilization would exceed a threshold and scores
// nodes by it, spreading load (Spread) or consolidating it (Pack).
// Estimated = measured by the node's agent (its last sample, or with the
// usage arg a percentile of its window, status.windows) + the requests of the pods placed
// on the node that its sample does not show yet (the scheduler's one
// estimate.Book) + this pod, so a burst of pods does not pile onto the node
// that looked idle. Both are scaled by podCPUScalingPercent and
// podMemoryScalingPercent.
//
// Node annotations may lower a node's thresholds, never raise them: anyone
// who may patch a Node, its own kubelet included, could otherwise draw load
// onto it. Pods of a DaemonSet skip the filter, once the DaemonSet they
// name is found with that UID.
package loadaware

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/apis/config/validation"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/cyclestate"
	"github.com/telesched/telesched/scheduler/plugins/internal/nodeset"
	"github.com/telesched/telesched/scheduler/plugins/internal/pluginfactory"
	"github.com/telesched/telesched/scheduler/plugins/internal/podmemo"
	"github.com/telesched/telesched/scheduler/plugins/internal/rejected"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Name is the plugin's name in the scheduler configuration.
const Name = "LoadAware"

const stateKey fwk.StateKey = "PreFilter" + Name

// LoadAware is the plugin.
type LoadAware struct {
	args  config.LoadAwareArgs
	cache *telemetry.Cache
	book  *estimate.Book
	last  cyclestate.Last[*podState]
	// lowered is the set of nodes whose annotations lower a threshold, nil
	// until WatchNodes: without it, any node may have a lower threshold.
	lowered *nodeset.Set
	// nodes and daemonSets are the scheduler's listers, nil until Watch:
	// pick and the hints then judge by the args' thresholds, and no pod
	// counts as a DaemonSet's.
	nodes      corelisters.NodeLister
	daemonSets appslisters.DaemonSetLister
	// requests remembers pending pods' scaled requests for podDeleteHint,
	// affinity their required node affinity.
	requests *podmemo.Memo[[2]int64]
	affinity podmemo.Affinity
	// rejected are the pending pods Filter rejected, with their scaled
	// requests, which a NodeTelemetry change may let in (pick).
	rejected *rejected.Index[[2]int64]
	// lastDeletion is what podDeleteHint read of the last deleted pod it
	// was asked about.
	lastDeletion atomic.Pointer[deletion]
}

var (
	_ fwk.PreFilterPlugin     = &LoadAware{}
	_ fwk.PreFilterExtensions = &LoadAware{}
	_ fwk.FilterPlugin        = &LoadAware{}
	_ fwk.PreScorePlugin      = &LoadAware{}
	_ fwk.ScorePlugin         = &LoadAware{}
	_ fwk.ScoreExtensions     = &LoadAware{}
	_ fwk.ReservePlugin       = &LoadAware{}
	_ fwk.EnqueueExtensions   = &LoadAware{}
)

// NewFactory returns the plugin factory; every profile's instance shares
// cache, which the first instance starts and syncs, and the scheduler's one
// reservation book, which follows Pods and Nodes (estimate.Book.Watch).
// Each instance follows Nodes and DaemonSets through the scheduler's
// informers (see Watch).
func NewFactory(cache *telemetry.Cache, book *estimate.Book) frameworkruntime.PluginFactory {
	return pluginfactory.New(Name, cache, validation.ValidateLoadAwareArgs, func(ctx context.Context, args config.LoadAwareArgs, h fwk.Handle) (fwk.Plugin, error) {
		if err := book.ShareDefaultRequests(fmt.Sprintf("profile %s's %s (defaultPodCPUMilli, defaultPodMemoryBytes)", h.ProfileName(), Name),
			args.DefaultPodCPUMilli, args.DefaultPodMemoryBytes); err != nil {
			return nil, err
		}
		pl := NewWith(args, cache, book)
		if err := book.Watch(ctx, h.SharedInformerFactory()); err != nil {
			return nil, err
		}
		if err := pl.Watch(h.SharedInformerFactory()); err != nil {
			return nil, err
		}
		if err := pl.rejected.Watch(h.SharedInformerFactory()); err != nil {
			return nil, err
		}
		pl.rejected.Requeue(ctx, Name, book, h.SharedInformerFactory(), h, pl.fitsReleased)
		pl.rejected.OnTelemetry(ctx, Name, cache, h.SharedInformerFactory(), h, pl.pick)
		return pl, nil
	})
}

// New returns the plugin for valid args, with a reservation book of its
// own that counts demand by them. Time is the cache's clock.
func New(args config.LoadAwareArgs, cache *telemetry.Cache) *LoadAware {
	opts := estimate.DefaultOptions()
	opts.DefaultCPUMilli, opts.DefaultMemoryBytes = args.DefaultPodCPUMilli, args.DefaultPodMemoryBytes
	return NewWith(args, cache, estimate.NewBook(cache, opts))
}

// NewWith returns the plugin for valid args, sharing book, which counts
// every pod's demand (the factory has the args' default requests shared
// with it: estimate.Book.ShareDefaultRequests).
func NewWith(args config.LoadAwareArgs, cache *telemetry.Cache, book *estimate.Book) *LoadAware {
	book.LimitCPU(args.CPUThresholdPercent)
	return &LoadAware{args: args, cache: cache, book: book, requests: podmemo.New[[2]int64](), affinity: podmemo.NewAffinity(), rejected: rejected.New[[2]int64]()}
}

// Name implements fwk.Plugin.
func (pl *LoadAware) Name() string { return Name }

// podState is what the plugin knows of the pod being scheduled. It is not
// modified after PreFilter/PreScore writes it, so Clone returns it as is.
type podState struct {
	cpuMilli, memoryBytes int64 // requests, scaled
	// now is the cycle's time, read once: telemetry freshness is judged
	// against it for every node.
	now time.Time
	// verbose is whether Filter logs each node that fits (-v=5), decided
	// once per cycle rather than by a context lookup per node.
	verbose bool
	// otherCPUMilli and otherMemoryBytes are what the scheduler added to
	// the node of this state's cycle and took off it (AddPod, RemovePod),
	// scaled: nominated pods placed and a preemption's victims removed.
	// They are set only on the copy of the state made for one node.
	otherCPUMilli, otherMemoryBytes int64
}

func (s *podState) Clone() fwk.StateData { return s }

// podRequests is the CPU and memory the pod will add to its node: its
// requests (the kube-scheduler's non-zero defaults for containers without
// any), scaled by the args.
func (pl *LoadAware) podRequests(pod *v1.Pod) *podState {
	req := pl.scaledRequests(pod)
	return &podState{cpuMilli: req[0], memoryBytes: req[1], now: pl.cache.Now()}
}

// scaledRequests is the pod's CPU (millicores) and memory (bytes) as
// podRequests counts them.
func (pl *LoadAware) scaledRequests(pod *v1.Pod) [2]int64 {
	return pl.scale(pl.book.Demand(pod))
}

// scale is a demand's CPU and memory as the args count them toward a
// node's load.
func (pl *LoadAware) scale(d estimate.Demand) [2]int64 {
	return [2]int64{
		d.CPUMilli * int64(pl.args.PodCPUScalingPercent) / 100,
		d.MemoryBytes * int64(pl.args.PodMemoryScalingPercent) / 100,
	}
}

// hintState is podState for podDeleteHint, judging freshness at now: the
// requests come from the memo, as the scheduler asks about the same
// pending pods again and again.
func (pl *LoadAware) hintState(pod *v1.Pod, now time.Time) *podState {
	req := pl.requests.Get(pod, pl.scaledRequests)
	return &podState{cpuMilli: req[0], memoryBytes: req[1], now: now}
}

func (pl *LoadAware) state(cs fwk.CycleState, pod *v1.Pod) *podState {
	if s, ok := pl.last.Read(cs, stateKey); ok {
		return s
	}
	return pl.podRequests(pod)
}

// PreFilter computes the pod's requests once. DaemonSet pods skip the
// filter: they must run on every node, whatever its load. So do pods that
// no node could fail (see mayReject).
func (pl *LoadAware) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	pl.book.Expire()
	if pl.ownedByDaemonSet(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s := pl.podRequests(pod)
	s.verbose = klog.FromContext(ctx).V(5).Enabled()
	pl.last.Write(cs, stateKey, s)
	if !pl.mayReject(s) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pl.rejected.Begin(pod, [2]int64{s.cpuMilli, s.memoryBytes}) // before Filter reads a node
	return nil, nil
}

// mayReject reports whether the filter could reject some node for the pod.
// It could not when stale telemetry is not rejected, no node's annotation
// lowers a threshold, and even the most loaded node's estimate (the
// cache's LoadBound) with the pod on the smallest node stays within the
// thresholds, and the args judge last samples (the bound knows no window):
// the common case of a fleet with headroom, where skipping the
// filter saves a telemetry lookup per node per pod.
func (pl *LoadAware) mayReject(s *podState) bool {
	if pl.args.StaleTelemetryPolicy == config.StaleTelemetryReject || pl.lowered == nil || pl.windowed() ||
		pl.args.PodCPUScalingPercent > 100 || pl.args.PodMemoryScalingPercent > 100 {
		return true // (the bound counts reservations unscaled, and the last samples only)
	}
	if n, ok := pl.lowered.Len(); !ok || n > 0 {
		return true
	}
	b := pl.book.LoadBound()
	return mayExceed(b.CPUBP, s.cpuMilli, b.MinCPUMilli, pl.args.CPUThresholdPercent) ||
		mayExceed(b.MemoryBP, s.memoryBytes, b.MinMemoryBytes, pl.args.MemoryThresholdPercent)
}

// PreFilterExtensions implements fwk.PreFilterPlugin: the scheduler adds
// the nominated pods of at least the pod's priority to a node before it
// filters the node (AddPod), and preemption's dry run takes its victims off
// a node (RemovePod) to see whether the pod then fits. Without them a node
// held over its threshold by the pods placed since its sample refuses every
// preemptor, whichever pods it would evict.
func (pl *LoadAware) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

// AddPod counts added, a pod the scheduler places on the node for this
// cycle, at its scaled requests, as a pod placed since the sample.
func (pl *LoadAware) AddPod(_ context.Context, cs fwk.CycleState, pod *v1.Pod, added fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	pl.adjust(cs, pod, added.GetPod(), 1)
	return nil
}

// RemovePod takes removed, a pod on the node, off it for this cycle at its
// scaled requests: the book's reservation of it, when the node's sample
// does not show it yet, or else its requests standing for its share of the
// measured load, which a sample does not break down by pod.
func (pl *LoadAware) RemovePod(_ context.Context, cs fwk.CycleState, pod *v1.Pod, removed fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	pl.adjust(cs, pod, removed.GetPod(), -1)
	return nil
}

// adjust writes a copy of the pod's state with other's scaled requests
// added (sign 1) or taken off (-1): cs is the framework's copy of the cycle
// state for one node, and the state other copies share stays as it was.
func (pl *LoadAware) adjust(cs fwk.CycleState, pod, other *v1.Pod, sign int64) {
	s := *pl.state(cs, pod)
	r := pl.scaledRequests(other)
	s.otherCPUMilli += sign * r[0]
	s.otherMemoryBytes += sign * r[1]
	pl.last.Write(cs, stateKey, &s)
}

// Filter rejects a node whose estimated utilization with the pod exceeds
// its threshold, with the numbers.
func (pl *LoadAware) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	s := pl.state(cs, pod)
	tel, reserved := pl.book.Placed(node.Name) // the view and its reservations, one lookup
	if st := pl.fits(node, tel, reserved, s); st != nil {
		pl.rejected.AddOn(pod, node.Name, [2]int64{s.cpuMilli, s.memoryBytes})
		return st
	}
	if s.verbose {
		klog.FromContext(ctx).V(5).Info("LoadAware fits", "pod", klog.KObj(pod), "node", node.Name, "cpuPercent", tel.CPUPercent, "memoryPercent", tel.MemoryPercent)
	}
	return nil
}

// fits is Filter's predicate, which pick and podDeleteHint use too
// (through admits): nil when the pod fits a node with telemetry tel (nil: none) and
// reserved placed that its sample does not show, else why not. node gives
// the thresholds' annotations; nil means none.
func (pl *LoadAware) fits(node *v1.Node, tel *telemetry.Node, reserved estimate.Demand, s *podState) *fwk.Status {
	m := pl.misfit(node, tel, reserved, s)
	switch m.over {
	case overStale:
		return telemetry.StaleStatus(pl.args.TelemetryArgs, tel, s.now)
	case overCPU:
		cpu, _ := pl.usage(tel)
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node cpu %s percent > threshold %d percent (%s, +%s placed since the sample and this pod)",
			percentBP(m.est), m.limit, pl.measured(tel, "cpu", cpu), percentBP(m.est-int64(cpu)*100)))
	case overMemory:
		_, mem := pl.usage(tel)
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node memory %s percent > threshold %d percent (%s, +%s placed since the sample and this pod)",
			percentBP(m.est), m.limit, pl.measured(tel, "memory", mem), percentBP(m.est-int64(mem)*100)))
	}
	return nil
}

// admits is fits without the reason: pick and podDeleteHint ask it about
// every pending pod Filter rejected, on each change, and need only the
// answer.
func (pl *LoadAware) admits(node *v1.Node, tel *telemetry.Node, reserved estimate.Demand, s *podState) bool {
	return pl.misfit(node, tel, reserved, s).over == overNone
}

// over names the rule a pod breaks on a node.
type over uint8

const (
	overNone   over = iota // it fits
	overStale              // telemetry missing or stale, rejected by policy
	overCPU                // CPU estimate over its threshold
	overMemory             // memory estimate over its threshold
)

// misfit is the rule the pod breaks on the node, with the estimate (basis
// points) and threshold (percent) it broke.
type misfit struct {
	over  over
	est   int64
	limit int32
}

// misfit is the predicate itself, fits and admits its two readings.
func (pl *LoadAware) misfit(node *v1.Node, tel *telemetry.Node, reserved estimate.Demand, s *podState) misfit {
	if tel == nil || !tel.Fresh(s.now, pl.args.TelemetryMaxAge) {
		if telemetry.RejectsStale(pl.args.TelemetryArgs) {
			return misfit{over: overStale}
		}
		return misfit{}
	}
	r := pl.scale(reserved)
	reservedCPU, reservedMem := r[0], r[1]
	cpu, mem := pl.usage(tel)
	if tel.HasCPU {
		limit := threshold(node, config.NodeAnnotationCPUThresholdPercent, pl.args.CPUThresholdPercent)
		if est := estimate.EstimateBP(cpu, reservedCPU+s.cpuMilli+s.otherCPUMilli, int64(tel.LogicalCores)*1000); est > int64(limit)*100 {
			return misfit{over: overCPU, est: est, limit: limit}
		}
	}
	if tel.HasMemory {
		limit := threshold(node, config.NodeAnnotationMemoryThresholdPercent, pl.args.MemoryThresholdPercent)
		if est := estimate.EstimateBP(mem, reservedMem+s.memoryBytes+s.otherMemoryBytes, tel.MemoryTotalBytes); est > int64(limit)*100 {
			return misfit{over: overMemory, est: est, limit: limit}
		}
	}
	return misfit{}
}

// PreScore makes sure the pod's requests are in the cycle state: PreFilter
// put them there unless it was skipped (DaemonSet pods).
func (pl *LoadAware) PreScore(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if _, ok := pl.last.Read(cs, stateKey); !ok {
		pl.last.Write(cs, stateKey, pl.podRequests(pod))
	}
	return nil
}

// Score ranks a node by its estimated utilization with the pod (the higher
// of CPU and memory).
func (pl *LoadAware) Score(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s := pl.state(cs, pod)
	tel, reserved := pl.book.Placed(nodeInfo.Node().Name) // the view and its reservations, one lookup
	if tel == nil || !tel.Fresh(s.now, pl.args.TelemetryMaxAge) || (!tel.HasCPU && !tel.HasMemory) {
		return telemetry.NoTelemetry, nil
	}
	r := pl.scale(reserved)
	reservedCPU, reservedMem := r[0], r[1]
	cpu, mem := pl.usage(tel)
	var est int64
	if tel.HasCPU {
		est = estimate.EstimateBP(cpu, reservedCPU+s.cpuMilli, int64(tel.LogicalCores)*1000)
	}
	if tel.HasMemory {
		est = max(est, estimate.EstimateBP(mem, reservedMem+s.memoryBytes, tel.MemoryTotalBytes))
	}
	if pl.args.ScoringStrategy == config.ScoringStrategyPack {
		return packScore(est, pl.args.PackTargetPercent), nil
	}
	return spreadScore(est), nil
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *LoadAware) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore gives nodes without fresh telemetry the lowest score of
// the nodes with it (0 when none has it).
func (pl *LoadAware) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	telemetry.NormalizeMissing(scores)
	return nil
}

// Reserve counts the pod toward its node in the scheduler's reservation
// book until a sample shows it running (estimate.Book).
func (pl *LoadAware) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	pl.rejected.End(pod)
	pl.book.Reserve(nodeName, pod)
	return nil
}

// Unreserve forgets the pod's reservation: its binding failed.
func (pl *LoadAware) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.book.Unreserve(nodeName, pod.UID)
}

// EventsToRegister requeues pods this plugin rejected when a pod placed on
// a node goes away in a way that lets them in by Filter's own predicate.
// A NodeTelemetry change requeues them through the plugin itself (pick,
// rejected.OnTelemetry), not through the scheduling queue's walk.
func (pl *LoadAware) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{
			Event:          fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete},
			QueueingHintFn: pl.podDeleteHint,
		},
	}, nil
}

// change is what a NodeTelemetry update means for the pods rejected on
// its node, before any pod is looked at.
type change struct {
	// prevKnown: the previous view was stored and fresh; one that was not
	// proves nothing about why a pod was rejected.
	prevKnown bool
	// before are the node's reservations as they were until this sample,
	// reserved those now.
	before, reserved estimate.Demand
	// lighter: some estimate may be lower than before (load, capacity or
	// reservations), or the previous view was unknown; when false, no pod
	// fits now that did not before.
	lighter bool
}

func (pl *LoadAware) change(prev, cur *telemetry.Node, now time.Time) change {
	c := change{
		prevKnown: prev != nil && prev.Fresh(now, pl.args.TelemetryMaxAge),
		before:    pl.book.Before(cur.Name, cur),
		reserved:  pl.book.Get(cur.Name),
	}
	c.lighter = !c.prevKnown || c.reserved.CPUMilli < c.before.CPUMilli || c.reserved.MemoryBytes < c.before.MemoryBytes || !pl.noLighter(prev, cur)
	return c
}

// pick names the pods Filter rejected that a NodeTelemetry change lets in
// (rejected.OnTelemetry): none when the update makes no estimate lower
// (the common case of a busy fleet, decided before any pod is looked at:
// the load fell, the node's telemetry became fresh, or the new sample
// retired reservations), else those the node's required affinity admits
// that fit the node now by Filter's predicate and did not before.
func (pl *LoadAware) pick(prev, cur *telemetry.Node) []types.NamespacedName {
	now := pl.cache.Now()
	c := pl.change(prev, cur, now)
	if !c.lighter {
		return nil
	}
	node := pl.node(cur.Name)
	return pl.rejected.SelectChange(prev, node, func(req [2]int64) bool {
		return pl.letsIn(node, prev, cur, c, &podState{cpuMilli: req[0], memoryBytes: req[1], now: now})
	})
}

// letsIn reports whether the update lets the pod in by Filter's predicate
// on node: it fits cur with the reservations now, and did not fit prev,
// when known, with those until this sample (a pod that fitted already was
// rejected by something else).
func (pl *LoadAware) letsIn(node *v1.Node, prev, cur *telemetry.Node, c change, s *podState) bool {
	return pl.admits(node, cur, c.reserved, s) && (!c.prevKnown || !pl.admits(node, prev, c.before, s))
}

// noLighter reports whether cur estimates no pod's load lower than prev:
// the same sections and capacities, and CPU and memory, as the args' usage
// reads them, no lower.
func (pl *LoadAware) noLighter(prev, cur *telemetry.Node) bool {
	prevCPU, prevMem := pl.usage(prev)
	curCPU, curMem := pl.usage(cur)
	return prev.HasCPU == cur.HasCPU && prev.HasMemory == cur.HasMemory &&
		prev.LogicalCores == cur.LogicalCores && prev.MemoryTotalBytes == cur.MemoryTotalBytes &&
		curCPU >= prevCPU && curMem >= prevMem
}

// podDeleteHint queues a pod when a pod deleted from a node takes its
// reservation with it and that lets the pod fit the node, by Filter's
// predicate. It undoes the reservation itself: the plugin's own Pod
// handler may not have seen the deletion yet.
//
// The scheduler asks it about every pending pod this plugin rejected, one
// after another, with the same deleted object: what the deletion freed and
// the node's view and reservations are read on the first call (deletion)
// and kept for the calls with the same object.
func (pl *LoadAware) podDeleteHint(logger klog.Logger, pod *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	if d, ok := oldObj.(toolscache.DeletedFinalStateUnknown); ok {
		oldObj = d.Obj
	}
	gone, ok := oldObj.(*v1.Pod)
	if !ok || gone.Spec.NodeName == "" {
		return fwk.QueueSkip, nil
	}
	d := pl.lastDeletion.Load()
	if d == nil || d.gone != gone {
		d = pl.deletion(gone)
		pl.lastDeletion.Store(d)
	}
	if !d.freedRoom {
		return fwk.QueueSkip, nil
	}
	if !pl.affinity.Allows(pod, d.node) {
		return fwk.QueueSkip, nil
	}
	s := pl.hintState(pod, d.now)
	if !pl.admits(d.node, d.tel, d.reserved, s) || pl.admits(d.node, d.tel, d.reserved.Plus(d.freed), s) {
		return fwk.QueueSkip, nil
	}
	logger.V(4).Info("a deleted pod's reservation makes room for the pod", "pod", klog.KObj(pod), "deleted", klog.KObj(gone), "node", gone.Spec.NodeName, "plugin", Name)
	return fwk.Queue, nil
}

// deletion is what the deletion of a pod bound to a node means for the
// pods rejected there, before any pod is looked at (podDeleteHint).
type deletion struct {
	gone *v1.Pod // the deleted object the scheduler hands every call
	// freedRoom: the pod's reservation was undone (now or before), Filter
	// kept some pending pod out of the node and the node has a view; when
	// false, no pending pod fits now that did not.
	freedRoom bool
	freed     estimate.Demand
	node      *v1.Node
	tel       *telemetry.Node
	reserved  estimate.Demand
	now       time.Time
}

func (pl *LoadAware) deletion(gone *v1.Pod) *deletion {
	d := &deletion{gone: gone}
	freed, ok := pl.book.Unreserve(gone.Spec.NodeName, gone.UID)
	if !ok {
		return d // measured by a sample already, or never reserved
	}
	if !pl.rejected.MayHelp(gone.Spec.NodeName) {
		return d // Filter kept no pending pod out of the node (rejected.Index.Select)
	}
	tel, ok := pl.cache.Get(gone.Spec.NodeName)
	if !ok {
		return d
	}
	d.freedRoom, d.freed, d.tel = true, freed, tel
	d.node, d.reserved, d.now = pl.node(gone.Spec.NodeName), pl.book.Get(gone.Spec.NodeName), pl.cache.Now()
	return d
}

// fitsReleased is Filter's predicate on a node whose reservations the book
// just released (a reserved pod gone, or a reservation expired), for
// rejected.Requeue: the node's view and reservations are read once.
func (pl *LoadAware) fitsReleased(name string) func([2]int64) bool {
	tel, ok := pl.cache.Get(name)
	if !ok {
		return func([2]int64) bool { return false }
	}
	node, reserved, now := pl.node(name), pl.book.Get(name), pl.cache.Now()
	return func(req [2]int64) bool {
		return pl.admits(node, tel, reserved, &podState{cpuMilli: req[0], memoryBytes: req[1], now: now})
	}
}

// node is the named Node from the scheduler's informer, nil when unknown.
func (pl *LoadAware) node(name string) *v1.Node {
	if pl.nodes == nil {
		return nil
	}
	n, err := pl.nodes.Get(name)
	if err != nil {
		return nil
	}
	return n
}

// threshold is the node's annotation when it lowers def, else def. A
// value above def, or not a whole number from 1 to 100, is ignored.
func threshold(node *v1.Node, annotation string, def int32) int32 {
	if node == nil {
		return def
	}
	if v, ok := node.Annotations[annotation]; ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 && n < int(def) {
			return int32(n)
		}
	}
	return def
}

// ownedByDaemonSet reports whether the pod's controller is a DaemonSet that
// exists with the UID the pod names. An owner reference is written by
// whoever creates the pod, so one naming a DaemonSet proves nothing alone.
func (pl *LoadAware) ownedByDaemonSet(pod *v1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "DaemonSet" || ref.APIVersion != "apps/v1" || pl.daemonSets == nil {
		return false
	}
	ds, err := pl.daemonSets.DaemonSets(pod.Namespace).Get(ref.Name)
	return err == nil && ds.UID == ref.UID
}

// percentBP renders basis points as a percentage number, e.g. 9125 as
// "91.25". Rejection reasons never carry a percent sign: kube-scheduler
// passes them to Eventf as a format string.
func percentBP(bp int64) string {
	if bp%100 == 0 {
		return fmt.Sprintf("%d", bp/100)
	}
	return fmt.Sprintf("%d.%02d", bp/100, bp%100)
}
