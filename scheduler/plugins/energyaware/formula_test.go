package energyaware

import (
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

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
	if got := coolGPUs(n, 3_000); got != 2 {
		t.Errorf("coolGPUs = %d, want 2", got)
	}
}

func TestMarginalMilliwatts(t *testing.T) {
	n := &telemetry.Node{HasCPU: true, LogicalCores: 32, HasPower: true, ModelReady: true, IdleWatts: 100, FullLoadWatts: 420,
		GPUWatts: 1200, GPUs: make([]telemetry.GPU, 4)}
	// CPU: (420-100) W * 4000m / 32000m = 40 W
	if mw, ok := marginalMilliwatts(n, 4000, 0); !ok || mw != 40_000 {
		t.Errorf("CPU pod: %d mW, %v; want 40000", mw, ok)
	}
	// + 2 GPUs x 1200/4 W = 600 W -> 640 W
	if mw, _ := marginalMilliwatts(n, 4000, 2); mw != 640_000 {
		t.Errorf("GPU pod: %d mW, want 640000", mw)
	}
	n.ModelReady = false
	if _, ok := marginalMilliwatts(n, 4000, 0); ok {
		t.Error("a node without a ready model gave an estimate")
	}
}

func TestScoreParts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"lowest watts", powerScore(10_000, 10_000, 50_000), 100},
		{"highest watts", powerScore(50_000, 10_000, 50_000), 0},
		{"a quarter up", powerScore(20_000, 10_000, 50_000), 75}, // 100*(50-20)/(50-10)
		{"all equal", powerScore(10_000, 10_000, 10_000), 100},
		// headroom 20°C of 40 -> 50
		{"thermal 20°C headroom", thermalScore(&telemetry.Node{HasThermal: true, HasHeadroom: true, HeadroomMilli: 20_000}, 90_000), 50},
		// no limit: 90 - 70 = 20°C -> 50
		{"thermal, absolute", thermalScore(&telemetry.Node{HasThermal: true, HasUnlimited: true, UnlimitedMilli: 70_000}, 90_000), 50},
		// the smaller of 40°C (limited) and 90 - 80 = 10°C -> 25
		{"thermal, both", thermalScore(&telemetry.Node{HasThermal: true, HasHeadroom: true, HeadroomMilli: 40_000, HasUnlimited: true, UnlimitedMilli: 80_000}, 90_000), 25},
		{"thermal, none", thermalScore(&telemetry.Node{}, 90_000), 0},
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
			// power 10, 30, 50 W -> 100, 50, 0; thermal 50, 100, 0
			// (100*70 + 50*30)/100 = 85; (50*70 + 100*30)/100 = 65; (0*70 + 0*30)/100 = 0
			name:   "range of power",
			scores: []int64{packScore(10_000, true, 50), packScore(30_000, true, 100), packScore(50_000, true, 0)},
			want:   []int64{85, 65, 0},
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
		normalize(list, 70, 30)
		for i, s := range list {
			if s.Score != tc.want[i] {
				t.Errorf("%s: node %d scored %d, want %d", tc.name, i, s.Score, tc.want[i])
			}
		}
	}
}
