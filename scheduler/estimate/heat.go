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
// since its sample, with watts calibrated by b (nil: not calibrated): the
// node's Slot's Heat with reserved in it.
func (b *Book) Heat(n *telemetry.Node, d, reserved Demand) Heat {
	return b.slotWith(n.Name, reserved).Heat(n, d)
}

// Heat predicts a pod of demand d on node n, whose slot s is, with watts
// calibrated by its calibration.
//
// One walk along the node's curve: from the measured load, the reserved
// pods' step, then the pod's from there, each what PodWatts gives for
// the CPUs alone (ReservedWatts, PodWatts of the pod's CPU request),
// calibrated alike.
func (s Slot) Heat(n *telemetry.Node, d Demand) Heat {
	var h Heat
	if n.Models == nil || !n.Models.HasThermal {
		return h
	}
	c, ok := curveFrom(n, Demand{})
	if !ok {
		return h
	}
	upper := func(watts, uncertainty float64) float64 {
		return s.cal.watts(Watts{Mean: watts, Upper: watts + UpperSigmas*uncertainty}).Upper
	}
	if s.Reserved.CPUMilli > 0 {
		w, unc, w1 := c.step(s.Reserved.CPUMilli)
		h.ReservedWatts = upper(w, unc)
		c = c.moved(s.Reserved.CPUMilli, w1)
	}
	if d.CPUMilli > 0 {
		w, unc, _ := c.step(d.CPUMilli)
		h.PodWatts = upper(w, unc)
	}
	t := &n.Models.Thermal
	h.NowWatts = nowCPUWatts(n)
	h.Watts = h.NowWatts + h.ReservedWatts + h.PodWatts
	h.Predicted, h.SteadyMilli, h.LimitMilli = true, t.Steady(h.Watts), t.LimitMilli
	return h
}

// nowCPUWatts is the node's watts less its GPUs', its last plausible
// watts when the sample lacks them: what Heat starts from.
func nowCPUWatts(n *telemetry.Node) float64 {
	watts, gpuWatts := n.Watts, n.GPUWatts
	if !n.HasPower {
		watts, gpuWatts = n.LastWatts, 0
	}
	return float64(max(0, watts-gpuWatts))
}

// SteadyBound is at least s.Heat(n, d).SteadyMilli, from
// PodWattsBound's few multiplications for the reserved pods' step and the
// pod's instead of a walk along the node's curve: EnergyAware passes the
// nodes whose bound is clear of their limit without the walk. ok is false
// where it cannot tell: where Heat predicts nothing, or the model's
// sensor cools as watts rise (a fit gone wrong; Heat says how far).
func (s Slot) SteadyBound(n *telemetry.Node, d Demand) (milli int64, ok bool) {
	if n == nil || n.Models == nil || !n.Models.HasThermal {
		return 0, false
	}
	base, perMilli, fixed, ok := boundWatts(n, s.Reserved, s.cal)
	if !ok {
		return 0, false
	}
	if d.CPUMilli > 0 {
		base += perMilli*float64(d.CPUMilli) + fixed
	}
	// Steady rounds to the milli-degree; Heat sums its parts in another
	// order, and a last bit's difference may round the other way.
	return n.Models.Thermal.Steady(base) + 1, true
}

// boundWatts is what SteadyBound feeds node n's thermal model before the
// pod: the node's watts now and PodWattsBound's bound on the reserved
// pods' step, and for the pod's step perMilli a millicore and fixed (the
// bound calibrated by cal). ok is false where SteadyBound cannot tell:
// no curve, or a thermal model whose sensor cools as watts rise. The
// caller has checked that n has a thermal model. The load bound's heat
// room (heatRoom) reads the same.
func boundWatts(n *telemetry.Node, reserved Demand, cal calibration) (base, perMilli, fixed float64, ok bool) {
	if n.Models.Thermal.MilliPerWatt < 0 {
		return 0, 0, 0, false
	}
	perMilli, fixed, ok = wattsBound(n, cal)
	if !ok {
		return 0, 0, 0, false
	}
	base = nowCPUWatts(n)
	if reserved.CPUMilli > 0 {
		base += perMilli*float64(reserved.CPUMilli) + fixed
	}
	return base, perMilli, fixed, true
}
