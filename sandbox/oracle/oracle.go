// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import (
	"math"

	"github.com/telesched/telesched/sandbox/sim"
)

// Fleet is what the oracle places pods on: the simulated nodes, and the
// racks' power budgets over them. A node's GPU units are its spec's: its
// MIG strategy and devices (sim.NodeSpec.MIGStrategy, GPUSpec.MIG), its
// NVLink (NVLinkPairs: a 2-GPU pod takes a linked pair), and DRA (its
// GPUs go to claims only).
type Fleet struct {
	Nodes   []sim.NodeSpec
	Budgets []Budget
}

// Budget is a rack's power budget (a PowerBudget over the nodes whose
// Rack is Rack): the rack's nodes draw at most BudgetWatts -
// ReserveWatts.
type Budget struct {
	Rack                      string
	BudgetWatts, ReserveWatts int64
}

// Pod is one pod to place: its requests, its phase (which Closures
// name) and whether its CPUs, memory and GPUs must sit on one NUMA node.
type Pod struct {
	Name, Phase           string
	CPUMilli, MemoryBytes int64
	// GPUs are units of the GPU resource (nvidia.com/gpu): whole GPUs, or
	// MIG devices on a node of the single MIG strategy; a pod of 2 on a
	// node of NVLink pairs takes a linked pair.
	GPUs int
	// MIG are MIG devices per profile (the mixed strategy's resources);
	// ClaimGPUs whole GPUs a DRA claim asks for, which only a DRA node's
	// GPUs meet; ClaimMIG MIG devices per profile that DRA claims ask for,
	// which only a DRA node's MIG devices meet.
	MIG       map[string]int
	ClaimGPUs int
	ClaimMIG  map[string]int
	// Node pins the pod to the node of that name ("" none).
	Node       string
	SingleNUMA bool
	// Seconds is a finite pod's work: the seconds it runs at its requests
	// on the reference (a CPU pod on reference cores, a GPU pod on
	// reference GPUs); on a node k times faster it runs Seconds / k. 0: a
	// service, which does its work at a fixed rate over the horizon and
	// keeps 1/k of its requests busy.
	Seconds float64
}

// DefaultHorizon is how long the services' work runs, Options.Horizon's
// default: an hour.
const DefaultHorizon = 3600.0

// Options choose the oracle's variant.
type Options struct {
	// CPUPodsOffGPUNodes keeps pods that request no GPU off nodes with GPUs.
	CPUPodsOffGPUNodes bool
	// CPUPodsObjective minimizes the energy of the fleet running its CPU
	// pods only.
	CPUPodsObjective bool
	// Horizon is how many seconds of the services' work the energy counts
	// (DefaultHorizon when 0); finite pods count until they end.
	Horizon float64
	// Closed keeps a phase's pods off a node.
	Closed []Closure
	// Queue lets a node's finite pods run one after another, beside its
	// services, in the pods' order: a job waits for the one before it on
	// its node, as telesched's queue holds a job that a rack's budget
	// keeps pending until another ends. A rack's budget then holds each
	// of its nodes' services with the costliest of its finite pods (the
	// most the node draws at any moment), and each job's energy counts
	// from its start (Result.Starts). Capacity (CPUs, memory, GPUs) still
	// holds every pod at once: the model reuses no GPU that a job ended,
	// gives no pod the CPUs a job leaves free before it starts, and never
	// runs two jobs of one node at once; a schedule that does may spend
	// less.
	Queue bool
}

// Closure keeps the pods of Phase off Node: the sandbox's scenario
// creates the heat phase's pods while the heater reports itself past its
// thermal limit, when no pod may go there (EnergyAware's filter; the
// promise that nothing runs on a node that is overheating), and nothing
// moves a pod once it runs. An oracle blind to time would give the heater
// the pods it can take once its fan is repaired, a placement no scheduler
// can make.
type Closure struct {
	Phase, Node string
}

// Result is the oracle's placement.
type Result struct {
	// Nodes is each placed pod's node. Unplaced are the pods that no node
	// could take in the greedy pass (with racks' budgets binding, a
	// placement of them all may still exist that it did not find).
	Nodes    map[string]string
	Unplaced []string
	// Joules is the objective at the placement: the energy the fleet
	// spends for the pods' work beyond its base load (the services' over
	// the horizon, the finite pods' until they end), or its CPU pods'
	// alone (CPUPodsObjective).
	Joules float64
	// LowerBound is no more than the objective of any placement of every
	// pod; NaN when not computed (too many ways to place the GPU and
	// single-NUMA pods, or none).
	LowerBound float64
	// Starts are the finite pods' starts, seconds from the start, with
	// Queue: each after the finite pods before it on its node; nil
	// without Queue (every pod starts at once).
	Starts map[string]float64
	// Infeasible: no placement of every pod exists, proven: the lower
	// bound's relaxation has none (the GPU and single-NUMA pods fit the
	// nodes no way, or take a rack over its budget alone every way they
	// fit, or the other pods' CPUs fit no node's limits).
	Infeasible bool
}

// Solve returns the cheapest placement it finds of pods on the fleet's
// nodes, and the lower bound no placement can beat.
func Solve(fleet Fleet, pods []Pod, opts Options) Result {
	o := newOracle(fleet, pods, opts)
	b := o.lowerBound()
	res := Result{Nodes: map[string]string{}, LowerBound: b.joules, Infeasible: b.infeasible}
	var starts []*oState
	for _, order := range o.orders() {
		st := o.newState()
		if unplaced := o.greedy(st, order); len(unplaced) > 0 {
			if res.Unplaced == nil {
				res.Unplaced = unplaced
			}
			continue
		}
		starts = append(starts, st)
	}
	if st := o.seed(b); st != nil {
		starts = append(starts, st)
	}
	if st := o.seedTotals(b); st != nil {
		starts = append(starts, st)
	}
	var best *oState
	for _, st := range starts {
		o.improve(st)
		if !o.overBudget(st) && (best == nil || st.total < best.total-1e-9) {
			best = st
		}
	}
	if best == nil {
		if res.Unplaced == nil {
			// Every pod found a node, but no start left the racks
			// within their budgets: name the pods on racks over theirs.
			// (the first start's placement names them)
			if len(starts) > 0 {
				st := starts[0]
				for p, n := range st.at {
					for _, bi := range o.nodes[n].budgets {
						if o.over(bi, st.rack[bi]) > 0 {
							res.Unplaced = append(res.Unplaced, o.pods[p].name)
							break
						}
					}
				}
			}
		}
		res.Joules = math.NaN()
		return res
	}
	res.Unplaced = nil
	for p, n := range best.at {
		res.Nodes[o.pods[p].name] = o.nodes[n].spec.Name
	}
	if opts.Queue {
		res.Starts = map[string]float64{}
		for n := range best.load {
			for p, s := range o.queueStarts(n, &best.load[n]) {
				res.Starts[o.pods[p].name] = s
			}
		}
	}
	res.Joules = best.objective()
	return res
}
