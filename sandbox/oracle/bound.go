// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import (
	"math"
	"slices"
)

// maxBigPlacements bounds the ways of placing the GPU and single-NUMA pods
// the lower bound tries.
const maxBigPlacements = 100_000

// bound is the lower bound and the relaxed placement that reaches it:
// where the GPU and single-NUMA pods go (node and NUMA node, by pod; -1
// for the others) and how many units of unit CPU of the other pods each
// node takes.
type bound struct {
	joules     float64
	node, numa []int
	units      []int
	unit       int64
	// infeasible: every way was tried and none fits (see Result).
	infeasible bool
}

// lowerBound is no more than the objective of any placement of every pod
// that meets the nodes' own constraints: it places the GPU and
// single-NUMA pods every way they fit, and for each spreads the other pods'
// CPUs over the nodes, in units of their greatest common divisor, by
// dynamic programming on each node's true watts (its threshold, thermal
// limit and NUMA shares kept; those pods' memory and the racks' budgets
// relaxed; the pods kept off some nodes by a closure kept off them, for
// one set of such nodes: pods under any other set count as free to go
// anywhere, which only lowers the bound). Its watts are NaN when there
// are too many ways or none.
func (o *oracle) lowerBound() bound {
	var big []int
	var sp spreadPods
	res := bound{joules: math.Inf(1)}
	for p := range o.pods {
		if o.pods[p].big() {
			big = append(big, p)
			continue
		}
		res.unit = gcd(res.unit, o.pods[p].cpuMilli)
		if c := o.pods[p].closed; len(c) > 0 && (sp.closed == nil || slices.Equal(c, sp.closed)) {
			sp.closed = c
		}
	}
	if res.unit > 0 {
		for p := range o.pods {
			if o.pods[p].big() {
				continue
			}
			u := int(o.pods[p].cpuMilli / res.unit)
			if sp.closed != nil && slices.Equal(o.pods[p].closed, sp.closed) {
				sp.closedUnits += u
			} else {
				sp.freeUnits += u
			}
		}
	}
	sp.unit = res.unit
	tried := 0
	loads := make([]oLoad, len(o.nodes))
	for n := range loads {
		loads[n] = o.emptyLoad(n)
	}
	node, numa := make([]int, len(o.pods)), make([]int, len(o.pods))
	for p := range node {
		node[p], numa[p] = -1, -1
	}
	var place func(i int)
	place = func(i int) {
		if tried > maxBigPlacements {
			return
		}
		if i == len(big) {
			tried++
			// Pods only add watts: a rack over its budget with these
			// pods alone stays over.
			racks := make([]float64, len(o.budgets))
			for n := range loads {
				all, _ := o.watts(n, &loads[n])
				for _, b := range o.nodes[n].budgets {
					racks[b] += all
				}
			}
			for b := range racks {
				if o.over(b, racks[b]) > 0 {
					return
				}
			}
			if w, per := o.spread(loads, sp); w < res.joules {
				res.joules, res.units = w, per
				res.node, res.numa = append([]int(nil), node...), append([]int(nil), numa...)
			}
			return
		}
		p := big[i]
		for n := range o.nodes {
			if !o.allowed(p, n) {
				continue
			}
			for _, k := range o.numaChoices(p, n) {
				l := o.with(loads[n], p, k, 1)
				if !o.fits(n, &l, true) {
					continue
				}
				prev := loads[n]
				loads[n], node[p], numa[p] = l, n, k
				place(i + 1)
				loads[n], node[p], numa[p] = prev, -1, -1
			}
		}
	}
	place(0)
	// No way fits: the relaxation has no placement, so none exists.
	res.infeasible = tried <= maxBigPlacements && math.IsInf(res.joules, 1)
	if tried > maxBigPlacements || math.IsInf(res.joules, 1) {
		res.joules = math.NaN()
	}
	return res
}

// spreadPods are the CPUs of the pods the lower bound spreads, in units of
// unit: freeUnits of pods that may go to any node, closedUnits of pods
// kept off the nodes in closed.
type spreadPods struct {
	unit                   int64
	freeUnits, closedUnits int
	closed                 []int
}

// spread is the least objective of the nodes running loads plus the
// pods' units spread over them, and how many units each node takes there.
func (o *oracle) spread(loads []oLoad, sp spreadPods) (float64, []int) {
	inf := math.Inf(1)
	units := sp.freeUnits + sp.closedUnits
	F, C := sp.freeUnits+1, sp.closedUnits+1
	// dp[n][i*C+j]: least objective of nodes 0..n-1 taking i free and j
	// closed units; tookF, tookC the units node n-1 takes there.
	dp := make([][]float64, len(o.nodes)+1)
	tookF, tookC := make([][]int, len(o.nodes)+1), make([][]int, len(o.nodes)+1)
	dp[0] = make([]float64, F*C)
	for j := range dp[0] {
		dp[0][j] = inf
	}
	dp[0][0] = 0
	for n := range o.nodes {
		// f[c]: node n's objective taking c units; +Inf past its limits
		// (each limit only tightens as c grows).
		f := make([]float64, units+1)
		for c := range f {
			f[c] = inf
		}
		for c := 0; c <= units; c++ {
			if c > 0 && o.opts.CPUPodsOffGPUNodes && o.nodes[n].hasGPU {
				break
			}
			l := loads[n].clone()
			l.cpuMilli += int64(c) * sp.unit
			l.cpuPodMilli += int64(c) * sp.unit
			l.svcMilli += int64(c) * sp.unit
			l.svcCPUPodMilli += int64(c) * sp.unit
			if c > 0 {
				l.pods++ // at least one
			}
			if !o.fits(n, &l, false) {
				break
			}
			_, f[c] = o.watts(n, &l)
		}
		maxClosed := sp.closedUnits
		if slices.Contains(sp.closed, n) {
			maxClosed = 0
		}
		cur := make([]float64, F*C)
		tf, tc := make([]int, F*C), make([]int, F*C)
		for i := range F {
			for j := range C {
				best, bi, bj := inf, 0, 0
				for a := 0; a <= i; a++ {
					for b := 0; b <= min(j, maxClosed); b++ {
						if v := dp[n][(i-a)*C+j-b] + f[a+b]; v < best {
							best, bi, bj = v, a, b
						}
					}
				}
				cur[i*C+j], tf[i*C+j], tc[i*C+j] = best, bi, bj
			}
		}
		dp[n+1], tookF[n+1], tookC[n+1] = cur, tf, tc
	}
	per := make([]int, len(o.nodes))
	end := sp.freeUnits*C + sp.closedUnits
	if !math.IsInf(dp[len(o.nodes)][end], 1) {
		i, j := sp.freeUnits, sp.closedUnits
		for n := len(o.nodes); n > 0; n-- {
			a, b := tookF[n][i*C+j], tookC[n][i*C+j]
			per[n-1] = a + b
			i, j = i-a, j-b
		}
	}
	return dp[len(o.nodes)][end], per
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
