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
	"sync"
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
// since. It is safe for concurrent use.
type Cache struct {
	startOnce sync.Once
	startErr  error

	mu           sync.RWMutex
	nodes        map[string]*Node
	reservations map[string]map[types.UID]reservation // by node, then pod
}

type reservation struct {
	cpuMilli, memoryBytes int64
	at                    time.Time
}

// NewCache returns an empty cache; Start fills it.
func NewCache() *Cache {
	return &Cache{nodes: map[string]*Node{}, reservations: map[string]map[types.UID]reservation{}}
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
	c.mu.Lock()
	delete(c.nodes, u.GetName())
	c.mu.Unlock()
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
	if old, ok := c.nodes[n.Name]; ok && old.resourceVersion > n.resourceVersion && n.resourceVersion != 0 {
		return // a late delivery from the other informer
	}
	c.nodes[n.Name] = n
	hold := max(2*n.Interval, minReservationHold)
	for uid, r := range c.reservations[n.Name] {
		if n.SampleTime.Sub(r.at) >= hold {
			delete(c.reservations[n.Name], uid)
		}
	}
}

// Get returns a node's view. The view must not be modified.
func (c *Cache) Get(name string) (*Node, bool) {
	c.mu.RLock()
	n, ok := c.nodes[name]
	c.mu.RUnlock()
	return n, ok
}

// Len is the number of nodes with telemetry.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.nodes)
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
}

// Unreserve forgets a pod's reservation (its binding failed).
func (c *Cache) Unreserve(node string, pod types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reservations[node], pod)
}

// Reserved returns the CPU and memory reserved on a node since its sample.
func (c *Cache) Reserved(node string) (cpuMilli, memoryBytes int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, r := range c.reservations[node] {
		cpuMilli += r.cpuMilli
		memoryBytes += r.memoryBytes
	}
	return cpuMilli, memoryBytes
}

// EventResource names NodeTelemetry in the scheduler's cluster events
// (<plural>.<version>.<group>): the scheduler watches it with a dynamic
// informer and hands QueueingHints *unstructured.Unstructured objects.
const EventResource fwk.EventResource = "nodetelemetries.v1alpha1.telemetry.telesched.io"
