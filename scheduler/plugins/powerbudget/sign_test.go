// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powerbudget

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/powerbudget"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/fixtures"
)

// PowerBudget signs a pod with its demand while no budget is near its
// limit, and refuses while one is: rack-a has 100 W of its 2000 W left.
func TestSignPod(t *testing.T) {
	pl := newPlugin(t)
	_, st := pl.SignPod(context.Background(), pod("p", "1"))
	if st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), "PowerBudget") || !strings.Contains(st.Message(), "near its limit") {
		t.Fatalf("SignPod with a rack at 95 %% = %v, want Unschedulable naming the budget", st)
	}
	t.Logf("refused: %s", st.Message())
	snap := snapshot(pl)
	if why := near(snap, estimate.Demand{CPUMilli: 1000}, 50); !strings.HasPrefix(why, "PowerBudget ") {
		t.Errorf("near = %q", why)
	}
	// Every budget far from its limit: pdu-1 alone, 1900 W of 5000 W;
	// a 1-core pod adds 50 W at most, leaving 62 % free, over 50 %.
	for i := len(snap.Domains) - 1; i >= 0; i-- {
		if snap.Domains[i].Name != "pdu-1" {
			snap.Domains = append(snap.Domains[:i], snap.Domains[i+1:]...)
		}
	}
	if why := near(snap, estimate.Demand{CPUMilli: 1000}, 50); why != "" {
		t.Errorf("near with pdu-1 at 38 %% = %q, want none", why)
	}
	// ... but not at a fullScoreHeadroomPercent of 70.
	if why := near(snap, estimate.Demand{CPUMilli: 1000}, 70); !strings.Contains(why, "pdu-1") {
		t.Errorf("near at 70 %% = %q, want pdu-1", why)
	}
}

// nearByEstimates is near without its bound: the pod estimated on every
// member of every budget.
func nearByEstimates(snap *powerbudget.Snapshot, d estimate.Demand, fullScorePercent int32) string {
	for i := range snap.Domains {
		dom := &snap.Domains[i]
		var most float64
		for _, member := range dom.Members {
			if w, ok := snap.PodWatts(snap.Node(member), d); ok && w > most {
				most = w
			}
		}
		full := float64(dom.LimitWatts()) * float64(fullScorePercent) / 100
		if left := dom.HeadroomWatts() - most; left < full {
			return dom.Name
		}
	}
	return ""
}

// TestNearPassesOverOnlyWhatIsFar: the bound near passes budgets over by
// never changes its answer: for pods of 0 to 64 CPUs, with and without
// GPUs, at every fullScoreHeadroomPercent from 0 to 100, near names the
// budget that estimating the pod on every member names.
func TestNearPassesOverOnlyWhatIsFar(t *testing.T) {
	snap := snapshot(newPlugin(t))
	named := map[string]bool{}
	for _, cpu := range []int64{0, 100, 1000, 4000, 16_000, 64_000} {
		for _, gpus := range []int64{0, 1} {
			d := estimate.Demand{CPUMilli: cpu, GPUs: gpus}
			for pct := int32(0); pct <= 100; pct += 5 {
				got, want := near(snap, d, pct), nearByEstimates(snap, d, pct)
				named[want] = true
				if (got == "") != (want == "") || (want != "" && !strings.HasPrefix(got, "PowerBudget "+want+" ")) {
					t.Errorf("pod %+v at %d%%: near = %q, want %q", d, pct, got, want)
				}
			}
		}
	}
	if !named[""] || len(named) < 2 {
		t.Errorf("the cases name %v: want both a near budget and none", named)
	}
}

// TestMayRefuseIsFilter: wherever Filter's predicate refuses a pod on some
// node, mayRefuse says it may (PreFilter then makes the pod one that
// NodeTelemetry changes are judged for): on the fixture, whose budgets
// refuse every pod somewhere, and on 200 nodes in racks of 40 under 1 MW
// budgets, far from full, where it clears pods (a pod's watts are bounded
// by its node's curve, so none there is refused).
func TestMayRefuseIsFilter(t *testing.T) {
	check := func(snap *powerbudget.Snapshot, names []string) (refusedSomewhere, cleared int) {
		for _, cpu := range []int64{0, 100, 1000, 4000, 16_000, 64_000, 256_000, 100_000_000} {
			for _, gpus := range []int64{0, 1, 8} {
				d := estimate.Demand{CPUMilli: cpu, GPUs: gpus}
				var refused []string
				for _, name := range names {
					if fits(snap, name, d) != "" {
						refused = append(refused, name)
					}
				}
				may := mayRefuse(snap, domainBounds(snap), d)
				switch {
				case len(refused) > 0 && !may:
					t.Errorf("pod %+v: Filter refuses it on %v, but mayRefuse says it cannot be refused", d, refused)
				case len(refused) > 0:
					refusedSomewhere++
				case !may:
					cleared++
				}
			}
		}
		return refusedSomewhere, cleared
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.name)
	}
	if refused, _ := check(snapshot(newPlugin(t)), names); refused == 0 {
		t.Error("the fixture refuses no pod anywhere")
	}
	clk := plugintest.NewClock(now)
	pl, infos := benchPlugin(t, 200, clk)
	names = nil
	for _, ni := range infos {
		names = append(names, ni.Node().Name)
	}
	if _, cleared := check(pl.domains.SnapshotLatest(clk.Now(), pl.args.TelemetryMaxAge), names); cleared == 0 {
		t.Error("under 1 MW budgets mayRefuse cleared no pod")
	}
}

// The bounds of a snapshot derived by placements are its base's widened
// by the placed nodes' states, without a pass over every member: each at
// least what a pass over the derived snapshot gives (so mayRefuse is true
// wherever it would be), and the base's computed once for every snapshot
// derived from it.
func TestBoundsOfDerivedSnapshots(t *testing.T) {
	clk := plugintest.NewClock(now)
	pl, infos := benchPlugin(t, 200, clk)
	ctx := context.Background()
	pod := plugintest.CPUPod()
	var memo boundsMemo
	bases := map[*powerbudget.Snapshot]bool{}
	passes, derived := 0, 0
	for i := range 60 {
		clk.Set(clk.Now().Add(time.Millisecond))
		placed := *pod
		placed.UID = types.UID(fmt.Sprint(i))
		placed.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 500*(i%9+1)))}}}}
		node := infos[(i*37)%len(infos)].Node().Name
		if i%10 == 5 {
			// A new sample of the node with a curve three times as
			// steep: its bound rises above every member's in the base.
			st := fixtures.FullStatus(clk.Now(), 2, 8)
			for k := range st.Power.Model.CurveWatts {
				st.Power.Model.CurveWatts[k] *= 3
			}
			pl.cache.Set(telemetry.FromStatus(node, &st))
		}
		pl.Reserve(ctx, framework.NewCycleState(), &placed, node)
		snap := pl.domains.Snapshot(clk.Now(), pl.args.TelemetryMaxAge)
		if snap.Base() != snap {
			derived++
		}
		bases[snap.Base()] = true
		before := memo.base
		got, want := memo.get(snap), domainBounds(snap)
		if memo.base != before {
			passes++
		}
		for j := range want {
			g, w := got[j], want[j]
			if g.perMilli < w.perMilli || g.fixed < w.fixed || (w.unmeteredRefused && !g.unmeteredRefused) {
				t.Fatalf("placement %d, budget %s: bounds %+v from the base and the overrides, %+v from every member: not a bound", i, snap.Domains[j].Name, g, w)
			}
		}
		for _, cpu := range []int64{100, 4000, 64_000, 100_000_000} {
			d := estimate.Demand{CPUMilli: cpu}
			if mayRefuse(snap, want, d) && !mayRefuse(snap, got, d) {
				t.Fatalf("placement %d, %dm: mayRefuse with every member's bounds, not with the derived ones", i, cpu)
			}
		}
	}
	if derived < 50 {
		t.Fatalf("%d of 60 placements derived their snapshot; the test needs derived ones", derived)
	}
	if passes != len(bases) {
		t.Errorf("%d passes over every member for %d snapshots built from every member, want one each", passes, len(bases))
	}
}
