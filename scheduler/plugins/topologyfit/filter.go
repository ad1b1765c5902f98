// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/scheduler/dra"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// PreFilter computes the pod's facts once. A pod that requests no GPU and no
// NUMA policy skips the filter: there is nothing to check. A malformed
// annotation makes the pod unschedulable on every node.
func (pl *TopologyFit) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	s, err := pl.podFacts(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	if !s.topology() {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pl.rejected.Begin(pod, s) // before Filter reads a node
	s.now = pl.cache.Now()
	logger := klog.FromContext(ctx)
	s.verbose = logger.V(5).Enabled()
	if logger.V(4).Enabled() {
		logger.V(4).Info("TopologyFit pod", "pod", klog.KObj(pod), "gpus", s.gpus, "singleNUMA", s.singleNUMA,
			"cpuMilli", s.cpuMilli, "memoryBytes", s.memoryBytes, "gpuConstraints", s.gpuConstraints)
	}
	pl.last.Write(cs, stateKey, s)
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *TopologyFit) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects a node without enough matching, unallocated GPUs, or, for a
// single-numa-node pod, without a NUMA node that has the pod's CPUs, memory
// and GPUs free; with the numbers.
func (pl *TopologyFit) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := pl.state(cs, pod)
	if err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	st := pl.filter(ctx, s, pod, nodeInfo)
	if st != nil {
		pl.rejected.Add(pod, s)
	}
	return st
}

func (pl *TopologyFit) filter(ctx context.Context, s *podState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	tel, ok := pl.cache.Get(node.Name)
	if !ok || !tel.Fresh(s.now, pl.args.TelemetryMaxAge) {
		return telemetry.StaleStatus(pl.args.TelemetryArgs, tel, s.now)
	}
	requested := nodeInfo.GetRequested()
	m := gpuMatcher{s: s, claims: pl.claimsOn(node.Name)} // dra.go: skips GPUs claims hold
	var hs [maxUnitRequests]holding
	units := 0 // requests to place: none when the GPUs are unknown
	if len(s.reqs) > 0 {
		if !tel.HasGPUSource {
			if st := pl.missingStatus("GPU"); st != nil {
				return st
			}
			// Ignore: the GPUs are unknown; check the rest.
		} else {
			units = len(s.reqs)
			pl.holdings(tel, nodeInfo, s, &hs, m.claims)
			for i := range units {
				if st := unitsStatus(tel, s, &hs[i], &m); st != nil {
					return st
				}
			}
		}
	}
	if s.singleNUMA {
		if len(tel.NUMA) == 0 {
			return pl.missingStatus("NUMA")
		}
		fs := s
		var c podState
		if units == 0 && s.claimPending > 0 {
			// The GPUs its unallocated claims ask for must be free on
			// the NUMA node too (dra.go).
			if !tel.HasGPUSource {
				if st := pl.missingStatus("GPU"); st != nil {
					return st
				}
			} else {
				c = *s
				c.reqs = []unitRequest{{resource: pl.gpuResource, count: s.claimPending}}
				units, fs = 1, &c // m matches by model and memory, which c shares
				pl.holdings(tel, nodeInfo, fs, &hs, m.claims)
			}
		}
		if fitNUMA(tel, fs, &m, hs[:units], requested.GetMilliCPU()) < 0 {
			return fwk.NewStatus(fwk.Unschedulable, numaReason(tel, fs, &m, hs[:units], requested.GetMilliCPU()))
		}
	}
	if s.verbose {
		klog.FromContext(ctx).V(5).Info("TopologyFit fits", "pod", klog.KObj(pod), "node", node.Name, "gpus", s.gpus, "units", units)
	}
	return nil
}

// unitsStatus rejects a node without enough free matching units for the
// request h, with the numbers; nil when it has them.
func unitsStatus(tel *telemetry.Node, s *podState, h *holding, m *gpuMatcher) *fwk.Status {
	total, matching, free, _ := h.tally(tel, m)
	left := h.unfree(free)
	if left >= h.req.count {
		return nil
	}
	noun := h.noun()
	requested := h.requested
	if h.kind == wholeGPUs {
		requested -= heldNoUUID(m.claims) // counted in holdings (dra.go), named by heldNote
	}
	var b strings.Builder
	fmt.Fprintf(&b, "node has %d healthy unallocated %s%s, pod needs %d (%d of %d %s healthy and matching, %d requested by pods on the node",
		max(left, 0), noun, s.gpuConstraints, h.req.count, matching, total, noun, requested)
	if h.kind != profileDevices {
		b.WriteString(heldNote(m)) // dra.go
	}
	if h.known {
		fmt.Fprintf(&b, ", %d allocated by the kubelet in the sample", h.published)
	}
	if h.kind == wholeGPUs && h.migGPUs > 0 {
		fmt.Fprintf(&b, "; %d GPUs in MIG mode", h.migGPUs)
	}
	b.WriteString(")")
	return fwk.NewStatus(fwk.Unschedulable, b.String())
}

// gpuMatcher says whether a GPU matches the pod: healthy, of the model and
// with the memory it asks for. It remembers the last model compared, since
// a node's GPUs are usually all of one model. Use one per node.
type gpuMatcher struct {
	s         *podState
	claims    *dra.Node // the GPUs claims hold, which never match (dra.go)
	lastModel string
	lastOK    bool
	compared  bool
}

// ok says whether a unit of GPU g with memory bytes (the GPU's, or its MIG
// device's) matches.
func (m *gpuMatcher) ok(g *telemetry.GPU, memory int64) bool {
	if m.claims.Held(g.UUID) {
		return false
	}
	if !g.Healthy || memory < m.s.minGPUMemory {
		return false
	}
	if m.s.model == "" {
		return true
	}
	if !m.compared || g.Model != m.lastModel {
		m.lastModel, m.lastOK, m.compared = g.Model, containsFoldASCII(g.Model, m.s.model), true
	}
	return m.lastOK
}

// count returns the node's matching GPUs, in MIG mode or not (the CPU
// reserve and PowerBudget's powerable GPUs count GPUs; heldGPUs counts
// what pods hold of them), and how many of them are on no known NUMA node.
func (m *gpuMatcher) count(n *telemetry.Node) (matching, unknownNUMA int64) {
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if m.ok(g, g.MemoryTotalBytes) {
			matching++
			if gpuNUMA(n, g) < 0 {
				unknownNUMA++
			}
		}
	}
	return matching, unknownNUMA
}

// countOn returns the node's matching GPUs on NUMA node id.
func (m *gpuMatcher) countOn(n *telemetry.Node, id int32) int64 {
	var c int64
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if gpuNUMA(n, g) == id && m.ok(g, g.MemoryTotalBytes) {
			c++
		}
	}
	return c
}

// gpuNUMA is the NUMA node of a GPU: as reported, else the node's only NUMA
// node, else -1.
func gpuNUMA(n *telemetry.Node, g *telemetry.GPU) int32 {
	if g.NUMANode >= 0 {
		return g.NUMANode
	}
	if len(n.NUMA) == 1 {
		return n.NUMA[0].ID
	}
	return -1
}

// fitNUMA returns the id of the first NUMA node of n on which the pod fits,
// or -1: its CPUs (numaFreeCPUMilli, with nodeRequestedMilli the CPU
// requests of the pods on the node), its memory (MemFree) and, for each
// request of hs, its matching units free in the sample (holding.freeOn)
// less the extra held units, which fill units on no known NUMA node
// first, then NUMA nodes from the lowest id up (takeFromLowest).
func fitNUMA(n *telemetry.Node, s *podState, m *gpuMatcher, hs []holding, nodeRequestedMilli int64) int32 {
	var held [maxUnitRequests]int64
	for r := range hs {
		held[r] = hs[r].extra - hs[r].freeOn(n, m, -1)
	}
	for i := range n.NUMA {
		nn := &n.NUMA[i]
		fits := true
		for r := range hs {
			var free int64
			free, held[r] = takeFromLowest(hs[r].freeOn(n, m, nn.ID), held[r])
			fits = fits && free >= hs[r].req.count
		}
		if fits &&
			numaFreeCPUMilli(nn.LogicalCores, nn.AllocatedExclusiveCPUs, nodeRequestedMilli, len(n.NUMA)) >= s.cpuMilli &&
			nn.MemoryFreeBytes >= s.memoryBytes {
			return nn.ID
		}
	}
	return -1
}

// numaReason says, with the numbers of every NUMA node, why fitNUMA found
// none: `no NUMA node has 16 free CPUs, 64Gi free memory and 4 free matching
// GPUs: node 0 has 12 CPUs, 30.5Gi, 2 GPUs; node 1 has ...`.
func numaReason(n *telemetry.Node, s *podState, m *gpuMatcher, hs []holding, nodeRequestedMilli int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "no NUMA node has %s free CPUs", formatCPU(s.cpuMilli))
	if len(hs) > 0 {
		fmt.Fprintf(&b, ", %s free memory and ", formatBytes(s.memoryBytes))
		for r := range hs {
			if r > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d free%s %s", hs[r].req.count, gpuAdjective(s), hs[r].noun())
		}
	} else {
		fmt.Fprintf(&b, " and %s free memory", formatBytes(s.memoryBytes))
	}
	var held [maxUnitRequests]int64
	for r := range hs {
		held[r] = hs[r].extra - hs[r].freeOn(n, m, -1)
	}
	estimated := false
	for i := range n.NUMA {
		nn := &n.NUMA[i]
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%snode %d has %s CPUs, %s", sep, nn.ID,
			formatCPU(numaFreeCPUMilli(nn.LogicalCores, nn.AllocatedExclusiveCPUs, nodeRequestedMilli, len(n.NUMA))), formatBytes(nn.MemoryFreeBytes))
		for r := range hs {
			var free int64
			free, held[r] = takeFromLowest(hs[r].freeOn(n, m, nn.ID), held[r])
			fmt.Fprintf(&b, ", %d %s", free, hs[r].noun())
		}
		estimated = estimated || nn.AllocatedExclusiveCPUs < 0
	}
	if estimated {
		b.WriteString(" (free CPUs estimated from the CPU requests of the node's pods, spread evenly over its NUMA nodes)")
	}
	return b.String()
}

// gpuAdjective is " matching" when the pod constrains its GPUs.
func gpuAdjective(s *podState) string {
	if s.gpuConstraints != "" {
		return " matching"
	}
	return ""
}
