// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package powerbudget is the PowerBudget plugin: it places no pod that
// would take a power domain (a PowerBudget: a rack, a PDU) past its budget,
// and scores nodes by their domains' headroom.
//
// A domain's watts are its nodes' measured watts, plus the estimated watts
// of the pods placed on them that their samples do not show yet (the
// scheduler's one reservation book), plus this pod's on the node being
// filtered: package estimate's watts, upper estimate. A node in several
// budgets must fit all of them. A node without fresh power telemetry
// (beyond the power hold of its last plausible watts), or without a
// plausible power curve, counts by its budget's unmeteredNodeWatts: at
// that nameplate, with pods adding nothing beyond it; without one, it
// takes no pods.
package powerbudget

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/apis/config/validation"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/cyclestate"
	"github.com/telesched/telesched/scheduler/plugins/internal/pluginfactory"
	"github.com/telesched/telesched/scheduler/plugins/internal/rejected"
	"github.com/telesched/telesched/scheduler/powerbudget"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Name is the plugin's name in the scheduler configuration.
const Name = "PowerBudget"

const stateKey fwk.StateKey = "PreFilter" + Name

// PowerBudget is the plugin.
type PowerBudget struct {
	args    config.PowerBudgetArgs
	cache   *telemetry.Cache
	domains *powerbudget.Domains
	last    cyclestate.Last[*podState]
	// nodes is the scheduler's Node lister, nil until set by NewFactory.
	nodes corelisters.NodeLister
	// rejected are the pending pods Filter rejected, with their demand,
	// which a NodeTelemetry change (pick) or a budget's update may let in.
	rejected *rejected.Index[estimate.Demand]
	// room remembers, for pick, which members of a changed
	// node's domains a demand fits by one snapshot: the pending pods that
	// share a demand then cost a lookup each, not a pass over the members.
	room demandMemo[[]string]
	// near remembers, per snapshot, why a demand may not be batched ("":
	// it may; SignPod).
	near demandMemo[string]
	// refuse remembers, per snapshot, whether Filter may refuse a demand
	// anywhere (mayRefuse).
	refuse demandMemo[bool]
	// bounds keeps the latest snapshot's domainBounds for mayRefuse.
	bounds boundsMemo
}

var (
	_ fwk.PreFilterPlugin   = &PowerBudget{}
	_ fwk.FilterPlugin      = &PowerBudget{}
	_ fwk.PreScorePlugin    = &PowerBudget{}
	_ fwk.ScorePlugin       = &PowerBudget{}
	_ fwk.ReservePlugin     = &PowerBudget{}
	_ fwk.EnqueueExtensions = &PowerBudget{}
)

// NewFactory returns the plugin factory; every profile's instance shares
// cache and domains, which the first instance starts.
func NewFactory(cache *telemetry.Cache, domains *powerbudget.Domains) frameworkruntime.PluginFactory {
	return pluginfactory.New(Name, cache, validation.ValidatePowerBudgetArgs, func(ctx context.Context, args config.PowerBudgetArgs, h fwk.Handle) (fwk.Plugin, error) {
		if err := domains.Book().ShareGPUResource(fmt.Sprintf("profile %s's %s (gpuResourceName)", h.ProfileName(), Name), v1.ResourceName(args.GPUResourceName)); err != nil {
			return nil, err
		}
		if err := domains.Start(ctx, h.KubeConfig(), h.SharedInformerFactory(), args, h.EventRecorder()); err != nil {
			return nil, err
		}
		pl := New(args, cache, domains)
		pl.nodes = h.SharedInformerFactory().Core().V1().Nodes().Lister()
		if err := pl.rejected.Watch(h.SharedInformerFactory()); err != nil {
			return nil, err
		}
		pl.rejected.Requeue(ctx, Name, domains.Book(), h.SharedInformerFactory(), h, pl.fitsReleased)
		pl.rejected.OnTelemetry(ctx, Name, cache, h.SharedInformerFactory(), h, pl.pick)
		return pl, nil
	})
}

// New returns the plugin for valid args; domains' book counts pods' demand.
func New(args config.PowerBudgetArgs, cache *telemetry.Cache, domains *powerbudget.Domains) *PowerBudget {
	return &PowerBudget{args: args, cache: cache, domains: domains,
		rejected: rejected.New[estimate.Demand]()}
}

// Name implements fwk.Plugin.
func (pl *PowerBudget) Name() string { return Name }

// podState is the pod's demand and the domains at the cycle's start. It
// is not modified after PreFilter writes it.
type podState struct {
	estimate.Demand
	snap *powerbudget.Snapshot
}

func (s *podState) Clone() fwk.StateData { return s }

// podState is a pod of demand d with the domains' snapshot now.
func (pl *PowerBudget) podState(d estimate.Demand) *podState {
	return &podState{Demand: d, snap: pl.domains.Snapshot(pl.cache.Now(), pl.args.TelemetryMaxAge)}
}

func (pl *PowerBudget) readState(cs fwk.CycleState, pod *v1.Pod) *podState {
	if s, ok := pl.last.Read(cs, stateKey); ok {
		return s
	}
	return pl.podState(pl.domains.Book().Demand(pod))
}

// PreFilter takes the domains' snapshot once per cycle; with no budget,
// Filter is skipped.
func (pl *PowerBudget) PreFilter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	pl.domains.Book().Expire()
	d := pl.domains.Book().Demand(pod)
	// Begun before the snapshot Filter reads: a change stored after it is
	// judged for the pod (rejected.Index.Begin).
	pl.rejected.Begin(pod, d)
	s := pl.podState(d)
	pl.last.Write(cs, stateKey, s)
	if s.snap.Empty() {
		pl.rejected.End(pod)
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if !pl.refuse.get(s.snap, "", d, func() bool { return mayRefuse(s.snap, pl.bounds.get(s.snap), d) }) {
		pl.rejected.End(pod) // Filter refuses it nowhere by this snapshot
	}
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *PowerBudget) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects a node when the pod would take one of its domains past
// budget - reserve.
func (pl *PowerBudget) Filter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s := pl.readState(cs, pod)
	if why := fits(s.snap, nodeInfo.Node().Name, s.Demand); why != "" {
		pl.rejected.Add(pod, s.Demand)
		return fwk.NewStatus(fwk.Unschedulable, why)
	}
	return nil
}

// fits is Filter's predicate, which pick uses too: "" when a pod of
// demand d may go to node by snap, else why not.
func fits(snap *powerbudget.Snapshot, node string, d estimate.Demand) string {
	ns := snap.Node(node)
	if ns == nil {
		return ""
	}
	podW, _ := snap.PodWatts(ns, d)
	for _, i := range ns.Domains {
		d := &snap.Domains[i]
		w := podW
		if !ns.Metered {
			if !d.HasUnmetered {
				what := "no fresh power telemetry"
				if ns.FreshPower {
					what = "no power curve to estimate the pod's watts"
				}
				return fmt.Sprintf("node has %s and PowerBudget %s sets no unmeteredNodeWatts (%d of its %d nodes lack one or the other)",
					what, d.Name, d.NodesWithoutPower+d.NodesWithoutEstimate, d.Nodes)
			}
			w = 0 // counted at its nameplate already
		}
		if d.MeasuredWatts+d.ReservedWatts+w > float64(d.LimitWatts()) {
			return fmt.Sprintf("PowerBudget %s: measured %dW + reserved %dW + this pod %dW = %dW > budget %dW - reserve %dW (%d nodes)",
				d.Name, int64(math.Round(d.MeasuredWatts)), powerbudget.RoundUp(d.ReservedWatts), powerbudget.RoundUp(w), powerbudget.RoundUp(d.MeasuredWatts+d.ReservedWatts+w),
				d.BudgetWatts, d.ReserveWatts, d.Nodes)
		}
	}
	return ""
}

// PreScore skips Score with no budget.
func (pl *PowerBudget) PreScore(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	s := pl.readState(cs, pod)
	if s.snap.Empty() {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score grows with the smallest share of its domains' limits left with the
// pod placed: 100 at fullScoreHeadroomPercent or more, 0 at none, so a
// rack near its budget scores low and racks far from theirs leave the
// choice to the other plugins. A node in no budget has no such limit and
// scores 100.
func (pl *PowerBudget) Score(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s := pl.readState(cs, pod)
	return score(s.snap, nodeInfo.Node().Name, s.Demand, pl.args.FullScoreHeadroomPercent), nil
}

// score is 100 × the smallest share of a domain's limit left with the pod
// placed, over fullPercent %: full at fullPercent % left or more.
func score(snap *powerbudget.Snapshot, node string, d estimate.Demand, fullPercent int32) int64 {
	ns := snap.Node(node)
	if ns == nil {
		return fwk.MaxScore
	}
	podW, _ := snap.PodWatts(ns, d)
	best := int64(fwk.MaxScore)
	for _, i := range ns.Domains {
		d := &snap.Domains[i]
		limit := float64(d.LimitWatts())
		if limit <= 0 {
			return fwk.MinScore // the API server refuses such a budget
		}
		left := (limit - d.MeasuredWatts - d.ReservedWatts - podW) / limit
		best = min(best, max(fwk.MinScore, min(fwk.MaxScore, int64(left*float64(fwk.MaxScore)*100/float64(fullPercent)))))
	}
	return best
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *PowerBudget) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve counts the pod toward its node (and so its domains) in the
// scheduler's reservation book until a sample shows it running.
func (pl *PowerBudget) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	pl.rejected.End(pod)
	pl.domains.Book().Reserve(node, pod)
	return nil
}

// Unreserve forgets the pod: its binding failed.
func (pl *PowerBudget) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, node string) {
	pl.domains.Book().Unreserve(node, pod.UID)
}

// EventsToRegister requeues pods this plugin rejected when a domain may
// have room: a budget is raised, loosened or deleted, or a node's labels
// take it out of a budget. A node's telemetry showing less power (or
// measuring pods placed since its last sample, or becoming fresh)
// requeues them through the plugin itself (pick, rejected.OnTelemetry),
// not through the scheduling queue's walk.
func (pl *PowerBudget) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: powerbudget.EventResource, ActionType: fwk.Update | fwk.Delete}, QueueingHintFn: pl.budgetHint, PreQueueingHintFn: pl.budgetPreHint},
		// No PreQueueingHint here: in-tree plugins register Node label
		// updates too, and the queue would skip the pods they rejected for
		// an event a PreQueueingHint narrowed.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeLabel}, QueueingHintFn: pl.nodeHint},
	}, nil
}

// fell returns the snapshot and the node's state when cur may have freed
// room in its domains: it belongs to a budget and its count may have
// fallen (fewer watts than its previous view, pods it measured retired,
// or telemetry fresh again). ns is nil otherwise.
func (pl *PowerBudget) fell(prev, cur *telemetry.Node) (*powerbudget.Snapshot, *powerbudget.NodeState) {
	now := pl.cache.Now()
	fell := prev == nil || !prev.HasPower || !prev.Fresh(now, pl.args.TelemetryMaxAge) || cur.Watts < prev.Watts || pl.domains.Retired(cur)
	if !fell {
		return nil, nil
	}
	snap := pl.domains.SnapshotLatest(now, pl.args.TelemetryMaxAge)
	return snap, snap.Node(cur.Name)
}

// pick names the pods Filter rejected that a NodeTelemetry change lets in
// (rejected.OnTelemetry): none unless the node belongs to a budget and
// its domains may have room (fell: fewer watts than its previous view,
// pods it measured retired, or telemetry fresh again; the steady stream
// of a busy fleet does not), else those whose demand fits some member of
// its domains by the newest snapshot and whose required affinity admits
// that member. The room freed is the domain's: the pod may fit on another
// of its nodes (one in fewer full budgets), not only on this one.
func (pl *PowerBudget) pick(prev, cur *telemetry.Node) []types.NamespacedName {
	snap, ns := pl.fell(prev, cur)
	if ns == nil {
		return nil
	}
	return pl.rejected.SelectAdmitted(func(d estimate.Demand, admits func(*v1.Node) bool) bool {
		for _, m := range pl.members(snap, cur.Name, ns, d) {
			if pl.nodes == nil {
				return true
			}
			if n, err := pl.nodes.Get(m); err != nil || admits(n) {
				return true
			}
		}
		return false
	})
}

// fitsReleased is, for a node whose reservations the book just released
// (a reserved pod gone, or a reservation expired), whether a demand now
// fits some member of the node's domains by Filter's predicate, for
// rejected.Requeue: the room is the domains', as in pick.
func (pl *PowerBudget) fitsReleased(name string) func(estimate.Demand) bool {
	snap := pl.domains.SnapshotLatest(pl.cache.Now(), pl.args.TelemetryMaxAge)
	ns := snap.Node(name)
	if ns == nil {
		return func(estimate.Demand) bool { return false }
	}
	return func(d estimate.Demand) bool { return len(pl.members(snap, name, ns, d)) > 0 }
}

// budgetPreHint is the PowerBudget event's PreQueueingHint: a status
// write (generation unchanged) helps none of the pods Filter rejected;
// any other update or a deletion may help any of them, and budgetHint
// decides.
func (pl *PowerBudget) budgetPreHint(_ klog.Logger, oldObj, newObj any) (fwk.PreQueueingHintResult, error) {
	if newObj != nil && sameGeneration(oldObj, newObj) {
		return fwk.PreQueueingHintResult{}, nil
	}
	return fwk.PreQueueingHintResult{Pods: pl.rejected.Select(nil, func(estimate.Demand) bool { return true })}, nil
}

// demandMemo remembers a T per demand for one snapshot and node: the
// pending pods that share a demand then cost a lookup each, not a pass
// over a domain's members. Another snapshot or node starts it anew.
type demandMemo[T any] struct {
	mu   sync.Mutex
	snap *powerbudget.Snapshot
	node string
	m    map[estimate.Demand]T
}

// get returns compute's answer for (snap, node, d), computed once.
func (dm *demandMemo[T]) get(snap *powerbudget.Snapshot, node string, d estimate.Demand, compute func() T) T {
	dm.mu.Lock()
	defer dm.mu.Unlock()
	if dm.snap != snap || dm.node != node || dm.m == nil {
		dm.snap, dm.node, dm.m = snap, node, map[estimate.Demand]T{}
	}
	if v, ok := dm.m[d]; ok {
		return v
	}
	v := compute()
	dm.m[d] = v
	return v
}

// fittingMembers returns the nodes of ns's domains where a pod of demand d
// fits by snap (fits, Filter's predicate), node first.
func fittingMembers(snap *powerbudget.Snapshot, node string, ns *powerbudget.NodeState, d estimate.Demand) []string {
	var m []string
	if fits(snap, node, d) == "" {
		m = append(m, node)
	}
	for _, i := range ns.Domains {
		for _, member := range snap.Domains[i].Members {
			if member != node && !slices.Contains(m, member) && fits(snap, member, d) == "" {
				m = append(m, member)
			}
		}
	}
	return m
}

// members is fittingMembers, remembered per snapshot, changed node and
// demand.
func (pl *PowerBudget) members(snap *powerbudget.Snapshot, node string, ns *powerbudget.NodeState, d estimate.Demand) []string {
	return pl.room.get(snap, node, d, func() []string { return fittingMembers(snap, node, ns, d) })
}

// budgetHint queues on a deleted budget, and on one whose limit rose, whose
// selector or unmeteredNodeWatts changed.
func (pl *PowerBudget) budgetHint(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	if newObj == nil {
		return fwk.Queue, nil // deleted
	}
	// A write that leaves the spec alone (the status the lease holder
	// writes every few seconds) leaves metadata.generation alone: nothing
	// to decode, for each pending pod, under the queue's lock.
	if sameGeneration(oldObj, newObj) {
		return fwk.QueueSkip, nil
	}
	cur, err := powerbudget.Decode(newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("%s: %w", Name, err)
	}
	old, err := powerbudget.Decode(oldObj)
	if err != nil {
		return fwk.Queue, nil
	}
	limit := func(s int64, r *int64) int64 {
		if r != nil {
			return s - *r
		}
		return s
	}
	unmetered := func(p *int64) int64 {
		if p == nil {
			return -1
		}
		return *p
	}
	if limit(cur.Spec.BudgetWatts, cur.Spec.ReserveWatts) > limit(old.Spec.BudgetWatts, old.Spec.ReserveWatts) ||
		fmt.Sprint(cur.Spec.NodeSelector) != fmt.Sprint(old.Spec.NodeSelector) ||
		unmetered(cur.Spec.UnmeteredNodeWatts) != unmetered(old.Spec.UnmeteredNodeWatts) {
		logger.V(4).Info("power budget loosened", "pod", klog.KObj(pod), "powerBudget", cur.Name, "plugin", Name)
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// sameGeneration reports whether two versions of an object carry the same
// metadata.generation, which the API server raises on every change of a
// custom resource's spec (not of its status). 0 is no generation: objects
// not read from a server.
func sameGeneration(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*unstructured.Unstructured)
	n, ok2 := newObj.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return false
	}
	g := n.GetGeneration()
	return g > 0 && g == o.GetGeneration()
}

// nodeHint queues when a node's labels take it out of a budget.
func (pl *PowerBudget) nodeHint(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	old, ok1 := oldObj.(*v1.Node)
	cur, ok2 := newObj.(*v1.Node)
	if !ok1 || !ok2 {
		return fwk.Queue, nil
	}
	is := pl.domains.BudgetsOf(cur.Labels)
	for _, b := range pl.domains.BudgetsOf(old.Labels) {
		if !slices.Contains(is, b) {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}
