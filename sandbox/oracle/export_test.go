// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import (
	"fmt"
	"math"
)

// PlacementJoules checks a placement (pod -> node) against every node's
// constraints and returns its objective, and the nodes whose constraints
// it breaks. A single-NUMA pod goes to the first NUMA node that fits (a
// Result does not name NUMA nodes). For the tests of package oracle_test.
func PlacementJoules(fleet Fleet, pods []Pod, opts Options, nodes map[string]string) (joules float64, broken []string) {
	o := newOracle(fleet, pods, opts)
	index := map[string]int{}
	for i := range o.nodes {
		index[o.nodes[i].spec.Name] = i
	}
	loads := make([]oLoad, len(o.nodes))
	for n := range loads {
		loads[n] = o.emptyLoad(n)
	}
	for p, pod := range o.pods {
		n := index[nodes[pod.name]]
		k := -1
		if pod.singleNUMA {
			for kk := range o.nodes[n].numa {
				if l := o.with(loads[n], p, kk, 1); o.fits(n, &l, true) {
					k = kk
					break
				}
			}
		}
		loads[n] = o.with(loads[n], p, k, 1)
	}
	for n := range loads {
		if !o.fits(n, &loads[n], true) {
			broken = append(broken, fmt.Sprintf("%s: %+v", o.nodes[n].spec.Name, loads[n]))
		}
		_, c := o.watts(n, &loads[n])
		joules += c
	}
	return joules, broken
}

// Online places the pods one at a time in order, each where it adds the
// least by the nodes' true joules within every constraint, charged its
// share of what it and up to consolidation-1 more pods like it add
// (EnergyAware's consolidationPods); opts.CPUPodsObjective counts the
// CPU pods' joules only. It returns the objective (the fleet's joules
// beyond its base load), and the CPUs of CPU pods on each node. For the
// tests of package oracle_test.
func Online(fleet Fleet, pods []Pod, opts Options, consolidation int) (added float64, cpus map[string]int, err error) {
	o := newOracle(fleet, pods, opts)
	st := o.newState()
	for p := range o.pods {
		bestN, bestK, best := -1, -1, math.Inf(1)
		for n := range o.nodes {
			if !o.allowed(p, n) {
				continue // the heat phase's pods off the heater
			}
			for _, k := range o.numaChoices(p, n) {
				l := o.with(st.load[n], p, k, 1)
				if _, ok := o.try(st, change{n, l}); !ok {
					continue
				}
				all, _ := o.watts(n, &l)
				over := false
				for _, b := range o.nodes[n].budgets {
					over = over || o.over(b, st.rack[b]+all-st.all[n]) > 0
				}
				if over {
					continue
				}
				// The least, over j = 1..consolidation pods like p that
				// fit, of the watts they add over j.
				cost := math.Inf(1)
				for j := 1; j <= consolidation; j++ {
					if j > 1 {
						l = o.with(l, p, k, 1)
						if !o.fits(n, &l, true) {
							break
						}
					}
					cur := st.load[n]
					cpuOnly := o.pods[p].cpuPod()
					d := o.nodeJoules(n, &l, cpuOnly) - o.nodeJoules(n, &cur, cpuOnly)
					cost = math.Min(cost, d/float64(j))
				}
				if cost < best-1e-9 {
					bestN, bestK, best = n, k, cost
				}
			}
		}
		if bestN < 0 {
			return 0, nil, fmt.Errorf("consolidation %d: %s found no node", consolidation, o.pods[p].name)
		}
		o.place(st, p, bestN, bestK)
	}
	cpus = map[string]int{}
	for p, n := range st.at {
		if o.pods[p].cpuPod() {
			cpus[o.nodes[n].spec.Name] += int(o.pods[p].cpuMilli / 1000)
		}
	}
	return st.objective(), cpus, nil
}
