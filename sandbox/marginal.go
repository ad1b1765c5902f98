// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"math"
	"sort"

	"github.com/telesched/telesched/sandbox/sim"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// learnedMarginal is what the scheduler estimates a pod of demand d adds
// to a node from the node's NodeTelemetry, on which pods of reservedMilli
// were placed since that sample: the published power curve at the
// estimated load (the sample's CPU plus the reserved pods) with the pod
// minus without, plus a busy GPU's power less an idle one's per GPU and
// its share per MIG device (EnergyAware's estimate). ok is false when the
// node has no watts, no CPU count or no curve.
func learnedMarginal(n *telemetry.Node, d estimate.Demand, reservedMilli int64) (float64, bool) {
	w, ok := estimate.PodWatts(n, d, estimate.Demand{CPUMilli: reservedMilli})
	return w.Mean, ok
}

// trueMarginal is what a pod of cpuMilli and a share of GPUs (whole GPUs,
// MIG devices their share) adds to a simulated node running at
// utilization u with busy GPUs in use, by the simulation's own steady
// physics: the node's curve, the leakage at the temperature it settles
// at, and its GPUs (sim.NodeSpec.EstimatedWattsShare, what the oracle
// minimizes).
func trueMarginal(spec sim.NodeSpec, u, busy float64, cpuMilli int64, share float64) float64 {
	du := float64(cpuMilli) / float64(spec.Host.CPUs*1000)
	return spec.EstimatedWattsShare(u+du, busy+share) - spec.EstimatedWattsShare(u, busy)
}

// perBusyCore is what one more busy core costs a node at its load now, by
// its published curve: the curve's slope there over its cores. ok false
// without a curve.
func perBusyCore(n *telemetry.Node) (float64, bool) {
	if n == nil || !n.HasCPU || n.LogicalCores <= 0 || n.Models == nil || n.Models.CurveBasis == telemetry.BasisNone {
		return 0, false
	}
	return n.Models.Watts.Slope(float64(n.CPUPercent)/100) / float64(n.LogicalCores), true
}

// minTrueWatts is the least true marginal a placement's error is judged
// against: below it (a pod on a node whose curve is flat there) a
// percentage says nothing.
const minTrueWatts = 0.5

// marginalError is the learned marginal's error against the true one, in
// percent of the true one; ok false without a learned value or with too
// small a true one.
func (p *Placement) marginalError() (float64, bool) {
	if !p.HasLearned || p.TrueWatts < minTrueWatts {
		return 0, false
	}
	return 100 * (p.LearnedWatts - p.TrueWatts) / p.TrueWatts, true
}

// marginalCell is a placement's learned and true marginal watts for the
// report: "+9.1 / +8.7 W (+5%)".
func marginalCell(p *Placement) string {
	if !p.HasTrue {
		return "-"
	}
	if !p.HasLearned {
		return fmt.Sprintf("no curve / %+.1f W", p.TrueWatts)
	}
	if e, ok := p.marginalError(); ok {
		return fmt.Sprintf("%+.1f / %+.1f W (%+.0f%%)", p.LearnedWatts, p.TrueWatts, e)
	}
	return fmt.Sprintf("%+.1f / %+.1f W", p.LearnedWatts, p.TrueWatts)
}

// MarginalErrors are the median absolute errors of the learned marginal
// watts against the true ones over a profile's placements, in percent:
// all pods, the pods without GPUs and those with; N counts the
// placements each was taken over.
type MarginalErrors struct {
	All, CPU, GPU    float64
	NAll, NCPU, NGPU int
}

// marginalErrors are the median absolute errors over placements.
func marginalErrors(ps []Placement) MarginalErrors {
	var all, cpu, gpu []float64
	for i := range ps {
		e, ok := ps[i].marginalError()
		if !ok {
			continue
		}
		all = append(all, math.Abs(e))
		if ps[i].PodGPUs > 0 {
			gpu = append(gpu, math.Abs(e))
		} else {
			cpu = append(cpu, math.Abs(e))
		}
	}
	return MarginalErrors{All: median(all), CPU: median(cpu), GPU: median(gpu), NAll: len(all), NCPU: len(cpu), NGPU: len(gpu)}
}

// median is NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
