// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/powermodel"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/heat"
)

func sensor(name string, milli int64, maxC, crit *int64) collector.TempSensor {
	return collector.TempSensor{Name: name, Source: "hwmon", MilliCelsius: milli, MaxMilliCelsius: maxC, CritMilliCelsius: crit}
}

func TestThermal(t *testing.T) {
	s := &collector.Sample{Thermal: &collector.Thermal{Sensors: []collector.TempSensor{
		sensor("coretemp.0/Package id 0", 71_000, ptr.To[int64](84_000), ptr.To[int64](100_000)), // crit wins: headroom 29°C
		sensor("nvme0/Composite", 62_000, ptr.To[int64](70_000), nil),                            // max only: headroom 8°C
		sensor("acpitz/thermal_zone0", 75_000, nil, nil),                                         // hottest, no limit
		sensor("mlx5/asic", 55_000, nil, ptr.To[int64](105_000)),                                 // headroom 50°C
	}}}
	want := &telemetryv1alpha1.ThermalStatus{
		HottestSensor:                "acpitz/thermal_zone0",
		HottestMilliCelsius:          75_000,
		HeadroomMilliCelsius:         ptr.To[int64](8_000), // min(100-71, 70-62, 105-55) = 8°C
		HeadroomSensor:               "nvme0/Composite",
		HottestUnlimitedSensor:       "acpitz/thermal_zone0",
		HottestUnlimitedMilliCelsius: ptr.To[int64](75_000),
		// Ranked by headroom, the zone against the absolute 90°C: 8, 15, 29, 50.
		Sensors: []telemetryv1alpha1.ThermalSensor{
			{Name: "nvme0/Composite", MilliCelsius: 62_000, LimitMilliCelsius: ptr.To[int64](70_000)},
			{Name: "acpitz/thermal_zone0", MilliCelsius: 75_000},
			{Name: "coretemp.0/Package id 0", MilliCelsius: 71_000, LimitMilliCelsius: ptr.To[int64](100_000)},
			{Name: "mlx5/asic", MilliCelsius: 55_000, LimitMilliCelsius: ptr.To[int64](105_000)},
		},
	}
	if diff := cmp.Diff(want, Thermal(s, heat.DefaultAbsoluteLimitMilliCelsius)); diff != "" {
		t.Errorf("Thermal (-want +got):\n%s", diff)
	}

	// An alarm is counted and flagged on its sensor, and is not throttling.
	s.Thermal.Sensors[1].Alarm = true
	if th := Thermal(s, heat.DefaultAbsoluteLimitMilliCelsius); th.Throttling || th.Alarms != 1 || !th.Sensors[0].Alarm {
		t.Errorf("with an alarm on nvme0: throttling %v, alarms %d, sensors[0] %+v; want false, 1, alarm", th.Throttling, th.Alarms, th.Sensors[0])
	}
	// CPU throttle counters that rose are throttling.
	s.CPU = &telemetryv1alpha1.CPUStatus{ThermalThrottle: &telemetryv1alpha1.CPUThrottleStatus{Throttling: true}}
	if th := Thermal(s, heat.DefaultAbsoluteLimitMilliCelsius); !th.Throttling {
		t.Error("CPU throttling did not mark the node throttling")
	}
	// The hottest sensor's own limit is reported with its type, and a
	// vendor limit counts where the sensor reports none.
	s.Thermal.Sensors[2].MaxMilliCelsius = ptr.To[int64](80_000)
	if th := Thermal(s, heat.DefaultAbsoluteLimitMilliCelsius); *th.LimitMilliCelsius != 80_000 || th.LimitType != telemetryv1alpha1.ThermalLimitMax || th.HottestUnlimitedSensor != "" {
		t.Errorf("limit = %v %s, unlimited %q; want 80000 Max and none", *th.LimitMilliCelsius, th.LimitType, th.HottestUnlimitedSensor)
	}
	s.Thermal.Sensors[2].MaxMilliCelsius = nil
	s.Thermal.Sensors[2].VendorMilliCelsius = ptr.To[int64](95_000)
	if th := Thermal(s, heat.DefaultAbsoluteLimitMilliCelsius); *th.LimitMilliCelsius != 95_000 || th.LimitType != telemetryv1alpha1.ThermalLimitVendor {
		t.Errorf("limit = %v %s, want 95000 Vendor", *th.LimitMilliCelsius, th.LimitType)
	}
}

func TestThermalListsAtMostEightSensors(t *testing.T) {
	s := &collector.Sample{Thermal: &collector.Thermal{}}
	for i := range 20 {
		s.Thermal.Sensors = append(s.Thermal.Sensors, sensor(fmt.Sprintf("chip/temp%d", i), int64(40_000+i*1000), nil, ptr.To[int64](100_000)))
	}
	th := Thermal(s, heat.DefaultAbsoluteLimitMilliCelsius)
	if len(th.Sensors) != MaxSensors {
		t.Fatalf("%d sensors listed, want %d", len(th.Sensors), MaxSensors)
	}
	// Closest to the limit first: temp19 at 59°C has 41°C headroom.
	if th.Sensors[0].Name != "chip/temp19" || th.Sensors[7].Name != "chip/temp12" {
		t.Errorf("sensors = %s .. %s, want chip/temp19 .. chip/temp12", th.Sensors[0].Name, th.Sensors[7].Name)
	}
	if (&collector.Sample{}).Thermal != nil || Thermal(&collector.Sample{}, heat.DefaultAbsoluteLimitMilliCelsius) != nil {
		t.Error("no sensors must give no thermal section")
	}
}

func TestBuild(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 5, 300, time.UTC)
	s := &collector.Sample{
		Time:   now,
		CPU:    &telemetryv1alpha1.CPUStatus{LogicalCores: 8, OnlineCores: 8, UtilizationPercent: 45},
		Memory: &telemetryv1alpha1.MemoryStatus{TotalBytes: 100, AvailableBytes: 38, UtilizationPercent: 62},
		Thermal: &collector.Thermal{Sensors: []collector.TempSensor{
			sensor("coretemp.0/Package id 0", 70_600, nil, ptr.To[int64](100_000)),
		}},
		Power: &collector.Power{
			Watts: 412.6, Sources: []telemetryv1alpha1.PowerSource{telemetryv1alpha1.PowerSourceRAPL, telemetryv1alpha1.PowerSourceNVML},
			GPUWatts: ptr.To(300.4), EnergyJoules: 12_345.9,
		},
		GPUs: []telemetryv1alpha1.GPUStatus{
			{Index: 0, UUID: "GPU-a", Health: telemetryv1alpha1.GPUHealth{Healthy: true}},
			{Index: 1, UUID: "GPU-b", Health: telemetryv1alpha1.GPUHealth{Healthy: false}},
		},
		Sources: []telemetryv1alpha1.SourceStatus{
			{Name: telemetryv1alpha1.SourceCPU, State: telemetryv1alpha1.SourceAvailable},
			{Name: telemetryv1alpha1.SourceNUMA, State: telemetryv1alpha1.SourceUnavailable, Reason: "NoNUMATopology"},
		},
	}
	curve := make([]powermodel.Point, powermodel.Knots)
	for k := range curve {
		curve[k] = powermodel.Point{UtilizationPercent: k * 10, Watts: 98.4 + 20.31*float64(k), Uncertainty: 1.2}
	}
	fit := powermodel.Fit{Basis: powermodel.Fitted, Samples: 600, SpreadPercent: 62, Curve: curve, R2: 0.98765}
	tracker := NewHeatTracker(DefaultHeatConfig())
	th := Thermal(s, heat.DefaultAbsoluteLimitMilliCelsius)
	st := Build(Input{Sample: s, Interval: 5 * time.Second, AgentVersion: "v1.2.3", PowerModel: PowerModel(fit), Thermal: th, Heat: tracker.Update(th, s.CPU)})

	wantPower := &telemetryv1alpha1.PowerStatus{
		Watts:        413, // 412.6 rounded
		Sources:      []telemetryv1alpha1.PowerSource{telemetryv1alpha1.PowerSourceRAPL, telemetryv1alpha1.PowerSourceNVML},
		GPUWatts:     ptr.To[int32](300),
		EnergyJoules: 12_345,
		Model: &telemetryv1alpha1.PowerModel{
			Ready: true, Basis: telemetryv1alpha1.PowerModelFitted, Samples: 600, UtilizationSpreadPercent: 62,
			IdleWatts: ptr.To[int32](98), FullLoadWatts: ptr.To[int32](302), // 98.4 and 301.5 rounded
			FitQualityBasisPoints: ptr.To[int32](9877), // 0.98765 -> 9876.5 -> 9877
			CurveWatts:            []int32{98, 119, 139, 159, 180, 200, 220, 241, 261, 281, 302},
			CurveUncertaintyWatts: []int32{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, // 1.2 rounded up
		},
	}
	if diff := cmp.Diff(wantPower, st.Power); diff != "" {
		t.Errorf("Power (-want +got):\n%s", diff)
	}
	wantSummary := &telemetryv1alpha1.Summary{CPU: "45%", Memory: "62%", Temperature: "71°C", Power: "413W", GPUs: "1/2"}
	if diff := cmp.Diff(wantSummary, st.Summary); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
	if got := st.SampleTime.Time; !got.Equal(now.Truncate(time.Second)) || st.IntervalSeconds != 5 || st.AgentVersion != "v1.2.3" {
		t.Errorf("header = %v %d %q", got, st.IntervalSeconds, st.AgentVersion)
	}
	ready := meta.FindStatusCondition(st.Conditions, telemetryv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Message != "read: [cpu]; not available: [numa (NoNUMATopology)]" {
		t.Errorf("Ready = %+v", ready)
	}
	hot := meta.FindStatusCondition(st.Conditions, telemetryv1alpha1.ConditionOverheating)
	if hot == nil || hot.Status != metav1.ConditionFalse || hot.Reason != ReasonWithinLimits {
		t.Errorf("Overheating = %+v, want False/WithinLimits (headroom 29.4°C)", hot)
	}

	// A later sample with the same state keeps the transition times.
	later := *s
	later.Time = now.Add(time.Minute)
	st2 := Build(Input{Sample: &later, Interval: 5 * time.Second, AgentVersion: "v1.2.3", Thermal: th, Heat: tracker.Update(th, s.CPU), PreviousConditions: st.Conditions})
	if diff := cmp.Diff(st.Conditions, st2.Conditions); diff != "" {
		t.Errorf("unchanged conditions changed (-want +got):\n%s", diff)
	}
	if st2.Power.Model != nil {
		t.Error("no fit given, but a power model was published")
	}
}

// TestSummarySaysWhyASourceIsMissing: a node without watts or degrees says
// why in kubectl get nt's POWER and TEMP cells, the reason its source gave
// (collector.Unavailable/Failed), so an operator sees PermissionDenied
// (RAPL is root's since Linux 5.10) apart from a VM's NoPowerMeter.
func TestSummarySaysWhyASourceIsMissing(t *testing.T) {
	for _, tc := range []struct {
		name              string
		sources           []telemetryv1alpha1.SourceStatus
		wantTemp, wantPow string
	}{
		{"vm", []telemetryv1alpha1.SourceStatus{
			{Name: telemetryv1alpha1.SourceThermal, State: telemetryv1alpha1.SourceUnavailable, Reason: "NoSensors"},
			{Name: telemetryv1alpha1.SourcePower, State: telemetryv1alpha1.SourceUnavailable, Reason: "NoPowerMeter"},
		}, "NoSensors", "NoPowerMeter"},
		{"rapl root-only", []telemetryv1alpha1.SourceStatus{
			{Name: telemetryv1alpha1.SourcePower, State: telemetryv1alpha1.SourceFailed, Reason: "PermissionDenied"},
		}, "n/a", "PermissionDenied"},
		// Too long for the 16-character cell: n/a, the reason stays in
		// status.sources.
		{"long reason", []telemetryv1alpha1.SourceStatus{
			{Name: telemetryv1alpha1.SourcePower, State: telemetryv1alpha1.SourceFailed, Reason: "SomethingMuchTooLong"},
		}, "n/a", "n/a"},
		// Available but gave no section this sample (the first RAPL read
		// has no rate yet): no reason to show.
		{"available", []telemetryv1alpha1.SourceStatus{
			{Name: telemetryv1alpha1.SourcePower, State: telemetryv1alpha1.SourceAvailable},
		}, "n/a", "n/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Build(Input{Sample: &collector.Sample{Time: time.Now(), Sources: tc.sources}, Interval: time.Second})
			if st.Summary.Temperature != tc.wantTemp || st.Summary.Power != tc.wantPow {
				t.Errorf("TEMP, POWER = %q, %q; want %q, %q", st.Summary.Temperature, st.Summary.Power, tc.wantTemp, tc.wantPow)
			}
		})
	}
}

func TestSummaryShowsMissingSources(t *testing.T) {
	st := Build(Input{Sample: &collector.Sample{Time: time.Now(), CPU: &telemetryv1alpha1.CPUStatus{UtilizationPercent: 3}}, Interval: time.Second})
	// No memory, sensor, power or GPU data: "n/a", never 0 or blank.
	want := &telemetryv1alpha1.Summary{CPU: "3%", Memory: "n/a", Temperature: "n/a", Power: "n/a", GPUs: "n/a"}
	if diff := cmp.Diff(want, st.Summary); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
	if st.Thermal != nil || st.Power != nil {
		t.Error("sections made up for missing sources")
	}
	hot := meta.FindStatusCondition(st.Conditions, telemetryv1alpha1.ConditionOverheating)
	if hot.Status != metav1.ConditionUnknown || hot.Reason != ReasonNoThermalData {
		t.Errorf("Overheating = %s/%s, want Unknown/%s", hot.Status, hot.Reason, ReasonNoThermalData)
	}
}

func TestHeatHysteresis(t *testing.T) {
	h := NewHeatTracker(DefaultHeatConfig())
	thermal := func(headroom int64) *telemetryv1alpha1.ThermalStatus {
		return &telemetryv1alpha1.ThermalStatus{HottestSensor: "cpu", HottestMilliCelsius: 100_000 - headroom, HeadroomMilliCelsius: ptr.To(headroom)}
	}
	for i, step := range []struct {
		headroom    int64
		throttling  bool
		wantHot     bool
		wantChanged bool
	}{
		{headroom: 20_000, wantHot: false},
		{headroom: 6_000, wantHot: false},                    // above the 5°C hot mark
		{headroom: 5_000, wantHot: true, wantChanged: true},  // at the mark: hot
		{headroom: 7_000, wantHot: true},                     // inside the band: stays hot
		{headroom: 4_000, wantHot: true},                     // hotter still: no new change
		{headroom: 8_000, wantHot: false, wantChanged: true}, // back at 8°C: cool
		{headroom: 6_000, wantHot: false},                    // inside the band: stays cool
		{headroom: 30_000, throttling: true, wantHot: true, wantChanged: true},
	} {
		th := thermal(step.headroom)
		th.Throttling = step.throttling
		got := h.Update(th, nil)
		if got.Hot != step.wantHot || got.Changed != step.wantChanged || !got.Known {
			t.Errorf("step %d (headroom %d, throttling %v): %+v, want hot=%v changed=%v", i, step.headroom, step.throttling, got, step.wantHot, step.wantChanged)
		}
	}
	if err := (HeatConfig{HotHeadroomMilliCelsius: 8_000, CoolHeadroomMilliCelsius: 5_000, AbsoluteLimitMilliCelsius: 90_000}).Validate(); err == nil {
		t.Error("a cool headroom below the hot one was accepted")
	}
}

// TestGPUThrottleTracker: an episode starts when a GPU throttles after the
// quiet period without throttling, and starts are reported together at
// most once a MinInterval, so one 8-GPU node hovering at its slowdown
// temperature records a handful of Events a minute that name every GPU,
// not one per flip.
func TestGPUThrottleTracker(t *testing.T) {
	gpu := func(uuid string, hot bool) telemetryv1alpha1.GPUStatus {
		r := telemetryv1alpha1.GPUThrottleSwPowerCap
		if hot {
			r = telemetryv1alpha1.GPUThrottleHwThermalSlowdown
		}
		return telemetryv1alpha1.GPUStatus{UUID: uuid, ThrottleReasons: []telemetryv1alpha1.GPUThrottleReason{r}}
	}
	t0 := time.Unix(1_700_000_000, 0)

	// A minute of eight GPUs at their slowdown temperature, each thermally
	// throttled in a random half of 1 s samples (the same minute for every
	// tracker), through tr: the reports tr made and the GPUs they named.
	minute := func(tr *GPUThrottleTracker) (reports int, named map[string]int) {
		rng := rand.New(rand.NewPCG(1, 2))
		named = map[string]int{}
		for s := range 60 {
			var gpus []telemetryv1alpha1.GPUStatus
			for i := range 8 {
				gpus = append(gpus, gpu(fmt.Sprintf("GPU-%d", i), rng.IntN(2) == 0))
			}
			got := tr.Update(t0.Add(time.Duration(s)*time.Second), gpus)
			if len(got) > 0 {
				reports++
			}
			for _, g := range got {
				named[g.UUID]++
			}
		}
		return reports, named
	}
	tr := GPUThrottleTracker{Quiet: DefaultGPUThrottleQuiet, MinInterval: DefaultGPUThrottleMinInterval}
	reports, named := minute(&tr)
	if reports > 3 {
		t.Errorf("a minute of 8 GPUs flipping at their slowdown temperature: %d reports (Events), want at most 3 (one a %v)", reports, DefaultGPUThrottleMinInterval)
	}
	if len(named) != 8 {
		t.Errorf("the reports named %d GPUs, want all 8: %v", len(named), named)
	}
	for uuid, n := range named {
		if n != 1 {
			t.Errorf("%s named in %d reports, want 1 (one episode)", uuid, n)
		}
	}
	// The same minute as the agent recorded it before: an Event for every
	// GPU throttled in a sample and not in the one before (no quiet period,
	// no interval).
	eventsBefore := 0
	_, namedBefore := minute(&GPUThrottleTracker{})
	for _, n := range namedBefore {
		eventsBefore += n
	}
	t.Logf("a minute of 8 flipping GPUs: %d Events naming %d GPUs (without hysteresis and rate limit: %d Events)", reports, len(named), eventsBefore)

	// Cool for less than the quiet period, then hot: the same episode.
	last := t0.Add(59 * time.Second)
	at := last.Add(DefaultGPUThrottleQuiet - time.Second)
	if got := tr.Update(at, []telemetryv1alpha1.GPUStatus{gpu("GPU-0", true)}); len(got) != 0 {
		t.Errorf("throttling again within the quiet period: %v, want no report", got)
	}
	// Cool for the whole quiet period, then hot: a new episode, reported
	// at once (the last report is long past).
	tr.Update(at.Add(time.Second), []telemetryv1alpha1.GPUStatus{gpu("GPU-0", false)})
	at = at.Add(DefaultGPUThrottleQuiet)
	if got := tr.Update(at, []telemetryv1alpha1.GPUStatus{gpu("GPU-0", true), gpu("GPU-1", false)}); len(got) != 1 || got[0].UUID != "GPU-0" {
		t.Errorf("throttling after a quiet period: %v, want GPU-0 alone", got)
	}

	// Without hysteresis or rate limit, every flip to hot is an Event (how
	// it was): 30 a minute for one GPU.
	every := GPUThrottleTracker{}
	n := 0
	for s := range 60 {
		n += len(every.Update(t0.Add(time.Duration(s)*time.Second), []telemetryv1alpha1.GPUStatus{gpu("GPU-0", s%2 == 0)}))
	}
	if n != 30 {
		t.Errorf("quiet period and interval 0, 30 flips to hot: %d reports, want 30", n)
	}
}

func TestSummaryNoGPUs(t *testing.T) {
	st := Build(Input{Sample: &collector.Sample{Time: time.Now(), Sources: []telemetryv1alpha1.SourceStatus{
		{Name: telemetryv1alpha1.SourceGPU, State: telemetryv1alpha1.SourceAvailable},
	}}, Interval: time.Second})
	// NVML answered and listed no GPU: a fact, "none", not "n/a".
	if st.Summary.GPUs != "none" {
		t.Errorf("Summary.GPUs = %q, want none", st.Summary.GPUs)
	}
}

// TestSourcesMessage checks the Ready condition's list of sources: read,
// read in part (Available with a reason: Degraded), and not available.
func TestSourcesMessage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sources []telemetryv1alpha1.SourceStatus
		want    string
	}{
		{"all read", []telemetryv1alpha1.SourceStatus{{Name: "cpu", State: "Available"}, {Name: "thermal", State: "Available"}},
			"read: [cpu thermal]"},
		{"thermal read in part, gpu stuck", []telemetryv1alpha1.SourceStatus{
			{Name: "cpu", State: "Available"},
			{Name: "thermal", State: "Available", Reason: "Degraded", Message: "1 of 2 temperature sensors unreadable: ..."},
			{Name: "gpu", State: "Failed", Reason: "NVMLTimeout"},
		}, "read: [cpu thermal]; read in part: [thermal (Degraded)]; not available: [gpu (NVMLTimeout)]"},
	} {
		if diff := cmp.Diff(tc.want, sourcesMessage(tc.sources)); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
}
