// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"testing"

	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

func gpu(watts, util, limit int32) telemetryv1alpha1.GPUStatus {
	return telemetryv1alpha1.GPUStatus{PowerWatts: ptr.To(watts), UtilizationPercent: ptr.To(util), PowerLimitWatts: ptr.To(limit)}
}

// TestGPUPower: a GPU's marginal power comes from this node's busy and
// idle GPUs, not the average of all; the enforced limit stands in for a
// busy GPU until one is seen.
func TestGPUPower(t *testing.T) {
	for _, tc := range []struct {
		name             string
		gpus             []telemetryv1alpha1.GPUStatus
		basis            Basis
		wantIdle, wantBu float64
	}{
		{"busy and idle", []telemetryv1alpha1.GPUStatus{gpu(640, 97, 700), gpu(660, 90, 700), gpu(70, 0, 700), gpu(72, 3, 700)}, BasisFitted, 71, 650},
		// 40 % busy is neither: it tells nothing of either end.
		{"half-busy ignored", []telemetryv1alpha1.GPUStatus{gpu(300, 40, 700), gpu(70, 0, 700)}, BasisPrior, 70, 700},
		{"all idle", []telemetryv1alpha1.GPUStatus{gpu(55, 0, 400), gpu(57, 0, 400)}, BasisPrior, 56, 400},
		{"all busy", []telemetryv1alpha1.GPUStatus{gpu(390, 95, 400)}, BasisPrior, 40, 390},
		{"no readings", []telemetryv1alpha1.GPUStatus{{Index: 0}}, BasisNone, 0, 0},
	} {
		b, idle, busy := gpuPower(tc.gpus)
		if b != tc.basis || idle != tc.wantIdle || busy != tc.wantBu {
			t.Errorf("%s: %v idle %v busy %v, want %v %v %v", tc.name, b, idle, busy, tc.basis, tc.wantIdle, tc.wantBu)
		}
	}
}

// TestModelsFrom reads the curve, and a model from an agent that published
// only idle and full-load watts as their straight line.
func TestModelsFrom(t *testing.T) {
	st := &telemetryv1alpha1.NodeTelemetryStatus{Power: &telemetryv1alpha1.PowerStatus{Model: &telemetryv1alpha1.PowerModel{
		Ready: true, Basis: telemetryv1alpha1.PowerModelPrior, IdleWatts: ptr.To[int32](52), FullLoadWatts: ptr.To[int32](457),
		CurveWatts:            []int32{52, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457},
		CurveUncertaintyWatts: []int32{1, 1, 1, 1, 1, 1, 10, 20, 30, 40, 50},
	}}}
	m := modelsFrom(st)
	if w, u, ok := m.CurveAt(0.65); !ok || m.CurveBasis != BasisPrior || w != 273.5 || u != 15 {
		t.Errorf("curve at 65%%: %v ± %v (%v, %v), want 273.5 ± 15, prior", w, u, ok, m.CurveBasis)
	}
	st.Power.Model.CurveWatts, st.Power.Model.CurveUncertaintyWatts, st.Power.Model.Basis = nil, nil, ""
	m = modelsFrom(st)
	if w, _, ok := m.CurveAt(0.5); !ok || m.CurveBasis != BasisFitted || w != 254.5 {
		t.Errorf("line at 50%%: %v (%v), want 254.5", w, ok)
	}
	st.Power.Model.Ready = false
	if m := modelsFrom(st); m != nil {
		t.Errorf("a model that is not ready was read: %+v", m)
	}
}
