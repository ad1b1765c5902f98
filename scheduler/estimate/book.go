// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/telesched/telesched/internal/cowmap"
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

// MaxReservationAge bounds a reservation's life when no sample retires it
// (a pod that never starts, or an agent that stopped): its pod is running
// or gone by then, and the node's telemetry is stale.
const MaxReservationAge = 10 * time.Minute

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
// after MaxReservationAge. A scheduler that starts (a restart, or a
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
	cache   *telemetry.Cache
	counter Counter

	entries atomic.Pointer[map[string]*resEntry]
	bound   atomic.Pointer[LoadBound]
	// cpuThreshold is the lowest CPU threshold of the LoadAware plugins
	// that share the book (LimitCPU), 0 when none does.
	cpuThreshold atomic.Int32
	nextExpiry   atomic.Int64 // unix ns at which the oldest reservation expires; 0: none

	watchOnce sync.Once
	watchErr  error
	synced    []func() bool

	mu         sync.Mutex
	pods       map[string]map[types.UID]*reservation // by node, then pod
	undone     map[types.UID]undone                  // recently undone, for hints
	ended      map[types.UID]time.Time               // pods seen deleted or finished, for a minute
	loads      map[string]nodeLoad                   // each node's part of the LoadBound
	extremes   loadExtremes
	loadPasses int // passes over every node setLoad took
	listeners  []func(node string)
}

type reservation struct {
	Demand
	at time.Time
	// running is when the pod was seen running; zero until then. base is
	// its node's view then, which the calibration measures its jump from.
	running time.Time
	base    *telemetry.Node
}

type undone struct {
	node string
	Demand
	gone time.Time
}

// resEntry is one node's sums and calibration. Writers hold Book.mu.
type resEntry struct {
	cpuMilli, memoryBytes, gpus atomic.Int64
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
	return Demand{CPUMilli: e.cpuMilli.Load(), MemoryBytes: e.memoryBytes.Load(), GPUs: e.gpus.Load()}
}

type retirement struct {
	view   *telemetry.Node
	before Demand
}

// NewBook returns the book of the nodes in cache, kept current as the
// cache stores their samples; pods' demand is counted by opts.
func NewBook(cache *telemetry.Cache, opts Options) *Book {
	b := &Book{
		cache: cache, counter: NewCounter(opts),
		pods: map[string]map[types.UID]*reservation{}, undone: map[types.UID]undone{}, ended: map[types.UID]time.Time{}, loads: map[string]nodeLoad{},
	}
	b.entries.Store(&map[string]*resEntry{})
	b.bound.Store(&LoadBound{})
	cache.Watch(b.observe)
	return b
}

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
	if b == nil || n == nil || !n.HasCPU || n.LogicalCores <= 0 {
		return 0, false
	}
	t := int64(b.CPUThresholdPercent())
	if t <= 0 {
		return 0, false
	}
	capacity := int64(n.LogicalCores) * 1000
	load := int64(n.CPUPercent)*capacity/100 + b.Get(n.Name).CPUMilli
	return capacity*t/100 - load, true
}

// Demand is the pod's demand as the book counts it.
func (b *Book) Demand(pod *v1.Pod) Demand { return b.counter.Of(pod) }

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
// Only the first call registers anything.
func (b *Book) Watch(factory informers.SharedInformerFactory) error {
	b.watchOnce.Do(func() { b.watchErr = b.watch(factory) })
	return b.watchErr
}

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
		UpdateFunc: func(_, obj any) { b.podSeen(obj, false) },
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

// podSeen keeps a bound pod's reservation current: reserved from its
// binding, its hold started when it runs, undone when it finishes. A pod
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
		if now.Sub(at) > MaxReservationAge {
			return
		}
	}
	b.reserve(node, pod.UID, b.counter.Of(pod), at, running)
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

// startedAt is when the last of the pod's running containers started, by
// the kubelet's clock.
func startedAt(pod *v1.Pod) (time.Time, bool) {
	var t time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if r := cs.State.Running; r != nil && r.StartedAt.After(t) {
			t = r.StartedAt.Time
		}
	}
	return t, !t.IsZero()
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
		b.setLoad(name, loadOf(cur, Demand{}))
		return
	}
	hold := Hold(cur.Interval)
	before := e.load()
	jump := shownByJump(b.pods[name], cur)
	var shown []*reservation
	for uid, res := range b.pods[name] {
		if !res.running.IsZero() && (jump || !cur.Observed.Before(res.running.Add(hold))) {
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
		b.setLoad(name, loadOf(cur, before)) // the new sample's load; no reservation changed
		return
	}
	e.retired.Store(&retirement{view: cur, before: before})
	b.publish(name, e)
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
		if res.base == nil || !res.base.HasCPU || cur.Observed.Before(res.running.Add(cur.Interval)) {
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
	b.reserve(node, pod.UID, b.counter.Of(pod), b.cache.Now(), time.Time{})
}

// ReserveDemand is Reserve for a pod known by its UID and demand.
func (b *Book) ReserveDemand(node string, uid types.UID, d Demand) {
	b.reserve(node, uid, d, b.cache.Now(), time.Time{})
}

// reserve counts a pod, or, for one counted already, records when it was
// seen running.
func (b *Book) reserve(node string, uid types.UID, d Demand, at, running time.Time) {
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
		}
		return
	}
	if _, ok := b.ended[uid]; ok {
		return // deleted or finished before this late event
	}
	m[uid] = &reservation{Demand: d, at: at}
	if !running.IsZero() {
		b.run(node, m[uid], running)
	}
	if exp := at.Add(MaxReservationAge).UnixNano(); b.nextExpiry.Load() == 0 || exp < b.nextExpiry.Load() {
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
		return res.Demand, true
	}
	if u, ok := b.undone[pod]; ok && u.node == node {
		return u.Demand, true
	}
	return Demand{}, false
}

// End forgets the reservation of a pod that was deleted or finished, for
// good: an informer event about it that comes late does not bring it back.
func (b *Book) End(node string, pod types.UID) {
	b.Unreserve(node, pod)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended[pod] = b.cache.Now()
	if b.nextExpiry.Load() == 0 {
		b.nextExpiry.Store(b.cache.Now().Add(recallAge).UnixNano())
	}
}

// Expire drops reservations older than MaxReservationAge, and undone ones
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
			if now.Sub(res.at) > MaxReservationAge {
				delete(m, uid)
				changed = true
			} else if oldest.IsZero() || res.at.Before(oldest) {
				oldest = res.at
			}
		}
		if changed {
			b.publish(node, b.lookup(node))
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
		b.nextExpiry.Store(oldest.Add(MaxReservationAge).UnixNano())
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
		b.publishEntries(name, nil)
	}
	b.setLoad(name, nodeLoad{})
	b.changed(name)
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
	if ret := e.retired.Load(); ret != nil && ret.view == view {
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
	return ret != nil && ret.view == view
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
	}
	n, _ := b.cache.Get(name)
	b.setLoad(name, loadOf(n, sum))
	b.changed(name)
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
