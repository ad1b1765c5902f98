// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"math"
	"testing"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// heatByParts is Heat as PodWatts and ReservedWatts define it: the
// reserved pods' CPUs from the measured load, the pod's CPU request from
// there, each calibrated and taken at its upper estimate.
func heatByParts(b *Book, n *telemetry.Node, d, reserved Demand) Heat {
	var h Heat
	if n.Models == nil || !n.Models.HasThermal {
		return h
	}
	cpu, ok := b.PodWatts(n, Demand{CPUMilli: d.CPUMilli}, reserved)
	if !ok {
		return h
	}
	r, _ := b.ReservedWatts(n, Demand{CPUMilli: reserved.CPUMilli})
	watts, gpuWatts := n.Watts, n.GPUWatts
	if !n.HasPower {
		watts, gpuWatts = n.LastWatts, 0
	}
	h.NowWatts = float64(max(0, watts-gpuWatts))
	h.ReservedWatts, h.PodWatts = r.Upper, cpu.Upper
	h.Watts = h.NowWatts + h.ReservedWatts + h.PodWatts
	h.Predicted, h.SteadyMilli, h.LimitMilli = true, n.Models.Thermal.Steady(h.Watts), n.Models.Thermal.LimitMilli
	return h
}

// TestHeatWalksTheCurveOnce: Heat, which reads the node's curve once along
// the measured load, the reserved pods and the pod, gives what its parts
// do (heatByParts) on the R740's curve with an uncertainty band, below
// and past its knee, at full load, with and without reserved pods or a
// CPU request, on a node without watts in its sample, and calibrated
// (ratios 0.5 and 1.4, which move the upper estimates) or not.
func TestHeatWalksTheCurveOnce(t *testing.T) {
	nodes := map[string]*telemetry.Node{}
	for _, percent := range []int32{0, 4, 8, 40, 97, 100} {
		n := r740Node(percent)
		n.Models.HasThermal = true
		n.Models.Thermal = telemetry.ThermalModel{LimitMilli: 95_000, AmbientMilli: 30_000, MilliPerWatt: 120}
		for k := range n.Models.Uncertainty {
			n.Models.Uncertainty[k] = 2 + float64(k)
		}
		nodes[string(rune('a'+len(nodes)))] = n
	}
	unmetered := *nodes["c"]
	unmetered.HasPower, unmetered.HasLastWatts, unmetered.LastWatts = false, true, 140
	nodes["unmetered"] = &unmetered

	for _, ratio := range []float64{0, 0.5, 1.4} { // 0: uncalibrated
		f := newBookFixture()
		for name, n := range nodes {
			n.Name = name
			if ratio > 0 {
				e := f.book.entry(name)
				e.calibrations.Store(MinCalibrations)
				e.ratio.Store(math.Float64bits(ratio))
			}
		}
		for name, n := range nodes {
			for _, d := range []Demand{{}, {CPUMilli: 500}, {CPUMilli: 2000, GPUs: 1}, {CPUMilli: 64_000}} {
				for _, reserved := range []Demand{{}, {CPUMilli: 2560}, {CPUMilli: 40_000, GPUs: 2}} {
					want, got := heatByParts(f.book, n, d, reserved), f.book.Heat(n, d, reserved)
					if math.Abs(got.Watts-want.Watts) > 1e-9 || math.Abs(got.PodWatts-want.PodWatts) > 1e-9 ||
						math.Abs(got.ReservedWatts-want.ReservedWatts) > 1e-9 || got.NowWatts != want.NowWatts ||
						got.Predicted != want.Predicted || got.SteadyMilli != want.SteadyMilli || got.LimitMilli != want.LimitMilli {
						t.Errorf("ratio %v, node %s at %d%%, pod %+v, reserved %+v: Heat = %+v, want %+v", ratio, name, n.CPUPercent, d, reserved, got, want)
					}
				}
			}
		}
		// Without a book: uncalibrated.
		if got, want := (*Book)(nil).Heat(nodes["b"], Demand{CPUMilli: 2000}, Demand{CPUMilli: 2560}), heatByParts(nil, nodes["b"], Demand{CPUMilli: 2000}, Demand{CPUMilli: 2560}); got != want {
			t.Errorf("nil book: Heat = %+v, want %+v", got, want)
		}
	}
}

// TestPodWattsBound: the bound PowerBudget passes budgets by holds for
// every demand and reservation on curves that climb steeply first (the
// R740), evenly, flat then steep, with an uncertainty band, calibrated
// below and above 1 or not, at every load; and it is not loose by orders
// of magnitude (within 3x of the steepest step at 1 CPU, uncalibrated).
func TestPodWattsBound(t *testing.T) {
	curves := map[string][]float64{
		"r740":       {52, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457},
		"even":       {100, 180, 260, 340, 420, 500, 580, 660, 740, 820, 900},
		"flat-steep": {200, 200, 201, 201, 202, 202, 203, 203, 204, 400, 700},
	}
	for cname, knots := range curves {
		for _, percent := range []int32{0, 3, 8, 40, 85, 99, 100} {
			n := r740Node(percent)
			n.Name = cname
			copy(n.Models.Watts[:], knots)
			for k := range n.Models.Uncertainty {
				n.Models.Uncertainty[k] = float64(k % 4)
			}
			for _, ratio := range []float64{0, 0.3, 1.7} {
				f := newBookFixture()
				if ratio > 0 {
					e := f.book.entry(n.Name)
					e.calibrations.Store(MinCalibrations)
					e.ratio.Store(math.Float64bits(ratio))
				}
				perMilli, fixed, ok := f.book.PodWattsBound(n)
				if !ok {
					t.Fatalf("%s at %d%%: no bound for a metered node", cname, percent)
				}
				for _, d := range []Demand{{}, {CPUMilli: 100}, {CPUMilli: 1000}, {CPUMilli: 6400}, {CPUMilli: 64_000}, {CPUMilli: 2000, GPUs: 1}} {
					for _, reserved := range []Demand{{}, {CPUMilli: 3000}, {CPUMilli: 30_000}} {
						w, ok := f.book.PodWatts(n, d, reserved)
						bound := perMilli*float64(d.CPUMilli) + fixed + PodGPUWatts(n, d)
						if !ok || w.Upper > bound+1e-9 {
							t.Errorf("%s at %d%%, ratio %v, pod %+v, reserved %+v: PodWatts upper %v (ok %v) above the bound %v",
								cname, percent, ratio, d, reserved, w.Upper, ok, bound)
						}
					}
				}
				if ratio == 0 && cname == "even" {
					// 80 W per 10 % of 64 CPUs: 800 W over 64 000 mCPU.
					if want := 800.0 / 64_000; math.Abs(perMilli-want) > 1e-12 {
						t.Errorf("even curve: %v W per mCPU, want %v", perMilli, want)
					}
				}
			}
		}
	}
	if _, _, ok := (*Book)(nil).PodWattsBound(&telemetry.Node{HasCPU: true, LogicalCores: 8, HasPower: true}); ok {
		t.Error("a bound for a node without a power curve")
	}
}
