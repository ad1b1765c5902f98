// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"math"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// Closed-loop calibration: when a sample shows pods that started on a
// node (it retires their reservations), the jump in the node's measured
// watts since the sample before they ran is compared with the jump the
// scheduler predicted for them from that sample (PodWatts, by their
// requests: what the placement was decided on). The ratio measured /
// predicted is followed per node, published as a metric, and used:
// Book.PodWatts scales a node's estimates by it and widens their upper
// estimate by how far it is from 1, so a node whose curve, or whose pods'
// use of their requests, the estimates misprice is priced by what it
// really does.
//
// The ratio is one of sums, not a mean of each start's ratio: the jumps
// measured over the jumps predicted, each sum keeping calibrationKeep of
// its past at every measurement, with calibrationPriorWatts of predicted
// jumps taken as measured exactly added to both. A small pod's jump is
// mostly the samples' noise (a 6 W prediction against a node whose watts
// wander 2-3 W from one sample to the next); as a ratio of its own it
// moved the node's mean as much as a 200 W pod's, and the sandbox's nodes
// of one model were ranked ±20 % apart by noise. In the sums a start
// weighs by the watts it was predicted to add, and a node whose pods were
// all small stays near 1 until they add up.
//
// A jump counts only when it can be the pods' alone: every pod that
// started since the base sample is among those shown, no pod of the node
// stopped counting in between (deleted, measured or not, or shown by
// another sample), none was found running by a scheduler that started
// (its node's samples may show it already), both
// samples have watts, and the prediction is at least MinCalibrationWatts.
// Other changes of the node's load (its own work, the pods already there)
// are noise the moving mean evens out.
const (
	// MinCalibrationWatts is the smallest predicted jump measured: below
	// it a sample's noise is the jump.
	MinCalibrationWatts = 5
	// calibrationKeep is the share of the past sums kept at each
	// measurement: the last few starts count most, so the ratio follows
	// a node whose pods or curve change.
	calibrationKeep = 0.7
	// calibrationPriorWatts is the predicted watts, measured exactly,
	// that both sums start from: what the jumps must add up to before
	// they move the ratio halfway.
	calibrationPriorWatts = 20
	// MinCalibrations is how many measurements a node's ratio needs
	// before estimates use it.
	MinCalibrations = 2
	// A ratio is kept within [minRatio, maxRatio]: a measurement beyond
	// is clamped, so one wild sample moves the mean by a bounded step.
	minRatio, maxRatio = 0.25, 4
)

var (
	predictionRatio = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name: "telesched_scheduler_power_prediction_ratio",
		Help: "Per node: the jumps in node watts measured when placed pods start over the jumps the scheduler " +
			"predicted for them at placement (1 is exact; 2 means pods cost twice the estimate). Estimates use it after " +
			"2 measurements.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"node"})
	calibrations = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "telesched_scheduler_power_calibrations_total",
		Help: "Samples that showed placed pods running, by whether the jump in watts was measured (measured) or could " +
			"not be told from other changes (confounded) or had nothing to measure (unmetered).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
)

// What the book holds on each node: the pods placed there that its
// samples do not show yet. An operator compares them with the node's pods
// during an incident; the churn soak compares them with the truth.
var (
	reservedCPU = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "telesched_scheduler_reserved_cpu_cores",
		Help:           "Per node with telemetry: CPU requested by the pods placed on it that its latest sample does not show yet, in cores.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"node"})
	reservedGPUs = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "telesched_scheduler_reserved_gpus",
		Help:           "Per node with telemetry: GPUs requested by the pods placed on it that its latest sample does not show yet, by extended resource and by ResourceClaim.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"node"})
	reservedWatts = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name: "telesched_scheduler_reserved_watts",
		Help: "Per node with telemetry and a power model: the watts the pods placed on it that its latest sample does not show yet " +
			"are estimated to add (calibrated mean; PowerBudget adds these up).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"node"})
)

var registerOnce sync.Once

// RegisterMetrics registers the book's and the calibration's metrics with kube-scheduler's
// registry; calls after the first do nothing.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(predictionRatio, calibrations, reservedCPU, reservedGPUs, reservedWatts)
	})
}

// run records that a reserved pod was seen running at t, and its node's
// view then. The caller holds b.mu.
func (b *Book) run(node string, res *reservation, t time.Time) {
	res.running = t
	if view, ok := b.cache.Get(node); ok {
		res.base = view
	}
}

// calibrate measures the jump in CPU-side watts (the node's less its GPUs')
// the sample cur shows for the pods shown, against the prediction of their
// CPUs from the earliest of their base views. The caller holds b.mu.
func (b *Book) calibrate(node string, e *resEntry, cur *telemetry.Node, shown []*reservation) {
	var base *telemetry.Node
	var first time.Time
	var sum Demand
	for _, res := range shown {
		if res.base == nil || !res.base.HasPower {
			calibrations.WithLabelValues("unmetered").Inc()
			return
		}
		if first.IsZero() || res.running.Before(first) {
			first, base = res.running, res.base
		}
		sum = sum.Plus(res.Demand)
	}
	if !cur.HasPower || base == nil {
		calibrations.WithLabelValues("unmetered").Inc()
		return
	}
	clean := !e.disturbed.After(base.Observed)
	for _, res := range shown {
		clean = clean && !res.rebuilt // no sample before it ran is known
	}
	for _, res := range b.pods[node] {
		if !res.running.IsZero() && res.running.After(base.Observed) {
			clean = false // started since the base, not shown yet: its load is in cur too
		}
	}
	// The CPU side alone: a GPU's busy watts come from its own power
	// model, which NVML measures; what the curve misprices is the CPUs'.
	predicted, ok := PodWatts(base, sum.CPUOnly(), Demand{})
	if !clean || !ok || predicted.Mean < MinCalibrationWatts {
		calibrations.WithLabelValues("confounded").Inc()
		return
	}
	measured := float64((cur.Watts - cur.GPUWatts) - (base.Watts - base.GPUWatts))
	ratio := math.Min(maxRatio, math.Max(minRatio, measured/predicted.Mean))
	e.measuredSum = calibrationKeep*e.measuredSum + ratio*predicted.Mean
	e.predictedSum = calibrationKeep*e.predictedSum + predicted.Mean
	mean := (e.measuredSum + calibrationPriorWatts) / (e.predictedSum + calibrationPriorWatts)
	e.ratio.Store(math.Float64bits(mean))
	e.calibratedAt.Store(cur.Observed.UnixNano())
	e.calibrations.Add(1)
	calibrations.WithLabelValues("measured").Inc()
	predictionRatio.WithLabelValues(node).Set(mean)
	klog.V(4).InfoS("placed pods' watts measured", "node", node, "pods", len(shown), "predictedWatts", math.Round(predicted.Mean),
		"measuredWatts", measured, "ratio", math.Round(ratio*100)/100, "meanRatio", math.Round(mean*100)/100)
}

// Calibration is a node's ratio of measured to predicted watts and how
// many measurements it rests on (1 and 0 without any).
func (b *Book) Calibration(node string) (ratio float64, n int64) {
	c := b.calibrationOf(b.lookup(node))
	return c.ratio, c.count
}

// calibration is a node's ratio of measured to predicted watts over count
// measurements (1 and 0 without any).
type calibration struct {
	ratio float64
	count int64
}

var uncalibrated = calibration{ratio: 1}

func (b *Book) calibrationOf(e *resEntry) calibration {
	if e == nil {
		return uncalibrated
	}
	n := e.calibrations.Load()
	if n == 0 {
		return uncalibrated
	}
	return calibration{ratio: math.Float64frombits(e.ratio.Load()), count: n}
}

// watts is w calibrated: as it is until the node has MinCalibrations
// measurements, then calibratedBy its ratio.
func (c calibration) watts(w Watts) Watts {
	if c.count < MinCalibrations {
		return w
	}
	return calibratedBy(c.ratio, w)
}

// NodeCalibration is a node's calibration as its NodeTelemetry status
// shows it.
type NodeCalibration struct {
	Node string
	// Ratio is measured over predicted watts, over Measurements pod
	// starts; At is when the scheduler saw the last of them.
	Ratio        float64
	Measurements int64
	At           time.Time
}

// Calibrations returns the calibration of every node measured at least
// once, in no order.
func (b *Book) Calibrations() []NodeCalibration {
	var out []NodeCalibration
	for name, e := range *b.entries.Load() {
		n := e.calibrations.Load()
		if n == 0 {
			continue
		}
		out = append(out, NodeCalibration{Node: name, Ratio: math.Float64frombits(e.ratio.Load()), Measurements: n,
			At: time.Unix(0, e.calibratedAt.Load())})
	}
	return out
}

// PodWatts is the package's PodWatts for node n, calibrated: once the node
// has MinCalibrations measurements, the CPU side's mean scaled by the
// node's ratio, and its upper estimate widened by the part of the mean the
// ratio moved (a node whose estimates miss is less certain either way).
// The GPUs' watts are left as their power model has them: the ratio
// measures the CPU side's jumps (calibrate).
func (b *Book) PodWatts(n *telemetry.Node, d, reserved Demand) (Watts, bool) {
	w, ok := PodWatts(n, d, reserved)
	if !ok || b == nil {
		return w, ok
	}
	gpu := PodGPUWatts(n, d) // 0 without GPUs
	cpu := Watts{Mean: w.Mean - gpu, Upper: w.Upper - gpu}
	return b.calibrated(n.Name, cpu).Plus(Watts{Mean: gpu, Upper: gpu}), true
}

// PodWattsBound bounds PodWatts' upper estimate on node n whatever the
// demand and reservations: for every d and reserved, b.PodWatts(n, d,
// reserved).Upper <= perMilli*d.CPUMilli + fixed + PodGPUWatts(n, d). ok
// is false where PodWatts is. The CPU side rises no faster than the
// curve's steepest segment (nor does its floor, a share of the mean
// rise), its uncertainty is at most the band's widest knot, and
// calibration by a ratio r scales the rise by at most max(1, r) + |r-1|.
// PowerBudget uses it to pass over a budget far from its limit without
// estimating the pod on each member.
func (b *Book) PodWattsBound(n *telemetry.Node) (perMilli, fixed float64, ok bool) {
	if n == nil {
		return 0, 0, false
	}
	return wattsBound(n, b.slot(n.Name).cal)
}

// wattsBound is PodWattsBound for node n calibrated by cal.
func wattsBound(n *telemetry.Node, cal calibration) (perMilli, fixed float64, ok bool) {
	if !hasCurve(n) {
		return 0, 0, false
	}
	m := n.Models
	// Plain comparisons: the builtin max's care for NaN and -0 made this
	// loop the most of EnergyAware's Filter (Slot.SteadyBound).
	var rise, unc float64
	for k := range len(m.Watts) - 1 {
		if r := m.Watts[k+1] - m.Watts[k]; r > rise {
			rise = r
		}
	}
	for _, u := range m.Uncertainty {
		if u > unc {
			unc = u
		}
	}
	slope := rise * float64(len(m.Watts)-1)
	scale := 1.0
	if cal.count >= MinCalibrations {
		scale = max(1, cal.ratio) + math.Abs(cal.ratio-1)
	}
	return scale * slope / (float64(n.LogicalCores) * 1000), UpperSigmas * unc, true
}

// RankWatts is the watts a pod of demand d adds to node n as EnergyAware
// ranks them (RankJoules divides them by the node's speed): the
// CPU side amortized over up to pods pods like it (AmortizedCPUWatts),
// from the sample's load and the reserved pods it cannot show yet
// (Slot.UnseenCPUMilli; here every reserved pod), calibrated as PodWatts'
// mean is, plus its GPUs' watts.
func (b *Book) RankWatts(n *telemetry.Node, d, reserved Demand, pods int, headroomMilli int64) (float64, bool) {
	return b.slotWith(n.Name, reserved).RankWatts(n, d, pods, headroomMilli)
}

// RankWatts is Book.RankWatts on node n, whose slot s is.
func (s Slot) RankWatts(n *telemetry.Node, d Demand, pods int, headroomMilli int64) (float64, bool) {
	cpu, ok := AmortizedCPUWatts(n, d, s.unseen(), pods, headroomMilli)
	if !ok {
		return 0, false
	}
	return s.cal.watts(Watts{Mean: cpu, Upper: cpu}).Mean + PodGPUWatts(n, d), true
}

// unseen is the slot's reserved CPU that its sample cannot show yet, as
// the demand the energy ranking reads the curve from.
func (s Slot) unseen() Demand { return Demand{CPUMilli: s.UnseenCPUMilli} }

// ReservedWatts is PodWatts of what is reserved on n, calibrated.
func (b *Book) ReservedWatts(n *telemetry.Node, reserved Demand) (Watts, bool) {
	return b.PodWatts(n, reserved, Demand{})
}

func (b *Book) calibrated(node string, w Watts) Watts {
	return b.slot(node).cal.watts(w)
}

// calibratedBy is w with its mean scaled by ratio and its upper estimate
// widened by the change.
func calibratedBy(ratio float64, w Watts) Watts {
	mean := w.Mean * ratio
	return Watts{Mean: mean, Upper: math.Max(w.Upper, mean) + math.Abs(mean-w.Mean)}
}
