// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"math"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// migNode is r740Node with 8 A100s of 400 W limit, all in MIG mode (7
// compute slices each, cut into 7 1g.10gb devices): no utilization, so the
// GPU power model is the prior, 400 W busy and 40 W idle.
func migNode() *telemetry.Node {
	n := r740Node(0)
	st := &telemetryv1alpha1.NodeTelemetryStatus{}
	for i := range 8 {
		st.GPUs = append(st.GPUs, telemetryv1alpha1.GPUStatus{
			Index: int32(i), UUID: "GPU-x", Model: "NVIDIA A100-SXM4-80GB", MemoryTotalBytes: 80 << 30,
			PowerWatts: ptr.To[int32](90), PowerLimitWatts: ptr.To[int32](400), Health: telemetryv1alpha1.GPUHealth{Healthy: true},
			MIGEnabled: ptr.To(true),
			MIG: &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7, Profiles: []telemetryv1alpha1.MIGProfile{
				{Profile: "1g.10gb", Count: 7, MemoryBytes: 10 << 30},
			}},
		})
	}
	g := telemetry.FromStatus("n", st)
	n.GPUs, n.Models.GPUBasis, n.Models.GPUIdleWatts, n.Models.GPUBusyWatts = g.GPUs, g.Models.GPUBasis, g.Models.GPUIdleWatts, g.Models.GPUBusyWatts
	return n
}

// A MIG device draws its share of its GPU's busy-minus-idle watts: its
// profile's compute slices over the GPU's (NVML reports power per GPU,
// not per MIG device).
func TestMIGSliceWatts(t *testing.T) {
	n := migNode()
	for _, tc := range []struct {
		name string
		d    Demand
		want float64
	}{
		{name: "single strategy: one slice", d: Demand{GPUs: 1}, want: 360.0 / 7},    // (400-40) * 1/7
		{name: "single strategy: 9 slices", d: Demand{GPUs: 9}, want: 9 * 360.0 / 7}, // 9 * (400-40) * 1/7
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, ok := PodWatts(n, tc.d, Demand{})
			if !ok || math.Abs(w.Mean-tc.want) > 1e-9 {
				t.Errorf("PodWatts = %v, %v; want %.3f", w, ok, tc.want)
			}
		})
	}
}

// The mixed strategy's MIG resources count their profile's compute slices.
func TestMIGSlicesOfMixedStrategyPods(t *testing.T) {
	n := migNode()
	c := NewCounter(DefaultOptions())
	for _, tc := range []struct {
		name       string
		requests   v1.ResourceList
		wantSlices int64
		wantWatts  float64
	}{
		{name: "one 1g.10gb", requests: v1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("1")}, wantSlices: 1, wantWatts: 360.0 / 7},
		{name: "two 3g.40gb", requests: v1.ResourceList{"nvidia.com/mig-3g.40gb": resource.MustParse("2")}, wantSlices: 6, wantWatts: 6 * 360.0 / 7},
		{name: "a whole 7g.80gb and a 1g.10gb", requests: v1.ResourceList{"nvidia.com/mig-7g.80gb": resource.MustParse("1"), "nvidia.com/mig-1g.10gb": resource.MustParse("1")}, wantSlices: 8, wantWatts: 8 * 360.0 / 7},
		// A compute instance of 2 of its GPU instance's 3 slices: its 2.
		{name: "a 2c.3g.40gb compute instance", requests: v1.ResourceList{"nvidia.com/mig-2c.3g.40gb": resource.MustParse("1")}, wantSlices: 2, wantWatts: 2 * 360.0 / 7},
		{name: "another vendor's resource", requests: v1.ResourceList{"example.com/mig-1g.10gb": resource.MustParse("1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Resources: v1.ResourceRequirements{Requests: tc.requests, Limits: tc.requests}}}}}
			d := c.Of(pod)
			if d.MIGSlices != tc.wantSlices || d.GPUs != 0 {
				t.Errorf("demand = %+v, want %d MIG slices and no GPU", d, tc.wantSlices)
			}
			if w, _ := PodWatts(n, Demand{MIGSlices: d.MIGSlices}, Demand{}); math.Abs(w.Mean-tc.wantWatts) > 1e-9 {
				t.Errorf("PodWatts = %v, want %.3f", w, tc.wantWatts)
			}
		})
	}
}
