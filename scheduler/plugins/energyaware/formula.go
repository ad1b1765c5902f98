// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"fmt"
	"math"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/internal/heat"
	estimate "github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// headroomForFullScore is the thermal headroom at which the thermal part
// of the score is full: beyond 40°C below its limit a node is simply cool.
const headroomForFullScore = 40_000 // milli-°C

// thermalLimits are the filter's settings in milli-°C.
type thermalLimits struct {
	marginMilli       int64
	absoluteMilli     int64
	rejectThrottling  bool
	gpuSlowdownMargin int64
}

// tooHot says why a node is too hot for any pod, or "" when it is not, by
// package heat's Verdict: its CPUs throttle, or its effective headroom
// (every sensor against its limit, the absolute limit for a sensor without
// one) is at or below the margin. While the node's thermal source fails,
// the view holds its last reading, and a reading too hot stays too hot
// however old (see fits for how long a cool one counts). The common
// answer, a cool node, reads only the view's first cache line.
func tooHot(n *telemetry.Node, l thermalLimits) string {
	if !(l.rejectThrottling && n.Throttling) {
		if !n.HasThermal {
			return ""
		}
		if h, _, ok := heat.Effective(n.HasHeadroom, n.HeadroomMilli, n.HasUnlimited, n.UnlimitedMilli, l.absoluteMilli); !ok || h > l.marginMilli {
			return ""
		}
	}
	_, why := heat.Verdict(n.Throttling, l.rejectThrottling, n.Headroom(l.absoluteMilli), l.marginMilli)
	return why
}

// gpuCounts counts the node's GPUs that are healthy and not too hot
// (telemetry.GPU.Hot: thermally throttled, or within the margin of their
// slowdown temperature), and its whole GPUs that its agent publishes free
// (gpus[].allocated false), healthy and too hot: the kubelet hands a pod
// any free GPU, and may hand it one of these. One pass, no allocation:
// Filter and the hint ask both of every GPU pod and every update.
func gpuCounts(n *telemetry.Node, marginMilli int64) (cool, hotFree int) {
	for i := range n.GPUs {
		g := &n.GPUs[i]
		switch {
		case !g.Healthy:
		case !g.Hot(marginMilli):
			cool++
		case hotAndFree(g):
			hotFree++
		}
	}
	return cool, hotFree
}

// hotAndFree is true of a too hot GPU (the caller has said so) that is
// whole and published free.
func hotAndFree(g *telemetry.GPU) bool { return !g.MIG && g.Allocated == 0 }

// firstHotFree says why the node's first healthy, free, whole GPU that is
// too hot is (gpuCounts' hotFree), "" when it has none.
func firstHotFree(n *telemetry.Node, marginMilli int64) string {
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if g.Healthy && hotAndFree(g) && g.Hot(marginMilli) {
			return g.TooHot(marginMilli)
		}
	}
	return ""
}

// tooHotPredicted says why the pod would take the node's modelled sensor
// past its limit − margin once it settles, or "" when it would not (or the
// node has no thermal model).
func tooHotPredicted(n *telemetry.Node, e estimate.Heat, marginMilli int64) string {
	if !e.Predicted || e.SteadyMilli < e.LimitMilli-marginMilli {
		return ""
	}
	t := &n.Models.Thermal
	return fmt.Sprintf("predicted steady temperature of %s with the pod %s >= limit %s - margin %s: %s + %.3f°C/W x %.0fW (now %.0fW, +%.0fW reserved, +%.0fW this pod); time constant %ds, %d samples",
		t.Sensor, celsius(e.SteadyMilli), celsius(e.LimitMilli), celsius(marginMilli), celsius(t.AmbientMilli), float64(t.MilliPerWatt)/1000,
		e.Watts, e.NowWatts, e.ReservedWatts, e.PodWatts, t.Tau, t.Samples)
}

// minStakeMilliwatts is the least energy, in milliwatts (joules a second
// for a unit of work), that a pod's power score is judged against: a pod
// that adds next to nothing anywhere is not ranked by fractions of a watt.
const minStakeMilliwatts = 1000

// powerScore is 100 for the node that spends the fewest joules for a unit
// of the pod's work (minMW, in milliwatts), falling by 100 points over
// spanPercent more than that: a node x percent dearer scores
// 100*(1 - x/spanPercent), at least 0. The score is absolute: what a node
// loses follows from how much more it spends against what the pod spends
// at best, not from how far apart the candidates are. A node 2 W dearer
// for a 400 W GPU pod loses 2 points at a span of 25 %; a node 25 %
// dearer for a CPU pod loses all 100.
func powerScore(mw, minMW int64, spanPercent int64) int64 {
	if mw <= minMW {
		return fwk.MaxScore
	}
	stake := max(minMW, minStakeMilliwatts) * max(spanPercent, 1) / 100 // at least 10
	excess := mw - minMW
	if excess >= stake {
		return fwk.MinScore
	}
	return fwk.MaxScore - (fwk.MaxScore*excess+stake-1)/stake
}

// thermalScore grows with the effective headroom (package heat), or the
// predicted steady headroom with the pod where that is smaller, full at
// 40°C.
func thermalScore(n *telemetry.Node, absoluteMilli int64, e estimate.Heat) int64 {
	h, _, ok := heat.Effective(n.HasHeadroom, n.HeadroomMilli, n.HasUnlimited, n.UnlimitedMilli, absoluteMilli)
	if !n.HasThermal || !ok {
		return 0
	}
	if e.Predicted {
		h = min(h, e.LimitMilli-e.SteadyMilli)
	}
	return max(fwk.MinScore, min(fwk.MaxScore, fwk.MaxScore*h/headroomForFullScore))
}

// scoredHeadroom is the least predicted steady headroom that leaves
// thermalScore as the node's effective headroom has it: that headroom,
// or the full score's 40°C if less (any headroom from there scores 100).
func scoredHeadroom(n *telemetry.Node, absoluteMilli int64) int64 {
	h, _, ok := heat.Effective(n.HasHeadroom, n.HeadroomMilli, n.HasUnlimited, n.UnlimitedMilli, absoluteMilli)
	if !n.HasThermal || !ok {
		return math.MinInt64 / 2 // thermalScore is 0 whatever is predicted
	}
	return min(h, headroomForFullScore)
}

// Score packs a node's two parts into one int64 for NormalizeScore: the
// thermal score (0-100) in the low 7 bits, and above them 0 for a node
// without a power estimate or its marginal milliwatts + 1. Marginal power
// is capped at maxPackedMilliwatts (a petawatt), far above any node, so the
// packed value cannot overflow.
const (
	thermalBits         = 7
	thermalMask         = 1<<thermalBits - 1
	maxPackedMilliwatts = 1 << 50
)

// packScore is Score's result for a node with fresh telemetry.
func packScore(mw int64, hasPower bool, thermal int64) int64 {
	if !hasPower {
		return thermal
	}
	return (min(mw, maxPackedMilliwatts)+1)<<thermalBits | thermal
}

// unpackScore undoes packScore.
func unpackScore(packed int64) (mw int64, hasPower bool, thermal int64) {
	p := packed >> thermalBits
	return p - 1, p > 0, packed & thermalMask
}

// normalize replaces each packed score with the weighted combination of its
// power score (powerScore: against the lowest energy among the candidates
// with an estimate, over spanPercent) and its thermal score. A
// NoTelemetry score becomes the lowest of the others (MinScore when none
// has telemetry).
func normalize(scores fwk.NodeScoreList, powerWeight, thermalWeight, spanPercent int64) {
	minMW := int64(-1)
	for _, s := range scores {
		if s.Score == telemetry.NoTelemetry {
			continue
		}
		if mw, ok, _ := unpackScore(s.Score); ok && (minMW < 0 || mw < minMW) {
			minMW = mw
		}
	}
	for i, s := range scores {
		if s.Score == telemetry.NoTelemetry {
			continue
		}
		mw, ok, thermal := unpackScore(s.Score)
		var power int64
		if ok {
			power = powerScore(mw, minMW, spanPercent)
		}
		scores[i].Score = combine(power, thermal, powerWeight, thermalWeight)
	}
	telemetry.NormalizeMissing(scores)
}

// combine weighs the two parts.
func combine(power, thermal int64, powerWeight, thermalWeight int64) int64 {
	if powerWeight+thermalWeight == 0 {
		return 0
	}
	return (power*powerWeight + thermal*thermalWeight) / (powerWeight + thermalWeight)
}

func celsius(milli int64) string { return heat.Celsius(milli) }
