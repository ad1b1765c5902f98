// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/scheduler/dra"
	"github.com/telesched/telesched/scheduler/estimate"
)

// Dynamic Resource Allocation (resource.k8s.io/v1), as TopologyFit reads
// it (package dra has the index and its rules):
//
//   - A pod's ResourceClaims count as GPUs (podState.claimGPUs, the book's
//     Demand.ClaimGPUs). Whether they fit a node is the DynamicResources
//     plugin's to decide: Filter does not check their count. But a
//     single-numa-node pod needs a NUMA node with the GPUs its unallocated
//     claims ask for free (podState.claimPending), as the same number
//     asked by extended resource does; an allocated claim's devices are
//     chosen already, and only its CPUs and memory are checked. Score ranks
//     a node for them as for the same number of GPUs requested by
//     extended resource: NUMA alignment, then how tightly they fill the
//     node's free matching GPUs.
//   - A node's GPUs that claims hold (joined to its telemetry by UUID) are
//     not free: a GPU pod's matcher skips them, on the NUMA node they sit
//     on, and a held device without a UUID counts as allocated. So a pod
//     requesting GPUs by extended resource stays off them.
//   - A node whose ResourceSlices publish a GPU is a GPU node (for the
//     CPUs it keeps for its free GPUs), whatever its allocatable says.
//   - Claims and slices are counted by gpuDeviceClassNames,
//     migDeviceClassNames and gpuDriverNames, which every profile shares
//     with the book. A claim's MIG devices count as the pod's MIG slices
//     (the book's Demand.MIGSlices), priced as MIG resources are.

//   - Between the DynamicResources plugin's Reserve and the API write of a
//     claim's allocation (its PreBind), only the framework's
//     SharedDRAManager knows the devices it took; the scheduler's claim
//     informer learns them after binding. TopologyFit's Reserve, which runs
//     after DynamicResources', hands the index the pod's claims as the
//     SharedDRAManager has them, so the pods of the next cycles keep off
//     those GPUs in between; Unreserve hands it the informer's again.

// shareDRA sets the book's DRA classes and drivers from args and follows
// ResourceSlices and ResourceClaims through the scheduler's informers.
func shareDRA(book *estimate.Book, args config.TopologyFitArgs, h fwk.Handle) error {
	err := book.ShareDRA(fmt.Sprintf("profile %s's %s", h.ProfileName(), Name), dra.Config{DeviceClasses: args.GPUDeviceClassNames, MIGDeviceClasses: args.MIGDeviceClassNames, Drivers: args.GPUDriverNames})
	if err != nil {
		return err
	}
	return book.WatchClaims(h.SharedInformerFactory())
}

// claimTracker is where Reserve reads a pod's claims with the allocation
// DynamicResources just made: the framework's SharedDRAManager.
type claimTracker interface {
	Get(namespace, claimName string) (*resourceapi.ResourceClaim, error)
}

// Reserve tells the DRA index which devices the pod's claims were just
// allocated (see the rules above).
func (pl *TopologyFit) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	pl.rejected.End(pod)
	if pl.draTracker == nil || len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	for _, name := range dra.ClaimNames(pod) {
		if c, err := pl.draTracker.Get(pod.Namespace, name); err == nil && c.Status.Allocation != nil {
			pl.book.Claims().UpdateClaim(c)
		}
	}
	return nil
}

// Unreserve hands the DRA index the pod's claims as the informer has them:
// the allocation Reserve passed on was undone with the binding.
func (pl *TopologyFit) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	if pl.draLister == nil || len(pod.Spec.ResourceClaims) == 0 {
		return
	}
	for _, name := range dra.ClaimNames(pod) {
		c, err := pl.draLister.ResourceClaims(pod.Namespace).Get(name)
		switch {
		case err == nil:
			pl.book.Claims().UpdateClaim(c)
		case apierrors.IsNotFound(err):
			pl.book.Claims().DeleteClaim(&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name}})
		}
	}
}

// claimsOn is what DRA says of a node's GPUs; nil when nothing.
func (pl *TopologyFit) claimsOn(node string) *dra.Node {
	return pl.book.Claims().Node(node)
}

// heldNoUUID is how many GPU devices claims hold on node n that name no
// UUID: allocated GPUs of unknown identity (nil: none).
func heldNoUUID(n *dra.Node) int64 {
	if n == nil {
		return 0
	}
	return n.HeldNoUUID
}

// heldNote is the part of a rejection that counts the GPUs claims hold on
// the node, "" when none.
func heldNote(m *gpuMatcher) string {
	if n := m.claims.HeldCount(); n > 0 {
		return fmt.Sprintf(", %d held by ResourceClaims", n)
	}
	return ""
}

// draGPUNode reports whether the node's ResourceSlices publish a GPU.
func (pl *TopologyFit) draGPUNode(node string) bool { return pl.book.Claims().HasGPUs(node) }

// draGPUNodes is how many nodes' ResourceSlices publish a GPU.
func (pl *TopologyFit) draGPUNodes() int { return pl.book.Claims().GPUNodes() }

// withDRA is a node's GPUs and the GPUs held on it, for a node without
// GPU telemetry: its allocatable GPUs or those its slices publish,
// whichever is more, and held plus what claims hold.
func (pl *TopologyFit) withDRA(node string, gpus, held int64) (int64, int64) {
	n := pl.claimsOn(node)
	if n == nil {
		return gpus, held
	}
	return max(gpus, n.Published), held + n.HeldCount()
}

// draEvents are the DRA events that can let in a pod Filter rejected for
// want of free GPUs.
func (pl *TopologyFit) draEvents() []fwk.ClusterEventWithHint {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete}, QueueingHintFn: pl.claimHint},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Update | fwk.Delete}, QueueingHintFn: pl.sliceHint},
	}
}

// claimHint queues a pod that requests GPUs by extended resource when a
// claim lets go of GPU devices (deallocated or deleted): the GPUs it held
// are free again, by the count Filter subtracts.
func (pl *TopologyFit) claimHint(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	old, cur, err := schedutil.As[*resourceapi.ResourceClaim](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if s, err := pl.hintFacts(pod); err != nil || s.gpus == 0 {
		return fwk.QueueSkip, nil
	}
	drivers := pl.book.Claims().Config().Drivers
	if heldDevices(old, drivers) > heldDevices(cur, drivers) {
		logger.V(4).Info("a ResourceClaim released GPUs", "pod", klog.KObj(pod), "claim", klog.KObj(old), "plugin", Name)
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// sliceHint queues a pod that requests GPUs by extended resource when a
// node's ResourceSlice drops GPU devices: devices claims held there no
// longer count against the node's telemetry GPUs.
func (pl *TopologyFit) sliceHint(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	old, cur, err := schedutil.As[*resourceapi.ResourceSlice](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if s, err := pl.hintFacts(pod); err != nil || s.gpus == 0 {
		return fwk.QueueSkip, nil
	}
	drivers := pl.book.Claims().Config().Drivers
	if sliceDevices(old, drivers) > sliceDevices(cur, drivers) {
		logger.V(4).Info("a ResourceSlice dropped GPUs", "pod", klog.KObj(pod), "slice", klog.KObj(old), "plugin", Name)
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// heldDevices is how many devices of the drivers a claim holds (nil: 0),
// a scheduler-generated extended-resource claim none.
func heldDevices(c *resourceapi.ResourceClaim, drivers []string) int {
	if c == nil || c.Status.Allocation == nil || c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true" {
		return 0
	}
	var n int
	for _, r := range c.Status.Allocation.Devices.Results {
		if slices.Contains(drivers, r.Driver) {
			n++
		}
	}
	return n
}

// sliceDevices is how many devices of the drivers a node's slice
// publishes (nil: 0).
func sliceDevices(s *resourceapi.ResourceSlice, drivers []string) int {
	if s == nil || s.Spec.NodeName == nil || !slices.Contains(drivers, s.Spec.Driver) {
		return 0
	}
	return len(s.Spec.Devices)
}
