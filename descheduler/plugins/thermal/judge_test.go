// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package thermal

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// modelled is a 16-core node at 50 % CPU drawing watts, with a power
// curve from 100 W idle to 300 W at full load and a thermal model
// settling at 25°C + 0.35°C/W, limit 100°C.
func modelled(watts int32) *telemetry.Node {
	m := &telemetry.Models{CurveBasis: telemetry.BasisFitted, HasThermal: true,
		Thermal: telemetry.ThermalModel{Sensor: "pkg", LimitMilli: 100_000, AmbientMilli: 25_000, MilliPerWatt: 350}}
	for i := range m.Watts {
		m.Watts[i] = 100 + 20*float64(i)
	}
	return &telemetry.Node{Name: "n", HasCPU: true, LogicalCores: 16, CPUPercent: 50, HasPower: true, Watts: watts, Models: m}
}

func TestJudgeNeedsTheWattsThatBringTheModelUnder(t *testing.T) {
	book := estimate.NewBook(telemetry.NewCache(), estimate.DefaultOptions())
	measuredHot := &telemetry.Node{Name: "m", HasThermal: true, HasHeadroom: true, HeadroomMilli: 3_000}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	// Its thermal source failed an hour ago; the cache holds the hot
	// reading it had then (telemetry.Node.ThermalKnown).
	failed := &telemetry.Node{Name: "f", HasThermal: true, HasHeadroom: true, HeadroomMilli: 3_000,
		ThermalFailed: "thermal source failed (ReadError: hwmon0: no such device)", ThermalObserved: now.Add(-time.Hour), Observed: now}
	for _, tc := range []struct {
		name string
		node *telemetry.Node
		want Judgement
	}{
		// steady 25 + 0.35·150 = 77.5°C < 95°C.
		{name: "predicted under limit - margin", node: modelled(150), want: Judgement{}},
		// steady 25 + 0.35·240 = 109°C >= 95°C; under at
		// w < (100000-5000-25000-1)/350 = 199.997 W: shed 240-199.997 = 40.003 W.
		{name: "predicted over: shed to under", node: modelled(240), want: Judgement{Hot: true, NeedWatts: 40.003}},
		// headroom 3°C <= 5°C, no model: hot, need unknown (one pod).
		{name: "measured hot without a model", node: measuredHot, want: Judgement{Hot: true}},
		// Past --telemetry-thermal-hold (2m) EnergyAware no longer
		// counts the held reading; neither does the descheduler.
		{name: "a failed sensor's reading past the thermal hold", node: failed, want: Judgement{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Judge(tc.node, book, 5_000, 90_000, tc.node.ThermalKnown(now, telemetry.DefaultThermalHold))
			got.Why = ""
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 0.001 && b-a < 0.001 })); diff != "" {
				t.Errorf("Judge (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFreesCountsTheCPUSideAgainstTheNodesSensor: on a node whose CPU
// sensor is hot, a 1-GPU pod that keeps half a CPU busy cools it by that
// half CPU's watts, not by its GPU's; a 4-CPU pod cools it more.
func TestFreesCountsTheCPUSideAgainstTheNodesSensor(t *testing.T) {
	book := estimate.NewBook(telemetry.NewCache(), estimate.DefaultOptions())
	n := modelled(200)
	n.Models.GPUBasis, n.Models.GPUIdleWatts, n.Models.GPUBusyWatts = telemetry.BasisFitted, 70, 476
	n.GPUs = []telemetry.GPU{{Index: 0, Model: "NVIDIA H100 80GB HBM3"}, {Index: 1, Model: "NVIDIA H100 80GB HBM3"}}
	gpuPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpu", UID: "gpu"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
			Limits: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}}}
	cpuPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cpu", UID: "cpu"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}}}}}}
	gpu, cpu := Frees(book, n, gpuPod, nil), Frees(book, n, cpuPod, nil)
	// The curve climbs 20 W per 10 % of 16 cores: 12.5 W a core.
	if math.Abs(gpu-6.25) > 0.01 || math.Abs(cpu-50) > 0.01 {
		t.Errorf("Frees: GPU pod %.2f W, 4-CPU pod %.2f W; want 6.25 W (half a core) and 50 W (four cores)", gpu, cpu)
	}
}
