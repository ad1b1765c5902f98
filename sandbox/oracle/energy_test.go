// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import (
	"math"
	"testing"

	"github.com/telesched/telesched/sandbox/sim"
)

// Must show (2): the oracle no longer swaps four whole GPUs for four
// slices. Two nodes alike but for their GPUs: 8 whole A100s, and 8 A100s
// of the single MIG strategy cut into 1g.10gb devices (the GPU resource
// counts those). A training job of 4 GPUs and 16 CPUs, an hour's work on
// four reference GPUs, costs 4/7 of one GPU's watts on four devices
// (about 184 W against 1.3 kW): the watts objective put it there. On
// them it runs at 1/7 of the pace, seven hours, and its GPU energy per
// unit of work is the same as on whole GPUs while its 16 CPUs draw seven
// times as long: the joules objective keeps it on whole GPUs. Before
// (the objective in watts, no work; the same test without Seconds):
//
//	energy_old_test.go:16: the training job went to b-slices, want a-whole: four 1g devices for four GPUs' work cost 7 times the time
func TestOracleKeepsWholeGPUsForWholeGPUWork(t *testing.T) {
	whole := fleetNode("a-whole", "", 64, 2, curveR740, 10, withGPUs(8, 4))
	slices := fleetNode("b-slices", "", 64, 2, curveR740, 10, withGPUs(8, 4),
		withMIG(sim.MIGSingle, "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"))
	job := Pod{Name: "train", CPUMilli: 16000, MemoryBytes: 64 << 30, GPUs: 4, SingleNUMA: true, Seconds: 3600}
	res := Solve(Fleet{Nodes: []sim.NodeSpec{whole, slices}}, []Pod{job}, Options{})
	if got := res.Nodes["train"]; got != "a-whole" {
		t.Errorf("the training job went to %s, want a-whole: four 1g devices for four GPUs' work cost 7 times the time", got)
	}
	pl := Place(Fleet{Nodes: []sim.NodeSpec{whole, slices}}, []Pod{job}, map[string]string{"train": "b-slices"})
	onWhole := Place(Fleet{Nodes: []sim.NodeSpec{whole, slices}}, []Pod{job}, map[string]string{"train": "a-whole"})
	if s := pl.Seconds()["train"]; s < 7*3600-1 || s > 7*3600+1 {
		t.Errorf("on four 1g devices the job runs %.0f s, want 7 hours", s)
	}
	if !(pl.Watts(nil) < onWhole.Watts(nil) && pl.Joules(false, nil) > onWhole.Joules(false, nil)) {
		t.Errorf("slices: %.0f W, %.0f J; whole GPUs: %.0f W, %.0f J: want the slices cheaper in watts and dearer in joules",
			pl.Watts(nil), pl.Joules(false, nil), onWhole.Watts(nil), onWhole.Joules(false, nil))
	}
}

// a100AndH100Nodes are two nodes of rack alike but for their 8 GPUs,
// 4 a NUMA node: A100 80GBs (400 W, the reference's speed) and H100s
// (700 W, 2.06 times an A100's training work).
func a100AndH100Nodes(rack string) (a, h sim.NodeSpec) {
	h100 := sim.GPUSpec{Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, IdleWatts: 70, TDPWatts: 700, Speed: 2.06}
	a100x80 := sim.GPUSpec{Model: "NVIDIA A100-SXM4-80GB", MemoryBytes: 80 << 30, IdleWatts: 60, TDPWatts: 400, Speed: 1}
	gpus := func(g sim.GPUSpec) func(*sim.NodeSpec) {
		return func(n *sim.NodeSpec) {
			for i := range 8 {
				x := g
				x.NUMANode = i / 4
				n.GPUs = append(n.GPUs, x)
			}
		}
	}
	return fleetNode("a-a100", rack, 64, 2, curveR740, 10, gpus(a100x80)), fleetNode("h-h100", rack, 64, 2, curveR740, 10, gpus(h100))
}

// A job goes where its work costs the fewest joules: the same node with
// H100s (2.06 times an A100's training work, 700 W) against A100s
// (400 W): per unit of work the H100's (700-70)/2.06 = 306 W beats the
// A100's 340 W, and its host's CPUs draw for less than half the time.
func TestOracleTrainsWhereWorkCostsLeast(t *testing.T) {
	a, h := a100AndH100Nodes("")
	job := Pod{Name: "train", CPUMilli: 16000, MemoryBytes: 64 << 30, GPUs: 4, SingleNUMA: true, Seconds: 3600}
	fleet := Fleet{Nodes: []sim.NodeSpec{a, h}}
	res := Solve(fleet, []Pod{job}, Options{})
	if got := res.Nodes["train"]; got != "h-h100" {
		t.Errorf("the training job went to %s, want h-h100", got)
	}
	if w := Place(fleet, []Pod{job}, map[string]string{"train": "h-h100"}).Watts(nil); !(w > Place(fleet, []Pod{job}, map[string]string{"train": "a-a100"}).Watts(nil)) {
		t.Errorf("the H100 node draws no more than the A100 node: the test shows nothing")
	}
}

// A job started after another ended draws its watts then: the fleet's
// watts are the most it draws at any start, not both jobs at once.
func TestPlacedWattsOfAQueue(t *testing.T) {
	node := fleetNode("a", "", 64, 2, curveR740, 10, withGPUs(8, 4))
	jobs := []Pod{
		{Name: "first", CPUMilli: 16000, MemoryBytes: 1 << 30, GPUs: 4, Seconds: 3600},
		{Name: "second", CPUMilli: 16000, MemoryBytes: 1 << 30, GPUs: 4, Seconds: 3600},
	}
	fleet := Fleet{Nodes: []sim.NodeSpec{node}}
	on := map[string]string{"first": "a", "second": "a"}
	together := Place(fleet, jobs, on)
	queued := Place(fleet, jobs, on).StartAt(map[string]float64{"second": 3600})
	one := Place(fleet, jobs[:1], map[string]string{"first": "a"})
	if w, want := queued.Watts(nil), one.Watts(nil); w != want {
		t.Errorf("queued: %.0f W, want one job's %.0f W", w, want)
	}
	if !(together.Watts(nil) > one.Watts(nil)) {
		t.Errorf("together %.0f W, one job %.0f W: want more together", together.Watts(nil), one.Watts(nil))
	}
	if e := queued.Ends()["second"]; e != 7200 {
		t.Errorf("the queued job ends at %.0f s, want 7200", e)
	}
}

// podBusy is what a pod keeps busy at its requests, in whole GPUs, as the
// simulation's sim.Node.BusyShare counts it.
func TestPodBusy(t *testing.T) {
	cut := func(strategy string, profiles ...sim.MIGDevice) sim.NodeSpec {
		s := sim.NodeSpec{MIGStrategy: strategy}
		for range 2 {
			s.GPUs = append(s.GPUs, sim.GPUSpec{ComputeSlices: 7, MIG: profiles})
		}
		return s
	}
	one := sim.MIGDevice{Profile: "1g.10gb", Slices: 1}
	three := sim.MIGDevice{Profile: "3g.40gb", Slices: 3}
	tests := []struct {
		name string
		spec sim.NodeSpec
		pod  Pod
		want float64
	}{
		{"whole GPUs count whole", sim.NodeSpec{GPUs: make([]sim.GPUSpec, 8)}, Pod{GPUs: 4}, 4},
		{"nvidia.com/gpu: 4 on the single strategy is 4 MIG devices", cut(sim.MIGSingle, one, one, one, one, one, one, one), Pod{GPUs: 4}, 4.0 / 7},
		{"a mixed-strategy profile counts its slices", cut(sim.MIGMixed, three, one), Pod{MIG: map[string]int{"3g.40gb": 1, "1g.10gb": 2}}, 5.0 / 7},
		{"a DRA claim's GPU counts whole", sim.NodeSpec{DRA: true, GPUs: make([]sim.GPUSpec, 2)}, Pod{ClaimGPUs: 1}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle(Fleet{Nodes: []sim.NodeSpec{tc.spec}}, []Pod{tc.pod}, Options{})
			if got := o.podBusy(0, 0); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("podBusy() = %.4f, want %.4f", got, tc.want)
			}
		})
	}
}

// With Options.Queue a job may wait for the one before it on its node,
// as telesched's queue holds a job that a rack's budget keeps pending:
// an H100 node and an A100 node in one rack whose budget runs one job at
// a time on the H100s and no two jobs at once anywhere. No placement of
// both jobs at once fits the budget; queued, both run on the H100s (the
// fewer joules for their work), the second from when the first ends, and
// the report's own measure of that schedule (Placed.StartAt) agrees with
// the oracle's and meets its bound.
func TestOracleQueuesWhatABudgetHoldsBack(t *testing.T) {
	a, h := a100AndH100Nodes("gpu")
	jobs := []Pod{
		{Name: "first", CPUMilli: 16000, MemoryBytes: 64 << 30, GPUs: 4, SingleNUMA: true, Seconds: 3600},
		{Name: "second", CPUMilli: 16000, MemoryBytes: 64 << 30, GPUs: 4, SingleNUMA: true, Seconds: 3600},
	}
	nodes := Fleet{Nodes: []sim.NodeSpec{a, h}}
	oneOnH := Place(nodes, jobs[:1], map[string]string{"first": "h-h100"}).Watts(nil)
	twoOnA := Place(nodes, jobs, map[string]string{"first": "a-a100", "second": "a-a100"}).Watts(nil)
	split := Place(nodes, jobs, map[string]string{"first": "h-h100", "second": "a-a100"}).Watts(nil)
	limit := int64(math.Ceil(oneOnH)) + 1
	if !(twoOnA > float64(limit) && split > float64(limit)) {
		t.Fatalf("the rack draws %.0f W with one job on the H100s, %.0f W with both on the A100s, %.0f W split: want only the first within %d W", oneOnH, twoOnA, split, limit)
	}
	fleet := Fleet{Nodes: nodes.Nodes, Budgets: []Budget{{Rack: "gpu", BudgetWatts: limit}}}

	if res := Solve(fleet, jobs, Options{}); len(res.Unplaced) == 0 {
		t.Errorf("at once: placed %v (%.0f J) within %d W, want no placement of both jobs at once", res.Nodes, res.Joules, limit)
	}
	res := Solve(fleet, jobs, Options{Queue: true})
	if res.Nodes["first"] != "h-h100" || res.Nodes["second"] != "h-h100" || len(res.Unplaced) > 0 {
		t.Fatalf("queued: placed %v (unplaced %v), want both jobs on h-h100", res.Nodes, res.Unplaced)
	}
	run := 3600 / 2.06
	if s := res.Starts["second"]; math.Abs(s-run) > 1 || res.Starts["first"] != 0 {
		t.Errorf("starts %v, want the first at 0 and the second at %.0f s, when the first ends", res.Starts, run)
	}
	pl := Place(fleet, jobs, res.Nodes).StartAt(res.Starts)
	if j := pl.Joules(false, nil); math.Abs(j-res.Joules) > 1 {
		t.Errorf("the schedule costs %.0f J by Placed, %.0f J by the oracle: want the same", j, res.Joules)
	}
	if w := pl.Watts(nil); w > float64(limit) {
		t.Errorf("the queued schedule draws %.0f W at its peak, past the %d W budget", w, limit)
	}
	if !(res.LowerBound <= res.Joules+1e-6 && res.Joules-res.LowerBound < 36) {
		t.Errorf("queued: %.0f J against the bound %.0f J: want it met to 36 J", res.Joules, res.LowerBound)
	}
}
