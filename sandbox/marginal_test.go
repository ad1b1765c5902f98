// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/sandbox/hosttree"
	"github.com/telesched/telesched/sandbox/sim"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// node is a node's telemetry with a published curve of 100 W at idle,
// rising 20 W each 10 % to 20 %, then 40 W each 10 %.
func curveNode(cores int32, cpuPercent int32) *telemetry.Node {
	m := &telemetry.Models{CurveBasis: telemetry.BasisFitted}
	for k := range m.Watts {
		m.Watts[k] = 100 + 20*float64(min(k, 2)) + 40*float64(max(k-2, 0))
	}
	return &telemetry.Node{Name: "n", HasPower: true, HasCPU: true, LogicalCores: cores, CPUPercent: cpuPercent, Models: m}
}

// TestLearnedMarginal: the learned watts are the published curve at the
// load the scheduler estimates (the sample's plus the pods placed since)
// with the pod minus without, plus the GPUs' busy-minus-idle power.
func TestLearnedMarginal(t *testing.T) {
	gpuNode := curveNode(10, 10)
	gpuNode.GPUs = make([]telemetry.GPU, 4)
	gpuNode.Models.GPUBasis, gpuNode.Models.GPUIdleWatts, gpuNode.Models.GPUBusyWatts = telemetry.BasisFitted, 50, 300
	for _, tc := range []struct {
		name                string
		node                *telemetry.Node
		cpu, reserved, gpus int64
		want                float64
		wantOK              bool
	}{
		// 10 cores at 10 %: 1 CPU takes it to 20 %: 120 -> 140 W.
		{name: "from the sample's load", node: curveNode(10, 10), cpu: 1000, want: 20, wantOK: true},
		// 10 % + 1 reserved CPU = 20 %; the pod takes it to 30 %: 140 -> 180 W.
		{name: "after the pods placed since", node: curveNode(10, 10), cpu: 1000, reserved: 1000, want: 40, wantOK: true},
		// 1 CPU 10 -> 20 % (+20 W) and 2 GPUs of 300 - 50 W.
		{name: "with GPUs", node: gpuNode, cpu: 1000, gpus: 2, want: 20 + 2*250, wantOK: true},
		{name: "no curve", node: &telemetry.Node{HasPower: true, HasCPU: true, LogicalCores: 10}, cpu: 1000},
		{name: "no telemetry", cpu: 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := learnedMarginal(tc.node, estimate.Demand{CPUMilli: tc.cpu, GPUs: tc.gpus}, tc.reserved)
			if ok != tc.wantOK || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("learnedMarginal = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestPerBusyCore: "+X W per busy core" is the curve's slope at the
// node's load over its cores, not the step to the next core, which on a
// node of few cores reaches into the next segments.
func TestPerBusyCore(t *testing.T) {
	for _, tc := range []struct {
		name              string
		cores, cpuPercent int32
		want              float64
	}{
		// 15 %: the 10-20 % segment, 20 W per 10 % = 200 W per unit, over 10 cores.
		{name: "flat segment", cores: 10, cpuPercent: 15, want: 20},
		// 4 cores at 15 %: still 200 W per unit / 4; the step to 40 %
		// would have said (220 - 130) = 90 W.
		{name: "few cores", cores: 4, cpuPercent: 15, want: 50},
		// 50 %: 400 W per unit / 10.
		{name: "steep segment", cores: 10, cpuPercent: 50, want: 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := perBusyCore(curveNode(tc.cores, tc.cpuPercent))
			if !ok || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("perBusyCore = %v, %v; want %v", got, ok, tc.want)
			}
		})
	}
	n := curveNode(4, 15)
	n.Watts = 130
	if got, want := describe(n), "cpu 15%, 130W, +50.0W per busy core (fitted)"; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
	if _, ok := perBusyCore(&telemetry.Node{HasCPU: true, LogicalCores: 4}); ok {
		t.Error("perBusyCore without a curve: ok")
	}
}

// TestTrueMarginal: the true watts are the simulation's steady power with
// the pod minus without: the curve step plus the leakage its heat adds,
// and a busy GPU's power over an idle one's per GPU.
func TestTrueMarginal(t *testing.T) {
	spec := sim.NodeSpec{
		Host: hosttree.Spec{CPUs: 10, IdleWatts: 100, FullLoadWatts: 200, CritMilliCelsius: 100_000},
		GPUs: []sim.GPUSpec{{IdleWatts: 50, TDPWatts: 400}, {IdleWatts: 50, TDPWatts: 400}},
	}.WithDefaults()
	// The line 100 -> 200 W: 1 CPU of 10 is 10 W, and the leakage: 0.2
	// W/°C × the °C those 10 W (and their leakage) add.
	cpuOnly := trueMarginal(spec, 0.5, 0, 1000, 0)
	want := 10 / (1 - spec.LeakageWattsPerCelsius*spec.CelsiusPerWatt)
	if math.Abs(cpuOnly-want) > 1e-3 {
		t.Errorf("1 CPU: %.4f W, want %.4f W (10 W and its leakage)", cpuOnly, want)
	}
	// A GPU pod with no CPU: (400 - 50) × 0.95 per GPU.
	if got := trueMarginal(spec, 0.5, 0, 0, 2); math.Abs(got-2*350*sim.GPUBusyUtilization) > 1e-6 {
		t.Errorf("2 GPUs: %.2f W, want %.2f W", got, 2*350*sim.GPUBusyUtilization)
	}
	// Past full load the curve is flat: nothing more.
	if got := trueMarginal(spec, 1, 0, 1000, 0); math.Abs(got) > 1e-9 {
		t.Errorf("past 100 %%: %v W", got)
	}
}

// TestUnseenMilli: the pods placed on the node count until a sample
// seen the hold after them, unless deleted, and only while the sample was
// taken less than two intervals after them (the energy ranking's load).
func TestUnseenMilli(t *testing.T) {
	t0 := time.Now()
	placed := []Placement{
		{Pod: "old", Node: "n", At: t0, PodCPUMilli: 1000},
		{Pod: "shown", Node: "n", At: t0.Add(8 * time.Second), PodCPUMilli: 2000},
		{Pod: "recent", Node: "n", At: t0.Add(10500 * time.Millisecond), PodCPUMilli: 16000},
		{Pod: "deleted", Node: "n", At: t0.Add(9 * time.Second), PodCPUMilli: 4000},
		{Pod: "elsewhere", Node: "m", At: t0.Add(9 * time.Second), PodCPUMilli: 8000},
	}
	bound := func(pod string) bool { return pod != "deleted" }
	// Seen at t0 + 12 s with a 10 s hold: "old" retired (12 s), "shown"
	// and "recent" still reserved (4 s, 1.5 s).
	if got := unseenMilli(placed, "n", t0.Add(12*time.Second), 10*time.Second, time.Time{}, time.Second, bound); got != 18000 {
		t.Errorf("no sample time: unseen = %d, want 18000", got)
	}
	// Taken at t0 + 11.5 s, 1 s intervals: "shown" ran 3.5 s before it,
	// "recent" 1 s.
	if got := unseenMilli(placed, "n", t0.Add(12*time.Second), 10*time.Second, t0.Add(11500*time.Millisecond), time.Second, bound); got != 16000 {
		t.Errorf("unseen = %d, want 16000", got)
	}
}

// TestMarginalErrors: the median absolute error over the placements with
// both values, GPU pods apart; too small a true value is left out.
func TestMarginalErrors(t *testing.T) {
	ps := []Placement{
		{HasTrue: true, HasLearned: true, TrueWatts: 10, LearnedWatts: 12},              // +20 %
		{HasTrue: true, HasLearned: true, TrueWatts: 10, LearnedWatts: 9},               // -10 %
		{HasTrue: true, HasLearned: true, TrueWatts: 10, LearnedWatts: 14},              // +40 %
		{HasTrue: true, HasLearned: true, TrueWatts: 0.1, LearnedWatts: 5},              // too small
		{HasTrue: true, TrueWatts: 10},                                                  // no curve
		{HasTrue: true, HasLearned: true, TrueWatts: 100, LearnedWatts: 95, PodGPUs: 4}, // -5 %
	}
	got := marginalErrors(ps)
	// all: |20|, |-10|, |40|, |-5| -> median (10 + 20) / 2 = 15; CPU: 10, 20, 40 -> 20.
	want := MarginalErrors{All: 15, CPU: 20, GPU: 5, NAll: 4, NCPU: 3, NGPU: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("marginalErrors (-want +got):\n%s", diff)
	}
	if e := marginalErrors(nil); !math.IsNaN(e.All) {
		t.Errorf("no placements: %+v, want NaN", e)
	}
}

// TestCaptured: telesched's share of the achievable saving, and no share
// where that saving is under 5 % of the default profile's watts.
func TestCaptured(t *testing.T) {
	for _, tc := range []struct {
		name             string
		tel, def, oracle float64
		want             float64
		wantOK           bool
	}{
		// (400 - 350) / (400 - 300) = 0.5
		{name: "half", tel: 350, def: 400, oracle: 300, want: 0.5, wantOK: true},
		// worse than the default: (400 - 420) / 100 = -0.2
		{name: "worse than the default", tel: 420, def: 400, oracle: 300, want: -0.2, wantOK: true},
		// achievable 19 W < 5 % of 400 W = 20 W
		{name: "too little to gain", tel: 390, def: 400, oracle: 381},
		{name: "no oracle", tel: 390, def: 400, oracle: math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := captured(tc.tel, tc.def, tc.oracle)
			if ok != tc.wantOK || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("captured = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
