// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package energyaware is the EnergyAware plugin: it keeps pods off nodes at
// or near their thermal limits (and GPU pods off nodes whose GPUs are near
// slowdown), and scores the rest by the power the pod would add, from each
// node's fitted power model, combined with thermal headroom.
package energyaware

import (
	"context"
	"fmt"
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/apis/config/validation"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/cyclestate"
	"github.com/telesched/telesched/scheduler/plugins/internal/pluginfactory"
	"github.com/telesched/telesched/scheduler/plugins/internal/rejected"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Name is the plugin's name in the scheduler configuration.
const Name = "EnergyAware"

const stateKey fwk.StateKey = "PreFilter" + Name

// EnergyAware is the plugin.
type EnergyAware struct {
	args   config.EnergyAwareArgs
	limits thermalLimits
	cache  *telemetry.Cache
	last   cyclestate.Last[*podState]
	// nodes is the scheduler's Node lister, nil until set by NewFactory:
	// pick then cannot tell nodes a pod may not go to.
	nodes corelisters.NodeLister
	// hot counts the nodes whose latest view is too hot for any pod.
	hot *telemetry.Counter
	// reserved is the pods placed on a node since its sample (the
	// scheduler's estimate.Book), which counts every pod's demand.
	reserved *estimate.Book
	// predicting counts the nodes with a thermal model.
	predicting *telemetry.Counter
	// thermalFailed counts the nodes whose thermal source failed in their
	// latest sample (telemetry.Node.ThermalFailed): while none has, Filter
	// and Score need not read how long a node's heat is known.
	thermalFailed *telemetry.Counter
	// rejected are the pending pods Filter rejected, with their demand,
	// which a NodeTelemetry change may let in (pick).
	rejected *rejected.Index[estimate.Demand]
}

var (
	_ fwk.PreFilterPlugin   = &EnergyAware{}
	_ fwk.FilterPlugin      = &EnergyAware{}
	_ fwk.ScorePlugin       = &EnergyAware{}
	_ fwk.EnqueueExtensions = &EnergyAware{}
)

// NewFactory returns the plugin factory; every profile's instance shares
// cache, which the first instance starts and syncs, and reads the pods
// placed since each node's sample from reserved.
func NewFactory(cache *telemetry.Cache, reserved *estimate.Book) frameworkruntime.PluginFactory {
	return pluginfactory.New(Name, cache, validation.ValidateEnergyAwareArgs, func(ctx context.Context, args config.EnergyAwareArgs, h fwk.Handle) (fwk.Plugin, error) {
		if err := reserved.ShareGPUResource(fmt.Sprintf("profile %s's %s (gpuResourceName)", h.ProfileName(), Name), v1.ResourceName(args.GPUResourceName)); err != nil {
			return nil, err
		}
		pl := NewWith(args, cache, reserved)
		pl.nodes = h.SharedInformerFactory().Core().V1().Nodes().Lister()
		if err := pl.rejected.Watch(h.SharedInformerFactory()); err != nil {
			return nil, err
		}
		pl.rejected.Requeue(ctx, Name, reserved, h.SharedInformerFactory(), h, pl.fitsReleased)
		pl.rejected.OnTelemetry(ctx, Name, cache, h.SharedInformerFactory(), h, pl.pick)
		return pl, nil
	})
}

// New returns the plugin for valid args, with a reservation book of its
// own that counts GPUs by them. Time is the cache's clock.
func New(args config.EnergyAwareArgs, cache *telemetry.Cache) *EnergyAware {
	opts := estimate.DefaultOptions()
	opts.GPUResource = v1.ResourceName(args.GPUResourceName)
	return NewWith(args, cache, estimate.NewBook(cache, opts))
}

// NewWith returns the plugin for valid args, reading pods' demand and the
// pods placed since each node's sample from book.
func NewWith(args config.EnergyAwareArgs, cache *telemetry.Cache, book *estimate.Book) *EnergyAware {
	limits := thermalLimits{
		marginMilli:       int64(args.ThermalMarginCelsius) * 1000,
		absoluteMilli:     int64(args.AbsoluteLimitCelsius) * 1000,
		rejectThrottling:  args.RejectThrottling,
		gpuSlowdownMargin: int64(args.GPUSlowdownMarginCelsius) * 1000,
	}
	return &EnergyAware{
		args:          args,
		limits:        limits,
		cache:         cache,
		reserved:      book,
		hot:           cache.NewCounter(func(n *telemetry.Node) bool { return tooHot(n, limits) != "" }),
		predicting:    cache.NewCounter(func(n *telemetry.Node) bool { return n.Models != nil && n.Models.HasThermal }),
		thermalFailed: cache.NewCounter(func(n *telemetry.Node) bool { return n.ThermalFailed != "" }),
		rejected:      rejected.New[estimate.Demand](),
	}
}

// Name implements fwk.Plugin.
func (pl *EnergyAware) Name() string { return Name }

// podState is the pod's demand. It is not modified after PreFilter
// writes it, so Clone returns it as is.
type podState struct {
	estimate.Demand
	// work is how the pod's work is counted (estimate.WorkOf): Score
	// ranks nodes by the joules they spend for it.
	work estimate.Work
	// now is the cycle's time, read once: telemetry freshness is judged
	// against it for every node.
	now time.Time
	// thermalFailed is true when some node's thermal source failed: nodes
	// are then checked for heat they no longer know (heatUnknown).
	thermalFailed bool
}

func (s *podState) Clone() fwk.StateData { return s }

func (pl *EnergyAware) podRequests(pod *v1.Pod) *podState {
	work, _ := estimate.WorkOf(pod)
	return &podState{Demand: pl.reserved.Demand(pod), work: work, now: pl.cache.Now(), thermalFailed: pl.thermalFailed.Count() > 0}
}

// hintState is the state pick judges a pod of demand d with: it compares
// the views before and after an update, and the one before may
// be the only one whose thermal source failed.
func hintState(d estimate.Demand, now time.Time) *podState {
	return &podState{Demand: d, now: now, thermalFailed: true}
}

// PreFilter computes the pod's requests once. A pod that requests no GPU
// skips the filter while no node's telemetry is too hot, stale telemetry
// is not rejected and no node's predicted heat could reach its limit less
// the margin with the pod (no node has a thermal model, or the book's
// bound over every node's says so: estimate.LoadBound.HeatClear): the
// filter would pass every node.
func (pl *EnergyAware) PreFilter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	s := pl.podRequests(pod)
	pl.last.Write(cs, stateKey, s)
	if s.GPUs == 0 && pl.args.StaleTelemetryPolicy != config.StaleTelemetryReject && pl.hot.Count() == 0 &&
		(pl.predicting.Count() == 0 || pl.reserved.LoadBound().HeatClear(s.CPUMilli, pl.limits.marginMilli)) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pl.rejected.Begin(pod, s.Demand) // before Filter reads a node
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *EnergyAware) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

func (pl *EnergyAware) readState(cs fwk.CycleState, pod *v1.Pod) *podState {
	if s, ok := pl.last.Read(cs, stateKey); ok {
		return s
	}
	return pl.podRequests(pod)
}

// Filter rejects nodes too hot for any pod, and, for GPU pods, nodes
// without enough GPUs clear of their slowdown temperature.
func (pl *EnergyAware) Filter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	slot := pl.reserved.Slot(nodeInfo.Node().Name) // the view and its reservations, one lookup
	s := pl.readState(cs, pod)
	st := pl.fits(slot.View, slot, s)
	if st != nil {
		pl.rejected.AddOn(pod, nodeInfo.Node().Name, s.Demand)
	}
	return st
}

// fits is Filter's predicate, which pick uses too: nil when the pod may
// go to a node with telemetry tel (nil: none) and the book's slot (what
// was placed since its sample, its calibration), else why not.
func (pl *EnergyAware) fits(tel *telemetry.Node, slot estimate.Slot, s *podState) *fwk.Status {
	if tel == nil || !tel.Fresh(s.now, pl.args.TelemetryMaxAge) {
		if tel != nil {
			if why := tooHot(tel, pl.limits); why != "" {
				// Whatever the stale policy: silence from a node last
				// seen hot (an agent hung, a host struggling) is no sign
				// that it cooled.
				seen := "as last seen " + tel.Age(s.now).Round(time.Second).String() + " ago"
				if tel.Observed.IsZero() {
					seen = "as last published (no write of its agent's the scheduler saw)"
				}
				return fwk.NewStatus(fwk.Unschedulable, why+", "+seen+"; stays too hot until a fresh sample shows it cool")
			}
		}
		return telemetry.StaleStatus(pl.args.TelemetryArgs, tel, s.now)
	}
	if why := tooHot(tel, pl.limits); why != "" {
		if s.thermalFailed && tel.ThermalFailed != "" && !(pl.limits.rejectThrottling && tel.Throttling) {
			// Heat last read, held: whatever the policy, as for a
			// stale node last seen hot.
			why = fmt.Sprintf("%s, as last read %s ago: %s since; stays too hot until a sample shows it cool",
				why, s.now.Sub(tel.ThermalObserved).Round(time.Second), tel.ThermalFailed)
		}
		return fwk.NewStatus(fwk.Unschedulable, why)
	}
	if s.thermalFailed {
		if st := pl.heatUnknown(tel, s.now); st != nil {
			return st
		}
	}
	// Only the heat prediction: the pod's watts are Score's.
	if why := tooHotPredicted(tel, pl.heatAbove(tel, s.Demand, slot, pl.limits.marginMilli), pl.limits.marginMilli); why != "" {
		return fwk.NewStatus(fwk.Unschedulable, why)
	}
	if s.GPUs > 0 && tel.HasGPUSource {
		cool, hotFree := gpuCounts(tel, pl.limits.gpuSlowdownMargin)
		if int64(cool) < s.GPUs {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node has %d healthy GPUs more than %d°C below slowdown, pod needs %d",
				cool, pl.args.GPUSlowdownMarginCelsius, s.GPUs))
		}
		if hotFree > 0 {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%d free GPU(s) too hot (%s): the kubelet may give one to the pod",
				hotFree, firstHotFree(tel, pl.limits.gpuSlowdownMargin)))
		}
	}
	return nil
}

// heatUnknown is Filter's answer for a node with fresh telemetry whose
// thermal source failed, and which is not too hot by the reading it holds:
// nil while that reading is within the cache's thermal hold
// (telemetry.Node.ThermalKnown); after it, or with no reading to hold,
// the node's heat is unknown, and the stale-telemetry policy decides, as
// for a node whose telemetry is stale: nothing under Ignore (neither
// rejected nor, in Score, favoured), Unschedulable under Reject.
func (pl *EnergyAware) heatUnknown(tel *telemetry.Node, now time.Time) *fwk.Status {
	hold := pl.cache.ThermalHold()
	if pl.args.StaleTelemetryPolicy != config.StaleTelemetryReject || tel.ThermalKnown(now, hold) {
		return nil
	}
	held := "the scheduler saw no earlier reading to hold"
	if tel.HasThermal {
		held = fmt.Sprintf("its last reading, %s old, is past --telemetry-thermal-hold %s", now.Sub(tel.ThermalObserved).Round(time.Second), hold)
	}
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node's heat is unknown: %s; %s (staleTelemetryPolicy Reject)", tel.ThermalFailed, held))
}

// heatKnown reports whether the node's heat is known at now (see
// heatUnknown), for pick; Filter and Score read the counter first.
func (pl *EnergyAware) heatKnown(tel *telemetry.Node, now time.Time) bool {
	return tel.ThermalKnown(now, pl.cache.ThermalHold())
}

// Score reads the node's telemetry once and returns the energy it ranks
// the pod by (estimate.Book.RankJoules: the joules the node spends for a
// unit of the pod's work at its speed, the CPU side amortized over
// consolidationPods pods like it) and its thermal score packed into one
// number (see packScore); NormalizeScore turns those into the final
// scores, once it has seen every candidate's energy. A node without fresh
// telemetry gets NoTelemetry.
func (pl *EnergyAware) Score(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s := pl.readState(cs, pod)
	slot := pl.reserved.Slot(nodeInfo.Node().Name) // the view and its reservations, one lookup
	tel := slot.View
	if tel == nil || !tel.Fresh(s.now, pl.args.TelemetryMaxAge) {
		return telemetry.NoTelemetry, nil
	}
	// RankJoules answers wherever the pod's watts are known (both read the
	// node's curve at its estimated load, estimate.curveFrom), so it
	// alone tells whether the node has a power estimate.
	var mw int64
	j, hasPower := slot.RankJoules(tel, s.Demand, s.work, int(pl.args.ConsolidationPods), pl.headroomMilli(tel, slot, nodeInfo))
	if hasPower {
		mw = int64(math.Round(j.Joules * 1000))
	}
	thermal := thermalScore(tel, pl.limits.absoluteMilli, pl.heatAbove(tel, s.Demand, slot, scoredHeadroom(tel, pl.limits.absoluteMilli)))
	if s.thermalFailed && !pl.heatKnown(tel, s.now) {
		thermal = 0 // a held reading past the hold earns nothing
	}
	return packScore(mw, hasPower, thermal), nil
}

// heatAbove is Heat where the pod may take the node's modelled sensor
// above its limit less clearance, and no prediction (Predicted false)
// where SteadyBound shows that it cannot: a few multiplications instead
// of a walk along the curve, for the nodes far from their limits.
// Filter's clearance is the margin, Score's the headroom above which a
// prediction would not lower the node's thermal score (scoredHeadroom):
// the answer is Heat's wherever it could change theirs.
func (pl *EnergyAware) heatAbove(tel *telemetry.Node, d estimate.Demand, slot estimate.Slot, clearance int64) estimate.Heat {
	if bound, ok := slot.SteadyBound(tel, d); ok && bound < tel.Models.Thermal.LimitMilli-clearance {
		return estimate.Heat{}
	}
	return slot.Heat(tel, d)
}

// headroomMilli is the CPU that pods like the one placed may still take
// on the node: its allocatable CPU less its pods' requests, and no more
// than LoadAware's threshold (the profiles' lowest, estimate.Book) leaves
// above the node's estimated load.
func (pl *EnergyAware) headroomMilli(tel *telemetry.Node, slot estimate.Slot, nodeInfo fwk.NodeInfo) int64 {
	free := nodeInfo.GetAllocatable().GetMilliCPU() - nodeInfo.GetRequested().GetMilliCPU()
	if room, ok := slot.CPUUnderThresholdMilli(tel); ok {
		free = min(free, room)
	}
	return free
}

// fitsReleased is Filter's predicate on a node whose reservations the book
// just released (a reserved pod gone, or a reservation expired), for
// rejected.Requeue.
func (pl *EnergyAware) fitsReleased(name string) func(estimate.Demand) bool {
	slot, now := pl.reserved.Slot(name), pl.cache.Now()
	if slot.View == nil {
		return func(estimate.Demand) bool { return false }
	}
	return func(d estimate.Demand) bool { return pl.fits(slot.View, slot, &podState{Demand: d, now: now}) == nil }
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *EnergyAware) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore combines the energy the node spends for the pod's work
// (the candidates' lowest best, others falling over powerSpanPercent
// more; see powerScore) with thermal headroom (most best), weighted by
// the args.
// A node without a ready power model gets no power points; one without
// fresh telemetry gets the lowest score of the others, so it is never
// favoured.
func (pl *EnergyAware) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	normalize(scores, int64(pl.args.PowerWeight), int64(pl.args.ThermalWeight), int64(pl.args.PowerSpanPercent))
	return nil
}

// EventsToRegister registers no event: a NodeTelemetry change requeues
// the pods this plugin rejected through the plugin itself (pick,
// rejected.OnTelemetry), not through the scheduling queue's walk of every
// unschedulable pod, and a reservation given back through
// rejected.Requeue. The method stays so that the scheduler does not fall
// back to requeueing the plugin's pods on every event.
func (pl *EnergyAware) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{}, nil
}

// mayLetIn judges a NodeTelemetry update before any pod is looked at: may
// is false when Filter rejects every pod on cur (too hot, stale while
// staleness is ignored as before, or its heat unknown under Reject), or
// when the node was usable before (not of unknown heat under Reject), no
// GPU came clear of slowdown and no free GPU too hot cooled or was taken. prevKnown: the previous view was stored
// and fresh; one that was not proves nothing about why a pod was rejected.
func (pl *EnergyAware) mayLetIn(prev, cur *telemetry.Node, now time.Time) (prevKnown, may bool) {
	if !cur.Fresh(now, pl.args.TelemetryMaxAge) || tooHot(cur, pl.limits) != "" {
		return false, false
	}
	reject := pl.args.StaleTelemetryPolicy == config.StaleTelemetryReject
	if reject && !pl.heatKnown(cur, now) {
		return false, false
	}
	prevKnown = prev != nil && prev.Fresh(now, pl.args.TelemetryMaxAge)
	// A thermal model, now or before, may be why the pod was rejected, or
	// its going may let it in: no shortcut then.
	predicts := (cur.Models != nil && cur.Models.HasThermal) || (prev != nil && prev.Models != nil && prev.Models.HasThermal)
	// So may heat unknown before, under Reject.
	if prevKnown && !predicts && tooHot(prev, pl.limits) == "" && (!reject || pl.heatKnown(prev, now)) {
		coolNow, hotFreeNow := gpuCounts(cur, pl.limits.gpuSlowdownMargin)
		coolBefore, hotFreeBefore := gpuCounts(prev, pl.limits.gpuSlowdownMargin)
		if coolNow <= coolBefore && hotFreeNow >= hotFreeBefore {
			return prevKnown, false
		}
	}
	return prevKnown, true
}

// pick names the pods Filter rejected that a NodeTelemetry change lets in
// (rejected.OnTelemetry): none when mayLetIn says no (the common case: a
// node too hot now, or usable before with no more cool GPUs now), else
// those the node's required affinity admits that the node takes now, by
// Filter's predicate, and did not before: it cooled, its telemetry became
// fresh, its predicted steady temperature with the pod fell below limit -
// margin, or enough of its GPUs came clear of slowdown or became healthy.
func (pl *EnergyAware) pick(prev, cur *telemetry.Node) []types.NamespacedName {
	now := pl.cache.Now()
	prevKnown, may := pl.mayLetIn(prev, cur, now)
	if !may {
		return nil
	}
	var node *v1.Node
	if pl.nodes != nil {
		node, _ = pl.nodes.Get(cur.Name)
	}
	slot := pl.reserved.Slot(cur.Name)
	before := slot.With(pl.reserved.Before(cur.Name, cur))
	return pl.rejected.SelectChange(prev, node, func(d estimate.Demand) bool {
		return pl.letsIn(prev, cur, prevKnown, before, slot, hintState(d, now))
	})
}

// letsIn reports whether the update lets the pod in by Filter's predicate:
// cur takes it with the reservations now, and prev, when known, did not
// with those until cur's sample retired some (estimate.Book.Before): a
// pod prev took already was rejected by something else, and one the
// reservations cur retired kept out is let in by cur.
func (pl *EnergyAware) letsIn(prev, cur *telemetry.Node, prevKnown bool, before, now estimate.Slot, s *podState) bool {
	return pl.fits(cur, now, s) == nil && (!prevKnown || pl.fits(prev, before, s) != nil)
}
