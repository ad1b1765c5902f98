// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

// FewestToShed is the fewest of pods whose removal satisfies under, by brute
// force over every subset, smallest first: the minimum a descheduler
// needs to evict. pods are the candidates' CPU requests (milli-CPUs);
// under says whether the node, without the pods of the given total, is
// back under its limit. It returns that count and one such subset
// (indices into pods), or -1 and nil when even all of them are not
// enough. At most 20 candidates (a million subsets).
func FewestToShed(pods []int64, under func(removedMilli int64) bool) (int, []int) {
	if len(pods) > 20 {
		pods = pods[:20]
	}
	if under(0) {
		return 0, nil
	}
	for k := 1; k <= len(pods); k++ {
		var found []int
		var pick func(from int, chosen []int, milli int64) bool
		pick = func(from int, chosen []int, milli int64) bool {
			if len(chosen) == k {
				if under(milli) {
					found = append([]int(nil), chosen...)
					return true
				}
				return false
			}
			for i := from; i < len(pods); i++ {
				if pick(i+1, append(chosen, i), milli+pods[i]) {
					return true
				}
			}
			return false
		}
		if pick(0, nil, 0) {
			return k, found
		}
	}
	return -1, nil
}
