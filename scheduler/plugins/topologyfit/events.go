// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// EventsToRegister requeues pods this plugin rejected when a pod on a node
// is deleted and frees what they need, or a DRA claim or slice changes. A
// node's telemetry changing in a way that can let them in requeues them
// through the plugin itself (pick, rejected.OnTelemetry), not through the
// scheduling queue's walk of every unschedulable pod.
func (pl *TopologyFit) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return append([]fwk.ClusterEventWithHint{
		{
			Event:          fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete},
			QueueingHintFn: pl.podDeleteHint,
		},
	}, pl.draEvents()...), nil // dra.go
}

// helps says how the change from prev (nil: none) to cur can let the pod
// in, or "" when it cannot.
func (pl *TopologyFit) helps(prev, cur *telemetry.Node, s *podState) string {
	now := pl.cache.Now()
	if !cur.Fresh(now, pl.args.TelemetryMaxAge) || !pl.couldFit(cur, s) {
		return ""
	}
	if prev == nil || !prev.Fresh(now, pl.args.TelemetryMaxAge) {
		return "telemetry became fresh"
	}
	if gpuLayoutChanged(prev, cur) {
		return "GPU layout changed"
	}
	cm, pm := gpuMatcher{s: s}, gpuMatcher{s: s}
	var ch, ph [maxUnitRequests]holding
	pl.holdings(cur, nil, s, &ch, pl.claimsOn(cur.Name))
	pl.holdings(prev, nil, s, &ph, pl.claimsOn(prev.Name))
	for r := range s.reqs {
		_, _, c, _ := ch[r].tally(cur, &cm)
		_, _, p, _ := ph[r].tally(prev, &pm)
		if c > p {
			return "more free matching GPUs or MIG devices"
		}
	}
	if !s.singleNUMA {
		return ""
	}
	for i := range cur.NUMA {
		cn := &cur.NUMA[i]
		pn := numaByID(prev, cn.ID)
		switch {
		case pn == nil:
			return "new NUMA node"
		case moreFreeOn(cur, prev, &ch, &ph, &cm, &pm, len(s.reqs), cn.ID):
			return "more free matching GPUs or MIG devices on a NUMA node"
		case numaFreeCPUMilli(cn.LogicalCores, cn.AllocatedExclusiveCPUs, 0, 1) > numaFreeCPUMilli(pn.LogicalCores, pn.AllocatedExclusiveCPUs, 0, 1):
			return "more free CPUs on a NUMA node"
		case pn.MemoryFreeBytes < s.memoryBytes && cn.MemoryFreeBytes >= s.memoryBytes:
			return "enough free memory on a NUMA node"
		}
	}
	return ""
}

// pick names the pods Filter rejected that a NodeTelemetry change lets in
// (rejected.OnTelemetry), none when the node is not fresh: those the
// change helps (helps) when the node could hold the pod, ignoring what
// other pods use: it is newly fresh, or grew something the pod needs:
// more matching GPUs on the node or on one of its NUMA nodes (a GPU
// appeared or became healthy) for a GPU pod; for a single-numa-node pod,
// a new NUMA node, more free CPUs on a NUMA node, or a NUMA node's free
// memory reaching the pod's request. Anything else, e.g. memory moving
// while it stays short of or above the request, helps none.
func (pl *TopologyFit) pick(prev, cur *telemetry.Node) []types.NamespacedName {
	if !cur.Fresh(pl.cache.Now(), pl.args.TelemetryMaxAge) {
		return nil
	}
	return pl.rejected.Select(nil, func(s *podState) bool {
		return s.topology() && pl.helps(prev, cur, s) != ""
	})
}

// couldFit reports whether the node could hold the pod if no pod the
// scheduler knows used its GPUs and CPUs (the units its sample shows
// allocated stay held): the upper bound of Filter.
func (pl *TopologyFit) couldFit(n *telemetry.Node, s *podState) bool {
	m := gpuMatcher{s: s}
	var hs [maxUnitRequests]holding
	if len(s.reqs) > 0 {
		if !n.HasGPUSource {
			return false
		}
		pl.holdings(n, nil, s, &hs, pl.claimsOn(n.Name))
		for r := range s.reqs {
			if _, _, free, _ := hs[r].tally(n, &m); free < s.reqs[r].count {
				return false
			}
		}
	}
	return !s.singleNUMA || fitNUMA(n, s, &m, hs[:len(s.reqs)], 0) >= 0
}

// moreFreeOn reports whether NUMA node id has more free matching units of
// one of the pod's requests in cur than in prev.
func moreFreeOn(cur, prev *telemetry.Node, ch, ph *[maxUnitRequests]holding, cm, pm *gpuMatcher, reqs int, id int32) bool {
	for r := range reqs {
		if ch[r].freeOn(cur, cm, id) > ph[r].freeOn(prev, pm, id) {
			return true
		}
	}
	return false
}

// gpuLayoutChanged reports whether the node's GPUs changed their MIG
// layout, NVLink groups or PCIe roots: what a request's units are and
// where they sit together.
func gpuLayoutChanged(prev, cur *telemetry.Node) bool {
	if len(prev.GPUs) != len(cur.GPUs) {
		return true
	}
	for i := range cur.GPUs {
		p, c := &prev.GPUs[i], &cur.GPUs[i]
		if p.MIG != c.MIG || p.ComputeSlices != c.ComputeSlices || p.LinkGroup != c.LinkGroup || p.PCIeRoot != c.PCIeRoot ||
			!slices.EqualFunc(p.MIGProfiles, c.MIGProfiles, func(a, b telemetry.MIGProfile) bool {
				return a.Profile == b.Profile && a.Count == b.Count && a.MemoryBytes == b.MemoryBytes
			}) {
			return true
		}
	}
	return false
}

func numaByID(n *telemetry.Node, id int32) *telemetry.NUMANode {
	for i := range n.NUMA {
		if n.NUMA[i].ID == id {
			return &n.NUMA[i]
		}
	}
	return nil
}

// podDeleteHint queues a pod when a pod that held GPUs or MIG devices on a
// node is deleted and the pod needs GPUs or MIG devices; or, for a single-numa-node pod, when the deleted
// pod requested CPU (free CPUs per NUMA node are estimated from pod
// requests where the kubelet's allocations are not published).
func (pl *TopologyFit) podDeleteHint(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	deleted, _, err := schedutil.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if deleted == nil || (deleted.Spec.NodeName == "" && deleted.Status.NominatedNodeName == "") {
		return fwk.QueueSkip, nil
	}
	s, err := pl.hintFacts(pod)
	if err != nil || !s.topology() {
		return fwk.QueueSkip, nil
	}
	d := pl.book.Requested(deleted)
	gpus, cpuMilli := d.GPUs, d.CPUMilli
	switch {
	case s.gpus > 0 && gpus > 0, len(s.reqs) > 0 && d.MIGSlices > 0, len(s.reqs) > 0 && pl.holdsMIG(deleted):
		logger.V(4).Info("a pod holding GPUs was deleted", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted), "plugin", Name)
		return fwk.Queue, nil
	case s.singleNUMA && s.cpuMilli > 0 && cpuMilli > 0:
		logger.V(4).Info("a pod holding CPUs was deleted", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted), "plugin", Name)
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// holdsMIG reports whether the pod requests a MIG resource (one whose
// profile has no leading compute slices counts no MIG slices).
func (pl *TopologyFit) holdsMIG(pod *v1.Pod) bool {
	return len(pl.book.MIGRequests(pod)) > 0
}
