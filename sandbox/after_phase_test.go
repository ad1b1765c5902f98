// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/telesched/telesched/sandbox/oracle"
	"github.com/telesched/telesched/sandbox/sim"
)

// TestRackStageSizing: the default fleet's GPU rack, with the rack stage's
// pods placed idle on its nodes, is sized so that once their load rises
// the oracle needs exactly rackToShed of them gone, the rack then settling
// rackSlackWatts under its limit; and the simulated nodes, risen and then
// without the oracle's pods, draw what the sizing predicted.
func TestRackStageSizing(t *testing.T) {
	nodes := defaultGPURack(t)
	for _, n := range nodes {
		n.AddPod(types.UID("training-"+n.Spec.Name), 4000, 2) // a GPU pod of the scenario
	}
	const limit = 4500.0 // rack-gpu: 4600 W − 100 W reserve
	byName := map[string]*sim.Node{}
	for _, n := range nodes {
		byName[n.Spec.Name] = n
	}
	where := rackPlacement(nodes, rackPodMilli, rackResidents)
	if len(where) != rackResidents {
		t.Fatalf("rackPlacement: %v, want %d pods", where, rackResidents)
	}
	on := map[types.UID]placed{}
	for i, node := range where {
		uid := types.UID(fmt.Sprintf("rack-%d", i))
		p := placed{Pod: string(uid), Node: node, Request: rackPodMilli}
		byName[node].AddPod(uid, p.Request*rackIdlePercent/100, 0)
		on[uid] = p
	}
	load := newRackLoad(nodes, on, on)
	extra := load.extraFor(limit-rackSlackWatts, rackToShed)
	if extra <= 0 || extra >= 1 {
		t.Fatalf("extraFor = %v, want within (0, 1)", extra)
	}
	got, set := oracle.FewestToShed(len(load.cands), func(removed []int) bool { return load.watts(extra, removed) < limit })
	if got != rackToShed {
		t.Fatalf("oracle's fewest = %d (%v), want %d", got, set, rackToShed)
	}
	if w := load.leastWithout(extra, rackToShed); math.Abs(w-(limit-rackSlackWatts)) > 0.5 {
		t.Errorf("without the %d that free most the rack settles at %.2f W, want %.0f W", rackToShed, w, limit-rackSlackWatts)
	}

	// The simulation, risen, settles where the sizing said, over the
	// limit; without the oracle's pods, under it.
	wantRisen, wantAfter := load.watts(extra, nil), load.watts(extra, set)
	for uid, p := range on {
		for _, n := range nodes {
			if n.Spec.Name == p.Node && !n.SetPodCPU(uid, p.Request) {
				t.Fatalf("SetPodCPU(%s) on %s: not running", uid, p.Node)
			}
		}
	}
	for _, n := range nodes {
		n.SetExtraLoad(load.cpuExtra(n, extra), extra)
	}
	risen := 0.0
	for _, n := range nodes {
		risen += n.SteadyLoadWatts(load.cpuExtra(n, extra), extra, 0)
		if u := n.Utilization(); u >= 1 {
			t.Errorf("%s at %.0f%% CPU risen: past full load a pod leaving frees less than the curve says", n.Spec.Name, 100*u)
		}
	}
	if want := wantRisen; math.Abs(risen-want) > 1e-6 || risen <= limit {
		t.Errorf("risen, the nodes settle at %.2f W; the sizing said %.2f W, over the limit %.0f W", risen, want, limit)
	}
	for _, i := range set {
		for _, n := range nodes {
			n.RemovePod(types.UID(load.cands[i].Pod))
		}
	}
	after := 0.0
	for _, n := range nodes {
		after += n.SteadyLoadWatts(load.cpuExtra(n, extra), extra, 0)
	}
	if want := wantAfter; math.Abs(after-want) > 1e-6 || after >= limit {
		t.Errorf("without the oracle's pods the nodes settle at %.2f W; the sizing said %.2f W, under the limit %.0f W", after, want, limit)
	}
}

// TestRackPlacementKeepsToNodesWithRoom: the rack stage's pods are bound
// without the scheduler, so rackPlacement keeps each node at or under
// rackFullShare with them at their requests: a node that is busy takes
// none, the others take them in turn.
func TestRackPlacementKeepsToNodesWithRoom(t *testing.T) {
	var nodes []*sim.Node
	for _, spec := range DefaultFleet().Nodes {
		if spec.Name == "cpu-numa2" || spec.Name == "gpu-a100x8" || spec.Name == "gpu-h100x8" {
			n, err := sim.NewNode(t.TempDir(), spec)
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, n)
		}
	}
	// gpu-a100x8: 64 CPUs, 10% base; 44 CPUs more takes it to 78.75%,
	// with no room for 16 more under 85%.
	nodes[1].AddPod("busy", 44000, 0)
	got := rackPlacement(nodes, 16000, 4)
	if diff := cmp.Diff([]string{"cpu-numa2", "gpu-h100x8", "cpu-numa2", "gpu-h100x8"}, got); diff != "" {
		t.Errorf("rackPlacement (-want +got):\n%s", diff)
	}
	// 64 CPUs at 10% (cpu-numa2 20%): room for two of 24 CPUs on
	// gpu-h100x8 (10% + 75% = 85%), one on cpu-numa2 (20% + 37.5%; a
	// second would take it to 95%).
	if diff := cmp.Diff([]string{"cpu-numa2", "gpu-h100x8", "gpu-h100x8"}, rackPlacement(nodes, 24000, 4)); diff != "" {
		t.Errorf("rackPlacement of 24 CPUs (-want +got):\n%s", diff)
	}
}

// TestRackStageSizedPastTheBudget: with small pods, two of them free too
// little for the rise to pass the budget itself (4600 W) while settling
// under the limit (4500 W) without them; sized then sizes for more, and the
// oracle needs that many.
func TestRackStageSizedPastTheBudget(t *testing.T) {
	nodes := defaultGPURack(t)
	const limit, budget = 4500.0, 4600.0
	on := map[types.UID]placed{}
	for i, node := range rackPlacement(nodes, 8000, rackResidents) {
		uid := types.UID(fmt.Sprintf("rack-%d", i))
		on[uid] = placed{Pod: string(uid), Node: node, Request: 8000}
		for _, n := range nodes {
			if n.Spec.Name == node {
				n.AddPod(uid, 2000, 0)
			}
		}
	}
	load := newRackLoad(nodes, on, on)
	if two := load.extraFor(limit-rackSlackWatts, rackToShed); load.watts(two, nil) > budget {
		t.Fatalf("sized for %d pods of 8 CPUs the rack passes %v W (%.0f W): the case this test is for is gone", rackToShed, budget, load.watts(two, nil))
	}
	extra, k := load.sized(limit-rackSlackWatts, budget)
	if k <= rackToShed || load.watts(extra, nil) <= budget {
		t.Errorf("sized: %d pods, the rack risen at %.0f W; want more than %d and past %.0f W", k, load.watts(extra, nil), rackToShed, budget)
	}
	if got, _ := oracle.FewestToShed(len(load.cands), func(removed []int) bool { return load.watts(extra, removed) < limit }); got != k {
		t.Errorf("oracle's fewest = %d, want the %d it was sized for", got, k)
	}
}

// TestRackStageRisesIdleGPUs: after the scenario's training jobs end, the
// GPU rack's nodes have their CPUs near full load and their GPUs idle. An
// unseen load held to what the fullest node's CPUs have left (as it was)
// leaves the rack under its limit: `make demo` printed the rack stage
// "never reached". The GPUs' unseen load rises apart from the CPUs', so
// the rack passes its limit, no node's CPUs past full load, and the
// oracle's pods take it back under.
func TestRackStageRisesIdleGPUs(t *testing.T) {
	nodes := defaultGPURack(t)
	for _, n := range nodes {
		// CPU pods of the scenario, no GPU pods: 55 % of the CPUs busy, on top of their base load.
		n.AddPod(types.UID("cpu-"+n.Spec.Name), int64(n.Spec.Host.CPUs)*550, 0)
	}
	const limit = 4500.0 // rack-gpu: 4600 W − 100 W reserve
	// The pods as the stage sizes them.
	milli, where := rackPods(nodes)
	on := map[types.UID]placed{}
	for i, node := range where {
		uid := types.UID(fmt.Sprintf("rack-%d", i))
		on[uid] = placed{Pod: string(uid), Node: node, Request: milli}
		for _, n := range nodes {
			if n.Spec.Name == node {
				n.AddPod(uid, milli*rackIdlePercent/100, 0)
			}
		}
	}
	if len(on) < rackToShed {
		t.Fatalf("rackPlacement: %d pods, want at least %d", len(on), rackToShed)
	}
	load := newRackLoad(nodes, on, on)
	cpuOnly := 1.0
	for _, n := range nodes {
		cpuOnly = min(cpuOnly, load.room[n.Spec.Name])
	}
	at := 0.0
	for _, n := range nodes {
		at += n.SteadyWatts(cpuOnly, load.rise[n.Spec.Name])
	}
	if at >= limit {
		t.Fatalf("with the unseen load held to the fullest node's CPU room (%.3f) the rack settles at %.0f W, past %.0f W: the case this test is for is gone", cpuOnly, at, limit)
	}
	t.Logf("unseen load held to the fullest node's CPU room (%.3f): the rack settles at %.0f W, under its limit %.0f W", cpuOnly, at, limit)

	const budget = 4600.0
	extra, k := load.sized(limit-rackSlackWatts, budget)
	risen := load.watts(extra, nil)
	if risen <= limit {
		t.Fatalf("sized: unseen load %.3f for %d pods, the rack risen at %.0f W; want past its limit %.0f W", extra, k, risen, limit)
	}
	for _, n := range nodes {
		if u := n.Utilization() + load.cpuExtra(n, extra) + float64(load.rise[n.Spec.Name])/float64(n.Spec.Host.CPUs*1000); u > 1+1e-9 {
			t.Errorf("%s at %.1f%% CPU risen: past full load a pod leaving frees less than the curve says", n.Spec.Name, 100*u)
		}
	}
	got, set := oracle.FewestToShed(len(load.cands), func(removed []int) bool { return load.watts(extra, removed) < limit })
	if got != k || load.watts(extra, set) >= limit {
		t.Errorf("oracle's fewest = %d (the rack then at %.0f W), want the %d it was sized for, under %.0f W", got, load.watts(extra, set), k, limit)
	}
	t.Logf("pods of %d milli-CPUs; unseen load %.3f (GPUs; CPUs short of full load): the rack risen at %.0f W, %d pods to go", milli, extra, risen, k)
}

// defaultGPURack is the default fleet's GPU rack, its two nodes simulated
// and idle.
func defaultGPURack(t *testing.T) []*sim.Node {
	t.Helper()
	var nodes []*sim.Node
	for _, spec := range DefaultFleet().Nodes {
		if !strings.HasPrefix(spec.Name, "gpu-") {
			continue
		}
		n, err := sim.NewNode(t.TempDir(), spec)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	if len(nodes) != 2 {
		t.Fatalf("%d GPU nodes in the default fleet, want 2", len(nodes))
	}
	return nodes
}
