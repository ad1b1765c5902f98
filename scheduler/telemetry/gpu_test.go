// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// A GPU in MIG mode reports no utilization of its own (its MIG devices
// run the work), and an agent that published 0 for one must not make its
// power an idle GPU's: 250 W from a MIG GPU at "0 %" is not idle.
func TestGPUPowerIgnoresMIGUtilization(t *testing.T) {
	st := &telemetryv1alpha1.NodeTelemetryStatus{GPUs: []telemetryv1alpha1.GPUStatus{
		{Index: 0, PowerWatts: ptr.To[int32](300), PowerLimitWatts: ptr.To[int32](400), UtilizationPercent: ptr.To[int32](97)},
		{Index: 1, PowerWatts: ptr.To[int32](250), PowerLimitWatts: ptr.To[int32](400), UtilizationPercent: ptr.To[int32](0), MIGEnabled: ptr.To(true)},
	}}
	type model struct {
		Basis      Basis
		Idle, Busy float64
	}
	basis, idle, busy := gpuPower(st.GPUs)
	// busy: GPU 0's 300 W; idle: no idle GPU, a tenth of the mean limit.
	if diff := cmp.Diff(model{BasisPrior, 40, 300}, model{basis, idle, busy}); diff != "" {
		t.Errorf("GPU power model (-want +got):\n%s", diff)
	}
}

func TestGPULayout(t *testing.T) {
	st := &telemetryv1alpha1.NodeTelemetryStatus{GPUs: []telemetryv1alpha1.GPUStatus{
		{
			Index: 0, MIGEnabled: ptr.To(true), PCIeRoot: "pci0000:00",
			MIG: &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7, Profiles: []telemetryv1alpha1.MIGProfile{
				{Profile: "1g.10gb", Count: 3, MemoryBytes: 10 << 30, Allocated: ptr.To[int32](2)},
				{Profile: "3g.40gb", Count: 1, MemoryBytes: 40 << 30},
				{Profile: "1c.3g.40gb", Count: 1, MemoryBytes: 40 << 30, Allocated: ptr.To[int32](9)},
			}},
			NVLink: &telemetryv1alpha1.GPUNVLink{ActiveLinks: 12, Peers: []int32{1, 63}, Group: 0},
		},
		{Index: 1, MIGEnabled: ptr.To(false), Allocated: ptr.To(true), NVLink: &telemetryv1alpha1.GPUNVLink{ActiveLinks: 18, NVSwitch: true, Group: 0}},
		{Index: 2, Allocated: ptr.To(false)},
		// MIG layout without MIG mode is ignored.
		{Index: 3, MIG: &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7}},
	}}
	type layout struct {
		MIG           bool
		ComputeSlices int32
		MIGProfiles   []MIGProfile
		Allocated     int8
		NVSwitch      bool
		LinkGroup     int32
		Peers         uint64
		PCIeRoot      string
	}
	want := []layout{
		{MIG: true, ComputeSlices: 7, MIGProfiles: []MIGProfile{
			{Profile: "1g.10gb", Resource: "1g.10gb", Count: 3, MemoryBytes: 10 << 30, Slices: 1, Allocated: 2},
			{Profile: "3g.40gb", Resource: "3g.40gb", Count: 1, MemoryBytes: 40 << 30, Slices: 3, Allocated: -1},
			{Profile: "1c.3g.40gb", Resource: "1c.3g.40gb", Count: 1, MemoryBytes: 40 << 30, Slices: 1, Allocated: 1}, // 1 of its GPU instance's 3 slices; allocated 9 of 1: at most its count
		}, Allocated: -1, LinkGroup: 0, Peers: 1<<1 | 1<<63, PCIeRoot: "pci0000:00"},
		{Allocated: 1, NVSwitch: true, LinkGroup: 0},
		{Allocated: 0, LinkGroup: -1},
		{Allocated: -1, LinkGroup: -1},
	}
	var got []layout
	for _, g := range FromStatus("n", st).GPUs {
		got = append(got, layout{g.MIG, g.ComputeSlices, g.MIGProfiles, g.Allocated, g.NVSwitch, g.LinkGroup, g.Peers, g.PCIeRoot})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GPU layout (-want +got):\n%s", diff)
	}
}

// TestGPUTooHot: EnergyAware's rule of a GPU too hot for a GPU pod.
func TestGPUTooHot(t *testing.T) {
	at := func(tempC int64) GPU {
		return GPU{Index: 2, Healthy: true, HasTemperature: true, TemperatureMilli: tempC * 1000, HasSlowdown: true, SlowdownMilli: 90_000}
	}
	for _, tc := range []struct {
		name string
		g    GPU
		want string
	}{
		{"at slowdown - margin", at(87), "GPU 2 at 87.0°C >= slowdown 90.0°C - margin 3.0°C"},
		{"under it", at(86), ""},
		{"in thermal slowdown, cool by its reading", func() GPU { g := at(60); g.ThermalThrottled = true; return g }(), "GPU 2 in thermal slowdown"},
		{"no temperature", func() GPU { g := at(95); g.HasTemperature = false; return g }(), ""},
		{"no slowdown temperature", func() GPU { g := at(95); g.HasSlowdown = false; return g }(), ""},
	} {
		if got := tc.g.TooHot(3_000); got != tc.want {
			t.Errorf("%s: TooHot = %q, want %q", tc.name, got, tc.want)
		}
	}
}
