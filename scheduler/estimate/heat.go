// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import "github.com/telesched/telesched/scheduler/telemetry"

// Heat is where a node's modelled sensor settles with a pod: the node's
// CPU-side watts now, plus the upper estimates of the pods reserved since
// its sample and of the pod (GPUs excluded: the thermal model is of a CPU
// sensor), through the node's thermal model. Whether that is too hot is
// the plugins' call (EnergyAware's margin).
type Heat struct {
	// Predicted is false without a thermal model or a power estimate;
	// the rest is then zero.
	Predicted bool
	// SteadyMilli is the sensor's steady temperature with the pod,
	// LimitMilli its limit, in milli-°C.
	SteadyMilli, LimitMilli int64
	// Watts is NowWatts + ReservedWatts + PodWatts, what the model is
	// fed: the node's watts less its GPUs' (its last plausible watts
	// when the sample lacks them), the reserved pods' CPUs' upper
	// estimate and the pod's.
	Watts, NowWatts, ReservedWatts, PodWatts float64
}

// Heat predicts a pod of demand d on node n, which has reserved placed
// since its sample, with watts calibrated by b (nil: not calibrated).
//
// One walk along the node's curve: from the measured load, the reserved
// pods' step, then the pod's from there, each what PodWatts gives for
// the CPUs alone (ReservedWatts, PodWatts of the pod's CPU request),
// calibrated alike.
func (b *Book) Heat(n *telemetry.Node, d, reserved Demand) Heat {
	var h Heat
	if n.Models == nil || !n.Models.HasThermal {
		return h
	}
	c, ok := curveFrom(n, Demand{})
	if !ok {
		return h
	}
	ratio, count := 1.0, int64(0)
	if b != nil {
		ratio, count = b.Calibration(n.Name)
	}
	upper := func(watts, uncertainty float64) float64 {
		w := Watts{Mean: watts, Upper: watts + UpperSigmas*uncertainty}
		if count >= MinCalibrations {
			w = calibratedBy(ratio, w)
		}
		return w.Upper
	}
	if reserved.CPUMilli > 0 {
		w, unc, w1 := c.step(reserved.CPUMilli)
		h.ReservedWatts = upper(w, unc)
		c = c.moved(reserved.CPUMilli, w1)
	}
	if d.CPUMilli > 0 {
		w, unc, _ := c.step(d.CPUMilli)
		h.PodWatts = upper(w, unc)
	}
	t := &n.Models.Thermal
	watts, gpuWatts := n.Watts, n.GPUWatts
	if !n.HasPower {
		watts, gpuWatts = n.LastWatts, 0
	}
	h.NowWatts = float64(max(0, watts-gpuWatts))
	h.Watts = h.NowWatts + h.ReservedWatts + h.PodWatts
	h.Predicted, h.SteadyMilli, h.LimitMilli = true, t.Steady(h.Watts), t.LimitMilli
	return h
}
