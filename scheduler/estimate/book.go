// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"

	"github.com/telesched/telesched/internal/cowmap"
	"github.com/telesched/telesched/scheduler/dra"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// MinReservationHold is the shortest time a running pod keeps counting
// toward its node before a sample may show it, however short the node's
// sampling interval: a process takes a few seconds to reach its load.
const MinReservationHold = 10 * time.Second

// Hold is how long after a pod was observed running a sample of its node
// (with sampling interval) shows the pod's load: two intervals (the
// interval the load ramps in, and one whole interval measuring it), and
// at least MinReservationHold.
func Hold(interval time.Duration) time.Duration {
	return max(2*interval, MinReservationHold)
}

// DefaultMaxReservationAge bounds a reservation's life when no sample
// retires it (a pod that never starts, or an agent that stopped): its pod
// is running or gone by then, and the node's telemetry is stale. Change it
// with SetMaxAge (the scheduler's --reservation-max-age).
const DefaultMaxReservationAge = 10 * time.Minute

// recallAge is how long an undone reservation is remembered, so that the
// QueueingHint of the deleted pod's event can tell what the deletion freed
// whichever of the handlers saw the event first.
const recallAge = time.Minute

// Book is the one reservation book: every pod bound to a node, by this
// scheduler, another scheduler or another replica, counts toward its node
// from its binding (or this scheduler's Reserve, which comes first) until
// a sample of its node that the scheduler saw at least Hold(interval)
// after it saw the pod running. A pod still pulling its image keeps
// counting however long the sampling goes on; one that never runs stops
// after its max age (SetMaxAge). A scheduler that starts (a restart, or a
// replica taking over) rebuilds the book from the bound pods its Pod
// informer lists: those not running, and those running too recently for
// their node's sample to show them.
//
// Times are the scheduler's clock (the cache's), except the start time of
// a pod listed already running, which is the kubelet's.
//
// Readers take no lock: the per-node sums are atomics in entries that live
// as long as their node, in a map copied on write only when a node gets
// its first reservation or goes away.
type Book struct {
	cache *telemetry.Cache
	// counter counts every pod's demand, for every plugin (Demand); the
	// plugins' args set it through Share before the informers start.
	counter atomic.Pointer[Counter]
	// settings are what counter was built from, with who set each.
	settingsMu sync.Mutex
	opts       Options
	defaults   shared[[2]int64]
	gpu        shared[v1.ResourceName]
	mig        shared[string]
	draShared  shared[string]
	// claims is the process's one index of DRA's GPUs, which counter
	// reads for pods' ClaimGPUs.
	claims *dra.Index

	entries atomic.Pointer[map[string]*resEntry]
	bound   atomic.Pointer[LoadBound]
	// cpuThreshold is the lowest CPU threshold of the LoadAware plugins
	// that share the book (LimitCPU), 0 when none does.
	cpuThreshold atomic.Int32
	nextExpiry   atomic.Int64 // unix ns at which the oldest reservation expires; 0: none
	maxAge       atomic.Int64 // a reservation's longest life (SetMaxAge)

	watchOnce sync.Once
	watchErr  error
	synced    []func() bool

	mu         sync.Mutex
	pods       map[string]map[types.UID]*reservation // by node, then pod
	plans      map[types.UID]string                  // planned reservations' node (Plan)
	undone     map[types.UID]undone                  // recently undone, for hints
	ended      map[types.UID]time.Time               // pods seen deleted or finished, for a minute
	loads      map[string]nodeLoad                   // each node's part of the LoadBound
	extremes   loadExtremes
	loadPasses int // passes over every node setLoad took
	listeners  []func(node string)
	releases   []func(node string)
}

type reservation struct {
	Demand
	at time.Time
	// running is when the pod was seen running; zero until then. base is
	// its node's view then, which the calibration measures its jump from.
	running time.Time
	base    *telemetry.Node
	// started is when the last of the pod's containers started, by the
	// kubelet's clock, which is its node's and so its agent's: a sample
	// taken (sampleTime) less than an interval after it cannot show the
	// pod, however late it arrives. Zero when the pod's status says not.
	started time.Time
	// rebuilt is true for a pod the book found running when it started
	// (the informer's first list): its jump is not measured.
	rebuilt bool
	// planned is a descheduler's what-if (Plan), not a pod.
	planned bool
}

type undone struct {
	node string
	Demand
	gone time.Time
}

// resEntry is one node's sums and calibration. Writers hold Book.mu.
type resEntry struct {
	// view is the node's latest view, stored by viewStored as the cache
	// stores it (the cache's lock held): a plugin that reads a node's
	// view and its reservations finds both in one lookup (Slot).
	view                                              atomic.Pointer[telemetry.Node]
	cpuMilli, memoryBytes, gpus, migSlices, claimGPUs atomic.Int64
	// unseenCPUMilli is the CPU of the pods counted above that the
	// view's sample cannot show yet (shows): what the energy ranking
	// adds to the sample's load.
	unseenCPUMilli atomic.Int64
	// ratio is the node's measured over predicted watts (float64 bits,
	// calibration.go), over calibrations measurements, from the moving
	// sums of the jumps measured and predicted.
	ratio                     atomic.Uint64
	calibrations              atomic.Int64
	calibratedAt              atomic.Int64 // unix ns of the last measurement
	measuredSum, predictedSum float64
	// disturbed is when a pod of the node last stopped counting other
	// than by a sample showing it: a jump measured across it is not the
	// placed pods' alone.
	disturbed time.Time
	// retired is what the node's sums were before the sample retired
	// some of them, tagged with that sample's view: a hint handed that
	// view compares the pod's fit before and after.
	retired atomic.Pointer[retirement]
}

func (e *resEntry) load() Demand {
	return Demand{CPUMilli: e.cpuMilli.Load(), MemoryBytes: e.memoryBytes.Load(), GPUs: e.gpus.Load(), MIGSlices: e.migSlices.Load(), ClaimGPUs: e.claimGPUs.Load()}
}

type retirement struct {
	sample sampleKey
	before Demand
}

// sampleKey identifies a node's sample across copies of its view (the
// cache restamps a view when the node's agent pod changes readiness): the
// agent's time for it and the cache's. Two writes of one sample share
// both; the cache observes different samples at different times.
type sampleKey struct{ sampleTime, observed time.Time }

func keyOf(n *telemetry.Node) sampleKey {
	return sampleKey{sampleTime: n.SampleTime, observed: n.Observed}
}

// NewBook returns the book of the nodes in cache, kept current as the
// cache stores their samples; pods' demand is counted by opts.
func NewBook(cache *telemetry.Cache, opts Options) *Book {
	b := &Book{
		cache: cache, opts: opts, claims: dra.New(dra.DefaultConfig()),
		pods: map[string]map[types.UID]*reservation{}, undone: map[types.UID]undone{}, ended: map[types.UID]time.Time{}, loads: map[string]nodeLoad{},
	}
	c := NewCounter(opts)
	c.claims = b.claims
	b.counter.Store(&c)
	b.maxAge.Store(int64(DefaultMaxReservationAge))
	b.entries.Store(&map[string]*resEntry{})
	b.bound.Store(&LoadBound{})
	cache.Watch(b.observe)
	cache.WatchViews(b.viewStored)
	return b
}

// SetMaxAge sets how long a reservation counts when no sample retires it
// (DefaultMaxReservationAge); call it before the book counts any pod.
func (b *Book) SetMaxAge(d time.Duration) error {
	if d < MinReservationHold {
		return fmt.Errorf("a reservation's max age %v must be at least %v", d, MinReservationHold)
	}
	b.maxAge.Store(int64(d))
	return nil
}

// MaxAge is how long a reservation counts when no sample retires it.
func (b *Book) MaxAge() time.Duration { return time.Duration(b.maxAge.Load()) }

// LimitCPU records a LoadAware profile's cpuThresholdPercent: no pod may
// bring a node's estimated CPU (measured, plus the pods placed since) past
// it. The book keeps the lowest, for the plugins that must leave a node
// room under it (CPUUnderThresholdMilli: TopologyFit's CPUs kept for free
// GPUs, EnergyAware's room for pods like the one placed).
func (b *Book) LimitCPU(percent int32) {
	for {
		cur := b.cpuThreshold.Load()
		if percent <= 0 || (cur != 0 && cur <= percent) || b.cpuThreshold.CompareAndSwap(cur, percent) {
			return
		}
	}
}

// CPUThresholdPercent is the lowest LimitCPU recorded, 0 when none was.
func (b *Book) CPUThresholdPercent() int32 { return b.cpuThreshold.Load() }

// CPUUnderThresholdMilli is the CPU, in millicores, that the lowest
// LimitCPU leaves above node n's estimated load (its measured utilization
// plus the pods placed since its sample); negative when the load is past
// it. ok is false without a book, a threshold or n's CPU telemetry.
func (b *Book) CPUUnderThresholdMilli(n *telemetry.Node) (milli int64, ok bool) {
	if n == nil {
		return 0, false
	}
	return b.slot(n.Name).CPUUnderThresholdMilli(n)
}

// CPUUnderThresholdMilli is Book.CPUUnderThresholdMilli for node n, whose
// slot s is.
func (s Slot) CPUUnderThresholdMilli(n *telemetry.Node) (milli int64, ok bool) {
	if n == nil || !n.HasCPU || n.LogicalCores <= 0 || s.cpuThreshold <= 0 {
		return 0, false
	}
	capacity := int64(n.LogicalCores) * 1000
	load := int64(n.CPUPercent)*capacity/100 + s.Reserved.CPUMilli
	return capacity*int64(s.cpuThreshold)/100 - load, true
}

// Demand is the pod's demand as the book counts it: the one count of
// every plugin.
func (b *Book) Demand(pod *v1.Pod) Demand { return b.counter.Load().Of(pod) }

// Requested is the pod's demand as the book counts it, without the
// default requests (Counter.Requested).
func (b *Book) Requested(pod *v1.Pod) Demand { return b.counter.Load().Requested(pod) }

// MIGRequests are the pod's MIG resources as the book counts them
// (Counter.MIGRequests).
func (b *Book) MIGRequests(pod *v1.Pod) []MIGRequest { return b.counter.Load().MIGRequests(pod) }

// ShareDefaultRequests sets the CPU and memory counted for a container
// that requests none, as the plugin who (a profile's plugin, for messages)
// has them; an error when another plugin set other values first. Call it
// before the informers start.
func (b *Book) ShareDefaultRequests(who string, cpuMilli, memoryBytes int64) error {
	b.settingsMu.Lock()
	defer b.settingsMu.Unlock()
	if err := b.defaults.agree("default requests [CPU millicores, memory bytes]", who, [2]int64{cpuMilli, memoryBytes}); err != nil {
		return err
	}
	b.opts.DefaultCPUMilli, b.opts.DefaultMemoryBytes = cpuMilli, memoryBytes
	b.recount()
	return nil
}

// ShareGPUResource sets the extended resource that counts GPUs, as
// ShareDefaultRequests does the default requests.
func (b *Book) ShareGPUResource(who string, name v1.ResourceName) error {
	b.settingsMu.Lock()
	defer b.settingsMu.Unlock()
	if err := b.gpu.agree("GPU resource name", who, name); err != nil {
		return err
	}
	b.opts.GPUResource = name
	b.recount()
	return nil
}

// ShareMIGResourcePrefix sets the prefix of the MIG resources
// (migResourcePrefix), as ShareDefaultRequests does the default requests.
func (b *Book) ShareMIGResourcePrefix(who, prefix string) error {
	b.settingsMu.Lock()
	defer b.settingsMu.Unlock()
	if err := b.mig.agree("MIG resource prefix", who, prefix); err != nil {
		return err
	}
	b.opts.MIGResourcePrefix = prefix
	b.recount()
	return nil
}

// recount builds the counter from b.opts. The caller holds settingsMu.
func (b *Book) recount() {
	c := NewCounter(b.opts)
	c.claims = b.claims
	b.counter.Store(&c)
}

// OnChange registers f, called with a node's name after any change of its
// reservations (the book's lock is held: f must be quick and must not call
// the book's writers). PowerBudget's domains follow the book with it.
func (b *Book) OnChange(f func(node string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.listeners = append(b.listeners, f)
}

// Watch follows Pods and Nodes through the scheduler's informers: a pod
// bound to a node is reserved there, seen running it starts its hold, and
// finished or deleted it is undone; a deleted Node loses its reservations.
// It also follows ResourceSlices and ResourceClaims (WatchClaims). Only
// the first call registers anything.
//
// Until ctx ends, reservations are also expired on the clock, every
// ExpireInterval, so that their listeners (OnRelease) hear of it while no
// pod is being scheduled.
func (b *Book) Watch(ctx context.Context, factory informers.SharedInformerFactory) error {
	b.watchOnce.Do(func() {
		if b.watchErr = b.watch(factory); b.watchErr == nil {
			b.watchErr = b.WatchClaims(factory)
		}
		if b.watchErr == nil {
			go wait.UntilWithContext(ctx, func(context.Context) { b.Expire() }, ExpireInterval)
		}
	})
	return b.watchErr
}

// ExpireInterval is how often a watching book expires reservations on its
// own (Expire costs an atomic load until one is due).
const ExpireInterval = time.Second

func (b *Book) watch(factory informers.SharedInformerFactory) error {
	nodes, err := factory.Core().V1().Nodes().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if node, ok := obj.(*v1.Node); ok {
				b.ForgetNode(node.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching Nodes: %w", err)
	}
	pods, err := factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { b.podSeen(obj, initial) },
		UpdateFunc: b.podUpdated,
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok && pod.Spec.NodeName != "" {
				b.End(pod.Spec.NodeName, pod.UID)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching Pods: %w", err)
	}
	b.synced = []func() bool{nodes.HasSynced, pods.HasSynced}
	return nil
}

// Synced reports whether the Pod and Node handlers have had their first
// lists (true when Watch was never called: the book is then what Reserve
// told it).
func (b *Book) Synced() bool {
	for _, f := range b.synced {
		if !f() {
			return false
		}
	}
	return true
}

// podSeen is a pod the informer adds: one bound already is reserved from
// its binding, its hold started if it runs, undone if it finished. A pod
// of the informer's first list (the scheduler starting) is reserved only
// when its node's latest sample cannot show it yet.
func (b *Book) podSeen(obj any, initial bool) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	node := pod.Spec.NodeName
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		b.End(node, pod.UID)
		return
	}
	now := b.cache.Now()
	at, running := now, time.Time{}
	if pod.Status.Phase == v1.PodRunning {
		running = now
	}
	if initial {
		if t, ok := scheduledAt(pod); ok && t.Before(now) {
			at = t
		}
		if !running.IsZero() {
			if t, ok := startedAt(pod); ok && t.Before(now) {
				running = t
			}
			if view, ok := b.cache.Get(node); ok && !view.Observed.Before(running.Add(Hold(view.Interval))) {
				return // its node's sample shows it already
			}
		}
		if now.Sub(at) > b.MaxAge() {
			return
		}
	}
	started, _ := startedAt(pod)
	b.reserve(node, pod.UID, b.Demand(pod), at, running, started)
	if initial && !running.IsZero() {
		// Its node's samples since it started may show part of its load
		// already: there is no sample to measure its jump from.
		b.mu.Lock()
		if res := b.pods[node][pod.UID]; res != nil {
			res.rebuilt = true
		}
		b.mu.Unlock()
	}
}

// disturb records that a node's load changed at t other than by the
// reservations' pods starting: a jump in its watts measured across t is
// not theirs alone (calibrate).
func (b *Book) disturb(node string, t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.lookup(node); e != nil && t.After(e.disturbed) {
		e.disturbed = t // (a node without an entry has no calibration)
	}
}

// podUpdated follows a pod through the changes that move its reservation,
// and through those alone: its binding reserves it, its start starts its
// hold (or, when its reservation is gone by then, reserves it from its
// start: its load is new to its node's samples), and its end undoes it.
// Everything else a pod's status goes through (readiness flapping, a
// container restarting, a label patched, a pending pod's image pull
// retried) changes nothing: a pod a sample retired is never counted
// again, and a pending pod's max age counts from its binding.
func (b *Book) podUpdated(oldObj, newObj any) {
	old, ok := oldObj.(*v1.Pod)
	pod, ok2 := newObj.(*v1.Pod)
	if !ok || !ok2 || pod.Spec.NodeName == "" {
		return
	}
	node := pod.Spec.NodeName
	switch {
	case pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed:
		b.End(node, pod.UID)
	case old.Spec.NodeName == "":
		b.podSeen(pod, false) // bound
	case pod.Status.Phase == v1.PodRunning && old.Status.Phase != v1.PodRunning:
		started, _ := startedAt(pod)
		b.reserve(node, pod.UID, b.Demand(pod), b.cache.Now(), b.cache.Now(), started)
	}
}

// scheduledAt is when the pod was bound, by the API server's clock.
func scheduledAt(pod *v1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// startedAt is when the last of the pod's running containers first
// started, by the kubelet's clock: a container the kubelet restarted
// counts from its previous run's start (lastState), since its load was on
// the node before the restart and samples since then show it.
func startedAt(pod *v1.Pod) (time.Time, bool) {
	var t time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		r := cs.State.Running
		if r == nil {
			continue
		}
		first := r.StartedAt.Time
		if prev := cs.LastTerminationState.Terminated; prev != nil && !prev.StartedAt.IsZero() && prev.StartedAt.Before(&r.StartedAt) {
			first = prev.StartedAt.Time
		}
		if first.After(t) {
			t = first
		}
	}
	return t, !t.IsZero()
}

// viewStored keeps a node's slot's view the cache's: every view the
// cache stores, the ones it restamps when the node's agent's readiness
// changes too (of which observe is not told). The cache tells it after
// observe, which makes a node's entry when its first view comes. The
// cache's lock is held.
func (b *Book) viewStored(name string, cur *telemetry.Node) {
	if e := b.lookup(name); e != nil {
		e.view.Store(cur)
	}
}

// observe is the cache's Watcher: a node's new sample retires the
// reservations of pods seen running at least Hold(interval) before the
// cache saw the sample, and a node whose NodeTelemetry was deleted loses
// them all.
func (b *Book) observe(name string, _, cur *telemetry.Node) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur == nil {
		b.forget(name)
		return
	}
	e := b.lookup(name)
	if e == nil {
		// A node's entry is made when its first view comes, so that
		// Reserve, once per scheduled pod, never copies the map.
		b.entry(name)
		b.setLoad(name, loadOf(cur, Demand{}, uncalibrated))
		b.report(name, cur, b.Get(name))
		return
	}
	hold := Hold(cur.Interval)
	before := e.load()
	jump := shownByJump(b.pods[name], cur)
	var shown []*reservation
	for uid, res := range b.pods[name] {
		if !res.running.IsZero() && takenAfter(cur, res) && (jump || !cur.Observed.Before(res.running.Add(hold))) {
			delete(b.pods[name], uid)
			shown = append(shown, res)
		}
	}
	retired := len(shown) > 0
	if retired {
		b.calibrate(name, e, cur, shown)
		e.disturbed = cur.Observed
	}
	if !retired {
		e.unseenCPUMilli.Store(unseenCPU(b.pods[name], cur))
		b.setLoad(name, loadOf(cur, before, b.calibrationOf(e))) // the new sample's load; no reservation changed
		if before != (Demand{}) {
			b.report(name, cur, before) // their watts on the new view
		}
		return
	}
	e.retired.Store(&retirement{sample: keyOf(cur), before: before})
	b.publish(name, e)
}

// takenAfter reports whether cur's sample was taken, by its agent's clock,
// a whole interval after the pod's containers started, by the kubelet's
// (the node's clock both): one taken before cannot show the pod, however
// late the cache sees it. A pod or sample without the time passes.
func takenAfter(cur *telemetry.Node, res *reservation) bool {
	return res.started.IsZero() || cur.SampleTime.IsZero() || !cur.SampleTime.Before(res.started.Add(cur.Interval))
}

// ShownAfterIntervals is how many sampling intervals a pod must have run
// before a sample for the energy ranking to take the sample as showing
// its load (shows): one for its load to ramp up, one whole interval
// measuring it, as Hold; without Hold's MinReservationHold, which keeps
// the limits' reservations on for a safety margin.
const ShownAfterIntervals = 2

// shows reports whether n's sample shows a counted pod's load, for the
// energy ranking: the pod ran ShownAfterIntervals intervals before the
// sample was taken, by the node's clock where the kubelet gave its
// containers' start (the agent's sample time is the node's clock too),
// else by the scheduler's from when it saw the pod running to when it saw
// the sample. A pod not seen running, and a descheduler's what-if, show
// nowhere; nor does any pod on a view that gives no sampling interval.
func shows(n *telemetry.Node, res *reservation) bool {
	if n == nil || res.planned || res.running.IsZero() {
		return false
	}
	if !res.started.IsZero() && !n.SampleTime.IsZero() {
		return SampleShows(n.SampleTime, res.started, n.Interval)
	}
	return SampleShows(n.Observed, res.running, n.Interval)
}

// SampleShows reports whether a sample taken at taken, of a node sampled
// every interval, shows the load of a pod that started at started: it
// ran ShownAfterIntervals intervals before the sample. Without an
// interval nothing is shown.
func SampleShows(taken, started time.Time, interval time.Duration) bool {
	return interval > 0 && !taken.Before(started.Add(time.Duration(ShownAfterIntervals)*interval))
}

// unseenCPU is the CPU of the counted pods whose load n's sample cannot
// show (shows).
func unseenCPU(pods map[types.UID]*reservation, n *telemetry.Node) int64 {
	var milli int64
	for _, res := range pods {
		if !shows(n, res) {
			milli += res.CPUMilli
		}
	}
	return milli
}

// ShownFraction is how much of the CPU its running pods request a node's
// sample must show above the sample before they ran for the book to take
// them as shown before their hold is over (shownByJump).
const ShownFraction = 0.8

// shownByJump reports whether cur, a node's new sample, shows the load of
// every pod running there that it still counts: each seen running at least
// one sampling interval before the sample, so the sample measured a whole
// interval of it, and the node's measured CPU above the earliest of their
// base views by at least ShownFraction of what they request. Counting them
// on until the hold would count them twice, measured and reserved: a node
// that took a burst would refuse pods for up to a heartbeat with its CPUs
// no busier than the burst made them. Pods that use less than they request
// show no such jump and retire by the hold.
func shownByJump(pods map[types.UID]*reservation, cur *telemetry.Node) bool {
	if !cur.HasCPU || cur.LogicalCores <= 0 {
		return false
	}
	var base *telemetry.Node
	var cpu int64
	for _, res := range pods {
		if res.running.IsZero() {
			continue // pending: no load yet, nothing to show
		}
		if res.base == nil || !res.base.HasCPU || cur.Observed.Before(res.running.Add(cur.Interval)) || !takenAfter(cur, res) {
			return false
		}
		if base == nil || res.base.Observed.Before(base.Observed) {
			base = res.base
		}
		cpu += res.CPUMilli
	}
	if base == nil || cpu <= 0 {
		return false
	}
	expected := float64(cpu) / (float64(cur.LogicalCores) * 1000) * 100
	return float64(cur.CPUPercent-base.CPUPercent) >= ShownFraction*expected
}

// Reserve counts a pod toward its node from now, as the scheduler places
// it: a pod counted already keeps its first time.
func (b *Book) Reserve(node string, pod *v1.Pod) {
	b.reserve(node, pod.UID, b.Demand(pod), b.cache.Now(), time.Time{}, time.Time{})
}

// ReserveDemand is Reserve for a pod known by its UID and demand.
func (b *Book) ReserveDemand(node string, uid types.UID, d Demand) {
	b.reserve(node, uid, d, b.cache.Now(), time.Time{}, time.Time{})
}

// reserve counts a pod, or, for one counted already, records when it was
// seen running (and, by the kubelet, started).
func (b *Book) reserve(node string, uid types.UID, d Demand, at, running, started time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.pods[node]
	if m == nil {
		m = map[types.UID]*reservation{}
		b.pods[node] = m
	}
	if res, ok := m[uid]; ok {
		if res.running.IsZero() && !running.IsZero() {
			b.run(node, res, running)
			res.started = started
		}
		return
	}
	if _, ok := b.ended[uid]; ok {
		return // deleted or finished before this late event
	}
	m[uid] = &reservation{Demand: d, at: at, started: started}
	if !running.IsZero() {
		b.run(node, m[uid], running)
	}
	if exp := at.Add(b.MaxAge()).UnixNano(); b.nextExpiry.Load() == 0 || exp < b.nextExpiry.Load() {
		b.nextExpiry.Store(exp)
	}
	b.publish(node, b.entry(node))
}

// Running records that a pod was seen running now: its hold starts.
func (b *Book) Running(node string, uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if res, ok := b.pods[node][uid]; ok && res.running.IsZero() {
		b.run(node, res, b.cache.Now())
	}
}

// Unreserve forgets a pod's reservation: its binding failed, or the pod was
// deleted or finished before a sample measured it. It returns what the
// reservation was, also when another caller undid it in the last minute
// (false when neither).
func (b *Book) Unreserve(node string, pod types.UID) (Demand, bool) {
	now := b.cache.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if res, ok := b.pods[node][pod]; ok {
		delete(b.pods[node], pod)
		if e := b.lookup(node); e != nil {
			e.disturbed = now
		}
		b.undone[pod] = undone{node: node, Demand: res.Demand, gone: now}
		b.publish(node, b.lookup(node))
		b.released(node)
		return res.Demand, true
	}
	if u, ok := b.undone[pod]; ok && u.node == node {
		return u.Demand, true
	}
	return Demand{}, false
}

// End forgets the reservation of a pod that was deleted or finished, for
// good: an informer event about it that comes late does not bring it back.
// Its load leaves its node whether it was still reserved or measured
// already, so a jump in the node's watts measured across its end is not
// the placed pods' alone.
func (b *Book) End(node string, pod types.UID) {
	b.Unreserve(node, pod)
	b.disturb(node, b.cache.Now())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended[pod] = b.cache.Now()
	if b.nextExpiry.Load() == 0 {
		b.nextExpiry.Store(b.cache.Now().Add(recallAge).UnixNano())
	}
}

// Expire drops reservations older than MaxAge, and undone ones
// older than a minute; PreFilter calls it once per pod, and it costs an
// atomic load until the oldest reservation is due.
func (b *Book) Expire() {
	next := b.nextExpiry.Load()
	now := b.cache.Now()
	if next == 0 || now.UnixNano() < next {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var oldest time.Time
	for node, m := range b.pods {
		changed := false
		for uid, res := range m {
			if now.Sub(res.at) > b.MaxAge() {
				delete(m, uid)
				changed = true
				if e := b.lookup(node); e != nil && !res.running.IsZero() {
					e.disturbed = now // its load left the book, not the node
				}
			} else if oldest.IsZero() || res.at.Before(oldest) {
				oldest = res.at
			}
		}
		if changed {
			b.publish(node, b.lookup(node))
			b.released(node)
		}
	}
	for uid, u := range b.undone {
		if now.Sub(u.gone) > recallAge {
			delete(b.undone, uid)
		}
	}
	for uid, at := range b.ended {
		if now.Sub(at) > recallAge {
			delete(b.ended, uid)
		}
	}
	if oldest.IsZero() && len(b.ended) > 0 {
		b.nextExpiry.Store(now.Add(recallAge).UnixNano())
	} else if oldest.IsZero() {
		b.nextExpiry.Store(0)
	} else {
		b.nextExpiry.Store(oldest.Add(b.MaxAge()).UnixNano())
	}
}

// ForgetNode drops a deleted node's reservations and entry.
func (b *Book) ForgetNode(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forget(name)
}

func (b *Book) forget(name string) {
	delete(b.pods, name)
	if e := b.lookup(name); e != nil {
		e.cpuMilli.Store(0)
		e.memoryBytes.Store(0)
		e.gpus.Store(0)
		e.migSlices.Store(0)
		e.unseenCPUMilli.Store(0)
		b.publishEntries(name, nil)
	}
	b.setLoad(name, nodeLoad{})
	for _, m := range []*metrics.GaugeVec{reservedCPU, reservedGPUs, reservedWatts} {
		m.DeleteLabelValues(name)
	}
	b.changed(name)
}

// Slot is what the book holds for one node, read in one lookup: its
// latest view, the demand placed on it since its sample, its calibration
// and the lowest LimitCPU. A plugin that reads a node's view and asks
// several of the estimates below of it reads its slot once, where the
// cache and each Book method would look the node up again.
type Slot struct {
	// View is the node's latest view as the book observed it: the
	// cache's (Cache.Get), stored as the cache stores it; nil without
	// one.
	View *telemetry.Node
	// Reserved is what the pods placed on the node since its sample
	// demand (Get).
	Reserved Demand
	// UnseenCPUMilli is the CPU of those pods that the sample cannot
	// show yet (run for less than ShownAfterIntervals before it): the
	// energy ranking reads the node's curve at the sample's load plus
	// these, where the limits count every reserved pod until its hold
	// is over. A pod the sample shows but the book still holds would
	// count twice, and a node that took pods a few seconds ago would
	// rank as if it stood further up its curve than it does.
	UnseenCPUMilli int64
	cal            calibration
	cpuThreshold   int32
}

// Slot returns node's slot; a nil book's is empty and uncalibrated.
func (b *Book) Slot(node string) Slot { return b.slot(node) }

func (b *Book) slot(node string) Slot {
	if b == nil {
		return Slot{cal: uncalibrated}
	}
	e := b.lookup(node)
	s := Slot{cal: b.calibrationOf(e), cpuThreshold: b.cpuThreshold.Load()}
	if e != nil {
		s.View, s.Reserved, s.UnseenCPUMilli = e.view.Load(), e.load(), e.unseenCPUMilli.Load()
	}
	return s
}

// With is s with reserved in place of what the book held (a plugin
// judging the node as it was before a sample retired reservations), all
// of it unseen by the sample.
func (s Slot) With(reserved Demand) Slot {
	s.Reserved, s.UnseenCPUMilli = reserved, reserved.CPUMilli
	return s
}

// Placed is a node's latest view (Slot.View) and what was placed on it
// since its sample (Get), in one lookup, for a plugin that needs no more
// of the slot.
func (b *Book) Placed(node string) (*telemetry.Node, Demand) {
	e := b.lookup(node)
	if e == nil {
		return nil, Demand{}
	}
	return e.view.Load(), e.load()
}

// slotWith is node's slot with reserved in place of what the book holds
// (the Book methods that take reserved).
func (b *Book) slotWith(node string, reserved Demand) Slot {
	return b.slot(node).With(reserved)
}

// Get returns what the pods placed on a node since its sample demand.
func (b *Book) Get(node string) Demand {
	e := b.lookup(node)
	if e == nil {
		return Demand{}
	}
	return e.load()
}

// Before returns what was reserved on a node before view's sample retired
// part of it, or what is reserved now when view retired nothing.
func (b *Book) Before(node string, view *telemetry.Node) Demand {
	e := b.lookup(node)
	if e == nil {
		return Demand{}
	}
	if ret := e.retired.Load(); ret != nil && view != nil && ret.sample == keyOf(view) {
		return ret.before
	}
	return e.load()
}

// Retired reports whether view's sample retired reservations of its node.
func (b *Book) Retired(view *telemetry.Node) bool {
	if view == nil {
		return false
	}
	e := b.lookup(view.Name)
	if e == nil {
		return false
	}
	ret := e.retired.Load()
	return ret != nil && ret.sample == keyOf(view)
}

// publish stores the sums of a node's reservations for readers, and the
// node's load in the LoadBound. The caller holds b.mu.
func (b *Book) publish(name string, e *resEntry) {
	var sum Demand
	for _, res := range b.pods[name] {
		sum = sum.Plus(res.Demand)
	}
	if e != nil {
		e.cpuMilli.Store(sum.CPUMilli)
		e.memoryBytes.Store(sum.MemoryBytes)
		e.gpus.Store(sum.GPUs)
		e.migSlices.Store(sum.MIGSlices)
		e.claimGPUs.Store(sum.ClaimGPUs)
	}
	n, _ := b.cache.Get(name)
	if e != nil {
		e.unseenCPUMilli.Store(unseenCPU(b.pods[name], n))
	}
	b.setLoad(name, loadOf(n, sum, b.calibrationOf(e)))
	b.report(name, n, sum)
	b.changed(name)
}

// report sets a node's reserved metrics. The caller holds b.mu.
func (b *Book) report(name string, n *telemetry.Node, sum Demand) {
	reservedCPU.WithLabelValues(name).Set(float64(sum.CPUMilli) / 1000)
	reservedGPUs.WithLabelValues(name).Set(float64(sum.BusyGPUs()))
	if n != nil {
		if w, ok := b.ReservedWatts(n, sum); ok {
			reservedWatts.WithLabelValues(name).Set(w.Mean)
			return
		}
	}
	reservedWatts.DeleteLabelValues(name)
}

// OnRelease registers f, called with a node's name after reservations of
// the node were undone other than by a sample showing their pods: a pod
// deleted, finished or unbound, or a reservation expired. Pods rejected
// for want of the room they held may fit now, and no NodeTelemetry event
// says so. As for OnChange, b's lock is held: f must only take note.
func (b *Book) OnRelease(f func(node string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releases = append(b.releases, f)
}

// released tells the release listeners. The caller holds b.mu.
func (b *Book) released(name string) {
	for _, f := range b.releases {
		f(name)
	}
}

// changed tells the listeners. The caller holds b.mu.
func (b *Book) changed(name string) {
	for _, f := range b.listeners {
		f(name)
	}
}

func (b *Book) lookup(name string) *resEntry {
	return (*b.entries.Load())[name]
}

// entry returns a node's entry, creating it. The caller holds b.mu.
func (b *Book) entry(name string) *resEntry {
	if e := b.lookup(name); e != nil {
		return e
	}
	e := &resEntry{}
	b.publishEntries(name, e)
	return e
}

// publishEntries publishes a copy of the map with name's entry set to e,
// or removed when e is nil (cowmap, as telemetry.Cache does). The caller
// holds b.mu.
func (b *Book) publishEntries(name string, e *resEntry) {
	m := cowmap.With(*b.entries.Load(), name, e, e == nil)
	b.entries.Store(&m)
}
