// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"math"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// Watts is what pods add to a node's power draw: Mean is the best
// estimate, read off the node's power curve; Upper adds UpperSigmas of the
// curve's uncertainty at the load the pods bring the node to (a prior's
// shape is unsure far from the node's samples, a fit's beyond them).
//
// One convention for every plugin: a pod's own watts are ranked by Mean
// (EnergyAware's score, the best estimate of what the fleet will burn),
// and anything that guards a limit counts Upper: the pods reserved on a
// node since its sample, in a rack's sum (PowerBudget) and in the heat
// they will add (EnergyAware's prediction), and the pod being placed
// against a budget.
type Watts struct {
	Mean, Upper float64
}

// Plus is w and o together.
func (w Watts) Plus(o Watts) Watts { return Watts{Mean: w.Mean + o.Mean, Upper: w.Upper + o.Upper} }

// PodWatts is what a pod of demand d adds to node n, on which pods of
// reserved were placed since its sample: the node's power curve at its
// estimated load (measured utilization plus reserved) with the pod, minus
// without, plus a busy GPU's power less an idle one's for each of the
// pod's GPUs, claimed ones too (BusyGPUs), and that GPU's share for each MIG device
// (PodGPUWatts). The CPU side is never below MinSlopeShare of the curve's
// mean rise over the pod's load. ok is false when the node has no watts
// (fresh or held), no CPU count or no plausible curve; never negative.
func PodWatts(n *telemetry.Node, d, reserved Demand) (w Watts, ok bool) {
	c, ok := curveFrom(n, reserved)
	if !ok {
		return Watts{}, false
	}
	gpu := PodGPUWatts(n, d)
	if d.CPUMilli <= 0 {
		return Watts{Mean: gpu, Upper: gpu}, true
	}
	cpu, unc1 := c.add(d.CPUMilli)
	return Watts{Mean: cpu + gpu, Upper: cpu + UpperSigmas*unc1 + gpu}, true
}

// AmortizedCPUWatts is the CPU side of what a pod of demand d is charged
// on node n to rank it, when up to pods-1 more pods like it may follow it
// there: the least, over k = 1 to pods, of what k such pods add to the
// node's power curve (from its estimated load, as PodWatts) divided by k.
// Only the k whose CPUs fit in headroomMilli, and within the node's full
// load, count; the pod itself always does. pods 1 gives PodWatts' CPU
// side.
//
// A power curve climbs steeply from idle to its first knee (SPECpower's
// 10 % target load costs many servers half their idle watts again) and
// gently after it. Ranked by its own marginal watts, the first pod on a
// node below the knee pays the whole climb and goes elsewhere; so does
// every pod after it, and the node's cheap CPUs beyond the knee stay idle
// while other nodes climb their steeper tops. Charged its share of the
// climb, the pod goes where the pods like it will cost least together.
// On a node past its knee the least is k = 1, the pod's own watts.
func AmortizedCPUWatts(n *telemetry.Node, d, reserved Demand, pods int, headroomMilli int64) (float64, bool) {
	c, ok := curveFrom(n, reserved)
	if !ok {
		return 0, false
	}
	if d.CPUMilli <= 0 {
		return 0, true
	}
	if c.m.Watts.ConvexFrom(c.u0) {
		// k pods add at least k times what one adds (the floor too
		// grows in proportion while within 100 %): one is the least,
		// with no walk over the others.
		pods = 1
	}
	best := math.Inf(1)
	for k := int64(1); k <= int64(max(1, pods)); k++ {
		// Pods past the node's full load would run on no CPU: a curve
		// that stops rising at 100 % would share its last step among
		// them for nothing.
		if k > 1 && (k*d.CPUMilli > headroomMilli || c.u0+float64(k*d.CPUMilli)/c.capacityMilli > 1) {
			break
		}
		best = math.Min(best, c.addWatts(k*d.CPUMilli)/float64(k))
	}
	return best, true
}

// MinSlopeShare: a published curve never rises, over any stretch of load,
// less than this share of its mean rise (its watts at 100 % less at 0 %,
// spread evenly); where a learned curve does, the estimate takes the
// share. Of the SPECpower_ssj2008 results in this repository's fleets
// and tests, the flattest 10-point segment against the curve's mean one
// is 0.44 (Dell R740, power_ssj2008-20170829-00780), 0.50 (Supermicro
// 6025B-TR+, 2008, -20080115-00030), 0.51 to 0.54 (Dell T620, R830,
// R720, R620, R940) and 0.60 to 0.61 (Dell R640, IBM x3550 M3). A
// learned curve flatter than that is the fit's doing: noisy bins that
// would make it fall are tied into a flat stretch, and a node whose curve
// was flat where it ran (a 2008 Xeon at 25 %, +0 W a busy core) looked
// free to the scheduler, and took pods that cost it 16 to 28 W each.
const MinSlopeShare = 0.4

// nodeCurve is a node's power curve read from its estimated load: what
// PodWatts and AmortizedCPUWatts step along.
type nodeCurve struct {
	m                 *telemetry.Models
	capacityMilli     float64
	u0, w0            float64
	floorWattsPerUnit float64 // MinSlopeShare of the curve's mean rise
}

// curveFrom reads node n's curve at its estimated load, its measured
// utilization plus reserved; false when the node has no watts (fresh or
// held), no CPU count or no plausible curve.
func curveFrom(n *telemetry.Node, reserved Demand) (nodeCurve, bool) {
	if !hasCurve(n) {
		return nodeCurve{}, false
	}
	c := nodeCurve{m: n.Models, capacityMilli: float64(n.LogicalCores) * 1000}
	c.u0 = float64(n.CPUPercent)/100 + float64(reserved.CPUMilli)/c.capacityMilli
	w0, _ := n.Models.WattsAt(c.u0)
	c.w0, c.floorWattsPerUnit = w0, MinSlopeShare*max(0, n.Models.CurveRise())
	return c, true
}

// hasCurve is true where curveFrom reads a curve: the node has watts
// (fresh or held), a CPU count and a power curve.
func hasCurve(n *telemetry.Node) bool {
	return n != nil && (n.HasPower || n.HasLastWatts) && n.HasCPU && n.LogicalCores > 0 &&
		n.Models != nil && n.Models.CurveBasis != telemetry.BasisNone
}

// add is what cpuMilli more CPU adds to the curve from the estimated
// load, never below the floor over the stretch of it within 0-100 %, nor
// below 0; and the curve's uncertainty at the load with it.
func (c nodeCurve) add(cpuMilli int64) (watts, uncertainty float64) {
	watts, uncertainty, _ = c.step(cpuMilli)
	return watts, uncertainty
}

// step is add, and the curve's watts at the load with cpuMilli more
// (for moved).
func (c nodeCurve) step(cpuMilli int64) (watts, uncertainty, w1 float64) {
	u1 := c.u0 + float64(cpuMilli)/c.capacityMilli
	w1, unc1, _ := c.m.CurveAt(u1)
	floor := c.floorWattsPerUnit * max(0, min(u1, 1)-min(c.u0, 1))
	return max(w1-c.w0, floor, 0), unc1, w1
}

// addWatts is add's watts alone, without the curve's uncertainty.
func (c nodeCurve) addWatts(cpuMilli int64) float64 {
	u1 := c.u0 + float64(cpuMilli)/c.capacityMilli
	w1, _ := c.m.WattsAt(u1)
	floor := c.floorWattsPerUnit * max(0, min(u1, 1)-min(c.u0, 1))
	return max(w1-c.w0, floor, 0)
}

// moved is the curve read cpuMilli further on, whose watts there (w1,
// from step) are known: curveFrom with cpuMilli more reserved, without
// reading the curve again.
func (c nodeCurve) moved(cpuMilli int64, w1 float64) nodeCurve {
	c.u0 += float64(cpuMilli) / c.capacityMilli
	c.w0 = w1
	return c
}

// UpperSigmas is how many of the curve's uncertainties (standard errors)
// the upper estimate adds at the load a pod brings its node to: two, about
// a 95 % bound. The start of the step is where the node runs, which its
// watts measure, so the step is as unsure as its far end. A fit's standard
// error holds only as far as the curve's form does; the sandbox's
// heat-ahead pod, sized to settle 5°C past limit − margin, went through
// on one standard error of a curve fitted 18 % low across the top.
const UpperSigmas = 2

// ReservedWatts is what the pods placed on n since its sample add to its
// measured watts (PodWatts from the measured load).
func ReservedWatts(n *telemetry.Node, reserved Demand) (Watts, bool) {
	return PodWatts(n, reserved, Demand{})
}

// GPUWatts is what gpus busy units of the GPU resource add to the node:
// a busy GPU's power less an idle one's each, by its GPU power model, or
// the node's mean GPU watts without one; 0 on a node without GPUs. On a
// node whose GPUs are all in MIG mode the GPU resource counts MIG devices
// (the device plugin's single strategy, one profile on every GPU), and a
// unit is the GPU's share of its compute slices (MIGShare).
func GPUWatts(n *telemetry.Node, gpus int64) float64 {
	if gpus <= 0 || len(n.GPUs) == 0 {
		return 0
	}
	w := gpuWatts(n) * float64(gpus)
	if slices, total := singleStrategySlices(n); total > 0 {
		w = w * float64(slices) / float64(total)
	}
	return w
}

// PodGPUWatts is what a pod of demand d adds by its GPUs: GPUWatts of its
// GPU resource, plus its MIG compute slices' share of a busy GPU
// (MIGSliceWatts).
func PodGPUWatts(n *telemetry.Node, d Demand) float64 {
	return GPUWatts(n, d.BusyGPUs()) + MIGSliceWatts(n, d.MIGSlices)
}

// MIGSliceWatts is what slices busy MIG compute slices add to node n:
// each its share of a busy GPU's power less an idle one's, 1 over the
// compute slices of the node's GPUs in MIG mode (7 on an A100 or H100);
// 0 on a node with no GPU in MIG mode.
//
// NVML reports power per GPU, not per MIG device, so a device's watts are
// an assumption: a GPU's dynamic power splits by compute slices, as its
// SMs do, and a GPU whose devices are all busy draws what it draws busy
// whole. Memory-bound profiles and idle devices beside busy ones make it
// rough; it is the share MIG itself gives each device of the GPU's SMs.
func MIGSliceWatts(n *telemetry.Node, slices int64) float64 {
	if slices <= 0 {
		return 0
	}
	for i := range n.GPUs {
		if g := &n.GPUs[i]; g.MIG && g.ComputeSlices > 0 {
			return gpuWatts(n) * float64(slices) / float64(g.ComputeSlices)
		}
	}
	return 0
}

// gpuWatts is one busy GPU's power less an idle one's, by the node's GPU
// power model, or the node's mean GPU watts without one.
func gpuWatts(n *telemetry.Node) float64 {
	if m := n.Models; m != nil && m.GPUBasis != telemetry.BasisNone {
		return max(0, m.GPUBusyWatts-m.GPUIdleWatts)
	}
	return max(0, float64(n.GPUWatts)/float64(len(n.GPUs)))
}

// BusyGPUWatts is what one whole GPU of node n adds busy: a busy GPU's
// power less an idle one's, in MIG mode or not (GPUWatts of one unit is a
// MIG device's share on a node of the single strategy).
func BusyGPUWatts(n *telemetry.Node) float64 {
	if len(n.GPUs) == 0 {
		return 0
	}
	return gpuWatts(n)
}

// singleStrategySlices is, on a node whose GPUs are all in MIG mode with
// a published layout, the compute slices of one MIG device (its first
// GPU's first profile: the single strategy cuts every GPU alike) and of
// its GPU; 0, 0 on any other node.
func singleStrategySlices(n *telemetry.Node) (slices, total int32) {
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if !g.MIG || g.ComputeSlices <= 0 || len(g.MIGProfiles) == 0 {
			return 0, 0
		}
		if total == 0 {
			slices, total = n.GPUs[i].MIGProfiles[0].Slices, g.ComputeSlices
		}
	}
	return slices, total
}
