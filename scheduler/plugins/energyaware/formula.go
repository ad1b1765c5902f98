package energyaware

import (
	"fmt"
	"math"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/internal/heat"
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
// package heat's definition: its CPUs throttle, or its effective headroom
// (every sensor against its limit, the absolute limit for a sensor without
// one) is at or below the margin.
func tooHot(n *telemetry.Node, l thermalLimits) string {
	switch {
	case l.rejectThrottling && n.Throttling:
		return "node's CPUs are thermally throttling"
	case !n.HasThermal:
		return ""
	}
	if h, _, ok := heat.Effective(n.HasHeadroom, n.HeadroomMilli, n.HasUnlimited, n.UnlimitedMilli, l.absoluteMilli); !ok || h > l.marginMilli {
		return ""
	}
	hr := n.Headroom(l.absoluteMilli)
	return fmt.Sprintf("node thermal headroom %s <= margin %s (%s)", celsius(hr.MilliCelsius), celsius(l.marginMilli), hr.Where())
}

// coolGPUs counts the node's GPUs that are healthy, not thermally
// throttled and more than the margin below their slowdown temperature.
func coolGPUs(n *telemetry.Node, marginMilli int64) int {
	cool := 0
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if !g.Healthy || g.ThermalThrottled {
			continue
		}
		if g.HasTemperature && g.HasSlowdown && g.TemperatureMilli >= g.SlowdownMilli-marginMilli {
			continue
		}
		cool++
	}
	return cool
}

// estimate is what a pod would do to a node, by the node's models.
type estimate struct {
	// mw is the marginal power of the pod, milliwatts: the power curve at
	// the node's estimated load with the pod minus without it (the
	// estimated load is its measured utilization plus the pods placed
	// since the sample), plus, for GPU pods, a busy GPU's power minus an
	// idle one's per GPU. upperMW adds the uncertainty the step adds to the
	// curve's (a prior's shape is unsure far from the samples).
	mw, upperMW int64
	hasPower    bool
	// Thermal prediction: steadyMilli is where the modelled sensor settles
	// with the pod, from watts (the node's power without GPUs now, plus the
	// reserved pods' and this pod's, upper estimate). Valid when predicted.
	predicted             bool
	steadyMilli, limMilli int64
	watts, nowWatts       float64
	reservedWatts, podW   float64
}

// estimatePod estimates a pod of podCPUMilli and podGPUs on node n, which
// has reservedCPUMilli of pods placed since its sample.
func estimatePod(n *telemetry.Node, podCPUMilli, podGPUs, reservedCPUMilli int64) estimate {
	var e estimate
	cpu, upper, ok := n.MarginalWatts(podCPUMilli, reservedCPUMilli)
	if !ok {
		return e
	}
	gpu := n.GPUMarginalWatts(podGPUs)
	e.hasPower = true
	e.mw, e.upperMW = int64(math.Round((cpu+gpu)*1000)), int64(math.Round((upper+gpu)*1000))
	if m := n.Models; m.HasThermal {
		t := &m.Thermal
		e.nowWatts = float64(max(0, n.Watts-n.GPUWatts))
		e.reservedWatts, _, _ = n.MarginalWatts(reservedCPUMilli, 0)
		e.podW = upper
		e.watts = e.nowWatts + e.reservedWatts + e.podW
		e.predicted, e.steadyMilli, e.limMilli = true, t.Steady(e.watts), t.LimitMilli
	}
	return e
}

// tooHotPredicted says why the pod would take the node's modelled sensor
// past its limit − margin once it settles, or "" when it would not (or the
// node has no thermal model).
func tooHotPredicted(n *telemetry.Node, e estimate, marginMilli int64) string {
	if !e.predicted || e.steadyMilli < e.limMilli-marginMilli {
		return ""
	}
	t := &n.Models.Thermal
	return fmt.Sprintf("predicted steady temperature of %s with the pod %s >= limit %s - margin %s: %s + %.3f°C/W x %.0fW (now %.0fW, +%.0fW reserved, +%.0fW this pod); time constant %ds, %d samples",
		t.Sensor, celsius(e.steadyMilli), celsius(e.limMilli), celsius(marginMilli), celsius(t.AmbientMilli), float64(t.MilliPerWatt)/1000,
		e.watts, e.nowWatts, e.reservedWatts, e.podW, t.Tau, t.Samples)
}

// powerScore is 100 for the lowest marginal power among the candidates
// and 0 for the highest.
func powerScore(mw, minMW, maxMW int64) int64 {
	if maxMW <= minMW {
		return fwk.MaxScore
	}
	return fwk.MaxScore * (maxMW - mw) / (maxMW - minMW)
}

// thermalScore grows with the effective headroom (package heat), or the
// predicted steady headroom with the pod where that is smaller, full at
// 40°C.
func thermalScore(n *telemetry.Node, absoluteMilli int64, e estimate) int64 {
	h, _, ok := heat.Effective(n.HasHeadroom, n.HeadroomMilli, n.HasUnlimited, n.UnlimitedMilli, absoluteMilli)
	if !n.HasThermal || !ok {
		return 0
	}
	if e.predicted {
		h = min(h, e.limMilli-e.steadyMilli)
	}
	return max(fwk.MinScore, min(fwk.MaxScore, fwk.MaxScore*h/headroomForFullScore))
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
// power score, placed between the lowest and highest marginal power among
// the candidates with an estimate, and its thermal score. A NoTelemetry
// score becomes the lowest of the others (MinScore when none has
// telemetry).
func normalize(scores fwk.NodeScoreList, powerWeight, thermalWeight int64) {
	minMW, maxMW := int64(-1), int64(-1)
	for _, s := range scores {
		if s.Score == telemetry.NoTelemetry {
			continue
		}
		if mw, ok, _ := unpackScore(s.Score); ok {
			if minMW < 0 || mw < minMW {
				minMW = mw
			}
			maxMW = max(maxMW, mw)
		}
	}
	for i, s := range scores {
		if s.Score == telemetry.NoTelemetry {
			continue
		}
		mw, ok, thermal := unpackScore(s.Score)
		var power int64
		if ok {
			power = powerScore(mw, minMW, maxMW)
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
