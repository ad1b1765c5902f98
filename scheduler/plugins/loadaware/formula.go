// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import fwk "k8s.io/kube-scheduler/framework"

// Utilization is in basis points throughout (1% = 100) so that a small
// pod's share of a large node is not rounded away; estimateBP
// estimates it.

// mayExceed reports whether a node whose estimate is at most boundBP, and
// whose capacity is at least minCapacity, could go over thresholdPercent
// with add more: its estimate would be at most boundBP plus add's share of
// minCapacity, plus one basis point because the two shares round down
// separately.
func mayExceed(boundBP, add, minCapacity int64, thresholdPercent int32) bool {
	bp := boundBP + 1
	if minCapacity > 0 && add > 0 {
		bp += add * 10_000 / minCapacity
	}
	return bp > int64(thresholdPercent)*100
}

// spreadScore favours the least-utilized node: 100 at 0%, 0 at 100% or more.
func spreadScore(estBP int64) int64 {
	return clampScore(fwk.MaxScore - estBP/100)
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
		return clampScore((fwk.MaxScore*100-target)*estBP/target/100 + target/100)
	case target >= 10_000:
		return fwk.MaxScore
	default:
		// target * (100 - u) / (100 - target)
		return clampScore(target * (10_000 - estBP) / (10_000 - target) / 100)
	}
}

func clampScore(s int64) int64 {
	return max(fwk.MinScore, min(fwk.MaxScore, s))
}
