// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// watts and objective, each budget's watts; total is the objective plus
// overBudgetPenalty for each watt a rack is over its limit.
type oState struct {
	at, numa  []int
	load      []oLoad
	all, cost []float64
	rack      []float64
	total     float64
}

// overBudgetPenalty is what a watt over a rack's limit adds to a state's
// total, per second of the horizon: budgets are soft while the search
// runs, so that it can pass through an over-budget placement to a
// feasible one, and far costlier than any joule of the objective (a watt
// over the horizon, or a finite pod's hundred horizons), so that it
// leaves them. A result over budget is no placement.
const overBudgetPenalty = 1e4 * 100

func (o *oracle) newState() *oState {
	st := &oState{at: make([]int, len(o.pods)), numa: make([]int, len(o.pods)), all: make([]float64, len(o.nodes)), cost: make([]float64, len(o.nodes)), rack: make([]float64, len(o.budgets))}
	for p := range st.at {
		st.at[p], st.numa[p] = -1, -1
	}
	for n := range o.nodes {
		l := o.emptyLoad(n)
		st.load = append(st.load, l)
		st.all[n], st.cost[n] = o.watts(n, &l)
		st.total += st.cost[n]
		for _, b := range o.nodes[n].budgets {
			st.rack[b] += st.all[n]
		}
	}
	for b := range o.budgets {
		st.total += o.over(b, st.rack[b])
	}
	return st
}

// over is the penalty of budget b's rack drawing watts.
func (o *oracle) over(b int, watts float64) float64 {
	return overBudgetPenalty * o.horizon * max(0, watts-o.budgets[b].limit-1e-6)
}

// overBudget reports whether a rack is over its limit.
func (o *oracle) overBudget(st *oState) bool {
	for b := range o.budgets {
		if o.over(b, st.rack[b]) > 0 {
			return true
		}
	}
	return false
}

// objective is a state's objective, penalty apart.
func (st *oState) objective() float64 {
	var sum float64
	for _, c := range st.cost {
		sum += c
	}
	return sum
}

// change is a node's new load.
type change struct {
	node int
	load oLoad
}

// try returns how much the state's total would change if the nodes took
// their new loads; ok false when a node could not run its new load.
func (o *oracle) try(st *oState, changes ...change) (float64, bool) {
	var delta float64
	var rack map[int]float64
	for _, c := range changes {
		if !o.fits(c.node, &c.load, true) {
			return 0, false
		}
		all, cost := o.watts(c.node, &c.load)
		delta += cost - st.cost[c.node]
		for _, b := range o.nodes[c.node].budgets {
			if rack == nil {
				rack = map[int]float64{}
			}
			rack[b] += all - st.all[c.node]
		}
	}
	for b, d := range rack {
		delta += o.over(b, st.rack[b]+d) - o.over(b, st.rack[b])
	}
	return delta, true
}

func (o *oracle) apply(st *oState, changes ...change) {
	for _, c := range changes {
		all, cost := o.watts(c.node, &c.load)
		for _, b := range o.nodes[c.node].budgets {
			st.total += o.over(b, st.rack[b]+all-st.all[c.node]) - o.over(b, st.rack[b])
			st.rack[b] += all - st.all[c.node]
		}
		st.total += cost - st.cost[c.node]
		st.load[c.node], st.all[c.node], st.cost[c.node] = c.load, all, cost
	}
}

// place puts pod p on node n at NUMA node k.
func (o *oracle) place(st *oState, p, n, k int) {
	o.apply(st, change{n, o.with(st.load[n], p, k, 1)})
	st.at[p], st.numa[p] = n, k
}

// orders are the pod orders the greedy pass starts from: GPU and
// single-NUMA pods first in each, then the pods kept off the most nodes,
// then the largest CPU pods first, the smallest first, and the workload's
// own order.
func (o *oracle) orders() [][]int {
	base := make([]int, len(o.pods))
	for i := range base {
		base[i] = i
	}
	big := func(p int) bool { return o.pods[p].big() }
	sorted := func(less func(a, b *oPod) bool) []int {
		out := append([]int(nil), base...)
		sort.SliceStable(out, func(i, j int) bool {
			a, b := &o.pods[out[i]], &o.pods[out[j]]
			if big(out[i]) != big(out[j]) {
				return big(out[i])
			}
			if a.gpus != b.gpus {
				return a.gpus > b.gpus
			}
			if len(a.closed) != len(b.closed) {
				return len(a.closed) > len(b.closed) // fewer nodes to go to
			}
			return less(a, b)
		})
		return out
	}
	return [][]int{
		sorted(func(a, b *oPod) bool {
			return a.cpuMilli > b.cpuMilli || a.cpuMilli == b.cpuMilli && a.memBytes > b.memBytes
		}),
		sorted(func(a, b *oPod) bool {
			return a.cpuMilli < b.cpuMilli || a.cpuMilli == b.cpuMilli && a.memBytes < b.memBytes
		}),
		sorted(func(a, b *oPod) bool { return false }),
	}
}

// greedy places the pods in order on st, each where it adds the least to
// the total; it returns the pods no node could run.
func (o *oracle) greedy(st *oState, order []int) []string {
	var unplaced []string
	for _, p := range order {
		if st.at[p] >= 0 {
			continue
		}
		bestN, bestK, best := -1, -1, math.Inf(1)
		for n := range o.nodes {
			if !o.allowed(p, n) {
				continue
			}
			for _, k := range o.numaChoices(p, n) {
				if d, ok := o.try(st, change{n, o.with(st.load[n], p, k, 1)}); ok && d < best-1e-9 {
					bestN, bestK, best = n, k, d
				}
			}
		}
		if bestN < 0 {
			unplaced = append(unplaced, o.pods[p].name)
			continue
		}
		o.place(st, p, bestN, bestK)
	}
	return unplaced
}

// improve moves single pods and swaps pairs of pods of different shapes
// or closures while that lowers the total.
func (o *oracle) improve(st *oState) {
	const eps = 1e-6
	for {
		improved := false
		for p := range o.pods {
			a := st.at[p]
			from := o.with(st.load[a], p, st.numa[p], -1)
			bestN, bestK, best := -1, -1, -eps
			var bestLoad oLoad
			for n := range o.nodes {
				if n == a || !o.allowed(p, n) {
					continue
				}
				for _, k := range o.numaChoices(p, n) {
					to := o.with(st.load[n], p, k, 1)
					if d, ok := o.try(st, change{a, from}, change{n, to}); ok && d < best {
						bestN, bestK, best, bestLoad = n, k, d, to
					}
				}
			}
			if bestN >= 0 {
				o.apply(st, change{a, from}, change{bestN, bestLoad})
				st.at[p], st.numa[p] = bestN, bestK
				improved = true
			}
		}
		for p := range o.pods {
			for q := p + 1; q < len(o.pods); q++ {
				if o.trySwap(st, p, q, eps) {
					improved = true
				}
			}
		}
		if !improved {
			// Only when no single move or swap is left: two pods moved
			// at once, which crosses a curve's step that neither pod
			// pays alone.
			for _, pq := range o.distinctPairs(st) {
				if o.tryPairMove(st, pq[0], pq[1], eps) {
					improved = true
				}
			}
		}
		if !improved {
			return
		}
	}
}

// distinctPairs are the pairs of pods that tryPairMove needs to try: pods
// alike (shape, closures, node and NUMA node) are interchangeable, so one
// pair per two kinds of pod, and one of two pods of the same kind.
func (o *oracle) distinctPairs(st *oState) [][2]int {
	type kind struct {
		node, numa, gpus   int
		cpuMilli, memBytes int64
		singleNUMA         bool
		closed, units      string
	}
	var firsts [][2]int // per kind: its first pod, and a second or -1
	index := map[kind]int{}
	for p := range o.pods {
		pod := &o.pods[p]
		k := kind{st.at[p], st.numa[p], pod.gpus, pod.cpuMilli, pod.memBytes, pod.singleNUMA, fmt.Sprint(pod.closed), pod.units}
		i, ok := index[k]
		if !ok {
			index[k] = len(firsts)
			firsts = append(firsts, [2]int{p, -1})
		} else if firsts[i][1] < 0 {
			firsts[i][1] = p
		}
	}
	var out [][2]int
	for i, a := range firsts {
		if a[1] >= 0 {
			out = append(out, [2]int{a[0], a[1]})
		}
		for _, b := range firsts[i+1:] {
			out = append(out, [2]int{a[0], b[0]})
		}
	}
	return out
}

// tryPairMove moves pods p and q to other nodes at once (the same node or
// two), the best such move, when that lowers the total by more than eps.
func (o *oracle) tryPairMove(st *oState, p, q int, eps float64) bool {
	a, b := st.at[p], st.at[q]
	best := -eps
	var bestChanges []change
	var bestAt [2][2]int
	for n := range o.nodes {
		if n == a || !o.allowed(p, n) {
			continue
		}
		for _, kp := range o.numaChoices(p, n) {
			for m := range o.nodes {
				if m == b || !o.allowed(q, m) {
					continue
				}
				for _, kq := range o.numaChoices(q, m) {
					// Each node's load after both moves.
					loads := map[int]oLoad{}
					get := func(x int) oLoad {
						if l, ok := loads[x]; ok {
							return l
						}
						return st.load[x]
					}
					loads[a] = o.with(get(a), p, st.numa[p], -1)
					loads[b] = o.with(get(b), q, st.numa[q], -1)
					loads[n] = o.with(get(n), p, kp, 1)
					loads[m] = o.with(get(m), q, kq, 1)
					changes := make([]change, 0, len(loads))
					for x, l := range loads {
						changes = append(changes, change{x, l})
					}
					if d, ok := o.try(st, changes...); ok && d < best {
						best, bestChanges, bestAt = d, changes, [2][2]int{{n, kp}, {m, kq}}
					}
				}
			}
		}
	}
	if bestChanges == nil {
		return false
	}
	o.apply(st, bestChanges...)
	st.at[p], st.numa[p], st.at[q], st.numa[q] = bestAt[0][0], bestAt[0][1], bestAt[1][0], bestAt[1][1]
	return true
}

// trySwap swaps pods p and q, on different nodes and of different shapes
// or closures, when that lowers the total by more than eps.
func (o *oracle) trySwap(st *oState, p, q int, eps float64) bool {
	a, b := st.at[p], st.at[q]
	pp, qq := &o.pods[p], &o.pods[q]
	if a == b || (pp.cpuMilli == qq.cpuMilli && pp.memBytes == qq.memBytes && pp.gpus == qq.gpus && pp.singleNUMA == qq.singleNUMA && pp.units == qq.units && slices.Equal(pp.closed, qq.closed)) ||
		!o.allowed(p, b) || !o.allowed(q, a) {
		return false
	}
	la := o.with(st.load[a], p, st.numa[p], -1)
	lb := o.with(st.load[b], q, st.numa[q], -1)
	best, bestKP, bestKQ := -eps, 0, 0
	var bestA, bestB oLoad
	found := false
	for _, kq := range o.numaChoices(q, a) {
		na := o.with(la, q, kq, 1)
		for _, kp := range o.numaChoices(p, b) {
			nb := o.with(lb, p, kp, 1)
			if d, ok := o.try(st, change{a, na}, change{b, nb}); ok && d < best {
				best, bestKP, bestKQ, bestA, bestB, found = d, kp, kq, na, nb, true
			}
		}
	}
	if !found {
		return false
	}
	o.apply(st, change{a, bestA}, change{b, bestB})
	st.at[p], st.numa[p], st.at[q], st.numa[q] = b, bestKP, a, bestKQ
	return true
}
