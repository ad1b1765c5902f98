// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"os"
	"strings"
	"testing"

	"github.com/telesched/telesched/sandbox/sim"
)

// TestFleets: the built-in fleet, the example and the mixed-generations
// fleet parse, every node on an 11-point curve with its SPECpower result
// named, and exactly one fan fault each.
func TestFleets(t *testing.T) {
	exampleFleet, err := ReadFleet("fleets/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	example, defaults := exampleFleet.Nodes, DefaultFleet().Nodes
	for name, specs := range map[string]int{"default": len(defaults), "example": len(example)} {
		if specs < 5 {
			t.Errorf("%s fleet has %d nodes", name, specs)
		}
	}
	if len(example) != 9 {
		t.Errorf("example fleet: %d nodes, want 9 (web x3, batch-old x2, big, edge-rack, gpu-a100, gpu-h100)", len(example))
	}
	for _, fleet := range [][]string{names(defaults), names(example)} {
		if !strings.Contains(strings.Join(fleet, ","), "gpu-") {
			t.Errorf("fleet %v has no GPU node", fleet)
		}
	}
	for _, s := range append(defaults, example...) {
		if !strings.HasPrefix(s.CurveSource, "power_ssj2008-") || s.Curve[10] <= s.Curve[0] {
			t.Errorf("%s: curve %v from %q, want a SPECpower_ssj2008 result", s.Name, s.Curve, s.CurveSource)
		}
	}
	if heaterOf(defaults) != "cpu-heater" || heaterOf(example) != "edge-rack" {
		t.Errorf("heaters: %q, %q", heaterOf(defaults), heaterOf(example))
	}
	mixedFleet, err := ReadFleet("fleets/mixed-generations.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The mixed fleet: one GPU model, CPU nodes of several SPECpower
	// results and base loads, the 2008 ones idling far above the 2012 ones.
	gpuModels, cpuCurves, bases := map[string]bool{}, map[string]bool{}, map[float64]bool{}
	idle := map[string]float64{}
	for _, s := range mixedFleet.Nodes {
		if !strings.HasPrefix(s.CurveSource, "power_ssj2008-") {
			t.Errorf("%s: curve from %q, want a SPECpower_ssj2008 result", s.Name, s.CurveSource)
		}
		for _, g := range s.GPUs {
			gpuModels[g.Model] = true
		}
		if len(s.GPUs) == 0 {
			cpuCurves[s.CurveSource] = true
			idle[s.CurveSource] = s.Curve[0]
		}
		bases[s.BaseUtilization] = true
	}
	if len(gpuModels) != 1 || len(cpuCurves) < 4 || len(bases) < 4 {
		t.Errorf("mixed fleet: GPU models %v, CPU curves %v, base loads %v; want one GPU model, several CPU generations and base loads", gpuModels, cpuCurves, bases)
	}
	if idle["power_ssj2008-20080115-00030"] < 3*idle["power_ssj2008-20120306-00434"] {
		t.Errorf("mixed fleet: the 2008 node idles at %v W, the 2012 one at %v W", idle["power_ssj2008-20080115-00030"], idle["power_ssj2008-20120306-00434"])
	}
	if heaterOf(mixedFleet.Nodes) != "xeon-2012-heater" || len(mixedFleet.Budgets) != 3 {
		t.Errorf("mixed fleet: heater %q, %d budgets", heaterOf(mixedFleet.Nodes), len(mixedFleet.Budgets))
	}
	// Two racks with budgets in each: every node in one.
	for name, f := range map[string]*Fleet{"default": DefaultFleet(), "example": exampleFleet} {
		if len(f.Budgets) != 2 {
			t.Errorf("%s fleet: %d power budgets, want 2", name, len(f.Budgets))
		}
		for _, n := range f.Nodes {
			if n.Rack == "" {
				t.Errorf("%s fleet: node %s is in no rack", name, n.Name)
			}
		}
	}
}

func names(specs []sim.NodeSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

// TestFleetErrors: a bad fleet file is refused with the field that is
// wrong.
func TestFleetErrors(t *testing.T) {
	const node = `- name: nd
  cpus: 32
  memory: 64Gi
  powerCurve: [50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150]
`
	const gpu = `- name: g
  cpus: 64
  memory: 256Gi
  numaNodes: 2
  powerCurve: [50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150]
  gpus: {type: a100, count: 8, perNUMA: 4}
`
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown field", "nodes:\n" + node + "  colour: red\n" + gpu, `unknown field "colour"`},
		{"no nodes", "nodes: []\n", "nodes: at least one node"},
		{"short curve", "nodes:\n" + strings.Replace(node, "140, 150]", "140]", 1) + gpu, "nodes[0].powerCurve: 10 values, want 11"},
		{"falling curve", "nodes:\n" + strings.Replace(node, "[50, 60", "[50, 40", 1) + gpu, "nodes[0].powerCurve[1]"},
		{"bad name", "nodes:\n" + strings.Replace(node, "name: nd", "name: N_1", 1) + gpu, "nodes[0].name"},
		{"cpus over NUMA", "nodes:\n" + strings.Replace(node, "cpus: 32", "cpus: 33\n  numaNodes: 2", 1) + gpu, "nodes[0].cpus"},
		{"bad memory", "nodes:\n" + strings.Replace(node, "64Gi", "lots", 1) + gpu, "nodes[0].memory"},
		{"base load", "nodes:\n" + node + "  baseUtilizationPercent: 120\n" + gpu, "nodes[0].baseUtilizationPercent"},
		{"GPU type", "nodes:\n" + node + strings.Replace(gpu, "a100", "v100", 1), `nodes[1].gpus.type: "v100"`},
		{"GPUs over NUMA", "nodes:\n" + node + strings.Replace(gpu, "perNUMA: 4", "perNUMA: 2", 1), "nodes[1].gpus.perNUMA"},
		{"no GPU node for the GPU pods", "nodes:\n" + node, "the fleet has room for 0"},
		// 4 GPUs, 4 per NUMA node: one training pod fits, the second not.
		{"room for one GPU pod", "nodes:\n" + node + strings.Replace(gpu, "count: 8", "count: 4", 1), "the fleet has room for 1"},
		{"two fan faults", "nodes:\n" + node + "  fanFault: true\n  count: 2\n" + gpu, "2 nodes have a fan fault"},
		{"duplicate name", "nodes:\n" + node + node + gpu, `node "nd" is named twice`},
		{"time constant", "nodes:\n" + node + "  thermal: {timeConstant: soon}\n" + gpu, "nodes[0].thermal.timeConstant"},
		{"budget of an empty rack", "nodes:\n" + node + "  rack: r1\n" + gpu + "powerBudgets:\n- {name: r2, rack: r2, budgetWatts: 1000}\n", `powerBudgets[0].rack: no node is in rack "r2"`},
		{"zero budget", "nodes:\n" + node + "  rack: r1\n" + gpu + "powerBudgets:\n- {name: r1, rack: r1, budgetWatts: 0}\n", "powerBudgets[0].budgetWatts: 0 must be at least 1"},
		{"reserve over budget", "nodes:\n" + node + "  rack: r1\n" + gpu + "powerBudgets:\n- {name: r1, rack: r1, budgetWatts: 100, reserveWatts: 100}\n", "powerBudgets[0].reserveWatts: 100"},
		{"bad rack", "nodes:\n" + node + "  rack: r 1\n" + gpu, `nodes[0].rack: "r 1"`},
		{"runaway leakage", "nodes:\n" + node + "  thermal: {celsiusPerWatt: 1, leakageWattsPerCelsius: 0.6}\n" + gpu, "nodes[0].thermal.leakageWattsPerCelsius"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFleet([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseFleet = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := ParseFleet([]byte("nodes:\n" + node + gpu)); err != nil {
		t.Errorf("a good fleet was refused: %v", err)
	}
	if _, err := ReadFleet("fleets/missing.yaml"); err == nil || !os.IsNotExist(err) && !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// TestAlignedSlots: the fleet check counts the pods of count GPUs each a
// node holds on one NUMA node each, and the baseline's GPU pods take GPUs
// as the simulation does, so a second pod on a node is aligned only where
// the first left a whole NUMA node's worth.
func TestAlignedSlots(t *testing.T) {
	eight, err := ParseFleet([]byte(`nodes:
- name: g
  cpus: 64
  memory: 256Gi
  numaNodes: 2
  powerCurve: [50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150]
  gpus: {type: a100, count: 8, perNUMA: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	spec := eight.Nodes[0]
	if got := alignedSlots(spec, 4); got != 2 {
		t.Errorf("alignedSlots(8 GPUs, 4 per NUMA node; pods of 4) = %d, want 2", got)
	}
	if got := alignedSlots(spec, 3); got != 2 { // 4/3 + 4/3 = 1 + 1
		t.Errorf("alignedSlots(pods of 3) = %d, want 2", got)
	}
	busy := make([]bool, len(spec.GPUs))
	// 4 on NUMA 0, 4 on NUMA 1, then nothing left: the third is not aligned.
	for i, want := range []bool{true, true, false} {
		if got := aligned(spec, sim.TakeGPUs(spec, busy, 4)); got != want {
			t.Errorf("pod %d of 4 GPUs: aligned %v, want %v (busy %v)", i, got, want, busy)
		}
	}
}

// TestSlicePodAlignment: a pod of MIG devices is NUMA-aligned when the
// GPUs its devices sit on share a NUMA node: the report called every
// training pod on a single-strategy node "NOT on one NUMA node", since it
// looked at whole GPUs only and such a pod has none.
func TestSlicePodAlignment(t *testing.T) {
	spec := sim.NodeSpec{GPUs: []sim.GPUSpec{{NUMANode: 0}, {NUMANode: 0}, {NUMANode: 1}}}
	for _, tc := range []struct {
		name   string
		slices []sim.Slice
		want   bool
	}{
		{name: "4 devices of one GPU", slices: []sim.Slice{{GPU: 0, Device: 0}, {GPU: 0, Device: 1}, {GPU: 0, Device: 2}, {GPU: 0, Device: 3}}, want: true},
		{name: "devices of two GPUs on one NUMA node", slices: []sim.Slice{{GPU: 0, Device: 6}, {GPU: 1, Device: 0}}, want: true},
		{name: "devices on both NUMA nodes", slices: []sim.Slice{{GPU: 1, Device: 6}, {GPU: 2, Device: 0}}, want: false},
		{name: "none", want: false},
	} {
		if got := aligned(spec, sliceGPUs(tc.slices)); got != tc.want {
			t.Errorf("%s: aligned = %v, want %v", tc.name, got, tc.want)
		}
	}
}
