// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/telesched/telesched/sandbox/sim"
)

// bruteForce is the least objective over every placement of the pods
// (each on any node and NUMA node), by exhaustive search; ok false when
// none meets the constraints.
func bruteForce(o *oracle) (float64, bool) {
	type choice struct{ node, numa int }
	var choices [][]choice
	for p := range o.pods {
		var cs []choice
		for n := range o.nodes {
			if !o.allowed(p, n) {
				continue
			}
			for _, k := range o.numaChoices(p, n) {
				cs = append(cs, choice{n, k})
			}
		}
		choices = append(choices, cs)
	}
	best, found := math.Inf(1), false
	pick := make([]choice, len(o.pods))
	var walk func(p int)
	walk = func(p int) {
		if p == len(o.pods) {
			loads := make([]oLoad, len(o.nodes))
			for n := range loads {
				loads[n] = o.emptyLoad(n)
			}
			for q, c := range pick {
				loads[c.node] = o.with(loads[c.node], q, c.numa, 1)
			}
			var total float64
			racks := make([]float64, len(o.budgets))
			for n := range loads {
				if !o.fits(n, &loads[n], true) {
					return
				}
				all, cost := o.watts(n, &loads[n])
				total += cost
				for _, b := range o.nodes[n].budgets {
					racks[b] += all
				}
			}
			for b := range racks {
				if racks[b] > o.budgets[b].limit+1e-6 {
					return
				}
			}
			if total < best {
				best, found = total, true
			}
			return
		}
		for _, c := range choices[p] {
			pick[p] = c
			walk(p + 1)
		}
	}
	walk(0)
	return best, found
}

// TestOracleMatchesBruteForce: on random small fleets (three nodes of
// SPECpower curves, CPU counts, base loads and NUMA layouts drawn at
// random, plus a GPU node) and six pods (CPU pods of 1-4 CPUs, sometimes a
// single-NUMA pod and a GPU pod), with a budget over some of the nodes that
// binds in part of them and, in about half, a node closed to some of the
// pods (a Closure), the oracle's objective is the exhaustive search's:
// 300 instances, both objectives and both variants, none off by more than
// 0.01 W. The lower bound is never above the optimum.
func TestOracleMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	curves := [][11]float64{curveR740, curveR830, curve2008, curveR620, curveX5670}
	var gaps []float64
	infeasible, binding, closed, queued := 0, 0, 0, 0
	for i := range 300 {
		var nodes []sim.NodeSpec
		for n := range 3 {
			cpus := []int{8, 16, 32}[rng.IntN(3)]
			numa := []int{1, 2}[rng.IntN(2)]
			nodes = append(nodes, fleetNode(fmt.Sprintf("n%d", n), fmt.Sprintf("r%d", n%2), cpus, numa, curves[rng.IntN(len(curves))], float64(rng.IntN(7)*10)))
			// Speeds of the shipped table's CPUs (agent/speed), or none.
			nodes[n].CPUSpeed = []float64{0, 0.575, 0.756, 1}[rng.IntN(4)]
		}
		var pods []Pod
		for p := range 6 {
			pods = append(pods, Pod{Name: fmt.Sprintf("p%d", p), Phase: []string{"early", "late"}[rng.IntN(2)], CPUMilli: int64(1+rng.IntN(4)) * 1000, MemoryBytes: int64(1+rng.IntN(8)) << 30})
			if rng.IntN(3) == 0 {
				// A finite pod: 10 minutes to 2 hours of work on the
				// reference, against the services' hour.
				pods[p].Seconds = float64(600 * (1 + rng.IntN(12)))
			}
		}
		if rng.IntN(2) == 0 {
			pods[0].SingleNUMA = true
		}
		if rng.IntN(2) == 0 {
			pods[1] = Pod{Name: "gpu", CPUMilli: 8000, MemoryBytes: 32 << 30, GPUs: 4, SingleNUMA: true}
		}
		var budgets []Budget
		if rng.IntN(2) == 0 {
			// Rack r0 (n0, n2) at its watts without pods plus 1-60 W.
			o := newOracle(testFleet(slices.Clone(nodes)), nil, Options{})
			st := o.newState()
			idle := st.all[0] + st.all[2]
			budgets = []Budget{{Rack: "r0", BudgetWatts: int64(int(idle) + 1 + rng.IntN(60))}}
		}
		f := testFleet(slices.Clone(nodes), budgets...)
		opts := Options{CPUPodsOffGPUNodes: i%2 == 0, CPUPodsObjective: i%3 == 0, Queue: i%4 == 1}
		if rng.IntN(2) == 0 {
			opts.Closed = []Closure{{Phase: "late", Node: fmt.Sprintf("n%d", rng.IntN(3))}}
			closed++
		}
		if opts.Queue {
			queued++
		}
		o := newOracle(f, pods, opts)
		want, ok := bruteForce(o)
		got := Solve(f, pods, opts)
		if !ok {
			infeasible++
			if len(got.Unplaced) == 0 {
				t.Errorf("instance %d: no placement exists, the oracle found %v", i, got.Nodes)
			}
			continue
		}
		if len(budgets) > 0 {
			if free, _ := bruteForce(newOracle(testFleet(slices.Clone(nodes)), pods, opts)); free < want-1e-6 {
				binding++
			}
		}
		if len(got.Unplaced) > 0 {
			t.Errorf("instance %d: the oracle placed no %v; a placement of %.0f J exists", i, got.Unplaced, want)
			continue
		}
		// 0.01 W over the services' hour.
		gaps = append(gaps, got.Joules-want)
		if got.Joules-want > 0.01*DefaultHorizon {
			t.Errorf("instance %d (%+v): oracle %.0f J, optimum %.0f J, bound %.0f J\n%+v\n%+v", i, opts, got.Joules, want, got.LowerBound, nodes, pods)
		}
		if got.LowerBound > want+1e-3 {
			t.Errorf("instance %d: lower bound %.2f J above the optimum %.2f J", i, got.LowerBound, want)
		}
	}
	sort.Float64s(gaps)
	t.Logf("%d instances with a placement (%d with a binding budget), %d without, %d with a closure, %d queued; oracle - optimum: max %.4f J", len(gaps), binding, infeasible, closed, queued, gaps[len(gaps)-1])
	if binding < 10 || len(gaps) < 200 {
		t.Errorf("only %d feasible instances, %d with a binding budget: the test no longer exercises the budgets", len(gaps), binding)
	}
}
