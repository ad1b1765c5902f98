// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powerbudget

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/powerbudget"
)

var _ fwk.SignPlugin = &PowerBudget{}

// SignPod signs the pod's demand, what Filter and Score read from it, for
// kube-scheduler's opportunistic batching (KEP-5598), unless a budget is
// near its limit. A batch reuses one pod's scores for the next pod of the
// same signature, scoring again only the node it placed the pod on; but a
// placement changes the other members of that node's budgets too once a
// budget's headroom, less the pod's watts, falls under
// fullScoreHeadroomPercent of its limit (Score) or under the pod's watts
// (Filter). Then the pod is not signed, and is scheduled alone.
//
// kube-scheduler signs a pod when it enters the queue or is updated, not
// each cycle, so this judges the budgets at that moment; a batch lasts at
// most 500 ms, and Filter runs again on the node a batch hints.
func (pl *PowerBudget) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	d := pl.domains.Book().Demand(pod)
	snap := pl.domains.Snapshot(pl.cache.Now(), pl.args.TelemetryMaxAge)
	why := pl.near.get(snap, "", d, func() string { return near(snap, d, pl.args.FullScoreHeadroomPercent) })
	if why != "" {
		return nil, fwk.NewStatus(fwk.Unschedulable, why)
	}
	return []fwk.SignFragment{{Key: "telesched.io/" + Name, Value: d}}, nil
}

// near names the first budget where one placement of a pod of demand d
// changes what its other members answer, "" when none does: its headroom
// less the pod's largest marginal watts on any member is under
// fullScorePercent of its limit, the point below which Score falls with
// headroom (and below which Filter may refuse).
//
// A budget whose headroom less the pod's largest bound on any member
// (NodeState.PodWattsBound, a few multiplications) stays above that point
// is passed over without estimating the pod on each member: at 5000
// nodes and a telemetry write every 24 ms, the snapshot changed between
// most pods and the estimates took 13 % of the scheduler's CPU.
func near(snap *powerbudget.Snapshot, d estimate.Demand, fullScorePercent int32) string {
	for i := range snap.Domains {
		dom := &snap.Domains[i]
		full := float64(dom.LimitWatts()) * float64(fullScorePercent) / 100
		var bound float64
		for _, member := range dom.Members {
			if w, ok := snap.Node(member).PodWattsBound(d); ok && w > bound {
				bound = w
			}
		}
		if dom.HeadroomWatts()-bound >= full {
			continue
		}
		var most float64
		for _, member := range dom.Members {
			if w, ok := snap.PodWatts(snap.Node(member), d); ok && w > most {
				most = w
			}
		}
		if left := dom.HeadroomWatts() - most; left < full {
			return fmt.Sprintf("PowerBudget %s is near its limit (%.0fW left after a %.0fW pod, under %d%% of %dW): one placement changes its other nodes' scores, so pods are not batched",
				dom.Name, left, most, fullScorePercent, dom.LimitWatts())
		}
	}
	return ""
}

// mayRefuse reports whether Filter may refuse a pod of demand d on some
// member of some budget by snap: a member without usable power telemetry
// in a budget that sets no unmeteredNodeWatts, or a budget whose measured
// and reserved watts plus a bound on the pod's watts on any member exceed
// its limit (for a pod without GPUs the members' largest CPU bounds,
// domainBounds, else the largest of NodeState.PodWattsBound: at least
// what Filter counts). False for the common case of budgets far from
// full: PreFilter then does not make the pod one a NodeTelemetry change
// must be judged for (rejected.Index.Begin), which would cost a snapshot
// with every sample.
func mayRefuse(snap *powerbudget.Snapshot, bounds []domainBound, d estimate.Demand) bool {
	cpuOnly := d.BusyGPUs() == 0 && d.MIGSlices == 0
	for i := range snap.Domains {
		dom, b := &snap.Domains[i], &bounds[i]
		if b.unmeteredRefused {
			return true
		}
		var bound float64
		if cpuOnly {
			bound = b.perMilli*float64(d.CPUMilli) + b.fixed
		} else {
			for _, member := range dom.Members {
				if w, ok := snap.Node(member).PodWattsBound(d); ok && w > bound {
					bound = w
				}
			}
		}
		if dom.MeasuredWatts+dom.ReservedWatts+bound > float64(dom.LimitWatts()) {
			return true
		}
	}
	return false
}

// domainBound is what mayRefuse reads of a budget's members, once per
// snapshot: the largest of their CPU bounds' terms (NodeState.CPUWattsBound;
// each the largest alone, so that their sum bounds every member), and
// whether a member without usable power telemetry is refused (the budget
// sets no unmeteredNodeWatts).
type domainBound struct {
	perMilli, fixed  float64
	unmeteredRefused bool
}

// domainBounds computes snap's domainBound per budget, in snap.Domains'
// order.
func domainBounds(snap *powerbudget.Snapshot) []domainBound {
	out := make([]domainBound, len(snap.Domains))
	for i := range snap.Domains {
		dom := &snap.Domains[i]
		for _, member := range dom.Members {
			if ns := snap.Node(member); ns != nil {
				out[i].widen(dom, ns)
			}
		}
	}
	return out
}

// widen takes a member's state ns of dom into b.
func (b *domainBound) widen(dom *powerbudget.Domain, ns *powerbudget.NodeState) {
	perMilli, fixed, ok := ns.CPUWattsBound()
	if !ok {
		b.unmeteredRefused = b.unmeteredRefused || !dom.HasUnmetered
		return
	}
	b.perMilli, b.fixed = max(b.perMilli, perMilli), max(b.fixed, fixed)
}

// boundsMemo keeps the domainBounds of the latest snapshot built from
// every member (Snapshot.Base), and of the latest snapshot derived from
// it: a placement derives a new snapshot, with its node's state in place
// of the base's, and at 5000 nodes in budgets a pass over every member
// for each pod was most of PowerBudget's PreFilter. A derived snapshot's
// bounds are the base's widened by its overrides' states: at least each
// member's own, so still bounds (a member whose bound fell keeps the
// base's larger one until the next base, which a new sample brings
// within powerbudget.MaxSampleLag); mayRefuse may then say a pod may be
// refused where it could not be, never the other way.
type boundsMemo struct {
	mu         sync.Mutex
	base       *powerbudget.Snapshot
	baseBounds []domainBound
	snap       *powerbudget.Snapshot
	bounds     []domainBound
}

func (bm *boundsMemo) get(snap *powerbudget.Snapshot) []domainBound {
	bm.mu.Lock()
	defer bm.mu.Unlock()
	if bm.snap == snap {
		return bm.bounds
	}
	base := snap.Base()
	if bm.base != base {
		bm.base, bm.baseBounds = base, domainBounds(base)
	}
	bounds := bm.baseBounds
	if base != snap {
		bounds = slices.Clone(bounds)
		for _, ns := range snap.Overrides() {
			for _, i := range ns.Domains {
				bounds[i].widen(&snap.Domains[i], ns)
			}
		}
	}
	bm.snap, bm.bounds = snap, bounds
	return bounds
}
