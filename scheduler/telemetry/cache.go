// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package telemetry is the scheduler's cache of NodeTelemetry: one informer
// per process, shared by every plugin and profile, that decodes each object
// once, on update, into an immutable per-node view. Filter and Score read
// that view with a map lookup: no API calls, no decoding, no allocation.
//
// Time is the scheduler's own: a view carries when the cache first saw its
// sample (Node.Observed), and freshness is judged from that, never from the
// agent's sampleTime, which is kept for display and to detect an agent
// whose clock is off (see Node.ClockOffset). kube-controller-manager judges
// a node's lease the same way: by when it observed the renewal.
package telemetry

import (
	"context"
	"fmt"
	"strconv"
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

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/cowmap"
)

// Resource is the NodeTelemetry resource.
var Resource = telemetryv1alpha1.SchemeGroupVersion.WithResource("nodetelemetries")

// DefaultSyncTimeout bounds the wait for the first list of NodeTelemetry.
const DefaultSyncTimeout = time.Minute

// DefaultClockSkewTolerance is how far an agent's sampleTime may be from
// the scheduler's clock at the moment the cache sees the sample before the
// agent counts as skewed. A sample reaches the cache up to one publishing
// interval (5 s by default) plus API latency after it was taken, so a
// synchronized agent stays well within it.
const DefaultClockSkewTolerance = 30 * time.Second

// tombstoneAge is how long the cache remembers a deleted object, so that
// an update older than the deletion, delivered late, does not bring the
// node back.
const tombstoneAge = 10 * time.Minute

// Cache holds the latest telemetry view of every node and counters over
// them. It is safe for concurrent use. Reads take no lock: Filter and Score
// run on up to 16 goroutines per scheduling cycle, and a shared RWMutex's
// reader count is one cache line they would all write. The map of nodes is
// copied on write, which happens only when a node gets its first view or
// loses its object; each node's view is swapped atomically in place.
type Cache struct {
	startOnce sync.Once
	startErr  error
	// serverCheck runs on the API server before the informer starts.
	serverCheck func(*rest.Config) error

	now           func() time.Time // the scheduler's clock
	skewTolerance time.Duration
	// limits bound plausible watts and curves (vet).
	limits Limits
	// powerHold is how long a node's last plausible watts stand in for
	// missing ones (Node.PowerAt).
	powerHold atomic.Int64
	// thermalHold is how long a node whose thermal source failed keeps its
	// last thermal reading (Node.ThermalKnown).
	thermalHold atomic.Int64

	entries atomic.Pointer[map[string]*entry] // read-only once published

	mu         sync.Mutex           // serializes writers
	len        int                  // entries with a view
	skewed     int                  // views whose agent's clock is off
	slab       []entry              // entries not yet handed out
	counters   []*Counter           // kept current by set and remove
	gpuNodes   *Counter             // views that list GPUs
	watchers   []Watcher            // told of every stored change
	viewers    []ViewWatcher        // told of every view stored, restamps too
	tombstones map[string]tombstone // deleted objects, by name

	// The agent's pods (agents.go): by node, each pod's readiness; the
	// pods the informer lists, owned or not; the agent's DaemonSets, by
	// name, with their UIDs ("" until listed); the pods ignored as no
	// DaemonSet of the agent's controls them.
	agentSelector   string
	agentMaxAge     time.Duration
	agentNamespace  string
	agents          map[string]map[types.UID]bool
	agentPods       map[types.UID]agentPodInfo
	agentDaemonSets map[string]types.UID
	ignoredAgents   map[types.UID]bool
	readyAgents     int // nodes with a Ready agent pod
	agentEpoch      atomic.Uint64
	agentsSynced    atomic.Bool
}

// entry is one node's published state. Writers hold Cache.mu; readers load
// its fields atomically.
type entry struct {
	node atomic.Pointer[Node]
}

// tombstone remembers a deleted object's last resource version.
type tombstone struct {
	resourceVersion uint64
	at              time.Time
}

// Watcher is told of every view the cache stores (old and cur non-nil),
// adds (old nil) and removes (cur nil), with the cache locked: it must be
// quick and must not call the cache's writers.
type Watcher func(name string, old, cur *Node)

// ViewWatcher is told of every view the cache stores for a node, a
// sample's (after the Watchers) or one restamped when the node's agent's
// readiness changes (which the Watchers are not told of: the same
// sample), and of a removal (cur nil), with the cache locked: it must be
// quick and must not call the cache's writers.
type ViewWatcher func(name string, cur *Node)

// NewCache returns an empty cache on the system clock; Start fills it.
func NewCache() *Cache {
	return NewCacheWithClock(time.Now)
}

// NewCacheWithClock returns an empty cache that tells time by now.
func NewCacheWithClock(now func() time.Time) *Cache {
	c := &Cache{now: now, skewTolerance: DefaultClockSkewTolerance, limits: DefaultLimits(), tombstones: map[string]tombstone{},
		agentSelector: DefaultAgentSelector, agentMaxAge: DefaultAgentMaxAge, agentNamespace: DefaultAgentNamespace, agents: map[string]map[types.UID]bool{},
		agentPods: map[types.UID]agentPodInfo{}, agentDaemonSets: map[string]types.UID{}, ignoredAgents: map[types.UID]bool{}}
	for _, name := range DefaultAgentDaemonSets {
		c.agentDaemonSets[name] = ""
	}
	c.entries.Store(&map[string]*entry{})
	c.powerHold.Store(int64(DefaultPowerHold))
	c.thermalHold.Store(int64(DefaultThermalHold))
	c.gpuNodes = c.NewCounter(func(n *Node) bool { return len(n.GPUs) > 0 })
	return c
}

// SetClockSkewTolerance sets how far an agent's sampleTime may be from the
// scheduler's clock before it counts as skewed (DefaultClockSkewTolerance).
// Call it before Start.
func (c *Cache) SetClockSkewTolerance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.skewTolerance = d
}

// SetMaxNodeWatts sets the most watts a node may plausibly draw
// (DefaultMaxNodeWatts); call it before Start.
func (c *Cache) SetMaxNodeWatts(w int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limits.MaxNodeWatts = w
}

// SetPowerHold sets how long a node whose samples lack watts keeps
// counting its last plausible watts (DefaultPowerHold).
func (c *Cache) SetPowerHold(d time.Duration) { c.powerHold.Store(int64(d)) }

// SetThermalHold sets how long a node whose thermal source failed keeps
// its last thermal reading (DefaultThermalHold).
func (c *Cache) SetThermalHold(d time.Duration) { c.thermalHold.Store(int64(d)) }

// ThermalHold is how long a node whose thermal source failed keeps its
// last thermal reading (Node.ThermalKnown).
func (c *Cache) ThermalHold() time.Duration { return time.Duration(c.thermalHold.Load()) }

// SetServerCheck sets a check Start runs on the API server before anything
// else, the first time a plugin starts the cache: the scheduler checks the
// server's version with it (package compat), so an unsupported server
// stops it at start instead of leaving its informers waiting. Call it
// before the scheduler starts.
func (c *Cache) SetServerCheck(check func(*rest.Config) error) { c.serverCheck = check }

// PowerHold is how long a node whose samples lack watts keeps counting
// its last plausible watts.
func (c *Cache) PowerHold() time.Duration { return time.Duration(c.powerHold.Load()) }

// Now is the scheduler's clock, by which views are observed.
func (c *Cache) Now() time.Time { return c.now() }

// Watch registers w for every later change, after handing it every view
// the cache holds now as an add.
func (c *Cache) Watch(w Watcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, e := range *c.entries.Load() {
		if n := e.node.Load(); n != nil {
			w(name, nil, n)
		}
	}
	c.watchers = append(c.watchers, w)
}

// WatchViews registers w for every later view stored, after handing it
// every view the cache holds now.
func (c *Cache) WatchViews(w ViewWatcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, e := range *c.entries.Load() {
		if n := e.node.Load(); n != nil {
			w(name, n)
		}
	}
	c.viewers = append(c.viewers, w)
}

// Start runs the NodeTelemetry informer until ctx ends and waits for its
// first list. Only the first call starts anything; later calls return its
// result, so every plugin factory of every profile may call it.
func (c *Cache) Start(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	c.startOnce.Do(func() { c.startErr = c.start(ctx, cfg, timeout) })
	return c.startErr
}

func (c *Cache) start(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	if c.serverCheck != nil {
		if err := c.serverCheck(cfg); err != nil {
			return err
		}
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("telemetry cache: %w", err)
	}
	informer, err := NewInformer(client)
	if err != nil {
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
	if c.agentSelector != "" {
		agentsSynced, err := c.startAgents(ctx, cfg)
		if err != nil {
			return err
		}
		if !toolscache.WaitForCacheSync(syncCtx.Done(), agentsSynced) {
			return fmt.Errorf("telemetry cache: the agent's DaemonSets and pods (%s) in namespace %s not listed within %v (can the scheduler list and watch daemonsets and pods there?)",
				c.agentSelector, c.agentNamespace, timeout)
		}
		c.agentsSynced.Store(true)
	}
	c.mu.Lock()
	sets := c.agentDaemonSetNames()
	c.mu.Unlock()
	logger.Info("telemetry cache synced", "nodes", c.Len(), "readyAgentNodes", c.ReadyAgents(), "ignoredAgentPods", c.IgnoredAgentPods(),
		"agentPodSelector", c.agentSelector, "agentNamespace", c.agentNamespace, "agentDaemonSets", sets, "maxAgeReadyAgent", c.agentMaxAge)
	return nil
}

// NewInformer returns the informer the cache runs on NodeTelemetry: every
// object, managed fields trimmed to when its agent last wrote its status
// (see writtenAt), the rest of them being half an object the cache never
// reads.
// Benchmarks that measure what the cache sees run the same one.
func NewInformer(client dynamic.Interface) (toolscache.SharedIndexInformer, error) {
	informer := DynamicInformer(client.Resource(Resource))
	if err := informer.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			trimManagedFields(u)
		}
		return obj, nil
	}); err != nil {
		return nil, err
	}
	return informer, nil
}

// DynamicInformer is an informer on every object of a resource, as
// unstructured objects, with no resync.
func DynamicInformer(res dynamic.ResourceInterface) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, opts)
		},
	}, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
}

// AgentFieldManager is the field manager of the agent's writes
// (agent/publisher.DefaultFieldManager): a node's first view counts as
// observed when it last applied the object's status.
const AgentFieldManager = "telesched-agent"

// isAgentWrite reports whether a managed fields entry records the agent's
// write of a sample: a server-side apply of the status subresource by
// AgentFieldManager. Not its write of the object's metadata (the owner
// reference), nor anyone else's, such as a label or the scheduler's own
// status.calibration (field manager telesched-scheduler).
func isAgentWrite(manager string, op metav1.ManagedFieldsOperationType, subresource string) bool {
	return manager == AgentFieldManager && op == metav1.ManagedFieldsOperationApply && subresource == "status"
}

// trimManagedFields keeps, of an object's managed fields, the entry of the
// agent's latest write of the status (isAgentWrite), without its field
// set; none when there is no such entry.
func trimManagedFields(u *unstructured.Unstructured) {
	mf := u.GetManagedFields()
	if len(mf) == 0 {
		return
	}
	var agent metav1.ManagedFieldsEntry
	for _, m := range mf {
		if m.Time != nil && isAgentWrite(m.Manager, m.Operation, m.Subresource) && (agent.Time == nil || m.Time.After(agent.Time.Time)) {
			agent = metav1.ManagedFieldsEntry{Manager: m.Manager, Operation: m.Operation, APIVersion: m.APIVersion, Subresource: m.Subresource, Time: m.Time}
		}
	}
	if agent.Time == nil {
		u.SetManagedFields(nil)
		return
	}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{agent})
}

// writtenAt is when the node's agent last wrote the object's status
// (isAgentWrite), by the API server's clock, to the second; zero when its
// managed fields record no such write.
func writtenAt(u *unstructured.Unstructured) time.Time {
	var t time.Time
	mf, _, _ := unstructured.NestedSlice(u.Object, "metadata", "managedFields")
	for _, m := range mf {
		e, ok := m.(map[string]any)
		if !ok {
			continue
		}
		manager, _ := e["manager"].(string)
		op, _ := e["operation"].(string)
		sub, _ := e["subresource"].(string)
		if !isAgentWrite(manager, metav1.ManagedFieldsOperationType(op), sub) {
			continue
		}
		s, _ := e["time"].(string)
		if wt, err := time.Parse(time.RFC3339, s); err == nil && wt.After(t) {
			t = wt
		}
	}
	return t
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
	rv := resourceVersion(u)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for k, t := range c.tombstones {
		if now.Sub(t.at) > tombstoneAge {
			delete(c.tombstones, k)
		}
	}
	c.tombstones[name] = tombstone{resourceVersion: rv, at: now}
	e := c.lookup(name)
	if e == nil {
		return
	}
	old := e.node.Swap(nil)
	if old != nil {
		c.len--
		c.count(old, nil)
		if old.Skewed {
			c.skewed--
		}
		for _, w := range c.watchers {
			w(name, old, nil)
		}
		for _, w := range c.viewers {
			w(name, nil)
		}
	}
	c.publishEntries(name, nil)
	skewedNodes.Set(float64(c.skewed))
}

// Decode converts a NodeTelemetry object into the node view.
func Decode(u *unstructured.Unstructured) (*Node, error) {
	nt := &telemetryv1alpha1.NodeTelemetry{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), nt); err != nil {
		return nil, err
	}
	n := FromStatus(nt.Name, &nt.Status)
	n.resourceVersion = resourceVersion(u)
	n.written = writtenAt(u)
	n.unwritten = n.written.IsZero()
	return n, nil
}

// resourceVersion parses an object's resource version. Resource versions
// are opaque to clients, but a parseable one orders two views of one
// object; an unparseable one (0) is never preferred.
func resourceVersion(u *unstructured.Unstructured) uint64 {
	rv, _ := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
	return rv
}

// Set stores a node's view, unless the cache holds a newer view of the same
// object or the object was deleted since. A view whose sampleTime differs
// from the stored one's is a new sample, observed now. The first view of a
// node decoded from its object counts as observed when the node's agent
// last wrote the object's status, if that was earlier (the scheduler just
// started, and the agent may have stopped long ago), whoever wrote the
// object since: a label, or the scheduler's own status.calibration, says
// nothing of the agent. A first view of an object whose managed fields
// record no write of the agent's at all is never observed, so stale, until
// its agent's next sample: its status is someone else's, or the record of
// the agent's writes was wiped. A live agent always has its write on
// record; it writes a new sample at least once a heartbeat. Set stamps the
// view with that time and the agent's clock offset, carries the node's last
// plausible watts (vet) and, while its thermal source fails, its last
// thermal reading (holdThermal) over from the stored view, and returns the
// view it keeps.
func (c *Cache) Set(n *Node) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.tombstones[n.Name]; ok {
		if n.resourceVersion == 0 || n.resourceVersion <= t.resourceVersion {
			return nil // an update from before the deletion
		}
		delete(c.tombstones, n.Name)
	}
	e := c.entry(n.Name)
	old := e.node.Load()
	if old != nil && n.resourceVersion != 0 && old.resourceVersion >= n.resourceVersion {
		return old // a late or repeated delivery
	}
	now := c.now()
	switch {
	case old != nil && old.SampleTime.Equal(n.SampleTime):
		n.Observed = old.Observed // the same sample, written again
	case old == nil && n.unwritten:
		n.Observed = time.Time{} // stale until the agent's next sample
	case old == nil && !n.written.IsZero() && n.written.Before(now):
		n.Observed = n.written
	default:
		n.Observed = now
	}
	n.ClockOffset = 0
	if !n.Observed.IsZero() {
		n.ClockOffset = n.SampleTime.Sub(n.Observed)
	}
	c.stampAgent(n)
	c.vet(n, old, true)
	holdThermal(n, old)
	n.Skewed = !n.SampleTime.IsZero() && !n.Observed.IsZero() && (n.ClockOffset > c.skewTolerance || n.ClockOffset < -c.skewTolerance)
	e.node.Store(n)
	if old == nil {
		c.len++
	}
	c.count(old, n)
	c.countSkew(old, n)
	for _, w := range c.watchers {
		w(n.Name, old, n)
	}
	for _, w := range c.viewers {
		w(n.Name, n)
	}
	return n
}

// countSkew keeps the number of skewed views and logs a node whose agent's
// clock goes off or back. The caller holds c.mu.
func (c *Cache) countSkew(old, cur *Node) {
	was := old != nil && old.Skewed
	switch {
	case cur.Skewed && !was:
		c.skewed++
		klog.InfoS("node's telemetry agent clock is off the scheduler's; freshness is judged by the scheduler's clock",
			"node", cur.Name, "offset", cur.ClockOffset.Round(time.Second), "tolerance", c.skewTolerance)
	case was && !cur.Skewed:
		c.skewed--
		klog.InfoS("node's telemetry agent clock is back in step with the scheduler's", "node", cur.Name, "offset", cur.ClockOffset.Round(time.Second))
	default:
		return
	}
	skewedNodes.Set(float64(c.skewed))
}

// Skewed is the number of nodes whose latest sample's clock offset exceeds
// the tolerance.
func (c *Cache) Skewed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.skewed
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
	m := cowmap.With(*c.entries.Load(), name, e, e == nil)
	c.entries.Store(&m)
}

func (c *Cache) lookup(name string) *entry {
	return (*c.entries.Load())[name]
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

// DeliverDelete hands the cache a deletion as its informer would; for
// tests of packages that watch the cache.
func DeliverDelete(c *Cache, obj any) { c.remove(obj) }
