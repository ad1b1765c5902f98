// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"math"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/powercurve"
)

// CurveKnots is how many points a power curve has: 0 %, 10 % … 100 %.
const CurveKnots = powercurve.Knots

// Basis is what a model rests on.
type Basis uint8

const (
	// BasisNone: no model.
	BasisNone Basis = iota
	// BasisPrior: the hardware's identity, joined to few samples.
	BasisPrior
	// BasisFitted: the node's own samples.
	BasisFitted
)

func (b Basis) String() string {
	switch b {
	case BasisPrior:
		return "prior"
	case BasisFitted:
		return "fitted"
	}
	return "none"
}

// Models are a node's learned models, as its agent published them.
type Models struct {
	// CurveBasis is BasisNone when there is no power curve; Watts and
	// Uncertainty are the curve at 0 %, 10 % … 100 % CPU.
	CurveBasis  Basis
	Watts       powercurve.Curve
	Uncertainty powercurve.Curve
	// GPUBasis is BasisNone when there is no GPU power model; GPUIdleWatts
	// and GPUBusyWatts are one GPU's power idle and busy.
	GPUBasis                   Basis
	GPUIdleWatts, GPUBusyWatts float64
	// Thermal is the thermal model; HasThermal false when there is none.
	HasThermal bool
	Thermal    ThermalModel
}

// ThermalModel is a sensor's first-order thermal response: it settles at
// AmbientMilli + MilliPerWatt × watts.
type ThermalModel struct {
	Sensor       string
	LimitMilli   int64
	AmbientMilli int64
	MilliPerWatt int64
	Tau          int32 // seconds
	Samples      int32
}

// Steady is where the sensor settles at watts, milli-°C.
func (t *ThermalModel) Steady(watts float64) int64 {
	return t.AmbientMilli + int64(math.Round(float64(t.MilliPerWatt)*watts))
}

// CurveAt is the power curve at utilization u in [0, 1], and its
// uncertainty there; ok false without a curve.
func (m *Models) CurveAt(u float64) (watts, uncertainty float64, ok bool) {
	if m == nil || m.CurveBasis == BasisNone {
		return 0, 0, false
	}
	return m.Watts.At(u), m.Uncertainty.At(u), true
}

// WattsAt is CurveAt's watts alone, for callers that need no uncertainty.
func (m *Models) WattsAt(u float64) (watts float64, ok bool) {
	if m == nil || m.CurveBasis == BasisNone {
		return 0, false
	}
	return m.Watts.At(u), true
}

// CurveRise is the curve's watts at 100 % CPU less at 0 % (its last knot
// less its first); 0 without a curve.
func (m *Models) CurveRise() float64 {
	if m == nil || m.CurveBasis == BasisNone {
		return 0
	}
	return m.Watts[len(m.Watts)-1] - m.Watts[0]
}

// GPU utilization bounds: a GPU at most IdleGPUPercent busy counts as idle,
// one at least BusyGPUPercent busy as busy.
const (
	IdleGPUPercent = 5
	BusyGPUPercent = 80
)

// gpuPower is what one of the node's GPUs draws idle and busy, from what
// NVML shows of them in this sample: the mean power of its idle GPUs and of
// its busy GPUs (fitted when it has both); for busy without a busy GPU, the
// mean enforced power limit, and for idle without an idle GPU a tenth of it
// (prior). BasisNone without GPU power readings or limits to go on.
func gpuPower(gpus []telemetryv1alpha1.GPUStatus) (Basis, float64, float64) {
	var idle, busy, limit float64
	var nIdle, nBusy, nLimit int
	for _, g := range gpus {
		if g.PowerLimitWatts != nil {
			limit += float64(*g.PowerLimitWatts)
			nLimit++
		}
		// A GPU in MIG mode has no utilization of its own (NVML reports
		// none; its MIG devices run the work): its power tells neither
		// idle nor busy, whatever utilization an agent put beside it.
		if g.PowerWatts == nil || g.UtilizationPercent == nil || (g.MIGEnabled != nil && *g.MIGEnabled) {
			continue
		}
		switch u := *g.UtilizationPercent; {
		case u <= IdleGPUPercent:
			idle += float64(*g.PowerWatts)
			nIdle++
		case u >= BusyGPUPercent:
			busy += float64(*g.PowerWatts)
			nBusy++
		}
	}
	basis := BasisFitted
	if nBusy > 0 {
		busy /= float64(nBusy)
	} else if nLimit > 0 {
		busy, basis = limit/float64(nLimit), BasisPrior
	} else {
		return BasisNone, 0, 0
	}
	if nIdle > 0 {
		idle /= float64(nIdle)
	} else if nLimit > 0 {
		idle, basis = limit/float64(nLimit)/10, BasisPrior
	} else {
		return BasisNone, 0, 0
	}
	return basis, idle, max(idle, busy)
}

// modelsFrom reads a status's models; nil when it has none. A ready power
// model without a curve (an agent older than curves) reads as the straight
// line between its idle and full-load watts, fitted.
func modelsFrom(st *telemetryv1alpha1.NodeTelemetryStatus) *Models {
	m := &Models{}
	if p := st.Power; p != nil && p.Model != nil && p.Model.Ready {
		pm := p.Model
		switch {
		case len(pm.CurveWatts) == CurveKnots && len(pm.CurveUncertaintyWatts) == CurveKnots:
			m.CurveBasis = BasisFitted
			if pm.Basis == telemetryv1alpha1.PowerModelPrior {
				m.CurveBasis = BasisPrior
			}
			for k := range CurveKnots {
				m.Watts[k], m.Uncertainty[k] = float64(pm.CurveWatts[k]), float64(pm.CurveUncertaintyWatts[k])
			}
		case pm.IdleWatts != nil && pm.FullLoadWatts != nil:
			m.CurveBasis = BasisFitted
			for k := range m.Watts {
				m.Watts[k] = float64(*pm.IdleWatts) + float64(*pm.FullLoadWatts-*pm.IdleWatts)*float64(k)/(CurveKnots-1)
			}
		}
	}
	m.GPUBasis, m.GPUIdleWatts, m.GPUBusyWatts = gpuPower(st.GPUs)
	if t := st.Thermal; t != nil && t.Model != nil {
		tm := t.Model
		m.HasThermal = true
		m.Thermal = ThermalModel{
			Sensor: tm.Sensor, LimitMilli: tm.LimitMilliCelsius, AmbientMilli: tm.AmbientMilliCelsius,
			MilliPerWatt: int64(tm.MilliCelsiusPerWatt), Tau: tm.TimeConstantSeconds, Samples: tm.Samples,
		}
	}
	if m.CurveBasis == BasisNone && m.GPUBasis == BasisNone && !m.HasThermal {
		return nil
	}
	return m
}
