// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package publisher

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

func baseStatus() *telemetryv1alpha1.NodeTelemetryStatus {
	return &telemetryv1alpha1.NodeTelemetryStatus{
		Sources: []telemetryv1alpha1.SourceStatus{{Name: telemetryv1alpha1.SourceCPU, State: telemetryv1alpha1.SourceAvailable}},
		CPU:     &telemetryv1alpha1.CPUStatus{LogicalCores: 8, OnlineCores: 8, UtilizationPercent: 40},
		Memory:  &telemetryv1alpha1.MemoryStatus{TotalBytes: 1000, AvailableBytes: 500, UtilizationPercent: 50},
		Thermal: &telemetryv1alpha1.ThermalStatus{HottestSensor: "cpu", HottestMilliCelsius: 60_000, HeadroomMilliCelsius: ptr.To[int64](40_000),
			HottestUnlimitedSensor: "acpitz/thermal_zone0", HottestUnlimitedMilliCelsius: ptr.To[int64](56_000)},
		Power: &telemetryv1alpha1.PowerStatus{Watts: 200, Sources: []telemetryv1alpha1.PowerSource{telemetryv1alpha1.PowerSourceRAPL}},
		NUMA:  []telemetryv1alpha1.NUMANodeStatus{{ID: 0, CPUs: "0-7", LogicalCores: 8, MemoryTotalBytes: 1000, MemoryFreeBytes: 500, CPUUtilizationPercent: ptr.To[int32](40)}},
		GPUs: []telemetryv1alpha1.GPUStatus{{
			Index: 0, UUID: "GPU-a", MemoryTotalBytes: 1000, MemoryUsedBytes: 100, UtilizationPercent: ptr.To[int32](10),
			TemperatureMilliCelsius: ptr.To[int64](50_000), PowerWatts: ptr.To[int32](100), Health: telemetryv1alpha1.GPUHealth{Healthy: true},
			MIG: &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7, Profiles: []telemetryv1alpha1.MIGProfile{
				{Profile: "1g.10gb", Count: 7, MemoryBytes: 10200547328, Allocated: ptr.To[int32](1)},
			}},
			Allocated: ptr.To(false),
			PCIeRoot:  "pci0000:00",
			NVLink:    &telemetryv1alpha1.GPUNVLink{ActiveLinks: 4, Peers: []int32{1}, Group: 0},
		}},
		Windows: &telemetryv1alpha1.WindowsStatus{DurationSeconds: 300, Samples: 300,
			CPUPercent:           &telemetryv1alpha1.UsageWindow{P50: 40, P90: 60, Max: 80},
			MemoryPercent:        &telemetryv1alpha1.UsageWindow{P50: 50, P90: 52, Max: 55},
			ThermalMarginCelsius: &telemetryv1alpha1.MarginWindow{Min: 30, P10: 35, P50: 40},
			Watts:                &telemetryv1alpha1.UsageWindow{P50: 200, P90: 250, Max: 300}},
		Conditions: []metav1.Condition{{Type: telemetryv1alpha1.ConditionOverheating, Status: metav1.ConditionFalse, Reason: "WithinLimits"}},
	}
}

func TestChange(t *testing.T) {
	d := DefaultDeadbands() // 5 points, 2°C, 10%
	for _, tc := range []struct {
		name    string
		mutate  func(s *telemetryv1alpha1.NodeTelemetryStatus)
		changed bool
	}{
		{"identical", func(s *telemetryv1alpha1.NodeTelemetryStatus) {}, false},
		{"cpu +4 points", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.CPU.UtilizationPercent = 44 }, false},
		{"cpu +5 points", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.CPU.UtilizationPercent = 45 }, true},
		{"cpu -5 points", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.CPU.UtilizationPercent = 35 }, true},
		{"cpu went offline", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.CPU.OnlineCores = 7 }, true},
		{"memory +4 points", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Memory.UtilizationPercent = 54 }, false},
		{"memory +6 points", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Memory.UtilizationPercent = 56 }, true},
		{"temperature +1.9°C", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.Thermal.HottestMilliCelsius = 61_900
			s.Thermal.HeadroomMilliCelsius = ptr.To[int64](38_100)
		}, false},
		{"temperature +2°C", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Thermal.HottestMilliCelsius = 62_000 }, true},
		// The sensor without a limit is not the hottest (60°C) but nears
		// the absolute limit on its own.
		{"sensor without a limit +1.9°C", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.Thermal.HottestUnlimitedMilliCelsius = ptr.To[int64](57_900)
		}, false},
		{"sensor without a limit +2°C", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.Thermal.HottestUnlimitedMilliCelsius = ptr.To[int64](58_000)
		}, true},
		{"throttling starts", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Thermal.Throttling = true }, true},
		{"the sensor without a limit goes away", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.Thermal.HottestUnlimitedSensor, s.Thermal.HottestUnlimitedMilliCelsius = "", nil
		}, true},
		{"an alarm is raised", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Thermal.Alarms = 1 }, true},
		{"power +19W of 200 (9.5%)", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Power.Watts = 219 }, false},
		{"power +20W of 200 (10%)", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Power.Watts = 220 }, true},
		{"power source changed", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.Power.Sources = []telemetryv1alpha1.PowerSource{telemetryv1alpha1.PowerSourceHwmon}
		}, true},
		{"power went away", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Power = nil }, true},
		{"source state changed", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Sources[0].State = telemetryv1alpha1.SourceFailed }, true},
		{"condition flipped", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Conditions[0].Status = metav1.ConditionTrue }, true},
		{"condition message only", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Conditions[0].Message = "60.5°C" }, false},
		{"NUMA utilization +5", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.NUMA[0].CPUUtilizationPercent = ptr.To[int32](45) }, true},
		{"NUMA free memory -4% of total", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.NUMA[0].MemoryFreeBytes = 460 }, false},
		{"NUMA free memory -5% of total", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.NUMA[0].MemoryFreeBytes = 450 }, true},
		{"GPU unhealthy", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].Health.Healthy = false }, true},
		{"GPU MIG layout changed", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.GPUs[0].MIG.Profiles[0].Count = 6
		}, true},
		{"GPU MIG profile allocated", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.GPUs[0].MIG.Profiles[0].Allocated = ptr.To[int32](2)
		}, true},
		{"GPU allocated", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].Allocated = ptr.To(true) }, true},
		{"GPU allocation unknown", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].Allocated = nil }, true},
		{"GPU PCIe root changed", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].PCIeRoot = "pci0000:40" }, true},
		{"GPU NVLink went down", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].NVLink.ActiveLinks = 3 }, true},
		{"GPU NVLink peers changed", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].NVLink.Peers = nil }, true},
		{"GPU NVLink group changed", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].NVLink.Group = 1 }, true},
		{"GPU XID event", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].Health.XIDCriticalEvents = 1 }, true},
		{"GPU throttled", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.GPUs[0].ThrottleReasons = []telemetryv1alpha1.GPUThrottleReason{telemetryv1alpha1.GPUThrottleHwThermalSlowdown}
		}, true},
		{"GPU +1°C", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.GPUs[0].TemperatureMilliCelsius = ptr.To[int64](51_000)
		}, false},
		{"GPU power +10W of 100", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].PowerWatts = ptr.To[int32](110) }, true},
		{"GPU memory +40 of 1000 (4%)", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].MemoryUsedBytes = 140 }, false},
		{"GPU memory +50 of 1000 (5%)", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].MemoryUsedBytes = 150 }, true},
		{"GPU removed", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs = nil }, true},
		// Windows: the same deadbands as the instant values they summarize.
		{"window cpu p90 +4 points", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.CPUPercent.P90 = 64 }, false},
		{"window cpu p90 +5 points", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.CPUPercent.P90 = 65 }, true},
		{"window cpu max -5 points", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.CPUPercent.Max = 75 }, true},
		{"window memory p50 +5 points", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.MemoryPercent.P50 = 55 }, true},
		{"window margin min -1°C", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.ThermalMarginCelsius.Min = 29 }, false},
		{"window margin min -2°C", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.ThermalMarginCelsius.Min = 28 }, true},
		{"window margin p10 +2°C", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.ThermalMarginCelsius.P10 = 37 }, true},
		// 24 of 250 is 9.6%, 25 of 250 is 10%.
		{"window watts p90 +24W of 250", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.Watts.P90 = 274 }, false},
		{"window watts p90 +25W of 250", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.Watts.P90 = 275 }, true},
		{"window samples and duration only", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.Windows.Samples, s.Windows.DurationSeconds = 299, 600
		}, false},
		{"window margin went away", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.ThermalMarginCelsius = nil }, true},
		{"windows went away", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows = nil }, true},
		{"load and energy only", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.CPU.LoadAverage = &telemetryv1alpha1.LoadAverage{OneMinuteMilli: 9000}
			s.Power.EnergyJoules = 123456
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := baseStatus()
			tc.mutate(cur)
			why := Change(baseStatus(), cur, d)
			if (why != "") != tc.changed {
				t.Errorf("Change = %q, want changed=%v", why, tc.changed)
			}
		})
	}
}

func TestZeroDeadbandMeansAnyChange(t *testing.T) {
	var zero Deadbands
	if why := Change(baseStatus(), baseStatus(), zero); why != "" {
		t.Errorf("identical statuses with zero deadbands: Change = %q, want none", why)
	}
	cur := baseStatus()
	cur.CPU.UtilizationPercent++
	if Change(baseStatus(), cur, zero) == "" {
		t.Error("a 1-point move with zero deadbands was not a change")
	}
}

func TestStateChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(s *telemetryv1alpha1.NodeTelemetryStatus)
		state  bool
	}{
		{"identical", func(s *telemetryv1alpha1.NodeTelemetryStatus) {}, false},
		// Measured values, however far they move, are not state changes.
		{"cpu 40% -> 100%", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.CPU.UtilizationPercent = 100 }, false},
		{"memory 50% -> 0%", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Memory.UtilizationPercent = 0 }, false},
		{"hottest 60°C -> 105°C, headroom 40 -> -5°C", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.Thermal.HottestMilliCelsius = 105_000
			s.Thermal.HeadroomMilliCelsius = ptr.To[int64](-5_000)
		}, false},
		{"power 200W -> 2000W", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Power.Watts = 2000 }, false},
		{"NUMA cpu 40% -> 90%, free memory 500 -> 0 of 1000", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.NUMA[0].CPUUtilizationPercent = ptr.To[int32](90)
			s.NUMA[0].MemoryFreeBytes = 0
		}, false},
		// Shares of real byte totals: 100 points times 64 GiB must not
		// overflow into a state change.
		{"NUMA memory in use 32 -> 33 GiB of 64 GiB", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.NUMA[0].MemoryFreeBytes = 31 << 30
		}, false},
		{"GPU memory in use 10 -> 70 GiB of 80 GiB", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			s.GPUs[0].MemoryUsedBytes = 70 << 30
		}, false},
		{"GPU util 10% -> 100%, 50°C -> 90°C, 100W -> 400W, memory 100 -> 1000 of 1000", func(s *telemetryv1alpha1.NodeTelemetryStatus) {
			g := &s.GPUs[0]
			g.UtilizationPercent, g.TemperatureMilliCelsius, g.PowerWatts, g.MemoryUsedBytes = ptr.To[int32](100), ptr.To[int64](90_000), ptr.To[int32](400), 1000
		}, false},
		// What no deadband applies to.
		{"source failed", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Sources[0].State = telemetryv1alpha1.SourceFailed }, true},
		{"condition flipped", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Conditions[0].Status = metav1.ConditionTrue }, true},
		{"thermal throttling", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Thermal.Throttling = true }, true},
		{"cpu went offline", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.CPU.OnlineCores = 7 }, true},
		{"power went away", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Power = nil }, true},
		{"GPU utilization went away", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].UtilizationPercent = nil }, true},
		{"GPU unhealthy", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[0].Health.Healthy = false }, true},
		{"window cpu p90 60% -> 100%", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.CPUPercent.P90 = 100 }, false},
		{"window watts went away", func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.Watts = nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Byte totals of a real host.
			base := func() *telemetryv1alpha1.NodeTelemetryStatus {
				s := baseStatus()
				s.NUMA[0].MemoryTotalBytes, s.NUMA[0].MemoryFreeBytes = 64<<30, 32<<30
				s.GPUs[0].MemoryTotalBytes, s.GPUs[0].MemoryUsedBytes = 80<<30, 10<<30
				return s
			}
			cur := base()
			tc.mutate(cur)
			why := StateChange(base(), cur)
			if (why != "") != tc.state {
				t.Errorf("StateChange = %q, want state change %v", why, tc.state)
			}
		})
	}
}
