// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"slices"

	"github.com/telesched/telesched/sandbox/oracle"
)

// placed is a placement's pods (its workload's and unit phase's; the
// probe and the after-placement pods left out) as the oracle judges
// them, so that the profiles' placements and the oracle's are measured
// alike (oracle.Placed). A job the run bound after another had ended
// (Placement.Queued) starts when it was bound, in the model's seconds:
// the run's seconds since the GPU phase created its jobs, times
// WorkSpeedup. An oracle's queued job starts at its StartSeconds.
func (s *sandbox) placed(ps []Placement, cpuOnly bool) *oracle.Placed {
	nodes := map[string]string{}
	var pods []podSpec
	for _, p := range allPods(s.opts.Fleet) {
		if cpuOnly && p.gpuPod() {
			continue
		}
		pods = append(pods, p)
	}
	starts := map[string]float64{}
	for _, p := range ps {
		nodes[p.Pod] = p.Node
		switch {
		case p.StartSeconds > 0:
			starts[p.Pod] = p.StartSeconds
		case p.Queued && !s.res.JobsCreated.IsZero():
			starts[p.Pod] = p.At.Sub(s.res.JobsCreated).Seconds() * s.opts.WorkSpeedup
		}
	}
	return oracle.Place(oracleFleet(s.opts.Fleet), oraclePods(pods), nodes).StartAt(starts)
}

// fleetWatts is the simulated fleet's steady power running a placement's
// workload pods (cpuOnly: its CPU pods only), from each node's power
// curve and thermal response (see sandbox/sim): its services keeping
// their requests over their node's CPU speed busy, its finite pods at
// their requests.
func (s *sandbox) fleetWatts(ps []Placement, cpuOnly bool) float64 {
	return s.nodesWatts(ps, cpuOnly, nil)
}

// nodesWatts is fleetWatts over the nodes named (nil: every node).
func (s *sandbox) nodesWatts(ps []Placement, cpuOnly bool, only []string) float64 {
	return s.placed(ps, cpuOnly).Watts(only)
}

// work splits a placement's workload watts into its CPU pods' and what its
// GPU pods add.
func (s *sandbox) work(ps []Placement) Work {
	cpu := s.fleetWatts(ps, true)
	return Work{CPU: cpu - s.res.Energy.IdleWatts, GPU: s.fleetWatts(ps, false) - cpu}
}

// energy is a placement's energy for the scenario's work (the services'
// hour, each finite pod until it ends), its CPU pods' and what its GPU
// pods add, and when each finite pod ends (seconds from the start).
func (s *sandbox) energy(ps []Placement) (Joules, map[string]float64) {
	all := s.placed(ps, false)
	cpu := s.placed(ps, true).Joules(true, nil)
	return Joules{CPU: cpu, GPU: all.Joules(false, nil) - cpu}, all.Ends()
}

// account computes the run's energy figures (Result.Energy) and each
// rack's watts running each profile's placement. The caller holds the
// watcher's lock.
func (s *sandbox) account() {
	res := s.res
	res.Energy.TeleschedWatts, res.Energy.DefaultWatts = s.fleetWatts(res.Placements, false), s.fleetWatts(res.Baseline, false)
	res.Energy.IdleWatts = s.fleetWatts(nil, false)
	res.Energy.TeleschedWork, res.Energy.DefaultWork = s.work(res.Placements), s.work(res.Baseline)
	res.Energy.TeleschedJoules, res.Energy.TeleschedSeconds = s.energy(res.Placements)
	res.Energy.DefaultJoules, res.Energy.DefaultSeconds = s.energy(res.Baseline)
	placed := s.placedPods()
	closed := scenarioClosures(s.opts.Fleet)
	// Where the run queued a job (a rack's budget held it until another
	// ended), the oracles may queue jobs too: the best placement that
	// runs every pod at once is no bound for a queue.
	queue := slices.ContainsFunc(res.Placements, func(p Placement) bool { return p.Queued })
	res.Energy.Oracle = s.oracleReport(placed, oracle.Options{Closed: closed, Queue: queue})
	res.Energy.OracleOffGPU = s.oracleReport(placed, oracle.Options{CPUPodsOffGPUNodes: true, Closed: closed, Queue: queue})
	if len(res.Refused) > 0 {
		whole := oracle.Solve(oracleFleet(s.opts.Fleet), oraclePods(allPods(s.opts.Fleet)), oracle.Options{Closed: closed})
		res.Energy.WorkloadInfeasible = whole.Infeasible
	}
	res.Energy.Marginal = marginalErrors(res.Placements)
	for i := range res.Racks {
		r := &res.Racks[i]
		r.TeleschedWatts, r.DefaultWatts = s.nodesWatts(res.Placements, false, r.Nodes), s.nodesWatts(res.Baseline, false, r.Nodes)
	}
}
