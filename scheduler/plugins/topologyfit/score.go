package topologyfit

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// PreScore computes the pod's facts for scoring, or reuses PreFilter's. A
// pod that requests no GPU is scored by the GPU-node penalty alone: with no
// penalty configured, or when the candidates are all GPU nodes or all not,
// every node would get the same score, so Score is skipped.
func (pl *TopologyFit) PreScore(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	s, err := pl.state(cs, pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.gpus == 0 && (pl.args.NonGPUPodPenaltyPercent == 0 || !pl.mixedGPUNodes(nodes)) {
		return fwk.NewStatus(fwk.Skip)
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
	if s.gpus == 0 {
		return nonGPUPodScore(pl.gpuNode(nodeInfo, tel), pl.args.NonGPUPodPenaltyPercent), nil
	}
	if !ok || !tel.Fresh(s.now, pl.args.TelemetryMaxAge) || !tel.HasGPUSource {
		return telemetry.NoTelemetry, nil
	}
	requested := nodeInfo.GetRequested()
	allocated := requested.GetScalarResources()[pl.gpuResource]
	m := gpuMatcher{s: s}
	matching, unknown := m.count(tel)
	aligned := fitNUMA(tel, s, &m, s.gpus, allocated-unknown, requested.GetMilliCPU()) >= 0
	return gpuPodScore(aligned, gpuPackScore(s.gpus, matching-allocated)), nil
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
		if n, ok := pl.gpuAllocatable.Len(); ok && n == 0 {
			return false
		}
	}
	kind := func(ni fwk.NodeInfo) bool {
		if !withTelemetry {
			return ni.GetAllocatable().GetScalarResources()[pl.gpuResource] > 0
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
	return nodeInfo.GetAllocatable().GetScalarResources()[pl.gpuResource] > 0 || (tel != nil && len(tel.GPUs) > 0)
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *TopologyFit) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore gives nodes without fresh telemetry the lowest score of
// the nodes with it (0 when none has it).
func (pl *TopologyFit) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	telemetry.NormalizeMissing(scores)
	return nil
}
