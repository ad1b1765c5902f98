// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/sandbox/hosttree"
)

func testNode(t *testing.T) *Node {
	t.Helper()
	gpu := func(numa int) GPUSpec {
		return GPUSpec{IdleWatts: 50, TDPWatts: 400, NUMANode: numa, PCIAddress: "0000:07:00.0"}
	}
	n, err := NewNode(t.TempDir(), NodeSpec{
		Name: "n", BaseUtilization: 0.1,
		Host:           hosttree.Spec{CPUs: 8, NUMANodes: 2, Packages: 1, MemoryKiB: 1 << 20, IdleWatts: 100, FullLoadWatts: 300, CritMilliCelsius: 100_000},
		CelsiusPerWatt: 0.15,
		// GPUs 0 and 2 on NUMA 0, 1 and 3 on NUMA 1.
		GPUs: []GPUSpec{gpu(0), gpu(1), gpu(0), gpu(1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGPUsTakenOnOneNUMANode(t *testing.T) {
	n := testNode(t)
	// 2 GPUs fit on NUMA 0: 0 and 2, not 0 and 1.
	if diff := cmp.Diff([]int{0, 2}, n.AddPod("a", 0, 2)); diff != "" {
		t.Errorf("first pod's GPUs (-want +got):\n%s", diff)
	}
	// 2 left, both on NUMA 1.
	if diff := cmp.Diff([]int{1, 3}, n.AddPod("b", 0, 2)); diff != "" {
		t.Errorf("second pod's GPUs (-want +got):\n%s", diff)
	}
	if got := n.BusyGPUs(); got != 4 {
		t.Errorf("BusyGPUs = %d, want 4", got)
	}
	n.RemovePod("a")
	n.RemovePod("b")
	if got := n.BusyGPUs(); got != 0 {
		t.Errorf("BusyGPUs after both pods left = %d, want 0", got)
	}
	n.AddPod("c", 0, 1) // GPU 0
	// 3 GPUs: no NUMA node has 3 free (NUMA 0 has 1, NUMA 1 has 2): split.
	if diff := cmp.Diff([]int{2, 1, 3}, n.AddPod("d", 0, 3)); diff != "" {
		t.Errorf("split pod's GPUs (-want +got):\n%s", diff)
	}
}

func TestUtilizationAndWatts(t *testing.T) {
	n := testNode(t)
	n.AddPod("a", 2000, 1)
	// 0.1 base + 2 CPUs / 8 = 0.35.
	if got := n.Utilization(); got != 0.35 {
		t.Errorf("utilization = %v, want 0.35", got)
	}
	n.Sweep(0.9)
	if got := n.Utilization(); got != 0.9 {
		t.Errorf("utilization while sweeping = %v, want 0.9", got)
	}
	n.EndSweep()
	// CPU: the line 100 + 200 × 0.5 = 200 W plus leakage 0.2 W/°C above
	// 40°C, at T = 30 + 0.15 × P: T = (30 + 0.15 × (200 − 8)) / (1 −
	// 0.03). GPUs: one busy 50 + 350 × 0.95 =
	// 382.5, three idle 3 × 50 = 150.
	wantT := (30 + 0.15*(200-0.2*40)) / (1 - 0.15*0.2)
	wantP := 200 + 0.2*(wantT-40)
	if got := n.Spec.EstimatedWatts(0.5, 1); math.Abs(got-(wantP+382.5+150)) > 1e-3 {
		t.Errorf("EstimatedWatts(0.5, 1) = %v, want %v", got, wantP+532.5)
	}
	if c, w := n.Spec.Steady(0.5, 10); math.Abs(c-(wantT+10/0.97)) > 1e-3 || w <= wantP {
		t.Errorf("Steady with 10°C of fault heat = %.2f°C %.1f W, want %.2f°C and more power", c, w, wantT+10/0.97)
	}
}

// TestCurve: a node on a SPECpower curve reads it linearly between points.
func TestCurve(t *testing.T) {
	spec := NodeSpec{Curve: [11]float64{52.3, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457}}.WithDefaults()
	for _, tc := range []struct{ u, want float64 }{{0, 52.3}, {0.05, 90.65}, {0.75, 318}, {1, 457}, {1.5, 457}} {
		if got := spec.CurveWatts(tc.u); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("CurveWatts(%v) = %v, want %v", tc.u, got, tc.want)
		}
	}
}

// Joules is the node's power beyond its base load over each stretch in
// which the same loads run: a service for the horizon, each finite load
// from its start for its seconds.
func TestJoules(t *testing.T) {
	spec := testNode(t).Spec.WithDefaults() // 8 CPUs, 0.1 base load, 4 GPUs
	base := spec.EstimatedWattsShare(0.1, 0)
	at := func(cpu, busy float64) float64 { return spec.EstimatedWattsShare(0.1+cpu/8000, busy) - base }
	svc := Run{CPUMilli: 2000}
	job := Run{CPUMilli: 1000, Busy: 1, Seconds: 600}
	late := Run{CPUMilli: 1000, Busy: 1, Seconds: 600, Start: 3300}
	for _, tc := range []struct {
		name   string
		finite []Run
		want   float64
	}{
		{"a service alone", nil, 3600 * at(2000, 0)},
		{"a job within the hour", []Run{job}, 600*at(3000, 1) + 3000*at(2000, 0)},
		{"a job past the hour", []Run{late}, 3300*at(2000, 0) + 300*at(3000, 1) + 300*at(1000, 1)},
	} {
		if got := spec.Joules(svc, 3600, tc.finite); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s: %.3f J, want %.3f J", tc.name, got, tc.want)
		}
	}
	if got := spec.Joules(Run{}, 3600, nil); got != 0 {
		t.Errorf("nothing running: %.3f J, want 0", got)
	}
}
