// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"math"
	"strings"
	"testing"

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
	var nodes []*sim.Node
	for _, spec := range DefaultFleet().Nodes {
		if !strings.HasPrefix(spec.Name, "gpu-") {
			continue
		}
		n, err := sim.NewNode(t.TempDir(), spec)
		if err != nil {
			t.Fatal(err)
		}
		n.AddPod(types.UID("training-"+spec.Name), 4000, 2) // a GPU pod of the scenario
		nodes = append(nodes, n)
	}
	if len(nodes) != 2 {
		t.Fatalf("%d GPU nodes in the default fleet, want 2", len(nodes))
	}
	const limit = 4500.0 // rack-gpu: 4600 W − 100 W reserve
	on := map[types.UID]placed{}
	for i := range rackResidents {
		n := nodes[i%len(nodes)]
		uid := types.UID(fmt.Sprintf("rack-%d", i))
		p := placed{Pod: string(uid), Node: n.Spec.Name, Request: rackPodMilli}
		n.AddPod(uid, p.Request*rackIdlePercent/100, 0)
		on[uid] = p
	}
	load := newRackLoad(nodes, on, on)
	extra := load.extraFor(limit - rackSlackWatts)
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
		n.SetExtraUtilization(extra)
	}
	risen := 0.0
	for _, n := range nodes {
		risen += n.SteadyWatts(extra, 0)
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
		after += n.SteadyWatts(extra, 0)
	}
	if want := wantAfter; math.Abs(after-want) > 1e-6 || after >= limit {
		t.Errorf("without the oracle's pods the nodes settle at %.2f W; the sizing said %.2f W, under the limit %.0f W", after, want, limit)
	}
}
