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
	return x.sumClaims(pod, x.claimGPUs)
}

// PodMIGSlices is how many MIG compute slices the pod's claims hold, or
// ask for while unallocated (see the package doc); 0 for a pod without
// claims.
func (x *Index) PodMIGSlices(pod *v1.Pod) int64 {
	return x.sumClaims(pod, func(c *claimInfo) int64 {
		if c.allocated == nil {
			return c.requestedSlices
		}
		var n int64
		for _, id := range c.allocated {
			n += x.devices[id].slices // 0 for a whole GPU or a device not published
		}
		return n
	})
}

// PodHeldGPUs is, for each GPU the pod's allocated claims hold, by its
// UUID (a MIG device's parentUUID), the compute slices of the pod's MIG
// devices on it: 0 for a GPU held whole. Devices published without a UUID
// are left out; nil for a pod whose claims hold no GPU device.
func (x *Index) PodHeldGPUs(pod *v1.Pod) map[string]int64 {
	var held map[string]int64
	x.sumClaims(pod, func(c *claimInfo) int64 {
		for _, id := range c.allocated {
			d, ok := x.devices[id]
			if !ok {
				continue
			}
			uuid := d.uuid
			if d.parentUUID != "" {
				uuid = d.parentUUID
			}
			if uuid == "" {
				continue
			}
			if held == nil {
				held = map[string]int64{}
			}
			held[uuid] += d.slices
		}
		return 0
	})
	return held
}

// PodPendingGPUs is how many whole GPUs the pod's unallocated claims ask
// for (PodGPUs less what its allocated claims hold): the GPUs a node must
// still have free for the pod. An allocated claim's devices are chosen.
func (x *Index) PodPendingGPUs(pod *v1.Pod) int64 {
	return x.sumClaims(pod, func(c *claimInfo) int64 {
		if c.allocated != nil {
			return 0
		}
		return c.requested
	})
}

// sumClaims sums f over the pod's claims that count for it: those the
// index knows, not generated for an extended resource, and not reserved
// for another pod first (a shared claim counts for its first consumer).
// f runs under the read lock.
func (x *Index) sumClaims(pod *v1.Pod, f func(*claimInfo) int64) int64 {
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
		n += f(c)
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
