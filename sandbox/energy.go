// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/telesched/telesched/sandbox/oracle"
)

// fleetWatts estimates the simulated fleet's steady power running a
// placement's workload pods (cpuOnly: its CPU pods only), from each node's
// power curve and thermal response (see sandbox/sim).
func (s *sandbox) fleetWatts(ps []Placement, cpuOnly bool) float64 {
	return s.nodesWatts(ps, cpuOnly, nil)
}

// nodesWatts is fleetWatts over the nodes named (nil: every node).
func (s *sandbox) nodesWatts(ps []Placement, cpuOnly bool, only []string) float64 {
	spec := map[string]podSpec{}
	for _, p := range allPods(s.opts.Fleet) {
		spec[p.name] = p
	}
	cpu := map[string]float64{}
	busy := map[string]float64{}
	for _, p := range ps {
		ps, ok := spec[p.Pod]
		n := s.nodes[p.Node]
		if !ok || n == nil || (cpuOnly && ps.gpuPod()) {
			continue // the probe, or a GPU pod
		}
		q := resource.MustParse(ps.cpu)
		cpu[p.Node] += float64(q.MilliValue())
		busy[p.Node] += podBusy(n.Spec, ps)
	}
	var total float64
	for name, n := range s.nodes {
		if only != nil && !slices.Contains(only, name) {
			continue
		}
		u := n.Spec.BaseUtilization + cpu[name]/float64(n.Spec.Host.CPUs*1000)
		total += n.Spec.EstimatedWattsShare(u, busy[name])
	}
	return total
}

// work splits a placement's workload watts into its CPU pods' and what its
// GPU pods add.
func (s *sandbox) work(ps []Placement) Work {
	cpu := s.fleetWatts(ps, true)
	return Work{CPU: cpu - s.res.Energy.IdleWatts, GPU: s.fleetWatts(ps, false) - cpu}
}

// account computes the run's energy figures (Result.Energy) and each
// rack's watts running each profile's placement. The caller holds the
// watcher's lock.
func (s *sandbox) account() {
	res := s.res
	res.Energy.TeleschedWatts, res.Energy.DefaultWatts = s.fleetWatts(res.Placements, false), s.fleetWatts(res.Baseline, false)
	res.Energy.IdleWatts = s.fleetWatts(nil, false)
	res.Energy.TeleschedWork, res.Energy.DefaultWork = s.work(res.Placements), s.work(res.Baseline)
	placed := s.placedPods()
	closed := scenarioClosures(s.opts.Fleet)
	res.Energy.Oracle = s.oracleReport(placed, oracle.Options{Closed: closed})
	res.Energy.OracleOffGPU = s.oracleReport(placed, oracle.Options{CPUPodsOffGPUNodes: true, Closed: closed})
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
