// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package powerbudget is the scheduler's view of its power domains: every
// PowerBudget, the nodes its selector picks, the watts those nodes measured
// and the pods placed on them since their nodes' samples. The PowerBudget
// plugin filters and scores from a Snapshot of it, and the status writer
// (status.go) publishes the same Snapshot on each budget's status, so what
// `kubectl get powerbudgets` shows is what the scheduler judged by.
//
// Time is the scheduler's clock (the telemetry cache's): a node's watts are
// fresh while the cache saw its sample at most TelemetryMaxAge ago (its
// last plausible watts count for the cache's power hold when a sample
// lacks them), and the pods placed on a node are the scheduler's one
// reservation book (estimate.Book), whose watts are package estimate's.
package powerbudget

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/apis/config"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Resource is the PowerBudget resource.
var Resource = telemetryv1alpha1.SchemeGroupVersion.WithResource("powerbudgets")

// EventResource names PowerBudget in the scheduler's cluster events.
const EventResource fwk.EventResource = "powerbudgets.v1alpha1.telemetry.telesched.io"

// Domains holds every PowerBudget, its nodes and the pods placed on them
// since their samples. It is safe for concurrent use; readers take a
// Snapshot, rebuilt only when something it depends on changed or a node's
// telemetry may have gone stale.
type Domains struct {
	cache *telemetry.Cache
	book  *estimate.Book

	startOnce sync.Once
	startErr  error
	status    *StatusOptions // nil: no status writer

	mu      sync.Mutex
	budgets map[string]*budget
	// nodeLabels are the labels of every Node, members the budgets each
	// node belongs to.
	nodeLabels map[string]labels.Set
	members    map[string][]string
	version    atomic.Uint64 // bumped by changes of budgets and members
	samples    atomic.Uint64 // bumped by members' new samples that retired nothing
	// resVersion is bumped by every change of a member's reservations;
	// changed are those members since base, the last Snapshot built from
	// every member.
	resVersion atomic.Uint64
	changed    map[string]bool
	base       *Snapshot
	snap       atomic.Pointer[Snapshot]
	// synced is true once the budgets have been listed; handlersSynced
	// report whether the Node and Pod handlers have had their first lists.
	synced         atomic.Bool
	handlersSynced []func() bool
}

// budget is one PowerBudget as the scheduler uses it.
type budget struct {
	name                      string
	uid                       types.UID
	generation                int64
	selector                  labels.Selector
	budgetWatts, reserveWatts int64
	unmetered                 *int64
	status                    telemetryv1alpha1.PowerBudgetStatus
}

// NewDomains returns empty domains over cache's telemetry and book's
// reservations; Start fills them. status, when not nil, runs the status
// writer (status.go).
func NewDomains(cache *telemetry.Cache, book *estimate.Book, status *StatusOptions) *Domains {
	d := &Domains{
		cache: cache, book: book, status: status,
		budgets: map[string]*budget{}, nodeLabels: map[string]labels.Set{}, members: map[string][]string{},
		changed: map[string]bool{},
	}
	cache.Watch(d.observe)
	book.OnChange(func(node string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.touch(node)
	})
	return d
}

// Book is the reservation book the domains count.
func (d *Domains) Book() *estimate.Book { return d.book }

// Start follows Nodes through the scheduler's informers (and has the book
// follow Pods), PowerBudgets through an informer of its own, waits for the budgets'
// first list and starts the status writer, which records Events on the
// budgets with recorder (nil: none). Only the first call starts
// anything (with its args: the first profile's); later calls return its
// result.
func (d *Domains) Start(ctx context.Context, cfg *rest.Config, factory informers.SharedInformerFactory, args config.PowerBudgetArgs, recorder events.EventRecorder) error {
	d.startOnce.Do(func() {
		d.startErr = d.start(ctx, cfg, factory, DefaultSyncTimeout)
		if d.startErr == nil && d.status != nil {
			d.startErr = d.runStatus(ctx, cfg, *d.status, args.TelemetryMaxAge, recorder)
		}
	})
	return d.startErr
}

// DefaultSyncTimeout bounds the wait for the first list of PowerBudgets.
const DefaultSyncTimeout = time.Minute

func (d *Domains) start(ctx context.Context, cfg *rest.Config, factory informers.SharedInformerFactory, timeout time.Duration) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("power budgets: %w", err)
	}
	nodes, err := factory.Core().V1().Nodes().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.setNode(obj) },
		UpdateFunc: func(_, obj any) { d.setNode(obj) },
		DeleteFunc: func(obj any) { d.deleteNode(obj) },
	})
	if err != nil {
		return err
	}
	if err := d.book.Watch(ctx, factory); err != nil {
		return err
	}
	// The scheduler starts these informers after building its plugins:
	// until they have handed over their first lists, the domains have no
	// members, and the status writer waits.
	d.handlersSynced = []func() bool{nodes.HasSynced, d.book.Synced}
	informer := telemetry.DynamicInformer(client.Resource(Resource))
	logger := klog.FromContext(ctx)
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.setBudget(logger, obj) },
		UpdateFunc: func(_, obj any) { d.setBudget(logger, obj) },
		DeleteFunc: func(obj any) { d.deleteBudget(obj) },
	}); err != nil {
		return err
	}
	go informer.RunWithContext(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return fmt.Errorf("power budgets: PowerBudget not listed within %v (is the CRD installed and readable?)", timeout)
	}
	d.synced.Store(true)
	logger.Info("power budgets synced", "budgets", d.Len())
	return nil
}

// Len is the number of budgets.
func (d *Domains) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.budgets)
}

// Decode converts a PowerBudget object.
func Decode(obj any) (*telemetryv1alpha1.PowerBudget, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("PowerBudget event with a %T", obj)
	}
	pb := &telemetryv1alpha1.PowerBudget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), pb); err != nil {
		return nil, fmt.Errorf("decoding PowerBudget %s: %w", u.GetName(), err)
	}
	return pb, nil
}

// Selector is a budget's node selector as labels.Selector.
func Selector(s telemetryv1alpha1.NodeSelector) (labels.Selector, error) {
	ls := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for k, v := range s.MatchLabels {
		ls.MatchLabels[k] = string(v)
	}
	for _, e := range s.MatchExpressions {
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{Key: e.Key, Operator: e.Operator, Values: e.Values})
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, err
	}
	if sel.Empty() {
		return nil, fmt.Errorf("an empty selector would pick every node")
	}
	return sel, nil
}

func (d *Domains) setBudget(logger klog.Logger, obj any) {
	pb, err := Decode(obj)
	if err != nil {
		logger.Error(err, "ignoring PowerBudget")
		return
	}
	if err := d.SetBudget(pb); err != nil {
		// The API server validates selectors; one that gets past it is
		// reported, and the budget keeps its previous version, if any.
		logger.Error(err, "ignoring PowerBudget", "powerBudget", pb.Name)
	}
}

// SetBudget stores a budget, added or updated; its informer calls it.
func (d *Domains) SetBudget(pb *telemetryv1alpha1.PowerBudget) error {
	sel, err := Selector(pb.Spec.NodeSelector)
	if err != nil {
		return fmt.Errorf("invalid nodeSelector: %w", err)
	}
	if pb.Spec.BudgetWatts < 1 || (pb.Spec.ReserveWatts != nil && (*pb.Spec.ReserveWatts < 0 || *pb.Spec.ReserveWatts >= pb.Spec.BudgetWatts)) {
		return fmt.Errorf("budgetWatts %d and reserveWatts %v: want budgetWatts >= 1 and 0 <= reserveWatts < budgetWatts", pb.Spec.BudgetWatts, pb.Spec.ReserveWatts)
	}
	b := &budget{
		name: pb.Name, uid: pb.UID, generation: pb.Generation, selector: sel,
		budgetWatts: pb.Spec.BudgetWatts, unmetered: pb.Spec.UnmeteredNodeWatts, status: pb.Status,
	}
	if pb.Spec.ReserveWatts != nil {
		b.reserveWatts = *pb.Spec.ReserveWatts
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old, ok := d.budgets[b.name]
	d.budgets[b.name] = b
	if ok && sameSpec(old, b) {
		// A status write (the lease holder's, every budget at least once
		// a --power-budget-status-heartbeat): the spec, and so the
		// members and the numbers, are as they were. Matching every node
		// against every budget here cost 15 % of the scheduler's CPU at
		// 5000 nodes and 125 racks (docs/benchmarks.md).
		return nil
	}
	d.setBudgetMembers(b.name)
	return nil
}

func (d *Domains) deleteBudget(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.budgets, u.GetName())
	d.setBudgetMembers(u.GetName())
}

func (d *Domains) setNode(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.nodeLabels[n.Name]; ok && labels.Equals(old, n.Labels) {
		return
	}
	d.nodeLabels[n.Name] = labels.Set(n.Labels)
	d.setMembers(n.Name)
}

func (d *Domains) deleteNode(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.nodeLabels, n.Name)
	if _, ok := d.members[n.Name]; ok {
		delete(d.members, n.Name)
		d.version.Add(1)
	}
}

// sameSpec reports whether two versions of a budget have the same spec, so
// that one replacing the other changes nothing but the status.
func sameSpec(a, b *budget) bool {
	return a.uid == b.uid && a.generation == b.generation && a.budgetWatts == b.budgetWatts && a.reserveWatts == b.reserveWatts &&
		ptr.Equal(a.unmetered, b.unmetered) && a.selector.String() == b.selector.String()
}

// setBudgetMembers recomputes which nodes one budget, added, changed or
// deleted, picks: a pass over the nodes, not over nodes and budgets. The
// slices in members are replaced, never changed in place. The caller holds
// d.mu.
func (d *Domains) setBudgetMembers(name string) {
	b := d.budgets[name]
	for node, set := range d.nodeLabels {
		in := d.members[node]
		i, had := slices.BinarySearch(in, name)
		switch want := b != nil && b.selector.Matches(set); {
		case want && !had:
			in = slices.Insert(slices.Clip(in), i, name)
		case !want && had:
			in = slices.Delete(slices.Clone(in), i, i+1)
		default:
			continue
		}
		if len(in) == 0 {
			delete(d.members, node)
		} else {
			d.members[node] = in
		}
	}
	d.version.Add(1)
}

// setMembers recomputes one node's budgets. The caller holds d.mu.
func (d *Domains) setMembers(node string) {
	in := d.matching(d.nodeLabels[node])
	old := d.members[node]
	if len(in) == 0 {
		delete(d.members, node)
	} else {
		d.members[node] = in
	}
	if !slices.Equal(old, in) {
		d.version.Add(1)
	}
}

// BudgetsOf are the names of the budgets a node belongs to, by its
// labels.
func (d *Domains) BudgetsOf(nodeLabels map[string]string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.matching(labels.Set(nodeLabels))
}

// matching are the names of the budgets whose selectors pick set, sorted.
// The caller holds d.mu.
func (d *Domains) matching(set labels.Set) []string {
	var in []string
	for name, b := range d.budgets {
		if b.selector.Matches(set) {
			in = append(in, name)
		}
	}
	sort.Strings(in)
	return in
}

// observe is the telemetry cache's Watcher: a member's new sample is taken
// in by the next Snapshot (within MaxSampleLag), a member's deletion at
// once. A sample that retires reservations has the book touch its node
// (NewDomains), so it is seen at once too. Changes of a node in no budget
// cost a map lookup.
func (d *Domains) observe(name string, _, cur *telemetry.Node) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.members[name]; !ok {
		return
	}
	if cur == nil {
		d.version.Add(1)
	} else {
		d.samples.Add(1)
	}
}

// touch marks a member node whose reservations changed: the next Snapshot
// derives the node's state and its domains' sums anew, without a pass over
// every member. The caller holds d.mu.
func (d *Domains) touch(node string) {
	if _, ok := d.members[node]; !ok {
		return
	}
	d.changed[node] = true
	d.resVersion.Add(1)
}

// Retired reports whether view's sample retired pods placed on its node.
func (d *Domains) Retired(view *telemetry.Node) bool { return d.book.Retired(view) }

// Snapshot is the domains at one moment: each budget's measured and
// reserved watts, and each member node's view. It is immutable.
type Snapshot struct {
	Domains []Domain
	nodes   map[string]*NodeState
	book    *estimate.Book
	// built from version, valid until a member's telemetry turns stale or
	// a reservation expires.
	version    uint64
	samples    uint64
	resVersion uint64
	agentEpoch uint64 // the cache's AgentEpoch
	// overrides are the states of the nodes whose reservations changed
	// since the snapshot of every member it derives from.
	overrides map[string]*NodeState
	// base is the snapshot built from every member that this one derives
	// from; nil for a built one.
	base       *Snapshot
	maxAge     time.Duration
	validUntil time.Time
	at         time.Time
}

// Domain is one budget's numbers in a Snapshot, in watts.
type Domain struct {
	Name                      string
	UID                       types.UID
	Generation                int64
	BudgetWatts, ReserveWatts int64
	// UnmeteredNodeWatts is the budget's unmeteredNodeWatts; HasUnmetered
	// false when unset.
	UnmeteredNodeWatts int64
	HasUnmetered       bool
	// MeasuredWatts: the members' fresh watts, and, for each member without
	// an estimate (see NodeState.Metered), unmeteredNodeWatts when set,
	// else its last watts if it ever had any.
	MeasuredWatts float64
	// ReservedWatts: the marginal watts of the pods placed on metered
	// members since their samples.
	ReservedWatts     float64
	Nodes             int32
	NodesWithoutPower int32
	// NodesWithoutEstimate are members with fresh watts but no power curve
	// to estimate a pod's.
	NodesWithoutEstimate int32
	// SourceNodes are the members whose own watts the domain counts, by
	// where those watts came from (the index is a telemetry.PowerSources;
	// index 0 counts none of their own: countedSources).
	SourceNodes [16]int32
	// Status is the budget's status as last read, for the status writer.
	Status telemetryv1alpha1.PowerBudgetStatus
	// Members are the names of the budget's nodes, sorted.
	Members []string
}

// LimitWatts is what pods may fill up to: budget - reserve.
func (d *Domain) LimitWatts() int64 { return d.BudgetWatts - d.ReserveWatts }

// HeadroomWatts is the limit less measured and reserved watts; negative
// when the domain is over.
func (d *Domain) HeadroomWatts() float64 {
	return float64(d.LimitWatts()) - d.MeasuredWatts - d.ReservedWatts
}

// NodeState is one member node in a Snapshot.
type NodeState struct {
	// Domains are indexes into Snapshot.Domains.
	Domains []int
	// View is the node's telemetry view the snapshot counted; nil when it
	// has none.
	View *telemetry.Node
	// Metered: watts (fresh, or held) and a plausible power curve, so a
	// pod's watts can be estimated.
	Metered bool
	// FreshPower: watts seen within telemetryMaxAge, or, while its
	// samples lack them, its last plausible watts within the cache's
	// power hold (Held).
	FreshPower bool
	Held       bool
	// Watts are those watts.
	Watts float64
	// Reserved are the pods placed that its sample does not show yet.
	Reserved estimate.Demand
	// reservedWatts are their watts, when Metered.
	reservedWatts float64
	// wattsPerMilli and fixedWatts bound what any pod adds here, when
	// Metered (estimate.Book.PodWattsBound): PodWatts is at most
	// wattsPerMilli × its CPU + fixedWatts + its GPUs' watts.
	wattsPerMilli, fixedWatts float64
}

// PodWattsBound is at least PodWatts(ns, pod) for a metered member: a
// cheap bound that tells a budget far from its limit without estimating
// the pod on each member; ok is false where PodWatts' is.
func (ns *NodeState) PodWattsBound(pod estimate.Demand) (float64, bool) {
	perMilli, fixed, ok := ns.CPUWattsBound()
	if !ok {
		return 0, false
	}
	return perMilli*float64(pod.CPUMilli) + fixed + estimate.PodGPUWatts(ns.View, pod), true
}

// CPUWattsBound is PodWattsBound's CPU part: a pod of cpuMilli with no
// GPU adds at most perMilli × cpuMilli + fixed watts to a metered member;
// ok is false where PodWattsBound's is.
func (ns *NodeState) CPUWattsBound() (perMilli, fixed float64, ok bool) {
	if ns == nil || !ns.Metered {
		return 0, 0, false
	}
	return ns.wattsPerMilli, ns.fixedWatts, true
}

// Node is a member node's state; nil for a node in no budget.
func (s *Snapshot) Node(name string) *NodeState {
	if s.overrides != nil {
		if ns, ok := s.overrides[name]; ok {
			return ns
		}
	}
	return s.nodes[name]
}

// Base is the snapshot built from every member that s derives from: s
// itself when s was built so. s is Base with the states of Overrides in
// place of theirs, and its domains' sums moved by as much.
func (s *Snapshot) Base() *Snapshot {
	if s.base == nil {
		return s
	}
	return s.base
}

// Overrides are the member states s holds in place of Base's: the nodes
// whose reservations changed since Base was built (none when s is Base).
func (s *Snapshot) Overrides() iter.Seq2[string, *NodeState] {
	return maps.All(s.overrides)
}

// Empty is true when there is no budget.
func (s *Snapshot) Empty() bool { return len(s.Domains) == 0 }

// Synced is true once the budgets have been listed and the Nodes and Pods
// handed over.
func (d *Domains) Synced() bool {
	if !d.synced.Load() {
		return false
	}
	for _, f := range d.handlersSynced {
		if !f() {
			return false
		}
	}
	return true
}

// MaxSampleLag is how far behind the newest samples of the domains'
// nodes a Snapshot may be: a fleet of 5000 nodes writing every 5 s brings
// a new sample every millisecond, and rebuilding the domains for each
// would cost every scheduling cycle a pass over every member
// (BenchmarkCycleTelemetryFlowing). Samples that retire reservations, and
// every change of budgets, members or reservations, are seen at once.
const MaxSampleLag = time.Second

// Snapshot returns the domains at now, judging telemetry older than maxAge
// stale; it reuses the last one while nothing changed but samples that
// came within MaxSampleLag of it.
func (d *Domains) Snapshot(now time.Time, maxAge time.Duration) *Snapshot {
	return d.snapshot(now, maxAge, MaxSampleLag)
}

// SnapshotLatest is Snapshot with every sample the cache holds: for a
// hint handed the sample that may have freed room.
func (d *Domains) SnapshotLatest(now time.Time, maxAge time.Duration) *Snapshot {
	return d.snapshot(now, maxAge, 0)
}

func (d *Domains) snapshot(now time.Time, maxAge, lag time.Duration) *Snapshot {
	d.book.Expire() // (before d.mu: the book tells d of what expires)
	v, samples, rv := d.version.Load(), d.samples.Load(), d.resVersion.Load()
	// A node's agent turning Ready or not changes how long its watts stay
	// fresh: no snapshot from another agent epoch is reused.
	agents := d.cache.AgentEpoch()
	usable := func(s *Snapshot) bool {
		return s != nil && s.version == v && s.agentEpoch == agents && s.maxAge == maxAge && now.Before(s.validUntil) && !now.Before(s.at) &&
			(s.samples == samples || now.Sub(s.at) < lag)
	}
	if s := d.snap.Load(); usable(s) && s.resVersion == rv {
		return s
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// The counters first: a change made while the snapshot is built is
	// then seen by the next call, never missed.
	v, samples, rv, agents = d.version.Load(), d.samples.Load(), d.resVersion.Load(), d.cache.AgentEpoch()
	var s *Snapshot
	if usable(d.base) && len(d.changed) <= maxOverrides {
		s = d.derive(d.base, now)
	} else {
		s = d.build(now, maxAge, v)
		s.samples, s.agentEpoch = samples, agents
		d.base, d.changed = s, map[string]bool{}
	}
	s.resVersion = rv
	d.snap.Store(s)
	return s
}

// maxOverrides bounds the nodes a Snapshot derives from the last one
// built from every member; past it, the next one is built anew.
const maxOverrides = 256

// derive is base with the nodes whose reservations changed since (a pod
// placed, unreserved or retired by a sample) taken anew, and their
// domains' sums moved by as much: a placement costs its node, not a pass
// over every member. The caller holds d.mu.
func (d *Domains) derive(base *Snapshot, now time.Time) *Snapshot {
	s := *base
	s.base = base
	s.Domains = slices.Clone(base.Domains)
	s.overrides = make(map[string]*NodeState, len(d.changed))
	for node := range d.changed {
		old := base.nodes[node]
		if old == nil {
			continue // a member since base would have rebuilt it
		}
		ns, exp := d.nodeState(node, now, base.maxAge)
		ns.Domains = old.Domains
		s.validUntil = minTime(s.validUntil, exp)
		for _, i := range ns.Domains {
			dom := &s.Domains[i]
			m0, r0 := contribution(dom, old)
			m1, r1 := contribution(dom, ns)
			dom.MeasuredWatts += m1 - m0
			dom.ReservedWatts += r1 - r0
			dom.NodesWithoutPower += without(ns, true) - without(old, true)
			dom.NodesWithoutEstimate += without(ns, false) - without(old, false)
			dom.SourceNodes[countedSources(dom, old)]--
			dom.SourceNodes[countedSources(dom, ns)]++
		}
		s.overrides[node] = ns
	}
	// at stays base's: new samples are taken in within MaxSampleLag of it.
	return &s
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// nodeState is a member's state at now: its view, reservations and
// reserved watts, and until when it holds (its watts fresh or held). The
// caller holds d.mu and sets Domains.
func (d *Domains) nodeState(node string, now time.Time, maxAge time.Duration) (*NodeState, time.Time) {
	ns := &NodeState{Reserved: d.book.Get(node)}
	until := now.Add(d.book.MaxAge())
	if view, ok := d.cache.Get(node); ok {
		ns.View = view
		hold := d.cache.PowerHold()
		if w, held, ok := view.PowerAt(now, maxAge, hold); ok {
			ns.FreshPower, ns.Watts, ns.Held = true, float64(w), held
			until = minTime(until, view.Observed.Add(view.MaxAge(maxAge)))
			if held {
				until = minTime(until, view.LastWattsObserved.Add(hold))
			}
			_, ns.Metered = estimate.PodWatts(view, estimate.Demand{}, estimate.Demand{})
		}
	}
	if ns.Metered {
		w, _ := d.book.ReservedWatts(ns.View, ns.Reserved)
		ns.reservedWatts = w.Upper
		ns.wattsPerMilli, ns.fixedWatts, _ = d.book.PodWattsBound(ns.View)
	}
	return ns, until
}

// contribution is what a member counts in a domain: its measured watts
// (fresh ones; unmeteredNodeWatts, or its last watts, without) and the
// watts of its reservations.
func contribution(dom *Domain, ns *NodeState) (measured, reserved float64) {
	switch {
	case ns.Metered:
		return ns.Watts, ns.reservedWatts
	case dom.HasUnmetered:
		w := float64(dom.UnmeteredNodeWatts)
		if ns.FreshPower {
			w = max(w, ns.Watts)
		}
		return w, 0
	case ns.View != nil && ns.View.HasLastWatts:
		return float64(ns.View.LastWatts), 0 // its last watts, however old
	}
	return 0, 0
}

// without is 1 when a member has no fresh power telemetry (power) or has
// fresh watts but no curve (!power).
func without(ns *NodeState, power bool) int32 {
	if power && !ns.FreshPower || !power && ns.FreshPower && !ns.Metered {
		return 1
	}
	return 0
}

// build computes a Snapshot. The caller holds d.mu.
func (d *Domains) build(now time.Time, maxAge time.Duration, version uint64) *Snapshot {
	s := &Snapshot{nodes: map[string]*NodeState{}, book: d.book, version: version, maxAge: maxAge, at: now, validUntil: now.Add(d.book.MaxAge())}
	names := make([]string, 0, len(d.budgets))
	for name := range d.budgets {
		names = append(names, name)
	}
	sort.Strings(names)
	index := map[string]int{}
	for i, name := range names {
		b := d.budgets[name]
		index[name] = i
		dom := Domain{Name: name, UID: b.uid, Generation: b.generation, BudgetWatts: b.budgetWatts, ReserveWatts: b.reserveWatts, Status: b.status}
		if b.unmetered != nil {
			dom.HasUnmetered, dom.UnmeteredNodeWatts = true, *b.unmetered
		}
		s.Domains = append(s.Domains, dom)
	}
	for node, in := range d.members {
		ns, until := d.nodeState(node, now, maxAge)
		s.validUntil = minTime(s.validUntil, until)
		for _, name := range in {
			i := index[name]
			ns.Domains = append(ns.Domains, i)
			dom := &s.Domains[i]
			dom.Nodes++
			dom.Members = append(dom.Members, node)
			dom.NodesWithoutPower += without(ns, true)
			dom.NodesWithoutEstimate += without(ns, false)
			dom.SourceNodes[countedSources(dom, ns)]++
			m, r := contribution(dom, ns)
			dom.MeasuredWatts += m
			dom.ReservedWatts += r
		}
		s.nodes[node] = ns
	}
	for i := range s.Domains {
		sort.Strings(s.Domains[i].Members)
	}
	return s
}

// PodWatts is the watts a pod of demand pod adds to member ns, upper
// estimate (package estimate's convention for limits), on top of its
// reservations, calibrated by the book; ok is false when ns is not
// metered.
func (s *Snapshot) PodWatts(ns *NodeState, pod estimate.Demand) (float64, bool) {
	if ns == nil || !ns.Metered {
		return 0, false
	}
	w, ok := s.book.PodWatts(ns.View, pod, ns.Reserved)
	return w.Upper, ok
}

// RoundUp is watts as a whole number, up: what a message or a status says
// of an estimate must not read under it.
func RoundUp(w float64) int64 { return int64(math.Ceil(w - 1e-9)) }

// PowerableGPUs is how many of node's free GPUs the budgets it is in can
// still power busy. In each of its domains, the free GPUs of every member
// (free: the member's free GPUs, given its view) take the domain's
// headroom cheapest per unit of work first (what a busy GPU adds over an
// idle one over the GPU's speed, estimate.PerGPUWork; ties by node name),
// as energy-aware placement would fill them, each its watts
// (estimate.BusyGPUWatts); the node gets what it got in its tightest
// domain. ok is false for a node in no budget: nothing limits it.
func (s *Snapshot) PowerableGPUs(node string, free func(member string, view *telemetry.Node) int64) (n int64, ok bool) {
	ns := s.Node(node)
	if ns == nil || len(ns.Domains) == 0 {
		return 0, false
	}
	type gpus struct {
		node    string
		watts   float64 // each
		perWork float64 // watts over speed: the order they are filled in
		free    int64
	}
	n = math.MaxInt64
	for _, i := range ns.Domains {
		dom := &s.Domains[i]
		var all []gpus
		for _, m := range dom.Members {
			ms := s.Node(m)
			if ms == nil || ms.View == nil {
				continue
			}
			if f := free(m, ms.View); f > 0 {
				w := estimate.BusyGPUWatts(ms.View)
				all = append(all, gpus{node: m, watts: w, perWork: estimate.PerGPUWork(ms.View, w), free: f})
			}
		}
		sort.Slice(all, func(a, b int) bool {
			if all[a].perWork != all[b].perWork {
				return all[a].perWork < all[b].perWork
			}
			return all[a].node < all[b].node
		})
		left, got := dom.HeadroomWatts(), int64(0)
		for _, g := range all {
			k := g.free
			if g.watts > 0 {
				k = min(g.free, int64(math.Max(0, left)/g.watts))
			}
			if g.node == node {
				got = k
				break
			}
			left -= float64(k) * g.watts
		}
		n = min(n, got)
	}
	return n, true
}
