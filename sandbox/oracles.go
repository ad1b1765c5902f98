// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/telesched/telesched/sandbox/oracle"
)

// OracleInput is fleet f and the scenario's workload as the oracle takes
// them: the nodes and the racks' budgets, every pod of the workload in
// its phases' order, and the closures the scenario imposes on the fleet.
func OracleInput(f *Fleet) (oracle.Fleet, []oracle.Pod, []oracle.Closure) {
	return oracleFleet(f), oraclePods(allPods(f)), scenarioClosures(f)
}

// allPods are the scenario's pods on fleet f: the workload's, then the
// unit phase's (gpu_phase.go).
func allPods(f *Fleet) []podSpec {
	return append(workloadPods(), unitsWorkload(f.Nodes)...)
}

// oracleFleet is f as the oracle takes it.
func oracleFleet(f *Fleet) oracle.Fleet {
	out := oracle.Fleet{Nodes: f.Nodes}
	for _, b := range f.Budgets {
		out.Budgets = append(out.Budgets, oracle.Budget{Rack: b.Rack, BudgetWatts: b.BudgetWatts, ReserveWatts: b.ReserveWatts})
	}
	return out
}

// oraclePods are the pods as the oracle takes them.
func oraclePods(pods []podSpec) []oracle.Pod {
	out := make([]oracle.Pod, 0, len(pods))
	for _, p := range pods {
		cpu, mem := resource.MustParse(p.cpu), resource.MustParse(p.memory)
		out = append(out, oracle.Pod{Name: p.name, Phase: p.phase, CPUMilli: cpu.MilliValue(), MemoryBytes: mem.Value(), GPUs: int(p.gpus),
			MIG: p.mig, ClaimGPUs: int(p.claimGPUs), ClaimMIG: p.claimMIGs(), Node: p.nodeName, SingleNUMA: p.singleNUMA, Seconds: p.workSeconds})
	}
	return out
}

// scenarioClosures are the closures the scenario imposes on a fleet: the
// heat phase's pods are created once the heater reports itself past its
// limit.
func scenarioClosures(f *Fleet) []oracle.Closure {
	if h := heaterOf(f.Nodes); h != "" {
		return []oracle.Closure{{Phase: phaseHeat, Node: h}}
	}
	return nil
}

// workloadPods are the scenario's pods, in its phases' order.
func workloadPods() []podSpec {
	w := workload()
	var out []podSpec
	for _, ph := range phases {
		out = append(out, w[ph]...)
	}
	return out
}

// placedPods are the scenario's pods that telesched placed: the
// workload's but those the racks' budgets refused, and the unit phase's
// it bound.
func (s *sandbox) placedPods() []podSpec {
	var out []podSpec
	for _, p := range allPods(s.opts.Fleet) {
		if p.phase == phaseUnits {
			if _, ok := s.res.PlacementOf(p.name); !ok {
				continue
			}
		}
		if !s.res.refused(p.name) {
			out = append(out, p)
		}
	}
	return out
}

// gpuPod: a pod that asks for GPU units of any kind.
func (p podSpec) gpuPod() bool { return p.gpus > 0 || len(p.mig) > 0 || p.claimed() }

// claimMIGs is the MIG device its claim asks for, per profile (nil none).
func (p podSpec) claimMIGs() map[string]int {
	if p.claimMIG == "" {
		return nil
	}
	return map[string]int{p.claimMIG: 1}
}

// oracleReport runs the oracle on pods, the whole workload's energy and
// the CPU pods' apart. The caller holds the watcher's lock;
// Energy.IdleWatts is set.
func (s *sandbox) oracleReport(pods []podSpec, opts oracle.Options) OracleReport {
	fleet, in := oracleFleet(s.opts.Fleet), oraclePods(pods)
	all := oracle.Solve(fleet, in, opts)
	opts.CPUPodsObjective = true
	cpu := oracle.Solve(fleet, in, opts)
	r := OracleReport{LowerBound: all.LowerBound, CPULowerBound: cpu.LowerBound, Queue: opts.Queue}
	if len(all.Unplaced) > 0 || len(cpu.Unplaced) > 0 {
		r.Unplaced, r.Infeasible = all.Unplaced, all.Infeasible || cpu.Infeasible
		if len(r.Unplaced) == 0 {
			r.Unplaced = cpu.Unplaced
		}
		nan := math.NaN()
		r.Work, r.CPUWatts, r.Joules, r.CPUJoules = Work{CPU: nan, GPU: nan}, nan, Joules{CPU: nan, GPU: nan}, nan
		return r
	}
	placements := func(res oracle.Result) []Placement {
		var out []Placement
		for _, p := range pods {
			cpu, _ := resource.ParseQuantity(p.cpu)
			out = append(out, Placement{Pod: p.name, Phase: p.phase, Node: res.Nodes[p.name], PodCPUMilli: cpu.MilliValue(), PodGPUs: p.gpus, GPUsAligned: p.singleNUMA,
				StartSeconds: res.Starts[p.name]})
		}
		return out
	}
	r.Placements = placements(all)
	r.Work = s.work(r.Placements)
	r.Joules, r.Seconds = s.energy(r.Placements)
	cpuOnly := placements(cpu)
	r.CPUWatts = s.work(cpuOnly).CPU
	cj, _ := s.energy(cpuOnly)
	r.CPUJoules = cj.CPU
	return r
}
