// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import (
	"slices"
)

// seed is a placement from the lower bound's: its GPU and single-NUMA pods
// where the bound put them, the other pods packed into the nodes so that
// each takes the units the bound gave it (pack), and any pod left over
// placed greedily. Nil without a bound.
func (o *oracle) seed(b bound) *oState {
	if b.node == nil {
		return nil
	}
	st := o.newState()
	var small []int
	for _, p := range o.orders()[0] {
		if b.node[p] >= 0 {
			o.place(st, p, b.node[p], b.numa[p])
		} else {
			small = append(small, p)
		}
	}
	at := o.pack(st, small, b)
	var rest []int
	for i, p := range small {
		if n := at[i]; n >= 0 {
			if l := o.with(st.load[n], p, -1, 1); o.fits(n, &l, true) {
				o.place(st, p, n, -1)
				continue
			}
		}
		rest = append(rest, p)
	}
	if len(o.greedy(st, rest)) > 0 {
		return nil
	}
	return st
}

// seedTotals is a placement of every pod, the GPU and single-NUMA pods
// too, that gives each node the CPUs the lower bound's placement gives it
// (its pinned pods' and its units), by depth-first search over the pods
// in the greedy's first order, each on a node it fits; nil when none is
// found within maxPackSteps. Where the bound's units cannot be packed
// into pods around its pinned pods, moving a pinned pod can make them
// fit: the optimum of one small fleet was a 3-CPU pod on a node the bound
// gave a pinned 1-CPU pod and 2 units, which single moves, swaps and
// pairs of moves from every other start never reached.
func (o *oracle) seedTotals(b bound) *oState {
	if b.node == nil || b.unit <= 0 {
		return nil
	}
	left := append([]int(nil), b.units...)
	for p, n := range b.node {
		if n < 0 {
			continue
		}
		if o.pods[p].cpuMilli%b.unit != 0 {
			return nil
		}
		left[n] += int(o.pods[p].cpuMilli / b.unit)
	}
	order := o.orders()[0]
	for _, p := range order {
		if o.pods[p].cpuMilli%b.unit != 0 {
			return nil
		}
	}
	st := o.newState()
	steps := 0
	var dfs func(i int) bool
	dfs = func(i int) bool {
		if i == len(order) {
			return true
		}
		if steps++; steps > maxPackSteps {
			return false
		}
		p := order[i]
		need := int(o.pods[p].cpuMilli / b.unit)
		for n := range o.nodes {
			if left[n] < need || !o.allowed(p, n) {
				continue
			}
			for _, k := range o.numaChoices(p, n) {
				l := o.with(st.load[n], p, k, 1)
				if !o.fits(n, &l, true) {
					continue
				}
				prev := st.load[n]
				o.apply(st, change{n, l})
				st.at[p], st.numa[p] = n, k
				left[n] -= need
				if dfs(i + 1) {
					return true
				}
				left[n] += need
				o.apply(st, change{n, prev})
				st.at[p], st.numa[p] = -1, -1
			}
		}
		return false
	}
	if !dfs(0) {
		return nil
	}
	return st
}

// maxPackSteps bounds pack's search.
const maxPackSteps = 200_000

// pack assigns the pods (largest first) to nodes so that each node takes
// exactly its units of the bound, by depth-first search (a pod like the
// one before it goes to the same node or a later one, so identical pods
// are not permuted); -1 for each pod when no such assignment is found
// within maxPackSteps, and then first-fit by units left for what fits.
func (o *oracle) pack(st *oState, pods []int, b bound) []int {
	left := append([]int(nil), b.units...)
	at := make([]int, len(pods))
	for i := range at {
		at[i] = -1
	}
	need := func(i int) int { return int(o.pods[pods[i]].cpuMilli / b.unit) }
	same := func(i, j int) bool {
		a, c := &o.pods[pods[i]], &o.pods[pods[j]]
		return a.cpuMilli == c.cpuMilli && a.memBytes == c.memBytes && slices.Equal(a.closed, c.closed)
	}
	steps := 0
	var dfs func(i int) bool
	dfs = func(i int) bool {
		if i == len(pods) {
			return true
		}
		if steps++; steps > maxPackSteps {
			return false
		}
		from := 0
		if i > 0 && same(i, i-1) {
			from = at[i-1]
		}
		for n := from; n < len(o.nodes); n++ {
			if left[n] >= need(i) && o.allowed(pods[i], n) {
				left[n] -= need(i)
				at[i] = n
				if dfs(i + 1) {
					return true
				}
				left[n] += need(i)
				at[i] = -1
			}
		}
		return false
	}
	if dfs(0) {
		return at
	}
	left = append(left[:0], b.units...)
	for i := range pods {
		at[i] = -1
		for n := range o.nodes {
			if left[n] >= need(i) && o.allowed(pods[i], n) && (at[i] < 0 || left[n] > left[at[i]]) {
				at[i] = n
			}
		}
		if at[i] >= 0 {
			left[at[i]] -= need(i)
		}
	}
	return at
}
