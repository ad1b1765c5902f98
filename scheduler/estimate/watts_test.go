// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"math"
	"math/rand/v2"
	"testing"

	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// r740 is the SPECpower_ssj2008 curve of result power_ssj2008-20170829-00780
// (Dell PowerEdge R740): watts at 0 %, 10 % … 100 % load. It climbs 77 W
// from idle to 10 %, then 18 W to 20 %.
var r740 = []int32{52, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457}

// r740Node is a 64-CPU node at percent CPU with the R740 curve, fitted.
func r740Node(percent int32) *telemetry.Node {
	return telemetry.FromStatus("n", &telemetryv1alpha1.NodeTelemetryStatus{
		CPU: &telemetryv1alpha1.CPUStatus{LogicalCores: 64, OnlineCores: 64, UtilizationPercent: percent},
		Power: &telemetryv1alpha1.PowerStatus{Watts: 114, Sources: []telemetryv1alpha1.PowerSource{"rapl"},
			Model: &telemetryv1alpha1.PowerModel{Ready: true, Basis: telemetryv1alpha1.PowerModelFitted,
				IdleWatts: ptr.To[int32](52), FullLoadWatts: ptr.To[int32](457), CurveWatts: r740,
				CurveUncertaintyWatts: make([]int32, len(r740))}},
	})
}

// TestAmortizedCPUWatts: a 2-CPU pod (3.125 % of 64 CPUs) on the R740 at
// 8 %, below its knee at 10 %, adds 17.4 W alone (113.6 W to 131.0 W, by
// linear interpolation between the knots); eight of them take the node to
// 33 % (177.5 W), 8.0 W each, the least of k = 1..8 (three: 9.6 W each).
// At 40 %, past the knee, the pod's own 9.06 W is the least: the curve
// only steepens.
func TestAmortizedCPUWatts(t *testing.T) {
	pod := Demand{CPUMilli: 2000}
	for _, tc := range []struct {
		name     string
		percent  int32
		reserved int64
		pods     int
		headroom int64
		want     float64
	}{
		{name: "below the knee, alone", percent: 8, pods: 1, headroom: 64_000, want: 17.425},
		{name: "below the knee, 8 pods", percent: 8, pods: 8, headroom: 64_000, want: 63.9 / 8},
		{name: "below the knee, room for 3", percent: 8, pods: 8, headroom: 6_000, want: 28.675 / 3},
		{name: "below the knee, room for none", percent: 8, pods: 8, headroom: 0, want: 17.425},
		// 4 % measured + 2.56 CPUs reserved = 8 %.
		{name: "reserved count", percent: 4, reserved: 2560, pods: 8, headroom: 64_000, want: 63.9 / 8},
		{name: "past the knee", percent: 40, pods: 8, headroom: 64_000, want: 9.0625},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := AmortizedCPUWatts(r740Node(tc.percent), pod, Demand{CPUMilli: tc.reserved}, tc.pods, tc.headroom)
			if !ok || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("AmortizedCPUWatts = %v, %v; want %v", got, ok, tc.want)
			}
			if tc.pods == 1 {
				w, _ := PodWatts(r740Node(tc.percent), pod, Demand{CPUMilli: tc.reserved})
				if math.Abs(w.Mean-got) > 1e-9 {
					t.Errorf("one pod: %v, PodWatts %v", got, w.Mean)
				}
			}
		})
	}
	if _, ok := AmortizedCPUWatts(&telemetry.Node{HasCPU: true, LogicalCores: 8, HasPower: true}, pod, Demand{}, 8, 8000); ok {
		t.Error("a node without a curve gave an estimate")
	}
}

// TestAmortizedCPUWattsIsTheLeastOverK: AmortizedCPUWatts, which takes one
// pod's watts without the walk where the curve is convex from the node's
// load, is the least over k = 1..pods of what k pods add over k, walked in
// full, on random curves (convex, concave, rising by random steps, flat
// stretches that take the floor), loads, reservations, pods and headroom.
func TestAmortizedCPUWattsIsTheLeastOverK(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var convex, walked int
	for i := range 20_000 {
		n := r740Node(rng.Int32N(101))
		w := rng.Float64() * 200
		for k := range n.Models.Watts {
			n.Models.Watts[k] = w
			switch rng.IntN(4) {
			case 0:
				w += float64(k) * rng.Float64() * 20 // steepening
			case 1:
				w += float64(10-k) * rng.Float64() * 20 // flattening
			case 2:
				w += rng.Float64() * 60
			}
		}
		d := Demand{CPUMilli: 1 + rng.Int64N(16_000)}
		reserved := Demand{CPUMilli: rng.Int64N(20_000)}
		pods, headroom := 1+rng.IntN(10), rng.Int64N(64_000)
		got, ok := AmortizedCPUWatts(n, d, reserved, pods, headroom)
		c, _ := curveFrom(n, reserved)
		want := math.Inf(1)
		for k := int64(1); k <= int64(pods); k++ {
			if k > 1 && (k*d.CPUMilli > headroom || c.u0+float64(k*d.CPUMilli)/c.capacityMilli > 1) {
				break
			}
			want = math.Min(want, c.addWatts(k*d.CPUMilli)/float64(k))
		}
		if !ok || math.Abs(got-want) > 1e-9*max(1, want) {
			t.Fatalf("case %d: AmortizedCPUWatts = %v (ok %v), the walk over k gives %v (curve %v from %.3f, pod %dm, %d pods, headroom %dm)",
				i, got, ok, want, n.Models.Watts, c.u0, d.CPUMilli, pods, headroom)
		}
		if n.Models.Watts.ConvexFrom(c.u0) {
			convex++
		} else {
			walked++
		}
	}
	if convex < 1000 || walked < 1000 {
		t.Errorf("%d cases convex from the load, %d walked: want both at least 1000", convex, walked)
	}
}

// TestFlatCurveFloor: a learned curve tied flat where the node runs (the
// 2008 Xeon of the mixed-generation fleet, 8 CPUs at 25 %: its fit
// published 227, 235 and 235 W at 20, 30 and 40 %) prices half a CPU
// there at MinSlopeShare of the curve's mean rise, 0.4 x 99 W / 16 =
// 2.475 W, not 0 W (what it said before: the node looked free, and took pods that
// cost it 16 to 28 W). Where the curve rises more, the curve's rise
// stands.
func TestFlatCurveFloor(t *testing.T) {
	flat := []int32{216, 221, 227, 235, 235, 258, 270, 282, 294, 307, 315}
	n := telemetry.FromStatus("n", &telemetryv1alpha1.NodeTelemetryStatus{
		CPU: &telemetryv1alpha1.CPUStatus{LogicalCores: 8, OnlineCores: 8, UtilizationPercent: 30},
		Power: &telemetryv1alpha1.PowerStatus{Watts: 235, Sources: []telemetryv1alpha1.PowerSource{"rapl"},
			Model: &telemetryv1alpha1.PowerModel{Ready: true, Basis: telemetryv1alpha1.PowerModelFitted,
				IdleWatts: ptr.To[int32](216), FullLoadWatts: ptr.To[int32](315), CurveWatts: flat,
				CurveUncertaintyWatts: make([]int32, len(flat))}},
	})
	// Half a CPU: 30 % to 36.25 %, on the flat stretch.
	half := Demand{CPUMilli: 500}
	w, ok := PodWatts(n, half, Demand{})
	if want := 0.4 * 99 * 0.0625; !ok || math.Abs(w.Mean-want) > 1e-9 {
		t.Errorf("half a CPU from 30 %%: %v W, %v; want the floor, %v W", w.Mean, ok, want)
	}
	if a, _ := AmortizedCPUWatts(n, half, Demand{}, 1, 8000); math.Abs(a-w.Mean) > 1e-9 {
		t.Errorf("amortized over one pod: %v W, PodWatts %v W", a, w.Mean)
	}
	// One CPU: 30 % to 42.5 %, 0 W on the flat stretch and 5.75 W past
	// 40 %: above the floor's 4.95 W, the curve's rise stands.
	if w, _ := PodWatts(n, Demand{CPUMilli: 1000}, Demand{}); math.Abs(w.Mean-5.75) > 1e-9 {
		t.Errorf("one CPU from 30 %%: %v W, want the curve's 5.75", w.Mean)
	}
	// Past 100 %: the curve ends there (311 to 315 W), and so does the
	// floor's stretch (0.4 x 99 W x 5 % = 1.98 W).
	n.CPUPercent = 95
	if w, _ := PodWatts(n, Demand{CPUMilli: 1000}, Demand{}); math.Abs(w.Mean-4) > 1e-9 {
		t.Errorf("one CPU from 95 %%: %v W, want the curve's 4 W to 100 %%", w.Mean)
	}
}
