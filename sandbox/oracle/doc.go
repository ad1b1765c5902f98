// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package oracle finds the cheapest placement of a workload that a
// simulated fleet can hold, by the nodes' true power, and a lower bound no
// placement can beat, so the sandbox's report can say how much of the
// achievable saving a profile captured: fleet and pods in (Solve),
// placement and bound out (Result).
//
// What it minimizes: the energy the fleet spends for the pods' work,
// beyond what its nodes draw at their base load (docs/energy-models.md,
// "Energy for the same work"). A service pod (Pod.Seconds 0) does a fixed
// amount of work per second for the horizon (Options.Horizon, an hour):
// its requests are sized on the reference, so on a node whose cores are k
// times as fast it keeps 1/k of them busy. A finite pod does Seconds of
// work on the reference at its requests: on a node k times as fast it
// runs Seconds/k; a GPU pod's k is its devices' (a GPU's speed, times its
// MIG devices' compute slices over the reference GPUs it asks for: four
// 1g devices for four GPUs run at 1/7 of the pace). Each node's energy is
// its steady power over each stretch in which the same pods run, by
// sim.NodeSpec.Joules: the node's SPECpower curve at its base load plus
// its pods' busy CPUs, the leakage and fan term at the temperature that
// load settles at (the simulation's power includes it, so the oracle does
// too; a failed fan's heat does not count, as the scenario repairs it),
// and each GPU busy or idle. With CPUPodsObjective it minimizes the
// fleet's energy running its CPU pods only, the report's "CPU pods"
// figure; the GPU pods are still placed and take their room. Budgets stay
// in watts: every pod running at once, the rack's steady watts.
//
// With Queue a node's finite pods run one after another, beside its
// services, in the pods' order (Result.Starts), as telesched's queue holds
// a job that a rack's budget keeps pending until another ends: a rack's
// budget holds each node's services with the costliest of its finite
// pods, and each job's energy counts from its start. Capacity still holds
// every pod at once (no GPU is reused after a job ends, no CPU a waiting
// job will take goes to another pod meanwhile), and two jobs of one node
// never overlap, so a schedule outside those rules may spend less:
// telesched's queue on the default fleet once did, by 27.6 kJ, its CPU
// pods on the H100 host beside one job at a time. The lower bound below bounds the queue's model alike: it prices
// each node with the same rules. TestOracleMatchesBruteForce draws Queue
// in a quarter of its instances.
//
// What it respects, on the simulated nodes as they expose themselves:
//   - CPU, memory and GPU requests within each node's allocatable
//     (NodeResourcesFit, in both profiles);
//   - a single-numa-node pod's CPUs, memory and GPUs on one NUMA node: a
//     NUMA node's GPUs, and its share of CPUs and memory less its pinned
//     pods' and an even share of the node's other pods' (TopologyFit's
//     estimate; the simulation takes GPUs on one NUMA node when one has
//     enough);
//   - the base load plus the CPU requests within LoadAware's threshold
//     (80 % by default) of the node's CPUs;
//   - the node settling below its package's critical limit − EnergyAware's
//     margin (5°C), by the simulation's physics;
//   - every rack within budgetWatts − reserveWatts with its pods, by the
//     same true watts (PowerBudget);
//   - a phase's pods off a node that was too hot for any pod while they
//     were placed (Options.Closed: the sandbox's scenario keeps the heat
//     phase's pods off the heater). Blind to time, the oracle put one of
//     them on the mixed-generation fleet's heater, a placement no
//     scheduler that keeps pods off an overheating node can make; kept
//     off, it puts a web pod of the same CPUs there instead, at the same
//     watts on all three fleets: the oracle sees every pod at once.
//
// The last four are telesched's filters, which the default profile does
// not apply: the oracle is the best placement telesched's own rules allow.
// TopologyFit's preference for CPU pods off GPU nodes is a score, not a
// filter; CPUPodsOffGPUNodes makes it one, for the report's second oracle.
//
// How: greedy by marginal true watts (GPU and single-NUMA pods first, then
// the pods kept off the most nodes) from three pod orders, and two starts
// built from the lower bound below, each improved by local search: moving
// one pod or swapping two pods of different shapes while that lowers the
// objective, and when neither does, moving two pods at once. The best
// start is kept. While the search runs, a rack over its budget costs
// overBudgetPenalty a watt per second of the horizon, so it can pass
// through such placements; a result over budget is no placement.
//
// How far from optimal: LowerBound is a bound no placement can beat: the
// GPU and single-NUMA pods placed every way they fit, and for each the
// other pods' (the service CPU pods') CPUs spread over the nodes by
// dynamic programming on the nodes' true joules (thresholds, thermal limits, NUMA shares and closures
// kept; those pods' memory and the racks' budgets relaxed, save that a
// placement whose GPU and single-NUMA pods alone take a rack over its
// budget is dropped; their CPUs taken as divisible into the smallest
// pod's). Its placement, packed into pods around its GPU and single-NUMA
// pods (seed) and packed with them by each node's CPUs (seedTotals), gives
// the two starts. On the sandbox's three fleets, every variant of the
// oracle, with and without the scenario's closure, meets the bound to
// 0.01 W over the hour, 36 J (TestOracleNearLowerBound): it is the
// optimum of the model. On 300 random small fleets (3 nodes of the
// table's CPU speeds or none, 6 pods, a third of them finite, budgets
// binding in some, a closure in about half) it matches exhaustive search
// to 36 J (TestOracleMatchesBruteForce). The figures below are the watts
// objective's, before energy. Greedy and local search alone, without
// the starts from the bound, were up to 54 W (2.2 %) above the optimum on
// those small fleets and 32 W (0.6 %) on the example fleet with CPU pods
// kept off GPU nodes: single moves and swaps cannot cross the curves' humps
// where several pods must move at once. Of the 300 instances, two
// needed two pods moved at once (66 W and 0.1 W above the
// optimum without them), and one needed the second start (0.4 W).
package oracle
