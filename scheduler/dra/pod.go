// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	v1 "k8s.io/api/core/v1"
)

// ClaimNames are the names of the ResourceClaims of the pod's
// spec.resourceClaims that exist: a claim named directly, and a
// template's claim once status.resourceClaimStatuses names it.
func ClaimNames(pod *v1.Pod) []string {
	var names []string
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		switch {
		case pc.ResourceClaimName != nil:
			names = append(names, *pc.ResourceClaimName)
		case pc.ResourceClaimTemplateName != nil:
			for _, st := range pod.Status.ResourceClaimStatuses {
				if st.Name == pc.Name && st.ResourceClaimName != nil {
					names = append(names, *st.ResourceClaimName)
				}
			}
		}
	}
	return names
}

// PodGPUs is how many whole GPUs the pod's claims hold, or ask for while
// unallocated (see the package doc); 0 for a pod without claims.
func (x *Index) PodGPUs(pod *v1.Pod) int64 {
	if x == nil || len(pod.Spec.ResourceClaims) == 0 {
		return 0
	}
	names := ClaimNames(pod)
	x.mu.RLock()
	defer x.mu.RUnlock()
	var gpus int64
	for _, name := range names {
		c := x.claims[pod.Namespace+"/"+name]
		if c == nil || c.extended || (c.consumer != "" && c.consumer != pod.UID) {
			continue
		}
		gpus += x.claimGPUs(c)
	}
	return gpus
}

// PodMIGSlices is how many MIG compute slices the pod's claims hold, or
// ask for while unallocated (see the package doc); 0 for a pod without
// claims.
func (x *Index) PodMIGSlices(pod *v1.Pod) int64 {
	if x == nil || len(pod.Spec.ResourceClaims) == 0 {
		return 0
	}
	names := ClaimNames(pod)
	x.mu.RLock()
	defer x.mu.RUnlock()
	var n int64
	for _, name := range names {
		c := x.claims[pod.Namespace+"/"+name]
		if c == nil || c.extended || (c.consumer != "" && c.consumer != pod.UID) {
			continue
		}
		if c.allocated == nil {
			n += c.requestedSlices
			continue
		}
		for _, id := range c.allocated {
			n += x.devices[id].slices // 0 for a whole GPU or a device not published
		}
	}
	return n
}

// claimGPUs is the whole GPUs of a claim: its allocated devices that are
// not MIG devices, or its requests. The caller holds mu.
func (x *Index) claimGPUs(c *claimInfo) int64 {
	if c.allocated == nil {
		return c.requested
	}
	var n int64
	for _, id := range c.allocated {
		if d, ok := x.devices[id]; !ok || d.parentUUID == "" {
			n++
		}
	}
	return n
}

// PodPendingGPUs is how many whole GPUs the pod's unallocated claims ask
// for (PodGPUs less what its allocated claims hold): the GPUs a node must
// still have free for the pod. An allocated claim's devices are chosen.
func (x *Index) PodPendingGPUs(pod *v1.Pod) int64 {
	if x == nil || len(pod.Spec.ResourceClaims) == 0 {
		return 0
	}
	names := ClaimNames(pod)
	x.mu.RLock()
	defer x.mu.RUnlock()
	var gpus int64
	for _, name := range names {
		c := x.claims[pod.Namespace+"/"+name]
		if c == nil || c.extended || c.allocated != nil || (c.consumer != "" && c.consumer != pod.UID) {
			continue
		}
		gpus += c.requested
	}
	return gpus
}
