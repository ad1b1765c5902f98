// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/scheduler/dra"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// maxUnitRequests is how many GPU resources (the GPU resource and MIG
// profiles) one pod may request: a node's holdings of them sit in a fixed
// array, so that Filter and Score do not allocate.
const maxUnitRequests = 4

// unitRequest is one resource of a pod that TopologyFit places on a node's
// GPUs or MIG devices: the GPU resource (profile "") or a MIG resource.
type unitRequest struct {
	resource v1.ResourceName
	profile  string // the MIG profile of a MIG resource, "" for the GPU resource
	count    int64
}

// unitKind is what one unit of a request is on a node.
type unitKind uint8

const (
	// wholeGPUs: a GPU not in MIG mode.
	wholeGPUs unitKind = iota
	// singleSlices: the GPU resource on a node of the single MIG
	// strategy: any MIG device (and any GPU not in MIG mode).
	singleSlices
	// profileDevices: a MIG device of the request's profile.
	profileDevices
)

// holding is what one request finds on a node: its kind, and which of its
// units pods hold. Held units are the sample's published allocations of
// the request's units (known) plus extra, the units of pods placed since
// the sample: what the node's pods request of the resource beyond what the
// sample shows allocated, never below 0. Where the node does not publish
// every unit's allocation, all requested units are extra.
type holding struct {
	req       *unitRequest
	kind      unitKind
	known     bool  // every unit's allocation published
	published int64 // units the sample shows allocated, any unit
	requested int64 // what the node's pods request of the resource
	extra     int64 // held units not in published
	migGPUs   int64 // the node's GPUs in MIG mode
}

// unitGroups is how many groups of like units GPU g has for kind k: one
// per MIG profile on a GPU in MIG mode, one for a whole GPU.
func unitGroups(g *telemetry.GPU, k unitKind) int {
	if g.MIG && k != wholeGPUs {
		return len(g.MIGProfiles)
	}
	return 1
}

// unitGroup is group j of GPU g for request r of kind k: how many units it
// has, how many the sample shows allocated (-1 unknown), and each unit's
// memory. count is 0 where g has none of the request's units.
func unitGroup(g *telemetry.GPU, k unitKind, r *unitRequest, j int) (count, allocated, memory int64) {
	if !g.MIG {
		if k == profileDevices {
			return 0, 0, 0
		}
		return 1, int64(g.Allocated), g.MemoryTotalBytes
	}
	if k == wholeGPUs {
		return 0, 0, 0
	}
	p := &g.MIGProfiles[j]
	if k == profileDevices && p.Resource != r.profile {
		return 0, 0, 0
	}
	return int64(p.Count), int64(p.Allocated), p.MemoryBytes
}

// kindOn is what the request's units are on a node: a MIG resource's are
// its profile's devices; the GPU resource counts MIG devices on a node of
// the device plugin's single strategy (its GPUs all in MIG mode, and its
// allocatable, where known, without a MIG resource: the mixed strategy
// lists MIG devices there instead), and whole GPUs elsewhere.
func (pl *TopologyFit) kindOn(tel *telemetry.Node, nodeInfo fwk.NodeInfo, r *unitRequest) unitKind {
	if r.profile != "" {
		return profileDevices
	}
	if len(tel.GPUs) == 0 {
		return wholeGPUs
	}
	for i := range tel.GPUs {
		if !tel.GPUs[i].MIG {
			return wholeGPUs
		}
	}
	if nodeInfo != nil && nodeInfo.Node() != nil {
		for name := range nodeInfo.GetAllocatable().GetScalarResources() {
			if strings.HasPrefix(string(name), pl.args.MIGResourcePrefix) {
				return wholeGPUs
			}
		}
	}
	return singleSlices
}

// heldGPUs is what the pods on the node request of its GPUs, in whole
// GPUs: the GPU resource's units where they are GPUs, and MIG devices
// (the GPU resource's on a node of the single strategy, and the MIG
// resources') by their compute slices over their GPU's, rounded up: 7
// 1g devices of an A100 are one GPU. The CPU reserve and PowerBudget's
// powerable GPUs count GPUs, MIG mode or not, against it.
func (pl *TopologyFit) heldGPUs(tel *telemetry.Node, nodeInfo fwk.NodeInfo) int64 {
	scalars := nodeInfo.GetRequested().GetScalarResources()
	var whole, slices int64
	total := int64(0)
	perDevice := int64(0) // the single strategy's device, in slices
	for i := range tel.GPUs {
		if g := &tel.GPUs[i]; g.MIG && g.ComputeSlices > 0 {
			total = int64(g.ComputeSlices)
			if len(g.MIGProfiles) > 0 {
				perDevice = int64(g.MIGProfiles[0].Slices)
			}
			break
		}
	}
	r := unitRequest{resource: pl.gpuResource}
	if pl.kindOn(tel, nodeInfo, &r) == singleSlices && total > 0 {
		slices += scalars[pl.gpuResource] * max(perDevice, 1)
	} else {
		whole += scalars[pl.gpuResource]
	}
	if total > 0 {
		for name, n := range scalars {
			if profile, ok := strings.CutPrefix(string(name), pl.args.MIGResourcePrefix); ok && n > 0 {
				slices += n * max(int64(telemetry.ProfileSlices(profile)), 1)
			}
		}
	}
	if slices > 0 {
		whole += (slices + total - 1) / total
	}
	return whole
}

// holdings computes what each of the pod's requests finds on the node,
// into hs: the one place that says which units the node's pods hold.
// nodeInfo nil: no pod holds any (the hints' upper bound).
func (pl *TopologyFit) holdings(tel *telemetry.Node, nodeInfo fwk.NodeInfo, s *podState, hs *[maxUnitRequests]holding, claims *dra.Node) {
	var scalars map[v1.ResourceName]int64
	if nodeInfo != nil {
		requested := nodeInfo.GetRequested()
		scalars = requested.GetScalarResources()
	}
	for i := range s.reqs {
		r := &s.reqs[i]
		h := holding{req: r, kind: pl.kindOn(tel, nodeInfo, r), requested: scalars[r.resource]}
		units, published := 0, 0
		for gi := range tel.GPUs {
			g := &tel.GPUs[gi]
			if g.MIG {
				h.migGPUs++
			}
			if claims.Held(g.UUID) {
				// A claim holds it: never free, and its allocation in
				// the sample is the claim's, not the resource's (dra.go).
				continue
			}
			for j, n := 0, unitGroups(g, h.kind); j < n; j++ {
				count, alloc, _ := unitGroup(g, h.kind, r, j)
				if count > 0 {
					units++
				}
				if count > 0 && alloc >= 0 {
					published++
					h.published += alloc
				}
			}
		}
		if h.kind == wholeGPUs {
			h.requested += heldNoUUID(claims) // dra.go: held, of unknown identity
		}
		h.known = units > 0 && published == units
		if h.known {
			h.extra = max(0, h.requested-h.published)
		} else {
			h.published, h.extra = 0, h.requested
		}
		hs[i] = h
	}
}

// free is the matching units of GPU g that the sample does not show held.
func (h *holding) free(g *telemetry.GPU, m *gpuMatcher) int64 {
	_, _, free := h.units(g, m)
	return free
}

// units is GPU g's units for the request: how many there are, how many
// match, and how many of those the sample does not show held.
func (h *holding) units(g *telemetry.GPU, m *gpuMatcher) (total, matching, free int64) {
	for j, n := 0, unitGroups(g, h.kind); j < n; j++ {
		count, alloc, memory := unitGroup(g, h.kind, h.req, j)
		total += count
		if count == 0 || !m.ok(g, memory) {
			continue
		}
		matching += count
		if h.known {
			count -= min(max(alloc, 0), count)
		}
		free += count
	}
	return total, matching, free
}

// tally is the node's units for the request: how many there are, how many
// match, how many of those are free in the sample, and of those how many
// sit on no known NUMA node.
func (h *holding) tally(n *telemetry.Node, m *gpuMatcher) (total, matching, free, freeUnknownNUMA int64) {
	for i := range n.GPUs {
		g := &n.GPUs[i]
		t, mt, f := h.units(g, m)
		total, matching, free = total+t, matching+mt, free+f
		if gpuNUMA(n, g) < 0 {
			freeUnknownNUMA += f
		}
	}
	return total, matching, free, freeUnknownNUMA
}

// freeOn is the matching units free in the sample on NUMA node id.
func (h *holding) freeOn(n *telemetry.Node, m *gpuMatcher, id int32) int64 {
	var free int64
	for i := range n.GPUs {
		if g := &n.GPUs[i]; gpuNUMA(n, g) == id {
			free += h.free(g, m)
		}
	}
	return free
}

// unfree is the node's free matching units less the extra held units:
// what the request can take.
func (h *holding) unfree(free int64) int64 { return free - h.extra }

// noun names the request's units on the node, for messages: "GPUs",
// "nvidia.com/gpu MIG devices", "nvidia.com/mig-1g.10gb devices".
func (h *holding) noun() string {
	switch h.kind {
	case singleSlices:
		return string(h.req.resource) + " MIG devices"
	case profileDevices:
		return string(h.req.resource) + " devices"
	}
	return "GPUs"
}

// together reports, for a request of k >= 2 units, whether the node has k
// free matching units under one NVLink group (link) and under one PCIe
// root (root). Units held by pods placed since the sample, or by pods
// whose units are not published, are assumed to sit in each group: the
// kubelet's device plugin, not the scheduler, picks a node's devices, so
// this chooses nodes only, and counts a group free only where it is so
// whatever the plugin picked before.
//
// MIG devices have no peer-to-peer at all, over NVLink or PCIe, between
// GPUs or between the GPU instances of one GPU (NVIDIA's MIG User Guide,
// "Application Considerations", docs.nvidia.com/datacenter/tesla/
// mig-user-guide/deployment-considerations.html: no GPU-to-GPU P2P and
// no CUDA IPC across GPU instances; RAPIDS' MIG guide: "NVLink and
// NVSwitch are thus completely unavailable"): devices talk through host
// memory. So MIG devices are
// never linked; k devices of one GPU share its PCIe link and count as one
// root (together at that level), and devices of several GPUs count as
// nothing together, whatever NVLink or PCIe switch joins their GPUs.
func (h *holding) together(n *telemetry.Node, m *gpuMatcher, k int64) (link, root bool) {
	if h.kind != wholeGPUs {
		for i := range n.GPUs {
			if g := &n.GPUs[i]; g.MIG && h.unfree(h.free(g, m)) >= k {
				return false, true
			}
		}
		return false, false
	}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if g.LinkGroup >= 0 && !link && firstOfGroup(n, i) {
			var free int64
			for j := i; j < len(n.GPUs); j++ {
				if n.GPUs[j].LinkGroup == g.LinkGroup {
					free += h.free(&n.GPUs[j], m)
				}
			}
			link = h.unfree(free) >= k
		}
		if g.PCIeRoot != "" && !root && firstOfRoot(n, i) {
			var free int64
			for j := i; j < len(n.GPUs); j++ {
				if n.GPUs[j].PCIeRoot == g.PCIeRoot {
					free += h.free(&n.GPUs[j], m)
				}
			}
			root = h.unfree(free) >= k
		}
	}
	return link, root
}

func firstOfGroup(n *telemetry.Node, i int) bool {
	for j := range i {
		if n.GPUs[j].LinkGroup == n.GPUs[i].LinkGroup {
			return false
		}
	}
	return true
}

func firstOfRoot(n *telemetry.Node, i int) bool {
	for j := range i {
		if n.GPUs[j].PCIeRoot == n.GPUs[i].PCIeRoot {
			return false
		}
	}
	return true
}
