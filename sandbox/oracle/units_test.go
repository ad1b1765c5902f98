// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/sandbox/sim"
)

// withMIG cuts every GPU of a node into profiles under strategy.
func withMIG(strategy string, profiles ...string) func(*sim.NodeSpec) {
	return func(n *sim.NodeSpec) {
		n.MIGStrategy = strategy
		for i := range n.GPUs {
			n.GPUs[i].ComputeSlices = 7
			n.GPUs[i].MIG = nil
			for _, p := range profiles {
				slices := int(p[0] - '0')
				n.GPUs[i].MIG = append(n.GPUs[i].MIG, sim.MIGDevice{Profile: p, Slices: slices})
			}
		}
	}
}

func withNVLink(kind string) func(*sim.NodeSpec) {
	return func(n *sim.NodeSpec) { n.NVLink = kind }
}

// withMIGOn puts GPU i of a node in MIG mode (one 7g.80gb device).
func withMIGOn(i int) func(*sim.NodeSpec) {
	return func(n *sim.NodeSpec) {
		n.GPUs[i].ComputeSlices = 7
		n.GPUs[i].MIG = []sim.MIGDevice{{Profile: "7g.80gb", Slices: 7}}
	}
}

func TestSolveGPUUnits(t *testing.T) {
	cheap := fleetNode("a-cheap", "", 32, 1, curveR740, 10, withGPUs(2, 2))
	single := fleetNode("b-single", "", 32, 1, curveR740, 10, withGPUs(2, 2), withMIG(sim.MIGSingle, "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"))
	mixed := fleetNode("c-mixed", "", 32, 1, curveR830, 10, withGPUs(2, 2), withMIG(sim.MIGMixed, "3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
	// GPUs 0 and 3 in MIG mode: 1 and 2 are whole but no pair.
	broken := fleetNode("d-pairs", "", 32, 1, curveR740, 10, withGPUs(4, 4), withNVLink(sim.NVLinkPairs), withMIGOn(0), withMIGOn(3))
	pairs := fleetNode("e-pairs", "", 32, 1, curveR830, 10, withGPUs(4, 4), withNVLink(sim.NVLinkPairs))
	dra := fleetNode("f-dra", "", 32, 1, curveR830, 10, withGPUs(2, 2), func(n *sim.NodeSpec) { n.DRA = true })
	draMIG := fleetNode("g-dra-mig", "", 32, 1, curveR740, 10, withGPUs(2, 2), withMIG("", "3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"), func(n *sim.NodeSpec) { n.DRA = true })
	pod := func(name string, gpus int, mig map[string]int) Pod {
		return Pod{Name: name, CPUMilli: 1000, MemoryBytes: 1 << 30, GPUs: gpus, MIG: mig}
	}
	tests := []struct {
		name      string
		nodes     []sim.NodeSpec
		pods      []Pod
		want      map[string]string
		unplaced  bool
		wantWatts func() float64 // the fleet's watts at want; nil: not checked (its joules: these over the horizon, less its base load's)
	}{{
		name:  "a MIG profile's pod goes only where the mixed strategy lists that profile",
		nodes: []sim.NodeSpec{cheap, single, mixed},
		pods:  []Pod{pod("slice", 0, map[string]int{"3g.40gb": 1})},
		want:  map[string]string{"slice": "c-mixed"},
	}, {
		name:     "more devices of a profile than the fleet has: unplaced",
		nodes:    []sim.NodeSpec{mixed},
		pods:     []Pod{pod("s0", 0, map[string]int{"3g.40gb": 2}), pod("s1", 0, map[string]int{"3g.40gb": 1})},
		unplaced: true,
	}, {
		name:  "the GPU resource on the single strategy counts MIG devices: 14, not 2 GPUs",
		nodes: []sim.NodeSpec{single},
		pods:  []Pod{pod("train", 4, nil), pod("more", 10, nil)},
		want:  map[string]string{"train": "b-single", "more": "b-single"},
		wantWatts: func() float64 {
			s := single.WithDefaults()
			return s.EstimatedWattsShare(s.BaseUtilization+2.0/32, 14.0/7) - s.EstimatedWattsShare(s.BaseUtilization, 0)
		},
	}, {
		name:  "a single-strategy MIG device adds its slice share of the GPU's busy watts",
		nodes: []sim.NodeSpec{single},
		pods:  []Pod{pod("slice", 1, nil)},
		want:  map[string]string{"slice": "b-single"},
		wantWatts: func() float64 {
			s := single.WithDefaults()
			return s.EstimatedWattsShare(s.BaseUtilization+1.0/32, 1.0/7) - s.EstimatedWattsShare(s.BaseUtilization, 0)
		},
	}, {
		name:  "a 2-GPU pod on a node of NVLink pairs needs a free linked pair",
		nodes: []sim.NodeSpec{broken, pairs},
		pods:  []Pod{pod("pair", 2, nil)},
		want:  map[string]string{"pair": "e-pairs"},
	}, {
		name:  "two 1-GPU pods fill one pair, leaving the other to a 2-GPU pod",
		nodes: []sim.NodeSpec{pairs},
		pods:  []Pod{pod("one-0", 1, nil), pod("one-1", 1, nil), pod("pair", 2, nil)},
		want:  map[string]string{"one-0": "e-pairs", "one-1": "e-pairs", "pair": "e-pairs"},
	}, {
		name:  "a DRA claim takes a DRA node's GPU; the GPU resource finds none there",
		nodes: []sim.NodeSpec{dra, cheap},
		pods:  []Pod{{Name: "claim", CPUMilli: 1000, ClaimGPUs: 1}, pod("whole", 2, nil)},
		want:  map[string]string{"claim": "f-dra", "whole": "a-cheap"},
	}, {
		name:  "a DRA claim for a MIG device takes a DRA node's, and the mixed strategy's resource only the device plugin's",
		nodes: []sim.NodeSpec{draMIG, mixed},
		pods: []Pod{{Name: "claim", CPUMilli: 1000, ClaimMIG: map[string]int{"3g.40gb": 1}},
			pod("slice", 0, map[string]int{"3g.40gb": 1})},
		want: map[string]string{"claim": "g-dra-mig", "slice": "c-mixed"},
	}, {
		name:     "a DRA claim for a MIG device finds none on a node of the mixed strategy",
		nodes:    []sim.NodeSpec{mixed},
		pods:     []Pod{{Name: "claim", CPUMilli: 1000, ClaimMIG: map[string]int{"1g.10gb": 1}}},
		unplaced: true,
	}, {
		name:  "a DRA claim for a MIG device adds its slice share of the GPU's busy watts",
		nodes: []sim.NodeSpec{draMIG},
		pods:  []Pod{{Name: "claim", CPUMilli: 1000, ClaimMIG: map[string]int{"2g.20gb": 1}}},
		want:  map[string]string{"claim": "g-dra-mig"},
		wantWatts: func() float64 {
			s := draMIG.WithDefaults()
			return s.EstimatedWattsShare(s.BaseUtilization+1.0/32, 2.0/7) - s.EstimatedWattsShare(s.BaseUtilization, 0)
		},
	}, {
		name:  "a pinned pod goes to its node only",
		nodes: []sim.NodeSpec{cheap, pairs},
		pods:  []Pod{{Name: "pinned", CPUMilli: 1000, GPUs: 1, Node: "e-pairs"}},
		want:  map[string]string{"pinned": "e-pairs"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Solve(Fleet{Nodes: tc.nodes}, tc.pods, Options{})
			if tc.unplaced {
				if len(res.Unplaced) == 0 {
					t.Fatalf("Solve placed every pod (%v), want some unplaced", res.Nodes)
				}
				return
			}
			if diff := cmp.Diff(tc.want, res.Nodes); diff != "" {
				t.Fatalf("Solve() nodes mismatch (-want +got):\n%s", diff)
			}
			if tc.wantWatts != nil {
				if want := tc.wantWatts() * DefaultHorizon; math.Abs(res.Joules-want) > 1e-3 {
					t.Errorf("Solve() joules = %.3f, want %.3f", res.Joules, want)
				}
			}
		})
	}
}
