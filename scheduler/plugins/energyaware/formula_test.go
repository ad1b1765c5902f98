// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"context"
	"math"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

var limits = thermalLimits{marginMilli: 5_000, absoluteMilli: 90_000, rejectThrottling: true, gpuSlowdownMargin: 3_000}

func TestTooHot(t *testing.T) {
	for _, tc := range []struct {
		name string
		node telemetry.Node
		want string
	}{
		{"no thermal data", telemetry.Node{}, ""},
		{"cool", telemetry.Node{HasThermal: true, HottestSensor: "cpu", HottestMilli: 60_000, HasHeadroom: true, HeadroomMilli: 40_000}, ""},
		// headroom 5.0°C <= margin 5°C
		{"at the margin", telemetry.Node{HasThermal: true, HottestSensor: "cpu", HottestMilli: 95_000, HasHeadroom: true, HeadroomMilli: 5_000, HeadroomSensor: "cpu", HeadroomSensorMilli: 95_000},
			"node thermal headroom 5.0°C <= margin 5.0°C (cpu at 95.0°C, limit 100.0°C)"},
		{"just inside", telemetry.Node{HasThermal: true, HottestSensor: "cpu", HottestMilli: 94_900, HasHeadroom: true, HeadroomMilli: 5_100}, ""},
		// no sensor reports a limit: 90 - 91 = -1°C <= 5°C
		{"absolute limit", telemetry.Node{HasThermal: true, HottestSensor: "acpitz", HottestMilli: 91_000, HasUnlimited: true, UnlimitedSensor: "acpitz", UnlimitedMilli: 91_000},
			"node thermal headroom -1.0°C <= margin 5.0°C (acpitz at 91.0°C, absolute limit 90.0°C as it reports none)"},
		// Defect 2: a sensor without a limit counts although another has
		// one: 90 - 95 = -5°C beside an NVMe 44.85°C below its crit.
		{"unlimited beside limited", telemetry.Node{HasThermal: true, HottestSensor: "k10temp/Tctl", HottestMilli: 95_000,
			HasHeadroom: true, HeadroomMilli: 44_850, HeadroomSensor: "nvme/Composite", HeadroomSensorMilli: 40_000,
			HasUnlimited: true, UnlimitedSensor: "k10temp/Tctl", UnlimitedMilli: 95_000},
			"node thermal headroom -5.0°C <= margin 5.0°C (k10temp/Tctl at 95.0°C, absolute limit 90.0°C as it reports none)"},
		{"unlimited but cool", telemetry.Node{HasThermal: true, HottestSensor: "k10temp/Tctl", HottestMilli: 60_000,
			HasHeadroom: true, HeadroomMilli: 44_850, HasUnlimited: true, UnlimitedSensor: "k10temp/Tctl", UnlimitedMilli: 60_000}, ""},
		{"throttling", telemetry.Node{HasThermal: true, HottestMilli: 50_000, HasHeadroom: true, HeadroomMilli: 50_000, Throttling: true},
			"node's CPUs are thermally throttling"},
	} {
		if got := tooHot(&tc.node, limits); got != tc.want {
			t.Errorf("%s: tooHot = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCoolGPUs(t *testing.T) {
	n := &telemetry.Node{GPUs: []telemetry.GPU{
		{Healthy: true, HasTemperature: true, TemperatureMilli: 70_000, HasSlowdown: true, SlowdownMilli: 90_000},  // cool
		{Healthy: true, HasTemperature: true, TemperatureMilli: 87_000, HasSlowdown: true, SlowdownMilli: 90_000},  // 87 >= 90-3: hot
		{Healthy: false, HasTemperature: true, TemperatureMilli: 40_000, HasSlowdown: true, SlowdownMilli: 90_000}, // unhealthy
		{Healthy: true, ThermalThrottled: true}, // throttled
		{Healthy: true},                         // no temperature: counted as cool
	}}
	if got, _ := gpuCounts(n, 3_000); got != 2 {
		t.Errorf("gpuCounts' cool = %d, want 2", got)
	}
}

// TestHotFreeGPUs: the GPUs a device-plugin pod may be handed that are too
// hot: published free, whole, healthy (the device plugin does not offer
// an unhealthy GPU), at or past slowdown - margin or slowing down.
func TestHotFreeGPUs(t *testing.T) {
	gpu := func(i int32, tempC int64, alloc int8) telemetry.GPU {
		return telemetry.GPU{Index: i, Healthy: true, HasTemperature: true, TemperatureMilli: tempC * 1000, HasSlowdown: true, SlowdownMilli: 90_000, Allocated: alloc}
	}
	n := &telemetry.Node{GPUs: []telemetry.GPU{
		gpu(0, 70, 0),  // free, cool
		gpu(1, 88, 1),  // hot, held
		gpu(2, 88, -1), // hot, allocation unknown
		func() telemetry.GPU { g := gpu(3, 88, 0); g.Healthy = false; return g }(),
		func() telemetry.GPU { g := gpu(4, 88, 0); g.MIG = true; return g }(),
		gpu(5, 87, 0), // free, 87 >= 90 - 3
		func() telemetry.GPU { g := gpu(6, 50, 0); g.ThermalThrottled = true; return g }(),
	}}
	_, count := gpuCounts(n, 3_000)
	first := firstHotFree(n, 3_000)
	if count != 2 || first != "GPU 5 at 87.0°C >= slowdown 90.0°C - margin 3.0°C" {
		t.Errorf("gpuCounts' hotFree = %d, firstHotFree %q; want 2 (GPUs 5 and 6), the first GPU 5's reason", count, first)
	}
}

// r740 is the SPECpower_ssj2008 curve of result power_ssj2008-20170829-00780
// (Dell PowerEdge R740): watts at 0 %, 10 % … 100 % load.
var r740 = []int32{52, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457}

// curveNode is a 100-CPU node at 20 % CPU drawing 300 W, 100 of them its
// GPUs', with the R740 curve (uncertainty per knot from unc), one GPU busy
// at 650 W and two idle at 60 W, and a thermal model: 30°C + 0.2°C/W,
// limit 100°C.
func curveNode(basis telemetryv1alpha1.PowerModelBasis, unc func(k int) int32) *telemetry.Node {
	uncs := make([]int32, len(r740))
	for k := range uncs {
		uncs[k] = unc(k)
	}
	busy, idle := func(i int32) telemetryv1alpha1.GPUStatus {
		return telemetryv1alpha1.GPUStatus{Index: i, UUID: string(rune('a' + i)), PowerWatts: ptr.To[int32](650), UtilizationPercent: ptr.To[int32](97), PowerLimitWatts: ptr.To[int32](700)}
	}, func(i int32) telemetryv1alpha1.GPUStatus {
		return telemetryv1alpha1.GPUStatus{Index: i, UUID: string(rune('a' + i)), PowerWatts: ptr.To[int32](60), UtilizationPercent: ptr.To[int32](0), PowerLimitWatts: ptr.To[int32](700)}
	}
	return telemetry.FromStatus("n", &telemetryv1alpha1.NodeTelemetryStatus{
		CPU: &telemetryv1alpha1.CPUStatus{LogicalCores: 100, OnlineCores: 100, UtilizationPercent: 20},
		Power: &telemetryv1alpha1.PowerStatus{Watts: 300, GPUWatts: ptr.To[int32](100), Sources: []telemetryv1alpha1.PowerSource{"rapl", "nvml"},
			Model: &telemetryv1alpha1.PowerModel{Ready: true, Basis: basis, IdleWatts: ptr.To[int32](52), FullLoadWatts: ptr.To[int32](457),
				CurveWatts: r740, CurveUncertaintyWatts: uncs}},
		Thermal: &telemetryv1alpha1.ThermalStatus{HottestSensor: "pkg", HottestMilliCelsius: 70_000,
			Model: &telemetryv1alpha1.ThermalModel{Sensor: "pkg", LimitMilliCelsius: 100_000, AmbientMilliCelsius: 30_000, MilliCelsiusPerWatt: 200, TimeConstantSeconds: 40, Samples: 300}},
		// One GPU busy at 650 W, two idle at 60 W.
		GPUs: []telemetryv1alpha1.GPUStatus{busy(0), idle(1), idle(2)},
	})
}

// podEstimate is what TestEstimatePod reads of a pod on a node: its
// watts (estimate.PodWatts, uncalibrated), mean and upper, in milliwatts,
// and the heat prediction Filter and Score judge (estimate.Book.Heat).
type podEstimate struct {
	mw, upperMW int64
	hasPower    bool
	estimate.Heat
}

func estimatePod(n *telemetry.Node, d, reserved estimate.Demand) podEstimate {
	var e podEstimate
	w, ok := estimate.PodWatts(n, d, reserved)
	if !ok {
		return e
	}
	e.hasPower = true
	e.mw, e.upperMW = int64(math.Round(w.Mean*1000)), int64(math.Round(w.Upper*1000))
	e.Heat = (*estimate.Book)(nil).Heat(n, d, reserved)
	return e
}

func TestEstimatePod(t *testing.T) {
	fitted := curveNode(telemetryv1alpha1.PowerModelFitted, func(int) int32 { return 2 })
	// 20 % measured + 10 CPUs reserved = 30 % (170 W); + a 20-CPU pod = 50 %
	// (224 W): 54 W, on the curve's bend, not the straight line's 81 W.
	e := estimatePod(fitted, estimate.Demand{CPUMilli: 20_000, GPUs: 0}, estimate.Demand{CPUMilli: 10_000})
	// upper: 54 W + 2 x the 2 W uncertainty at 50 % = 58 W
	if !e.hasPower || e.mw != 54_000 || e.upperMW != 58_000 {
		t.Errorf("CPU pod: %+v, want 54000 mW, upper 58000", e)
	}
	// The node's power without GPUs (200 W) + the reserved pods' 23 W + 2 x
	// 2 W = 27 W + the pod's 58 W = 285 W, upper estimates: 30 + 0.2 x 285
	// = 87.0°C.
	if !e.Predicted || e.SteadyMilli != 87_000 || e.LimitMilli != 100_000 {
		t.Errorf("prediction: %+v, want 87000 m°C of 100000", e)
	}
	if why := tooHotPredicted(fitted, e.Heat, 5_000); why != "" {
		t.Errorf("87.0°C against 100 - 5°C rejected: %s", why)
	}
	want := "predicted steady temperature of pkg with the pod 87.0°C >= limit 100.0°C - margin 13.0°C: 30.0°C + 0.200°C/W x 285W (now 200W, +27W reserved, +58W this pod); time constant 40s, 300 samples"
	if why := tooHotPredicted(fitted, e.Heat, 13_000); why != want {
		t.Errorf("reason:\n got %s\nwant %s", why, want)
	}
	// Two GPUs: + 2 x (650 - 60) W, a busy GPU's power minus an idle one's
	// on this node, not the average of all three.
	if e := estimatePod(fitted, estimate.Demand{CPUMilli: 20_000, GPUs: 2}, estimate.Demand{CPUMilli: 10_000}); e.mw != 54_000+1_180_000 {
		t.Errorf("GPU pod: %d mW, want 1234000", e.mw)
	}
	// A prior whose uncertainty grows 10 W a knot: the upper estimate adds
	// two of the 50 W at 50 %, where the pod takes the node: 54 + 100 W.
	prior := curveNode(telemetryv1alpha1.PowerModelPrior, func(k int) int32 { return int32(10 * k) })
	if e := estimatePod(prior, estimate.Demand{CPUMilli: 20_000, GPUs: 0}, estimate.Demand{CPUMilli: 10_000}); e.mw != 54_000 || e.upperMW != 154_000 {
		t.Errorf("prior: %+v, want 54000 mW, upper 154000", e)
	}
	// Past 100 %: the curve ends there.
	if e := estimatePod(fitted, estimate.Demand{CPUMilli: 200_000, GPUs: 0}, estimate.Demand{CPUMilli: 0}); e.mw != (457-147)*1000 {
		t.Errorf("overfull: %d mW, want 310000", e.mw)
	}
	if e := estimatePod(&telemetry.Node{HasCPU: true, LogicalCores: 8, HasPower: true}, estimate.Demand{CPUMilli: 1000, GPUs: 0}, estimate.Demand{CPUMilli: 0}); e.hasPower {
		t.Errorf("a node without a model gave an estimate: %+v", e)
	}
}

func TestScoreParts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"the lowest energy", powerScore(10_000, 10_000, 50), 100},
		{"half the span up", powerScore(12_500, 10_000, 50), 50}, // 25 % dearer of a 50 % span
		{"the span up", powerScore(15_000, 10_000, 50), 0},       // 50 % dearer
		{"past the span", powerScore(50_000, 10_000, 50), 0},     // floored at 0
		{"a point started is lost", powerScore(10_001, 10_000, 50), 99},
		{"2 W on 400 W", powerScore(402_000, 400_000, 50), 99},            // 0.5 % of a 50 % span: 1 point
		{"below a watt: judged against 1 W", powerScore(600, 100, 50), 0}, // 0.5 W over a 1 W stake
		// headroom 20°C of 40 -> 50
		{"thermal 20°C headroom", thermalScore(&telemetry.Node{HasThermal: true, HasHeadroom: true, HeadroomMilli: 20_000}, 90_000, estimate.Heat{}), 50},
		// no limit: 90 - 70 = 20°C -> 50
		{"thermal, absolute", thermalScore(&telemetry.Node{HasThermal: true, HasUnlimited: true, UnlimitedMilli: 70_000}, 90_000, estimate.Heat{}), 50},
		// the smaller of 40°C (limited) and 90 - 80 = 10°C -> 25
		{"thermal, both", thermalScore(&telemetry.Node{HasThermal: true, HasHeadroom: true, HeadroomMilli: 40_000, HasUnlimited: true, UnlimitedMilli: 80_000}, 90_000, estimate.Heat{}), 25},
		{"thermal, none", thermalScore(&telemetry.Node{}, 90_000, estimate.Heat{}), 0},
		// predicted: 100 - 80 = 20°C below 40°C now -> 50
		{"thermal, predicted", thermalScore(&telemetry.Node{HasThermal: true, HasHeadroom: true, HeadroomMilli: 40_000}, 90_000, estimate.Heat{Predicted: true, SteadyMilli: 80_000, LimitMilli: 100_000}), 50},
		// (75*70 + 50*30)/100 = 67
		{"combined 70/30", combine(75, 50, 70, 30), 67},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

func TestPackScore(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mw       int64
		hasPower bool
		thermal  int64
		want     int64
	}{
		// (40000+1)<<7 | 50 = 5120128 + 50
		{"power and thermal", 40_000, true, 50, 5_120_178},
		{"zero watts is still an estimate", 0, true, 100, 1<<7 | 100},
		{"no power model", 0, false, 37, 37},
		// capped at 2^50 mW: (2^50+1)<<7 | 100
		{"capped", 1 << 62, true, 100, (1<<50+1)<<7 | 100},
	} {
		got := packScore(tc.mw, tc.hasPower, tc.thermal)
		if got != tc.want {
			t.Errorf("%s: packScore = %d, want %d", tc.name, got, tc.want)
		}
		mw, hasPower, thermal := unpackScore(got)
		if hasPower != tc.hasPower || thermal != tc.thermal || (tc.hasPower && mw != min(tc.mw, maxPackedMilliwatts)) {
			t.Errorf("%s: unpackScore = %d, %v, %d", tc.name, mw, hasPower, thermal)
		}
	}
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scores []int64 // packed, or NoTelemetry
		want   []int64
	}{
		{
			// power 10, 12, 50 W over a 50 % span -> 100, 60, 0; thermal 50, 100, 0
			// (100*70 + 50*30)/100 = 85; (60*70 + 100*30)/100 = 72; (0*70 + 0*30)/100 = 0
			name:   "range of power",
			scores: []int64{packScore(10_000, true, 50), packScore(12_000, true, 100), packScore(50_000, true, 0)},
			want:   []int64{85, 72, 0},
		},
		{
			// no model: no power points, 100*30/100 = 30; the other is alone in
			// the power range: (100*70 + 0*30)/100 = 70
			name:   "a node without a power model",
			scores: []int64{packScore(0, false, 100), packScore(20_000, true, 0)},
			want:   []int64{30, 70},
		},
		{
			// no telemetry: the lowest of the others (30)
			name:   "a node without telemetry",
			scores: []int64{telemetry.NoTelemetry, packScore(0, false, 100), packScore(20_000, true, 0)},
			want:   []int64{30, 30, 70},
		},
		{
			name:   "no node with telemetry",
			scores: []int64{telemetry.NoTelemetry, telemetry.NoTelemetry},
			want:   []int64{0, 0},
		},
	} {
		list := make(fwk.NodeScoreList, len(tc.scores))
		for i, s := range tc.scores {
			list[i].Score = s
		}
		normalize(list, 70, 30, 50)
		for i, s := range list {
			if s.Score != tc.want[i] {
				t.Errorf("%s: node %d scored %d, want %d", tc.name, i, s.Score, tc.want[i])
			}
		}
	}
}

// Issue 40: a few watts must not outweigh a topology preference. The
// power score was min-max over the candidates: of two nodes 2 W apart for
// a 2-GPU pod of some 800 W, the dearer got no power points at all, 70 of
// EnergyAware's 100 at its default weights, enough to outweigh
// TopologyFit's linked pair (TestWeightsCompose, in topologyfit). It now
// loses what the 2 W are of the pod's energy, over powerSpanPercent: one
// point (0.25 % of a 25 % span). A node twice as dear still loses every power point.
//
//	formula_test.go:263: 2 W more on an 800 W pod: scores [100 30], want 0 to 1 points apart
//	formula_test.go:263: 10 % more on a 10 W pod: scores [100 30], want 28 to 28 points apart
func TestPowerScoreScalesWithTheStake(t *testing.T) {
	pl := New(*configv1.DefaultEnergyAwareArgs(), newCache())
	for _, tc := range []struct {
		name    string
		mw      [2]int64
		maxDiff int64
		minDiff int64
	}{
		{"2 W more on an 800 W pod", [2]int64{800_000, 802_000}, 1, 0},
		{"twice the joules of a 10 W pod", [2]int64{10_000, 20_000}, 70, 70},
		{"10 % more on a 10 W pod", [2]int64{10_000, 11_000}, 28, 28}, // 40 of 100 power points, 70 % of them
	} {
		scores := fwk.NodeScoreList{{Name: "a", Score: packScore(tc.mw[0], true, 100)}, {Name: "b", Score: packScore(tc.mw[1], true, 100)}}
		if st := pl.NormalizeScore(context.Background(), nil, nil, scores); !st.IsSuccess() {
			t.Fatal(st)
		}
		diff := scores[0].Score - scores[1].Score
		if diff < tc.minDiff || diff > tc.maxDiff {
			t.Errorf("%s: scores [%d %d], want %d to %d points apart", tc.name, scores[0].Score, scores[1].Score, tc.minDiff, tc.maxDiff)
		}
	}
}
