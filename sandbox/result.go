// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"time"

	"github.com/telesched/telesched/sandbox/sim"
	"github.com/telesched/telesched/scheduler/estimate"
)

// Placement is where a pod went.
type Placement struct {
	Pod, Phase, Node string
	// Why is the node's telemetry when the pod was bound.
	Why string
	At  time.Time
	// GPUs are the simulated GPUs the pod took, and whether they share a
	// NUMA node.
	GPUs        []int
	GPUsAligned bool
	// SteadyCelsius is where the node settles with its pods, this one
	// included, by the simulation's physics (telesched's placements only).
	SteadyCelsius float64
	// PodCPUMilli and PodGPUs are the pod's CPU and GPU requests; Work
	// how its work is counted (a service keeps its requests over its
	// node's CPU speed busy).
	PodCPUMilli, PodGPUs int64
	Work                 estimate.Work
	// Ended is when a job's work was done in the run (zero: it ran to
	// the end); Queued: it was bound after another job had ended (a
	// rack's budget kept it pending until then).
	Ended  time.Time
	Queued bool
	// StartSeconds is when the oracle's queue starts a finite pod, in the
	// model's seconds from the start (oracle.Result.Starts; the oracles'
	// placements only): after the jobs before it on its node.
	StartSeconds float64
	// TrueWatts is what the pod added to its node by the simulation's
	// steady physics (HasTrue); LearnedWatts what the scheduler estimated
	// it would add from the node's published power curve, the sample it
	// had when it bound the pod and the pods it had placed there since
	// (HasLearned). Telesched's placements only.
	TrueWatts, LearnedWatts float64
	HasTrue, HasLearned     bool
	// PodMIGSlices are the compute slices of the MIG resources the pod
	// requests (estimate.Demand); Slices the MIG devices it took; Linked
	// whether its GPUs reach each other over NVLink.
	PodMIGSlices int64
	// PodClaimGPUs are the GPUs its DRA claims were allocated, which the
	// scheduler counts into its demand (estimate.Demand.ClaimGPUs).
	PodClaimGPUs int64
	Slices       []sim.Slice
	Linked       bool
	// SliceTrueWatts is what one of its MIG devices adds by the
	// simulation (sim.NodeSpec.SliceWatts, their mean), SliceLearnedWatts
	// what the scheduler estimates one adds from the sample it had
	// (estimate.PodGPUWatts over the devices; HasSliceLearned).
	SliceTrueWatts, SliceLearnedWatts float64
	HasSliceLearned                   bool
}

// Result is what a run found; tests assert on it.
type Result struct {
	RealHost   string
	Placements []Placement // the telesched profile's, in binding order
	Baseline   []Placement // the default profile's, same workload
	// Rejections are FailedScheduling messages by pod.
	Rejections map[string][]string
	// PeakCelsius is each node's hottest published temperature.
	PeakCelsius map[string]float64
	// Heat is what the heat phase, and the run around it, saw of the
	// heater and of nodes at their limit.
	Heat HeatResult
	// Ahead is what the run saw of placements judged on where a node
	// settles (the heat-ahead phase and EnergyAware's prediction).
	Ahead AheadResult
	// Units is the unit phase's check: the pods refused while units of
	// their kind were free fail the run.
	Units UnitsResult
	// Energy is each placement's watts, the oracles' and the learned
	// marginal watts' errors.
	Energy EnergyResult
	// Racks are the fleet's power budgets and what the run saw of them;
	// BudgetRejections counts FailedScheduling messages that rejected a
	// node on its PowerBudget.
	Racks            []Rack
	BudgetRejections int
	// Refused are the pods the racks' power budgets kept out, which the
	// scenario deleted and went on without; the oracles are then of the
	// pods telesched placed.
	Refused []Refusal
	// After are the after-placement passes, without the descheduler
	// first (--descheduler).
	After []AfterResult
	// Soak is the soak's evictions and goals (Options.Soak), nil when it
	// did not run.
	Soak *SoakResult `json:",omitempty"`
	// Tables are the NodeTelemetry tables printed, as kubectl prints them;
	// BudgetTables the PowerBudget tables.
	Tables       []string
	BudgetTables []string
	// Kubeconfig is the cluster's kubeconfig (kept with Keep).
	Kubeconfig string
	// Phases are the scenario's phases that ran, in order: baseline, web,
	// burst, gpu, heat-ahead, heat, cool. Skipped says why a phase did
	// not run, by phase.
	Phases  []string
	Skipped map[string]string
	// JobsCreated is when the GPU phase created its training jobs: a job
	// bound after another ended starts that long after them, times
	// Options.WorkSpeedup, in the energy accounting.
	JobsCreated time.Time
}

// HeatResult is what the run saw of the heater and of nodes at their
// thermal limit.
type HeatResult struct {
	// Node is the node whose fan fails, the heater ("" when none does);
	// PeakCelsius its hottest published temperature.
	Node        string
	PeakCelsius float64
	// HotPlacements are pods bound to a node while its latest telemetry
	// had it at or over its thermal limit (EnergyAware's definition).
	HotPlacements []string
	// ProbeScheduledAfterCooling: the pod pinned to the heater was
	// rejected while it was hot and bound once it cooled.
	ProbeScheduledAfterCooling bool
}

// AheadResult is what the run saw of placements judged on where a node
// settles with its pods.
type AheadResult struct {
	// Ran: the heat-ahead pod, which would take a cool node past its
	// limit - margin once it settles, was created (its node had a thermal
	// model); Refused: it was refused on its predicted temperature.
	Ran, Refused bool
	// PredictedHotPlacements are pods placed where the node, with its pods,
	// settles at or past its limit − EnergyAware's margin (the simulation's
	// physics); PredictionRejections counts FailedScheduling messages that
	// rejected a node on its predicted steady temperature.
	PredictedHotPlacements []string
	PredictionRejections   int
}

// EnergyResult is the workload's watts as each profile and the oracles
// placed it, and how well the scheduler learned the watts it placed by.
type EnergyResult struct {
	// Fleet watts estimated by the load model for each placement, the
	// fleet's watts without the workload, and the workload's share split
	// into its CPU pods and its GPU pods.
	TeleschedWatts, DefaultWatts float64
	IdleWatts                    float64
	TeleschedWork, DefaultWork   Work
	// The energy each placement spends for the scenario's work (the
	// services' hour, every finite pod until it ends; the nodes' speeds,
	// docs/energy-models.md), split as Work is; and when each finite pod
	// ends there, in seconds from the start (a queued job's start
	// included).
	TeleschedJoules, DefaultJoules   Joules
	TeleschedSeconds, DefaultSeconds map[string]float64
	// Oracle and OracleOffGPU are the placements of the workload that
	// spend the least energy for its work by the simulated nodes' true
	// watts and speeds (see package oracle): CPU pods allowed on GPU
	// nodes, as telesched allows them, and kept off them.
	Oracle, OracleOffGPU OracleReport
	// WorkloadInfeasible: with pods refused (Result.Refused), no
	// placement of the whole workload meets the constraints (proven, see
	// oracle.Result.Infeasible).
	WorkloadInfeasible bool
	// Marginal are the learned marginal watts' errors against the true
	// ones over telesched's placements.
	Marginal MarginalErrors
}

// OracleReport is an oracle's placements of the workload: the energy
// for its work, and its workload watts (the fleet's watts running them
// minus its watts without them).
type OracleReport struct {
	// Placements minimize the whole workload's energy; Joules is it, its
	// CPU pods' and what its GPU pods add; Work its watts, split alike;
	// Seconds how long each finite pod runs there.
	Placements []Placement
	Joules     Joules
	Work       Work
	Seconds    map[string]float64
	// CPUJoules is the least CPU pods' energy of any placement (the
	// oracle on the CPU pods' energy), CPUWatts that placement's CPU
	// pods' watts.
	CPUJoules, CPUWatts float64
	// LowerBound and CPULowerBound bound Joules.Total() and CPUJoules
	// from below, in joules (see package oracle).
	LowerBound, CPULowerBound float64
	// Unplaced are the pods it found no room for; the figures are NaN then.
	// Infeasible: no room exists for them, proven (see oracle.Result).
	Unplaced   []string
	Infeasible bool
	// Queue: the oracle let a job wait for the one before it on its node
	// (oracle.Options.Queue), as telesched's run queued one; its
	// placements' StartSeconds say when each starts.
	Queue bool
}

// Rack is a rack's PowerBudget and what the run saw of it.
type Rack struct {
	Budget, Rack              string
	Nodes                     []string
	BudgetWatts, ReserveWatts int64
	// PeakWatts is the most the rack's nodes drew together: the largest
	// sum of their latest published watts, from the end of the
	// calibration sweep on.
	PeakWatts float64
	// TeleschedWatts and DefaultWatts are the rack's watts running the
	// workload as each profile placed it, by the simulated nodes' curves.
	TeleschedWatts, DefaultWatts float64
}

// Work is a placement's workload watts: the fleet's watts running it
// minus its watts without it, split into the CPU pods' share and what the
// GPU pods add on top.
type Work struct {
	CPU, GPU float64
}

// Total is the workload's watts.
func (w Work) Total() float64 { return w.CPU + w.GPU }

// Joules is a placement's energy for the scenario's work, split as Work
// is: its CPU pods' and what its GPU pods add on top.
type Joules struct {
	CPU, GPU float64
}

// Total is the workload's energy.
func (j Joules) Total() float64 { return j.CPU + j.GPU }

// ran records a phase that ran.
func (r *Result) ran(phase string) { r.Phases = append(r.Phases, phase) }

// skip records why a phase did not run.
func (r *Result) skip(phase, why string) { r.Skipped[phase] = why }

// refused reports whether the budgets refused a pod.
func (r *Result) refused(pod string) bool {
	for _, x := range r.Refused {
		if x.Pod == pod {
			return true
		}
	}
	return false
}

// PlacementOf is where the telesched profile put a pod.
func (r *Result) PlacementOf(pod string) (Placement, bool) {
	for _, p := range r.Placements {
		if p.Pod == pod {
			return p, true
		}
	}
	return Placement{}, false
}

// AfterResult is one pass of the after-placement phases (the heater's fan
// failing under running pods, a rack's load rising past its budget), with
// or without telesched-descheduler.
type AfterResult struct {
	Descheduler bool
	// HotNode is the heater; LimitCelsius its limit − margin;
	// HotSeconds how long its package was at or past it (sandbox time,
	// the simulation's own temperature, read every half interval) during
	// the fault; BackUnderSeconds how long after first reaching it the
	// node was back under for good (BackUnder false: not within the fault).
	HotNode          string
	LimitCelsius     float64
	HotSeconds       float64
	BackUnderSeconds float64
	Reached          bool
	BackUnder        bool
	// OracleMin is the fewest of the heater's evictable pods whose removal
	// takes it under its limit − margin by the simulation's physics
	// (oracle.FewestToShed; -1: no subset is enough).
	OracleMin int
	// Rack is the PowerBudget whose rack's load rises (RackNodes its
	// nodes), BudgetWatts its
	// budget and RackLimitWatts its limit (budget − reserve, what
	// telesched-descheduler sheds to); OverBudgetSeconds and
	// OverLimitSeconds how long the rack's nodes' watts (the
	// simulation's) were over each during the rise; RackBackUnderSeconds
	// how long after first passing the limit it was back under for good
	// (RackBackUnder false: not within the rise), against RackBoundSeconds
	// (rackBound); RackOracleMin the fewest of the rack's evictable pods
	// whose removal takes it under its limit.
	Rack                                   string
	RackNodes                              []string
	BudgetWatts, RackLimitWatts            float64
	OverBudgetSeconds, OverLimitSeconds    float64
	RackBackUnderSeconds, RackBoundSeconds float64
	RackReached, RackBackUnder             bool
	RackOracleMin                          int
	// BoundSeconds is the bound the hot node must be back under within
	// (afterBound); Evictions are the evictions during the fault,
	// RackEvictions those while the rack's load is up.
	BoundSeconds  float64
	Evictions     EvictionCounts
	RackEvictions EvictionCounts
}
