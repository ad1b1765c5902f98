// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/telesched/telesched/sandbox/oracle"
)

// OracleInput is fleet f and the scenario's workload as the oracle takes
// them: the nodes and the racks' budgets, every pod of the workload in
// its phases' order, and the closures the scenario imposes on the fleet.
func OracleInput(f *Fleet) (oracle.Fleet, []oracle.Pod, []oracle.Closure) {
	return oracleFleet(f), oraclePods(workloadPods()), scenarioClosures(f)
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
		out = append(out, oracle.Pod{Name: p.name, Phase: p.phase, CPUMilli: cpu.MilliValue(), MemoryBytes: mem.Value(), GPUs: int(p.gpus), SingleNUMA: p.singleNUMA})
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
