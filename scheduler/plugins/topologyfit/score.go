// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// PreScore computes the pod's facts for scoring, or reuses PreFilter's. A
// pod that requests no GPU is scored by the GPU-node penalty alone: with no
// penalty or reserve configured, or when the candidates are all GPU nodes or
// all not, every node would get the same score (a GPU node whose free CPU
// covers its GPUs' reserve scores like a CPU node), so Score is skipped.
func (pl *TopologyFit) PreScore(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	s, err := pl.state(cs, pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if len(s.reqs) == 0 && s.claimGPUs == 0 && (pl.args.NonGPUPodPenaltyPercent == 0 || pl.args.GPUCPUReserveMilli == 0 || !pl.mixedGPUNodes(nodes)) {
		return fwk.NewStatus(fwk.Skip)
	}
	if len(s.reqs) == 0 && s.claimGPUs > 0 {
		// A pod whose GPUs are all claimed is scored as the same number
		// of whole GPUs asked by extended resource (dra.go).
		c := *s
		c.reqs = []unitRequest{{resource: pl.gpuResource, count: s.claimGPUs}}
		pl.last.Write(cs, stateKey, &c)
		return nil
	}
	if _, ok := pl.last.Read(cs, stateKey); !ok {
		pl.last.Write(cs, stateKey, s)
	}
	return nil
}

// Score ranks a node for a GPU pod by NUMA alignment, then by how tightly
// the pod fills the node's free matching GPUs; for any other pod, by
// whether the node has GPUs. See formula.go.
func (pl *TopologyFit) Score(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := pl.state(cs, pod)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	tel, ok := pl.cache.Get(nodeInfo.Node().Name)
	if len(s.reqs) == 0 {
		penalized := pl.gpuNode(nodeInfo, tel) && pl.takesGPUReserve(s.cpuMilli, nodeInfo, tel)
		return nonGPUPodScore(penalized, pl.args.NonGPUPodPenaltyPercent), nil
	}
	if !ok || !tel.Fresh(s.now, pl.args.TelemetryMaxAge) || !tel.HasGPUSource {
		return telemetry.NoTelemetry, nil
	}
	requested := nodeInfo.GetRequested()
	m := gpuMatcher{s: s, claims: pl.claimsOn(nodeInfo.Node().Name)} // dra.go
	var hs [maxUnitRequests]holding
	pl.holdings(tel, nodeInfo, s, &hs, m.claims)
	aligned := fitNUMA(tel, s, &m, hs[:len(s.reqs)], requested.GetMilliCPU()) >= 0
	// The pod's first request (its GPU resource, else its first MIG
	// resource) decides the packing and where its units sit together.
	h := &hs[0]
	_, _, free, _ := h.tally(tel, &m)
	pack := gpuPackScore(h.req.count, h.unfree(free))
	if h.req.count < 2 {
		return gpuPodScore(aligned, pack), nil
	}
	link, root := h.together(tel, &m, h.req.count)
	return gpuPodScoreTogether(link, root, aligned, pack), nil
}

// mixedGPUNodes reports whether some of the nodes are GPU nodes (see
// gpuNode) and some are not. While no node's telemetry lists a GPU, the
// nodes' allocatable decides alone, without a telemetry lookup per node;
// and while no node has the GPU resource either, none is a GPU node.
func (pl *TopologyFit) mixedGPUNodes(nodes []fwk.NodeInfo) bool {
	if len(nodes) < 2 {
		return false
	}
	withTelemetry := pl.cache.GPUNodes() > 0
	if !withTelemetry && pl.gpuAllocatable != nil {
		if n, ok := pl.gpuAllocatable.Len(); ok && n == 0 && pl.draGPUNodes() == 0 { // dra.go
			return false
		}
	}
	kind := func(ni fwk.NodeInfo) bool {
		if !withTelemetry {
			return ni.GetAllocatable().GetScalarResources()[pl.gpuResource] > 0 || pl.draGPUNode(ni.Node().Name)
		}
		tel, _ := pl.cache.Get(ni.Node().Name)
		return pl.gpuNode(ni, tel)
	}
	first := kind(nodes[0])
	for _, ni := range nodes[1:] {
		if kind(ni) != first {
			return true
		}
	}
	return false
}

// gpuNode reports whether a node has GPUs: its allocatable has the GPU
// resource, or its telemetry (of any age: hardware does not age) lists GPUs.
func (pl *TopologyFit) gpuNode(nodeInfo fwk.NodeInfo, tel *telemetry.Node) bool {
	return nodeInfo.GetAllocatable().GetScalarResources()[pl.gpuResource] > 0 || (tel != nil && len(tel.GPUs) > 0) || pl.draGPUNode(nodeInfo.Node().Name)
}

// takesGPUReserve reports whether a pod of podMilli CPU that requests no GPU
// would, on this GPU node, leave less CPU unrequested than the node keeps for
// its unallocated GPUs (GPUCPUReserveMilli each):
//
//   - on the node: allocatable CPU - requested CPU - podMilli against
//     reserve * (GPUs - GPUs requested by its pods), the GPUs counted from
//     its telemetry's healthy GPUs, else from its allocatable;
//
//   - on each NUMA node, where telemetry lists them: its free CPUs
//     (numaFreeCPUMilli, the pod included) against reserve * its
//     unallocated GPUs, the pods' GPUs filling NUMA nodes from the lowest
//     id up, as Filter assumes for a single-numa-node GPU pod. The GPU
//     pods to come on the other NUMA nodes count as requested too (their
//     reserve): where the kubelet's exclusive CPUs are not published,
//     Filter spreads every request over the NUMA nodes, so the last GPU
//     pod must still find its CPUs after the others took theirs.
//
//   - under LoadAware's CPU threshold (the lowest of the profiles', from the
//     book), where the node has CPU telemetry: the threshold's share of its
//     CPUs minus its estimated load with the pod (measured, plus the pods
//     placed since its sample, plus podMilli) against the same reserve, so
//     that the GPU pods to come still pass LoadAware's filter on a node
//     busy with work its requests do not show.
//
// The free GPUs counted are those the node's PowerBudgets can still power
// busy (powerbudget.Snapshot.PowerableGPUs: each rack's headroom goes to
// its members' free GPUs, cheapest first): a GPU that no budget leaves
// room to run needs no CPUs kept for it.
//
// So a GPU node's CPUs beyond what its free GPUs need take CPU pods like
// any node's, and a node whose GPUs are all allocated, or that its rack
// cannot power busy, keeps none.
func (pl *TopologyFit) takesGPUReserve(podMilli int64, nodeInfo fwk.NodeInfo, tel *telemetry.Node) bool {
	reserve := pl.args.GPUCPUReserveMilli
	if reserve == 0 {
		return false
	}
	requested := nodeInfo.GetRequested()
	after := requested.GetMilliCPU() + podMilli
	held := requested.GetScalarResources()[pl.gpuResource]
	gpus := nodeInfo.GetAllocatable().GetScalarResources()[pl.gpuResource]
	withTelemetry := tel != nil && tel.HasGPUSource && len(tel.GPUs) > 0
	m := gpuMatcher{s: &podState{}, claims: pl.claimsOn(nodeInfo.Node().Name)} // healthy GPUs of any model, not held by claims
	var unknown int64
	if withTelemetry {
		gpus, unknown = m.count(tel)
		held = pl.heldGPUs(tel, nodeInfo) + heldNoUUID(m.claims)
	} else {
		gpus, held = pl.withDRA(nodeInfo.Node().Name, gpus, held) // dra.go
	}
	free := max(gpus-held, 0)
	if free > 0 && pl.powerable != nil {
		if p, ok := pl.powerable(nodeInfo.Node().Name, pl.freeGPUs); ok && p < free {
			free = p
		}
	}
	if free == 0 {
		return false
	}
	kept := free * reserve
	if nodeInfo.GetAllocatable().GetMilliCPU()-after < kept {
		return true
	}
	if room, ok := pl.book.CPUUnderThresholdMilli(tel); ok && room-podMilli < kept {
		return true
	}
	if !withTelemetry {
		return false
	}
	// The powerable GPUs, per NUMA node: the free ones, lowest NUMA node
	// first (as the pods' GPUs are assumed to fill them), up to free.
	held -= unknown
	onNUMA := func(i int, held, left int64) (n, heldRest, leftRest int64) {
		n, heldRest = takeFromLowest(m.countOn(tel, tel.NUMA[i].ID), held)
		n = min(n, left)
		return n, heldRest, left - n
	}
	var total int64
	for i, h, left := 0, held, free; i < len(tel.NUMA); i++ {
		var n int64
		n, h, left = onNUMA(i, h, left)
		total += n
	}
	left := free
	for i := range tel.NUMA {
		nn := &tel.NUMA[i]
		var n int64
		n, held, left = onNUMA(i, held, left)
		others := (total - n) * reserve
		if numaFreeCPUMilli(nn.LogicalCores, nn.AllocatedExclusiveCPUs, after+others, len(tel.NUMA)) < n*reserve {
			return true
		}
	}
	return false
}

// freeGPUs is a node's healthy GPUs (by its view, else its allocatable)
// less those its pods request, for PowerableGPUs; its view's count alone
// when the scheduler's snapshot does not have the node.
func (pl *TopologyFit) freeGPUs(name string, view *telemetry.Node) int64 {
	var gpus int64
	if view.HasGPUSource {
		m := gpuMatcher{s: &podState{}, claims: pl.claimsOn(name)} // dra.go
		gpus, _ = m.count(view)
		gpus -= heldNoUUID(m.claims)
	}
	if pl.nodeInfos == nil {
		return gpus
	}
	ni, err := pl.nodeInfos.Get(name)
	if err != nil || ni.Node() == nil {
		return gpus
	}
	held := ni.GetRequested().GetScalarResources()[pl.gpuResource]
	if view.HasGPUSource {
		held = pl.heldGPUs(view, ni)
	} else {
		gpus, held = pl.withDRA(name, ni.GetAllocatable().GetScalarResources()[pl.gpuResource], held) // dra.go
	}
	return max(0, gpus-held)
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *TopologyFit) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore gives nodes without fresh telemetry the lowest score of
// the nodes with it (0 when none has it).
func (pl *TopologyFit) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	telemetry.NormalizeMissing(scores)
	return nil
}
