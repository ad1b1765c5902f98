// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/collector"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// Defect 7: the power model is fed the node's power without its GPUs. RAPL
// measures CPU packages and DRAM only, so its zones are that power; the
// ACPI power meter measures the whole platform (ACPI 6.5, section 10.4
// "Power Meters"; Documentation/hwmon/acpi_power_meter.rst), GPUs included,
// so their NVML power comes off it.
func TestCPUSideWatts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		power  collector.Power
		want   float64
		wantOK bool
	}{
		{"RAPL and GPUs", collector.Power{GPUWatts: ptr.To(600.0), Zones: []collector.PowerZone{
			{Source: telemetryv1alpha1.PowerSourceRAPL, Watts: 180}, {Source: telemetryv1alpha1.PowerSourceRAPL, Watts: 20},
			{Source: telemetryv1alpha1.PowerSourceNVML, Watts: 600},
		}}, 200, true},
		{"ACPI meter and GPUs", collector.Power{GPUWatts: ptr.To(600.0), Zones: []collector.PowerZone{
			{Source: telemetryv1alpha1.PowerSourceACPI, Watts: 950}, {Source: telemetryv1alpha1.PowerSourceNVML, Watts: 600},
		}}, 350, true},
		{"ACPI meter without GPUs", collector.Power{Zones: []collector.PowerZone{{Source: telemetryv1alpha1.PowerSourceACPI, Watts: 310}}}, 310, true},
		// The meters disagree (the ACPI meter averages over a longer
		// window): never negative.
		{"ACPI below the GPUs", collector.Power{GPUWatts: ptr.To(600.0), Zones: []collector.PowerZone{
			{Source: telemetryv1alpha1.PowerSourceACPI, Watts: 550}, {Source: telemetryv1alpha1.PowerSourceNVML, Watts: 600},
		}}, 0, true},
		{"GPUs only", collector.Power{GPUWatts: ptr.To(600.0), Zones: []collector.PowerZone{{Source: telemetryv1alpha1.PowerSourceNVML, Watts: 600}}}, 0, false},
	} {
		got, ok := cpuSideWatts(&tc.power)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: cpuSideWatts = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}
