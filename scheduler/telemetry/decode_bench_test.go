// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// benchObject is a NodeTelemetry as the scheduler's informers hand it over
// in the throughput benchmark (test/bench/scheduler): CPU, memory, thermal
// and power with a model, the agent's managed fields entry.
func benchObject(b *testing.B) *unstructured.Unstructured {
	b.Helper()
	now := metav1.Now()
	st := telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime: now, IntervalSeconds: 5, AgentVersion: "bench",
		CPU:    &telemetryv1alpha1.CPUStatus{LogicalCores: 64, OnlineCores: 64, UtilizationPercent: 42},
		Memory: &telemetryv1alpha1.MemoryStatus{TotalBytes: 256 << 30, AvailableBytes: 128 << 30, UtilizationPercent: 50},
		Thermal: &telemetryv1alpha1.ThermalStatus{HottestSensor: "coretemp.0/Package id 0", HottestMilliCelsius: 60_000,
			LimitMilliCelsius: ptr.To[int64](100_000), LimitType: telemetryv1alpha1.ThermalLimitCritical, HeadroomMilliCelsius: ptr.To[int64](40_000)},
		Power: &telemetryv1alpha1.PowerStatus{Watts: 300, Sources: []telemetryv1alpha1.PowerSource{telemetryv1alpha1.PowerSourceRAPL}, EnergyJoules: 1,
			Model: &telemetryv1alpha1.PowerModel{Ready: true, Basis: telemetryv1alpha1.PowerModelFitted, Samples: 100, UtilizationSpreadPercent: 60,
				IdleWatts: ptr.To[int32](150), FullLoadWatts: ptr.To[int32](450), CurveWatts: make([]int32, 11), CurveUncertaintyWatts: make([]int32, 11)}},
	}
	for k := range st.Power.Model.CurveWatts {
		st.Power.Model.CurveWatts[k], st.Power.Model.CurveUncertaintyWatts[k] = 150+30*int32(k), 5
	}
	nt := &telemetryv1alpha1.NodeTelemetry{
		TypeMeta: metav1.TypeMeta{APIVersion: telemetryv1alpha1.SchemeGroupVersion.String(), Kind: "NodeTelemetry"},
		ObjectMeta: metav1.ObjectMeta{Name: "node-00042", ResourceVersion: "12345", ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: AgentFieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "telemetry.telesched.io/v1alpha1", Subresource: "status", Time: &now},
		}},
		Status: st,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nt)
	if err != nil {
		b.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// BenchmarkDecode is the cache's work per NodeTelemetry event: an object
// to a node view.
func BenchmarkDecode(b *testing.B) {
	u := benchObject(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(u); err != nil {
			b.Fatal(err)
		}
	}
}
