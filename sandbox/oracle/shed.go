// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

// MaxShedCandidates is the most candidates FewestToShed searches (a
// million subsets); later ones are left out.
const MaxShedCandidates = 20

// FewestToShed is the fewest of n candidate pods whose removal satisfies
// under, by brute force over every subset, smallest first: the minimum a
// descheduler needs to evict. under says whether the node or rack, without
// the given candidates (indices, ascending), is back under its limit. It
// returns that count and the first such subset, or -1 and nil when even
// all of them are not enough. At most MaxShedCandidates candidates.
func FewestToShed(n int, under func(removed []int) bool) (int, []int) {
	n = min(n, MaxShedCandidates)
	if under(nil) {
		return 0, nil
	}
	for k := 1; k <= n; k++ {
		if set := firstSubset(n, k, under); set != nil {
			return k, set
		}
	}
	return -1, nil
}

// firstSubset is the first k-subset of 0..n-1, in lexicographic order,
// that satisfies ok, or nil.
func firstSubset(n, k int, ok func([]int) bool) []int {
	var found []int
	var pick func(from int, chosen []int) bool
	pick = func(from int, chosen []int) bool {
		if len(chosen) == k {
			if ok(chosen) {
				found = append([]int(nil), chosen...)
				return true
			}
			return false
		}
		for i := from; i < n; i++ {
			if pick(i+1, append(chosen, i)) {
				return true
			}
		}
		return false
	}
	pick(0, make([]int, 0, k))
	return found
}

// EachSubset calls f with every k-subset of 0..n-1 (indices, ascending;
// the slice is reused between calls).
func EachSubset(n, k int, f func([]int)) {
	firstSubset(n, k, func(s []int) bool { f(s); return false })
}
