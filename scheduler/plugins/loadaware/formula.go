package loadaware

import fwk "k8s.io/kube-scheduler/framework"

// Utilization is in basis points throughout (1% = 100) so that a small
// pod's share of a large node is not rounded away.

// estimateBP is a node's estimated utilization: the measured percentage
// plus added (the pods placed since the sample and this pod) as a share of
// capacity. With no capacity it is the measurement alone.
func estimateBP(measuredPercent int32, added, capacity int64) int64 {
	bp := int64(measuredPercent) * 100
	if capacity > 0 && added > 0 {
		bp += added * 10_000 / capacity
	}
	return bp
}

// spreadScore favours the least-utilized node: 100 at 0%, 0 at 100% or more.
func spreadScore(estBP int64) int64 {
	return clampScore(fwk.MaxNodeScore - estBP/100)
}

// packScore favours nodes filling up to target percent, for consolidation
// (the target-load-packing curve): from target at 0% rising linearly to
// 100 at the target, then falling linearly to 0 at 100%.
func packScore(estBP int64, targetPercent int32) int64 {
	target := int64(targetPercent) * 100
	switch {
	case target <= 0:
		return spreadScore(estBP)
	case estBP <= target:
		// (100 - target) * u / target + target, in score units
		return clampScore((fwk.MaxNodeScore*100-target)*estBP/target/100 + target/100)
	case target >= 10_000:
		return fwk.MaxNodeScore
	default:
		// target * (100 - u) / (100 - target)
		return clampScore(target * (10_000 - estBP) / (10_000 - target) / 100)
	}
}

func clampScore(s int64) int64 {
	return max(fwk.MinNodeScore, min(fwk.MaxNodeScore, s))
}
