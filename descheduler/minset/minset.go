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
	// Group is the node the pod runs on: what a pod frees depends on the
	// pods of its group already chosen (Refit).
	Group string
	// Frees is what evicting the pod frees (its marginal watts), with no
	// other pod of its group chosen.
	Frees float64
	// Priority is the pod's priority: among pods that free as much, the
	// lower is taken first.
	Priority int32
}

// Refit is what c frees once gone, the candidates already chosen in c's
// Group, have left: a node's power curve is steeper at high load, so a
// second pod leaving one node frees less than it would alone, and adding
// up each pod's marginal watts alone would promise more than the node
// sheds.
type Refit func(c Candidate, gone []Candidate) float64

// Choose returns the fewest candidates whose Frees add up to at least
// need, and whether they do. The k candidates that free most free more
// than any other k, so taking them by Frees, largest first, until need is
// met gives the fewest. When all of them together fall short, all are
// returned with false: they bring the node or rack closest to under.
// need <= 0 needs none.
func Choose(cands []Candidate, need float64) ([]Candidate, bool) {
	return ChooseWhere(cands, need, nil, func(Candidate) bool { return true })
}

// ChooseWhere is Choose over the candidates that ok accepts, each freeing
// what refit says once the chosen pods of its group are gone (nil: its
// Frees): it takes the candidate that frees most now, again and again,
// refitting the rest of its group after each, until need is met. Where a
// node's watts fall less and less with each pod it loses (a convex power
// curve), the pod that frees most now is always among the fewest. The
// chosen candidates' Frees are what they free in that order. ok is asked
// in that order and only until need is met, so it may have effects (a
// destination checked, and held, for each pod it accepts).
func ChooseWhere(cands []Candidate, need float64, refit Refit, ok func(Candidate) bool) ([]Candidate, bool) {
	if need <= 0 {
		return nil, true
	}
	left := slices.Clone(cands)
	var freed float64
	var chosen []Candidate
	gone := map[string][]Candidate{}
	for len(left) > 0 {
		best := slices.MinFunc(left, func(a, b Candidate) int {
			if c := cmp.Compare(b.Frees, a.Frees); c != 0 {
				return c
			}
			if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
				return c
			}
			return cmp.Compare(a.Key, b.Key)
		})
		if best.Frees <= 0 {
			// Frees nothing: no help towards need, nor does any other.
			break
		}
		left = slices.DeleteFunc(left, func(c Candidate) bool { return c.Key == best.Key })
		if !ok(best) {
			continue
		}
		chosen = append(chosen, best)
		freed += best.Frees
		if freed >= need {
			return chosen, true
		}
		if refit == nil {
			continue
		}
		gone[best.Group] = append(gone[best.Group], best)
		for i, c := range left {
			if c.Group == best.Group {
				left[i].Frees = refit(c, gone[c.Group])
			}
		}
	}
	return chosen, false
}
