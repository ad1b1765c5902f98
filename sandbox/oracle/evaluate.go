// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import "slices"

// Placed is a placement (pod name -> node name) of pods on fleet, judged
// by the oracle's own figures, so that a profile's placement and the
// oracle's are measured alike. Pods the placement leaves out, and nodes
// it names that the fleet lacks, are left out; no constraint is checked
// (the default profile's placement may break telesched's).
type Placed struct {
	o     *oracle
	loads []oLoad
	// starts are the finite pods' starts, seconds, by index; absent: 0.
	starts map[int]float64
}

// Place returns the placement of pods by nodes on fleet.
func Place(fleet Fleet, pods []Pod, nodes map[string]string) *Placed {
	o := newOracle(fleet, pods, Options{})
	index := map[string]int{}
	for i := range o.nodes {
		index[o.nodes[i].spec.Name] = i
	}
	pl := &Placed{o: o, loads: make([]oLoad, len(o.nodes))}
	for n := range pl.loads {
		pl.loads[n] = o.emptyLoad(n)
	}
	for p := range o.pods {
		if n, ok := index[nodes[o.pods[p].name]]; ok {
			pl.loads[n] = o.with(pl.loads[n], p, -1, 1)
		}
	}
	return pl
}

// StartAt starts the finite pods named later than the others (seconds
// after them): a job a rack's budget kept pending until another ended.
func (pl *Placed) StartAt(starts map[string]float64) *Placed {
	pl.starts = map[int]float64{}
	for p := range pl.o.pods {
		if s, ok := starts[pl.o.pods[p].name]; ok && s > 0 {
			pl.starts[p] = s
		}
	}
	return pl
}

// Joules is the energy the placement spends for its pods' work beyond
// the fleet's base load (the oracle's objective); cpuOnly its CPU pods'
// alone. only names the nodes counted (nil: every node).
func (pl *Placed) Joules(cpuOnly bool, only []string) float64 {
	var j float64
	for n := range pl.loads {
		if only == nil || slices.Contains(only, pl.o.nodes[n].spec.Name) {
			j += pl.o.nodeJoulesFrom(n, &pl.loads[n], cpuOnly, pl.starts)
		}
	}
	return j
}

// Watts is the fleet's steady watts with the placement's pods running
// (its services keeping their requests over their node's speed busy, its
// finite pods at their requests), over the nodes named (nil: every
// node), the nodes without pods at their base load: with every pod at
// once, or, where jobs start later (StartAt), the most the nodes draw
// together at any start.
func (pl *Placed) Watts(only []string) float64 {
	moments := []float64{0}
	for _, s := range pl.starts {
		moments = append(moments, s)
	}
	seconds := pl.Seconds()
	peak := 0.0
	for _, t := range moments {
		var w float64
		for n := range pl.loads {
			if only != nil && !slices.Contains(only, pl.o.nodes[n].spec.Name) {
				continue
			}
			l := pl.loads[n]
			if len(pl.starts) > 0 {
				// The jobs running at t only.
				l = l.clone()
				kept := l.finite[:0]
				for _, p := range l.finite {
					start := pl.starts[p]
					if t >= start && t < start+seconds[pl.o.pods[p].name] {
						kept = append(kept, p)
					}
				}
				l.finite = kept
			}
			all, _ := pl.o.watts(n, &l)
			w += all
		}
		peak = max(peak, w)
	}
	return peak
}

// Seconds is how long each finite pod of the placement runs on its node:
// its work over the node's pace for it (a GPU pod's its devices', a CPU
// pod's its cores').
func (pl *Placed) Seconds() map[string]float64 {
	out := map[string]float64{}
	for n := range pl.loads {
		for _, p := range pl.loads[n].finite {
			out[pl.o.pods[p].name] = pl.o.finiteRun(n, p, 0).Seconds
		}
	}
	return out
}

// Ends is when each finite pod of the placement ends, seconds from the
// start: its start (StartAt) and its Seconds.
func (pl *Placed) Ends() map[string]float64 {
	out := pl.Seconds()
	for p, s := range pl.starts {
		if _, ok := out[pl.o.pods[p].name]; ok {
			out[pl.o.pods[p].name] += s
		}
	}
	return out
}
