package loadaware

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/telesched/telesched/internal/cowmap"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// MinReservationHold is the shortest time a reservation counts toward its
// node, however short the node's sampling interval.
const MinReservationHold = 10 * time.Second

// maxReservationAge bounds a reservation's life when no new sample comes to
// retire it (an agent that stopped): its pod is running or gone by then,
// and the node's telemetry is stale.
const maxReservationAge = 10 * time.Minute

// recallAge is how long an undone reservation is remembered, so that the
// QueueingHint of the deleted pod's event can tell what the deletion freed
// whichever of the plugin's handlers saw the event first.
const recallAge = time.Minute

// Reservations are the pods the scheduler placed on each node since the
// node's last sample: they count toward the node's estimated load until a
// sample taken after they started measures them. Every LoadAware instance
// of every profile shares one (NewFactory), so a pod placed by one profile
// counts for the others. Times are the scheduler's clock (the cache's).
//
// Readers take no lock: the per-node sums are atomics in entries that live
// as long as their node, in a map copied on write only when a node gets
// its first reservation or goes away.
type Reservations struct {
	cache *telemetry.Cache

	entries    atomic.Pointer[map[string]*resEntry]
	bound      atomic.Pointer[LoadBound]
	nextExpiry atomic.Int64 // unix ns at which the oldest reservation expires; 0: none

	mu         sync.Mutex
	pods       map[string]map[types.UID]reservation // by node, then pod
	undone     map[types.UID]undone                 // recently undone, for hints
	loads      map[string]nodeLoad                  // each node's part of the LoadBound
	extremes   loadExtremes
	loadPasses int // passes over every node setLoad took
}

type reservation struct {
	cpuMilli, memoryBytes int64
	at                    time.Time
}

type undone struct {
	node string
	reservation
	gone time.Time
}

// resEntry is one node's sums. Writers hold Reservations.mu.
type resEntry struct {
	cpuMilli, memoryBytes atomic.Int64
	// retired is what the node's sums were before the sample retired
	// some of them, tagged with that sample's view: a hint handed that
	// view compares the pod's fit before and after.
	retired atomic.Pointer[retirement]
}

type retirement struct {
	view                  *telemetry.Node
	cpuMilli, memoryBytes int64
}

// NewReservations returns the reservations of the nodes in cache, kept
// current as the cache stores their samples.
func NewReservations(cache *telemetry.Cache) *Reservations {
	r := &Reservations{cache: cache, pods: map[string]map[types.UID]reservation{}, undone: map[types.UID]undone{}, loads: map[string]nodeLoad{}}
	r.entries.Store(&map[string]*resEntry{})
	r.bound.Store(&LoadBound{})
	cache.Watch(r.observe)
	return r
}

// observe is the cache's Watcher: a node's new sample retires the
// reservations made at least two sampling intervals (and 10 s) before the
// cache saw it, and a node whose NodeTelemetry was deleted loses them all.
func (r *Reservations) observe(name string, _, cur *telemetry.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur == nil {
		r.forget(name)
		return
	}
	e := r.lookup(name)
	if e == nil {
		// A node's entry is made when its first view comes, so that
		// Reserve, once per scheduled pod, never copies the map.
		r.entry(name)
		r.setLoad(name, loadOf(cur, 0, 0))
		return
	}
	hold := max(2*cur.Interval, MinReservationHold)
	cpu, mem := e.cpuMilli.Load(), e.memoryBytes.Load()
	retired := false
	for uid, res := range r.pods[name] {
		if cur.Observed.Sub(res.at) >= hold {
			delete(r.pods[name], uid)
			retired = true
		}
	}
	if retired {
		e.retired.Store(&retirement{view: cur, cpuMilli: cpu, memoryBytes: mem})
	}
	r.publish(name, e)
}

// Reserve counts a pod toward its node from now until a sample seen two
// sampling intervals (at least 10 s) later, or for 10 minutes without one.
func (r *Reservations) Reserve(node string, pod types.UID, cpuMilli, memoryBytes int64) {
	at := r.cache.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.pods[node]
	if m == nil {
		m = map[types.UID]reservation{}
		r.pods[node] = m
	}
	m[pod] = reservation{cpuMilli: cpuMilli, memoryBytes: memoryBytes, at: at}
	if exp := at.Add(maxReservationAge).UnixNano(); r.nextExpiry.Load() == 0 || exp < r.nextExpiry.Load() {
		r.nextExpiry.Store(exp)
	}
	r.publish(node, r.entry(node))
}

// Unreserve forgets a pod's reservation: its binding failed, or the pod was
// deleted or finished before a sample measured it. It returns what the
// reservation was, also when another caller undid it in the last minute
// (false when neither).
func (r *Reservations) Unreserve(node string, pod types.UID) (cpuMilli, memoryBytes int64, ok bool) {
	now := r.cache.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if res, ok := r.pods[node][pod]; ok {
		delete(r.pods[node], pod)
		r.undone[pod] = undone{node: node, reservation: res, gone: now}
		r.publish(node, r.lookup(node))
		return res.cpuMilli, res.memoryBytes, true
	}
	if u, ok := r.undone[pod]; ok && u.node == node {
		return u.cpuMilli, u.memoryBytes, true
	}
	return 0, 0, false
}

// Expire drops reservations older than 10 minutes, and undone ones older
// than a minute; PreFilter calls it once per pod, and it costs an atomic
// load until the oldest reservation is due.
func (r *Reservations) Expire() {
	next := r.nextExpiry.Load()
	now := r.cache.Now()
	if next == 0 || now.UnixNano() < next {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var oldest time.Time
	for node, m := range r.pods {
		changed := false
		for uid, res := range m {
			if now.Sub(res.at) > maxReservationAge {
				delete(m, uid)
				changed = true
			} else if oldest.IsZero() || res.at.Before(oldest) {
				oldest = res.at
			}
		}
		if changed {
			r.publish(node, r.lookup(node))
		}
	}
	for uid, u := range r.undone {
		if now.Sub(u.gone) > recallAge {
			delete(r.undone, uid)
		}
	}
	if oldest.IsZero() {
		r.nextExpiry.Store(0)
	} else {
		r.nextExpiry.Store(oldest.Add(maxReservationAge).UnixNano())
	}
}

// ForgetNode drops a deleted node's reservations and entry.
func (r *Reservations) ForgetNode(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(name)
}

func (r *Reservations) forget(name string) {
	delete(r.pods, name)
	if e := r.lookup(name); e != nil {
		e.cpuMilli.Store(0)
		e.memoryBytes.Store(0)
		r.publishEntries(name, nil)
	}
	r.setLoad(name, nodeLoad{})
}

// Get returns the CPU and memory reserved on a node since its sample.
func (r *Reservations) Get(node string) (cpuMilli, memoryBytes int64) {
	e := r.lookup(node)
	if e == nil {
		return 0, 0
	}
	return e.cpuMilli.Load(), e.memoryBytes.Load()
}

// Before returns what was reserved on a node before view's sample retired
// part of it, or what is reserved now when view retired nothing.
func (r *Reservations) Before(node string, view *telemetry.Node) (cpuMilli, memoryBytes int64) {
	e := r.lookup(node)
	if e == nil {
		return 0, 0
	}
	if ret := e.retired.Load(); ret != nil && ret.view == view {
		return ret.cpuMilli, ret.memoryBytes
	}
	return e.cpuMilli.Load(), e.memoryBytes.Load()
}

// publish stores the sums of a node's reservations for readers, and the
// node's load in the LoadBound. The caller holds r.mu.
func (r *Reservations) publish(name string, e *resEntry) {
	var cpu, mem int64
	for _, res := range r.pods[name] {
		cpu += res.cpuMilli
		mem += res.memoryBytes
	}
	if e != nil {
		e.cpuMilli.Store(cpu)
		e.memoryBytes.Store(mem)
	}
	n, _ := r.cache.Get(name)
	r.setLoad(name, loadOf(n, cpu, mem))
}

func (r *Reservations) lookup(name string) *resEntry {
	return (*r.entries.Load())[name]
}

// entry returns a node's entry, creating it. The caller holds r.mu.
func (r *Reservations) entry(name string) *resEntry {
	if e := r.lookup(name); e != nil {
		return e
	}
	e := &resEntry{}
	r.publishEntries(name, e)
	return e
}

// publishEntries publishes a copy of the map with name's entry set to e,
// or removed when e is nil (cowmap, as telemetry.Cache does). The caller
// holds r.mu.
func (r *Reservations) publishEntries(name string, e *resEntry) {
	m := cowmap.With(*r.entries.Load(), name, e, e == nil)
	r.entries.Store(&m)
}
