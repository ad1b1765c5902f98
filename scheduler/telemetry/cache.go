// Package telemetry is the scheduler's cache of NodeTelemetry: one informer
// per process, shared by every plugin and profile, that decodes each object
// once, on update, into an immutable per-node view. Filter and Score read
// that view with a map lookup: no API calls, no decoding, no allocation.
//
// It also keeps the pods the scheduler placed since a node's last sample
// (reservations), so a burst of pods does not pile onto the node that
// looked idle before any of them started.
package telemetry

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// Resource is the NodeTelemetry resource.
var Resource = telemetryv1alpha1.SchemeGroupVersion.WithResource("nodetelemetries")

// DefaultSyncTimeout bounds the wait for the first list of NodeTelemetry.
const DefaultSyncTimeout = time.Minute

// minReservationHold is the shortest time a reservation counts toward its
// node, however short the node's sampling interval.
const minReservationHold = 10 * time.Second

// maxReservationAge bounds a reservation's life when no new sample comes to
// retire it (an agent that stopped): its pod is running or gone by then,
// and the node's telemetry is stale, so plugins do not read it anyway.
const maxReservationAge = 10 * time.Minute

// Cache holds the latest telemetry of every node and the reservations made
// since. It is safe for concurrent use. Reads take no lock: Filter and
// Score run on up to 16 goroutines per scheduling cycle, and a shared
// RWMutex's reader count is one cache line they would all write. The map
// of nodes is copied on write, which happens only when a node gets its
// first view or loses its object; each node's view and reservation sums
// are swapped atomically in place.
type Cache struct {
	startOnce sync.Once
	startErr  error

	entries atomic.Pointer[map[string]*entry] // read-only once published
	bound   atomic.Pointer[LoadBound]         // over every entry's load

	mu           sync.Mutex                           // serializes writers
	reservations map[string]map[types.UID]reservation // by node, then pod
	len          int                                  // entries with a view
	slab         []entry                              // entries not yet handed out
	extremes     loadExtremes                         // behind bound
	loadPasses   int                                  // passes over every node setLoad took
	counters     []*Counter                           // kept current by Set and remove
	gpuNodes     *Counter                             // views that list GPUs
}

// entry is one node's published state. Writers hold Cache.mu; readers load
// its fields atomically.
type entry struct {
	node                atomic.Pointer[Node]
	reservedCPUMilli    atomic.Int64
	reservedMemoryBytes atomic.Int64
	load                nodeLoad // the node's part of the LoadBound; under Cache.mu
}

type reservation struct {
	cpuMilli, memoryBytes int64
	at                    time.Time
}

// NewCache returns an empty cache; Start fills it.
func NewCache() *Cache {
	c := &Cache{reservations: map[string]map[types.UID]reservation{}}
	c.entries.Store(&map[string]*entry{})
	c.bound.Store(&LoadBound{})
	c.gpuNodes = c.NewCounter(func(n *Node) bool { return len(n.GPUs) > 0 })
	return c
}

// Start runs the NodeTelemetry informer until ctx ends and waits for its
// first list. Only the first call starts anything; later calls return its
// result, so every plugin factory of every profile may call it.
func (c *Cache) Start(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	c.startOnce.Do(func() { c.startErr = c.start(ctx, cfg, timeout) })
	return c.startErr
}

func (c *Cache) start(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("telemetry cache: %w", err)
	}
	res := client.Resource(Resource)
	informer := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, opts)
		},
	}, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
	// The cache needs the status only; managed fields are half an object.
	if err := informer.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			u.SetManagedFields(nil)
		}
		return obj, nil
	}); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.upsert(logger, obj) },
		UpdateFunc: func(_, obj any) { c.upsert(logger, obj) },
		DeleteFunc: func(obj any) { c.remove(obj) },
	}); err != nil {
		return err
	}
	go informer.RunWithContext(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return fmt.Errorf("telemetry cache: NodeTelemetry not listed within %v (is the CRD installed and readable?)", timeout)
	}
	logger.Info("telemetry cache synced", "nodes", c.Len())
	return nil
}

func (c *Cache) upsert(logger klog.Logger, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	node, err := Decode(u)
	if err != nil {
		logger.Error(err, "decoding NodeTelemetry; keeping the previous view", "node", u.GetName())
		return
	}
	c.Set(node)
}

func (c *Cache) remove(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	name := u.GetName()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.lookup(name)
	if e == nil {
		return
	}
	if old := e.node.Swap(nil); old != nil {
		c.len--
		c.count(old, nil)
	}
	c.setLoad(e, nodeLoad{})
	// The node is gone with its object: its reservations and entry go too.
	delete(c.reservations, name)
	c.publishEntries(name, nil)
}

// Decode converts a NodeTelemetry object into the node view.
func Decode(u *unstructured.Unstructured) (*Node, error) {
	nt := &telemetryv1alpha1.NodeTelemetry{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), nt); err != nil {
		return nil, err
	}
	n := FromStatus(nt.Name, &nt.Status)
	// Resource versions are opaque to clients, but a parseable one orders
	// two views of one object; an unparseable one is never preferred.
	n.resourceVersion, _ = strconv.ParseUint(nt.ResourceVersion, 10, 64)
	return n, nil
}

// Observe stores a view a QueueingHint decoded from the scheduler's own
// informer. The scheduler retries a pod as soon as a hint says Queue, and
// this cache's informer may not have delivered the same update yet; storing
// it here means the retry sees at least what triggered it.
func (c *Cache) Observe(n *Node) {
	c.Set(n)
}

// Set stores a node's view, unless the cache holds a newer view of the same
// object, and drops the reservations its sample already reflects.
func (c *Cache) Set(n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(n.Name)
	old := e.node.Load()
	if old != nil && old.resourceVersion > n.resourceVersion && n.resourceVersion != 0 {
		return // a late delivery from the other informer
	}
	e.node.Store(n)
	if old == nil {
		c.len++
	}
	c.count(old, n)
	hold := max(2*n.Interval, minReservationHold)
	for uid, r := range c.reservations[n.Name] {
		if n.SampleTime.Sub(r.at) >= hold {
			delete(c.reservations[n.Name], uid)
		}
	}
	c.publishReserved(n.Name, e)
}

// Counter is the number of nodes whose view satisfies a predicate, kept
// current as views change. Plugins use counters to skip per-node work that
// cannot change the outcome, such as a thermal filter while no node is hot.
type Counter struct {
	pred func(*Node) bool
	n    atomic.Int64
}

// Count is the number of nodes whose latest view satisfies the predicate,
// stale views included.
func (k *Counter) Count() int { return int(k.n.Load()) }

// NewCounter returns a counter of the views that satisfy pred, which must
// be cheap and must not block: Set calls it with the cache locked.
func (c *Cache) NewCounter(pred func(*Node) bool) *Counter {
	k := &Counter{pred: pred}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range *c.entries.Load() {
		if n := e.node.Load(); n != nil && pred(n) {
			k.n.Add(1)
		}
	}
	c.counters = append(c.counters, k)
	return k
}

// count updates the counters when a node's view goes from old to cur
// (either may be nil). The caller holds c.mu.
func (c *Cache) count(old, cur *Node) {
	for _, k := range c.counters {
		was, is := old != nil && k.pred(old), cur != nil && k.pred(cur)
		switch {
		case is && !was:
			k.n.Add(1)
		case was && !is:
			k.n.Add(-1)
		}
	}
}

// entry returns a node's entry, creating it. The caller holds c.mu.
func (c *Cache) entry(name string) *entry {
	if e := c.lookup(name); e != nil {
		return e
	}
	if len(c.slab) == 0 {
		c.slab = make([]entry, entrySlab)
	}
	e := &c.slab[0]
	c.slab = c.slab[1:]
	c.publishEntries(name, e)
	return e
}

// entrySlab is how many entries are allocated together: entries of nodes
// that appear together (a cache filling up) sit side by side in memory.
const entrySlab = 64

// publishEntries publishes a copy of the node map with name's entry set to
// e, or removed when e is nil. The caller holds c.mu.
//
// The first lookup of a node in a scheduling cycle is the telemetry
// plugins' main cost, and it is memory latency, not arithmetic: the map's
// slots, the key's bytes, the entry and the view are each a cache line
// that an earlier cycle may have let go. The copy therefore stores every
// key's bytes in one allocation, side by side, rather than in the
// allocation each name came from; node maps change only when a node gets
// its first view or loses its object.
func (c *Cache) publishEntries(name string, e *entry) {
	old := *c.entries.Load()
	size := 0
	for k := range old {
		size += len(k)
	}
	m := make(map[string]*entry, len(old)+1)
	var keys strings.Builder
	keys.Grow(size + len(name))
	add := func(k string, v *entry) {
		start := keys.Len()
		keys.WriteString(k)
		m[keys.String()[start:]] = v // a view into the builder's buffer: Grow sized it for every key
	}
	for k, v := range old {
		if k != name {
			add(k, v)
		}
	}
	if e != nil {
		add(name, e)
	}
	c.entries.Store(&m)
}

func (c *Cache) lookup(name string) *entry {
	return (*c.entries.Load())[name]
}

// publishReserved stores the sums of a node's reservations for readers, and
// the node's load in the LoadBound. The caller holds c.mu.
func (c *Cache) publishReserved(name string, e *entry) {
	var cpu, mem int64
	for _, r := range c.reservations[name] {
		cpu += r.cpuMilli
		mem += r.memoryBytes
	}
	e.reservedCPUMilli.Store(cpu)
	e.reservedMemoryBytes.Store(mem)
	c.setLoad(e, loadOf(e.node.Load(), cpu, mem))
}

// Get returns a node's view. The view must not be modified.
func (c *Cache) Get(name string) (*Node, bool) {
	e := c.lookup(name)
	if e == nil {
		return nil, false
	}
	n := e.node.Load()
	return n, n != nil
}

// GetWithReserved returns a node's view and the CPU and memory reserved on
// it since its sample, in one lookup. The sums are returned even when the
// node has no view (ok false).
func (c *Cache) GetWithReserved(name string) (n *Node, cpuMilli, memoryBytes int64, ok bool) {
	e := c.lookup(name)
	if e == nil {
		return nil, 0, 0, false
	}
	n = e.node.Load()
	return n, e.reservedCPUMilli.Load(), e.reservedMemoryBytes.Load(), n != nil
}

// GPUNodes is the number of nodes whose telemetry lists at least one GPU.
func (c *Cache) GPUNodes() int {
	return c.gpuNodes.Count()
}

// Len is the number of nodes with telemetry.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.len
}

// Reserve records that a pod was placed on a node at a time, with the CPU
// and memory it is expected to use. It counts toward the node's estimated
// load until a sample taken two sampling intervals (at least 10s) later
// arrives, which measures the pod running; without such a sample it expires
// after 10 minutes.
func (c *Cache) Reserve(node string, pod types.UID, cpuMilli, memoryBytes int64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.reservations[node]
	if m == nil {
		m = map[types.UID]reservation{}
		c.reservations[node] = m
	}
	for uid, r := range m {
		if at.Sub(r.at) > maxReservationAge {
			delete(m, uid)
		}
	}
	m[pod] = reservation{cpuMilli: cpuMilli, memoryBytes: memoryBytes, at: at}
	c.publishReserved(node, c.entry(node))
}

// Unreserve forgets a pod's reservation: its binding failed, or the pod was
// deleted or finished before a sample measured it. A pod without one is
// ignored.
func (c *Cache) Unreserve(node string, pod types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.reservations[node][pod]; !ok {
		return
	}
	delete(c.reservations[node], pod)
	if e := c.lookup(node); e != nil {
		c.publishReserved(node, e)
	}
}

// EventResource names NodeTelemetry in the scheduler's cluster events
// (<plural>.<version>.<group>): the scheduler watches it with a dynamic
// informer and hands QueueingHints *unstructured.Unstructured objects.
const EventResource fwk.EventResource = "nodetelemetries.v1alpha1.telemetry.telesched.io"
