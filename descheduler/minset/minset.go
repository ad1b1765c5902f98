// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package minset chooses the fewest pods whose removal frees a given
// amount (of watts): a pure algorithm, pods and need in, choice out.
package minset

import (
	"cmp"
	"slices"
)

// Candidate is a pod that may be evicted and what evicting it frees.
type Candidate struct {
	// Key names the pod (namespace/name); ties are broken by it, so the
	// choice is the same for the same input.
	Key string
	// Frees is what evicting the pod frees (its marginal watts).
	Frees float64
	// Priority is the pod's priority: among pods that free as much, the
	// lower is taken first.
	Priority int32
}

// Choose returns the fewest candidates whose Frees add up to at least
// need, and whether they do. The k candidates that free most free more
// than any other k, so taking them by Frees, largest first, until need is
// met gives the fewest. When all of them together fall short, all are
// returned with false: they bring the node or rack closest to under.
// need <= 0 needs none.
func Choose(cands []Candidate, need float64) ([]Candidate, bool) {
	return ChooseWhere(cands, need, func(Candidate) bool { return true })
}

// ChooseWhere is Choose over the candidates that ok accepts. ok is asked
// in Choose's order and only until need is met, so it may have effects (a
// destination checked, and held, for each pod it accepts).
func ChooseWhere(cands []Candidate, need float64, ok func(Candidate) bool) ([]Candidate, bool) {
	if need <= 0 {
		return nil, true
	}
	sorted := slices.Clone(cands)
	slices.SortFunc(sorted, func(a, b Candidate) int {
		if c := cmp.Compare(b.Frees, a.Frees); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	var freed float64
	var chosen []Candidate
	for _, c := range sorted {
		if c.Frees <= 0 {
			// Frees nothing: no help towards need.
			break
		}
		if !ok(c) {
			continue
		}
		chosen = append(chosen, c)
		freed += c.Frees
		if freed >= need {
			return chosen, true
		}
	}
	return chosen, false
}
