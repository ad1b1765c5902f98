// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/sandbox/hosttree"
	"github.com/telesched/telesched/sandbox/sim"
)

// curves are SPECpower_ssj2008 results the fleets use.
var (
	curveR740  = [11]float64{52.3, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457}
	curveR830  = [11]float64{86.4, 181, 215, 253, 287, 315, 340, 377, 421, 483, 562}
	curve2008  = [11]float64{216, 221, 227, 235, 245, 258, 270, 282, 294, 307, 315}
	curveR620  = [11]float64{54.1, 78.4, 88.5, 99.5, 115, 126, 143, 165, 196, 226, 243}
	curveX5670 = [11]float64{66, 107, 120, 131, 143, 156, 173, 191, 211, 229, 247}
)

// a100 is the sandbox's A100 as the oracle sees it: its watts idle and
// busy (sim.NodeSpec.EstimatedWatts).
var a100 = sim.GPUSpec{Model: "NVIDIA A100-SXM4-40GB", MemoryBytes: 40 << 30, IdleWatts: 55, TDPWatts: 400}

// fleetNode is a simulated node as a sandbox fleet file gives it (4 GiB
// a CPU, a package per NUMA node, a critical limit of 100°C).
func fleetNode(name, rack string, cpus, numa int, curve [11]float64, basePercent float64, opts ...func(*sim.NodeSpec)) sim.NodeSpec {
	n := sim.NodeSpec{
		Name: name, Rack: rack, BaseUtilization: basePercent / 100, Curve: curve,
		Host: hosttree.Spec{
			CPUs: cpus, NUMANodes: numa, Packages: numa, MemoryKiB: int64(cpus) * 4 << 20,
			IdleWatts: curve[0], FullLoadWatts: curve[10], CritMilliCelsius: 100_000,
		},
	}
	for _, o := range opts {
		o(&n)
	}
	return n
}

// withGPUs gives a node count A100s, perNUMA on each NUMA node in turn.
func withGPUs(count, perNUMA int) func(*sim.NodeSpec) {
	return func(n *sim.NodeSpec) {
		for i := range count {
			g := a100
			g.NUMANode = i / perNUMA
			n.GPUs = append(n.GPUs, g)
		}
	}
}

// withThermal gives a node its room's temperature and its cooling.
func withThermal(ambientCelsius, celsiusPerWatt float64) func(*sim.NodeSpec) {
	return func(n *sim.NodeSpec) { n.AmbientCelsius, n.CelsiusPerWatt = ambientCelsius, celsiusPerWatt }
}

// testFleet is nodes and budgets, plus a GPU node the tests' pods may use
// or not (a sandbox fleet has room for the scenario's GPU pods).
func testFleet(nodes []sim.NodeSpec, budgets ...Budget) Fleet {
	return Fleet{Nodes: append(nodes, fleetNode("zz-gpu", "zz", 64, 2, curveR740, 10, withGPUs(8, 4))), Budgets: budgets}
}

// nodes is its arguments as a list.
func nodes(ns ...sim.NodeSpec) []sim.NodeSpec { return ns }

// pod is a pod of cpus CPUs and memGiB GiB.
func pod(name string, cpus, memGiB int64) Pod {
	return Pod{Name: name, CPUMilli: cpus * 1000, MemoryBytes: memGiB << 30}
}

func cpuPods(prefix string, n int, cpus int64) []Pod {
	var out []Pod
	for i := range n {
		out = append(out, pod(fmt.Sprintf("%s-%d", prefix, i), cpus, 1))
	}
	return out
}

// TestOracleConstraints: the oracle places each pod where it costs the
// fewest true watts that every hard constraint allows.
func TestOracleConstraints(t *testing.T) {
	gpuPod := Pod{Name: "train", CPUMilli: 4000, MemoryBytes: 8 << 30, GPUs: 4, SingleNUMA: true}
	for _, tc := range []struct {
		name    string
		nodes   []sim.NodeSpec
		budgets []Budget
		pods    []Pod
		opts    Options
		want    map[string]string // pod -> node
	}{
		{
			// 2 CPUs: on the 2008 curve at 25 % of 8 CPUs, 25 -> 50 %,
			// 231 -> 258 W; on the R740 curve at 10 % of 64 CPUs, 10 ->
			// 13.1 %, 129 -> 134.6 W. The 64-CPU node wins.
			name:  "the cheaper marginal watts",
			nodes: nodes(fleetNode("a-old", "r", 8, 1, curve2008, 25), fleetNode("b-new", "r", 64, 1, curveR740, 10)),
			pods:  cpuPods("p", 1, 2),
			opts:  Options{CPUPodsOffGPUNodes: true},
			want:  map[string]string{"p-0": "b-new"},
		},
		{
			// The same, with the new node's rack budget just over its 130.2
			// W without pods: the pod must go to the old node.
			name:    "a rack's budget",
			nodes:   nodes(fleetNode("a-old", "r1", 8, 1, curve2008, 25), fleetNode("b-new", "r2", 64, 1, curveR740, 10)),
			budgets: []Budget{{Rack: "r2", BudgetWatts: 132}},
			pods:    cpuPods("p", 1, 2),
			opts:    Options{CPUPodsOffGPUNodes: true},
			want:    map[string]string{"p-0": "a-old"},
		},
		{
			// 78 % base: a 2-CPU pod on 64 CPUs is 3.1 % more, past
			// LoadAware's 80 %; the costlier node takes it.
			name:  "LoadAware's threshold",
			nodes: nodes(fleetNode("a-old", "r", 8, 1, curve2008, 25), fleetNode("b-busy", "r", 64, 1, curveR740, 78)),
			pods:  cpuPods("p", 1, 2),
			opts:  Options{CPUPodsOffGPUNodes: true},
			want:  map[string]string{"p-0": "a-old"},
		},
		{
			// 8 CPUs on the warm R740 node, 30 -> 42.5 %, add about 34 W
			// and on the R830 node, 25 -> 50 % of 32 CPUs, 81 W; but the
			// warm node would settle at 40 + 0.3 × 202 W / (1 - 0.3 × 0.2)
			// = 104°C, past 100 - 5.
			name:  "the thermal limit",
			nodes: nodes(fleetNode("a-legacy", "r", 32, 1, curveR830, 25), fleetNode("b-warm", "r", 64, 1, curveR740, 30, withThermal(40, 0.3))),
			pods:  cpuPods("p", 1, 8),
			opts:  Options{CPUPodsOffGPUNodes: true},
			want:  map[string]string{"p-0": "a-legacy"},
		},
		{
			// 4 GPUs on one NUMA node: the GPU node with 2 per NUMA node
			// cannot, the one with 4 per NUMA node (zz-gpu) can.
			name:  "GPUs on one NUMA node",
			nodes: nodes(fleetNode("a-gpu2", "r", 64, 2, curveR740, 10, withGPUs(4, 2))),
			pods:  []Pod{gpuPod},
			want:  map[string]string{"train": "zz-gpu"},
		},
		{
			// Single-NUMA pods of 5 and 4 CPUs: the cheaper node has 4
			// CPUs a NUMA node, so the 5-CPU pod goes to the costlier
			// one-NUMA node, and the 4-CPU pod (which does not fit beside
			// it, 9 > 8) to the cheaper.
			name:  "CPUs on one NUMA node",
			nodes: nodes(fleetNode("a-cheap", "r", 8, 2, curveR620, 0), fleetNode("b-costly", "r", 8, 1, curveR830, 0)),
			pods:  []Pod{{Name: "five", CPUMilli: 5000, MemoryBytes: 1 << 30, SingleNUMA: true}, {Name: "four", CPUMilli: 4000, MemoryBytes: 1 << 30, SingleNUMA: true}},
			opts:  Options{CPUPodsOffGPUNodes: true},
			want:  map[string]string{"five": "b-costly", "four": "a-cheap"},
		},
		{
			name:  "CPU pods off GPU nodes",
			nodes: nodes(fleetNode("a-old", "r", 8, 1, curve2008, 25)),
			pods:  cpuPods("p", 2, 1),
			opts:  Options{CPUPodsOffGPUNodes: true},
			want:  map[string]string{"p-0": "a-old", "p-1": "a-old"},
		},
		{
			// 1 CPU: +2.8 W on zz-gpu's 64 CPUs at 10 %, +6.5 W on a-old.
			name:  "CPU pods on GPU nodes' cheap CPUs",
			nodes: nodes(fleetNode("a-old", "r", 8, 1, curve2008, 25)),
			pods:  cpuPods("p", 2, 1),
			want:  map[string]string{"p-0": "zz-gpu", "p-1": "zz-gpu"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Solve(testFleet(tc.nodes, tc.budgets...), tc.pods, tc.opts)
			if len(got.Unplaced) > 0 {
				t.Fatalf("unplaced: %v", got.Unplaced)
			}
			if diff := cmp.Diff(tc.want, got.Nodes); diff != "" {
				t.Errorf("placement (-want +got):\n%s", diff)
			}
			if !(got.LowerBound <= got.Joules+1e-6) {
				t.Errorf("lower bound %v above the oracle's %v", got.LowerBound, got.Joules)
			}
		})
	}
}

// TestOracleUnplaced: a pod no node can take is reported, not forced.
func TestOracleUnplaced(t *testing.T) {
	f := testFleet(nodes(fleetNode("a-old", "r", 8, 1, curve2008, 25)))
	got := Solve(f, []Pod{pod("huge", 100, 1)}, Options{})
	if diff := cmp.Diff([]string{"huge"}, got.Unplaced); diff != "" {
		t.Errorf("unplaced (-want +got):\n%s", diff)
	}
	if !math.IsNaN(got.Joules) || !got.Infeasible {
		t.Errorf("joules = %v, infeasible %v; want NaN and proven infeasible", got.Joules, got.Infeasible)
	}
	// A GPU pod whose GPUs alone take the GPU node's rack over its budget
	// (zz-gpu draws about 580 W idle, a 4-GPU pod adds 1.3 kW): proven.
	train := Pod{Name: "train", CPUMilli: 4000, MemoryBytes: 8 << 30, GPUs: 4, SingleNUMA: true}
	f = testFleet(nodes(fleetNode("a-old", "r", 8, 1, curve2008, 25)), Budget{Rack: "zz", BudgetWatts: 1200})
	got = Solve(f, []Pod{train, pod("web", 1, 1)}, Options{})
	if diff := cmp.Diff([]string{"train"}, got.Unplaced); diff != "" || !got.Infeasible {
		t.Errorf("unplaced (-want +got):\n%s\ninfeasible %v, want true", diff, got.Infeasible)
	}
	// The same with room for it: placed, and not infeasible.
	f = testFleet(nodes(fleetNode("a-old", "r", 8, 1, curve2008, 25)), Budget{Rack: "zz", BudgetWatts: 2200})
	if got := Solve(f, []Pod{train}, Options{}); len(got.Unplaced) > 0 || got.Infeasible {
		t.Errorf("with room: %+v", got)
	}
}
