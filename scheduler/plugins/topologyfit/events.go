// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/telesched/telesched/scheduler/plugins/internal/rejected"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// EventsToRegister requeues pods this plugin rejected when a node's
// telemetry changes in a way that can let them in, or when a pod on a node
// is deleted and frees what they need.
func (pl *TopologyFit) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return append([]fwk.ClusterEventWithHint{
		{
			Event:             fwk.ClusterEvent{Resource: telemetry.EventResource, ActionType: fwk.Add | fwk.Update},
			QueueingHintFn:    pl.telemetryHint,
			PreQueueingHintFn: pl.telemetryPreHint,
		},
		{
			Event:          fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete},
			QueueingHintFn: pl.podDeleteHint,
		},
	}, pl.draEvents()...), nil // dra.go
}

// telemetryHint queues a pod when a node's new telemetry is fresh, could
// hold the pod (ignoring what other pods use) and either is newly fresh or
// grew something the pod needs: more matching GPUs on the node or on one of
// its NUMA nodes (a GPU appeared or became healthy) for a GPU pod; for a
// single-numa-node pod, a new NUMA node, more free CPUs on a NUMA node, or
// a NUMA node's free memory reaching the pod's request. Anything else,
// e.g. memory moving while it stays short of or above the request, skips.
func (pl *TopologyFit) telemetryHint(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	prev, cur, err := pl.cache.ObserveChange(oldObj, newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("%s: %w", Name, err)
	}
	s, err := pl.hintFacts(pod)
	if err != nil || !s.topology() {
		// A malformed annotation is not fixed by telemetry, and a pod with
		// nothing to check was not rejected by this plugin.
		return fwk.QueueSkip, nil
	}
	if why := pl.helps(prev, cur, s); why != "" {
		logger.V(4).Info("node telemetry may make the pod schedulable", "pod", klog.KObj(pod), "node", cur.Name, "plugin", Name, "reason", why)
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// helps says how the change from prev (nil: none) to cur can let the pod
// in, or "" when it cannot.
func (pl *TopologyFit) helps(prev, cur *telemetry.Node, s *podState) string {
	now := pl.cache.Now()
	if !cur.Fresh(now, pl.args.TelemetryMaxAge) || !couldFit(cur, s) {
		return ""
	}
	if prev == nil || !prev.Fresh(now, pl.args.TelemetryMaxAge) {
		return "telemetry became fresh"
	}
	cm, pm := gpuMatcher{s: s}, gpuMatcher{s: s}
	if s.gpus > 0 {
		c, _ := cm.count(cur)
		p, _ := pm.count(prev)
		if c > p {
			return "more matching GPUs"
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
		case s.gpus > 0 && cm.countOn(cur, cn.ID) > pm.countOn(prev, cn.ID):
			return "more matching GPUs on a NUMA node"
		case numaFreeCPUMilli(cn.LogicalCores, cn.AllocatedExclusiveCPUs, 0, 1) > numaFreeCPUMilli(pn.LogicalCores, pn.AllocatedExclusiveCPUs, 0, 1):
			return "more free CPUs on a NUMA node"
		case pn.MemoryFreeBytes < s.memoryBytes && cn.MemoryFreeBytes >= s.memoryBytes:
			return "enough free memory on a NUMA node"
		}
	}
	return ""
}

// telemetryPreHint is the NodeTelemetry event's PreQueueingHint: the pods
// Filter rejected that the update helps by the hint's own test (helps),
// none when the node is not fresh. The pod's facts come from the index, so
// the hint runs again only for the pods named.
func (pl *TopologyFit) telemetryPreHint(_ klog.Logger, oldObj, newObj any) (fwk.PreQueueingHintResult, error) {
	prev, cur, done, err := pl.rejected.Views(pl.cache, Name, oldObj, newObj)
	if done != nil {
		return *done, err
	}
	if !cur.Fresh(pl.cache.Now(), pl.args.TelemetryMaxAge) {
		return rejected.None(), nil
	}
	return pl.rejected.Select(nil, func(s *podState) bool {
		return s.topology() && pl.helps(prev, cur, s) != ""
	}), nil
}

// couldFit reports whether the node could hold the pod if no other pod
// used its GPUs and CPUs: the upper bound of Filter.
func couldFit(n *telemetry.Node, s *podState) bool {
	m := gpuMatcher{s: s}
	if s.gpus > 0 {
		if !n.HasGPUSource {
			return false
		}
		if matching, _ := m.count(n); matching < s.gpus {
			return false
		}
	}
	return !s.singleNUMA || fitNUMA(n, s, &m, s.gpus, 0, 0) >= 0
}

func numaByID(n *telemetry.Node, id int32) *telemetry.NUMANode {
	for i := range n.NUMA {
		if n.NUMA[i].ID == id {
			return &n.NUMA[i]
		}
	}
	return nil
}

// podDeleteHint queues a pod when a pod that held GPUs on a node is deleted
// and the pod needs GPUs; or, for a single-numa-node pod, when the deleted
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
	gpus, cpuMilli, _ := pl.podRequests(deleted)
	switch {
	case s.gpus > 0 && gpus > 0:
		logger.V(4).Info("a pod holding GPUs was deleted", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted), "plugin", Name)
		return fwk.Queue, nil
	case s.singleNUMA && s.cpuMilli > 0 && cpuMilli > 0:
		logger.V(4).Info("a pod holding CPUs was deleted", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted), "plugin", Name)
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
