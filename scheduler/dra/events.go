// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"regexp"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/telesched/telesched/internal/cowmap"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// UpdateSlice indexes a ResourceSlice's GPU devices.
func (x *Index) UpdateSlice(obj any) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	cfg := x.cfg.Load()
	node := ""
	if s.Spec.NodeName != nil {
		node = *s.Spec.NodeName
	}
	si := sliceInfo{node: node, pool: poolID{driver: s.Spec.Driver, pool: s.Spec.Pool.Name}, gen: s.Spec.Pool.Generation}
	if node != "" && slices.Contains(cfg.Drivers, s.Spec.Driver) {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			dev := device{slice: s.Name, node: node, uuid: stringAttribute(d, s.Spec.Driver, AttributeUUID), parentUUID: stringAttribute(d, s.Spec.Driver, AttributeParentUUID)}
			if dev.parentUUID != "" {
				dev.slices = max(int64(telemetry.ProfileSlices(stringAttribute(d, s.Spec.Driver, AttributeProfile))), 1)
			}
			si.ids = append(si.ids, deviceID{driver: s.Spec.Driver, pool: s.Spec.Pool.Name, device: d.Name})
			si.devs = append(si.devs, dev)
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	touched := x.dropSlice(s.Name)
	if len(si.ids) > 0 {
		x.seq++
		si.seq = x.seq
		x.slices[s.Name] = si
		set(x.nodeSlices, node, s.Name)
		set(x.pools, si.pool, s.Name)
		x.reown(si.pool, si.ids)
		x.touchPool(si.pool, touched)
	}
	x.refresh(touched)
}

// DeleteSlice forgets a deleted ResourceSlice's devices.
func (x *Index) DeleteSlice(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.refresh(x.dropSlice(s.Name))
}

// dropSlice forgets a slice: its devices count where another slice of
// its pool lists them, or nowhere. It returns the nodes of the pool's
// slices, whose counts may change. The caller holds mu.
func (x *Index) dropSlice(name string) map[string]bool {
	touched := map[string]bool{}
	si, ok := x.slices[name]
	if !ok {
		return touched
	}
	unset(x.nodeSlices, si.node, name)
	unset(x.pools, si.pool, name)
	delete(x.slices, name)
	x.reown(si.pool, si.ids)
	touched[si.node] = true
	x.touchPool(si.pool, touched)
	return touched
}

// reown sets each of ids to the device of the slice of pool that counts
// it (see device.slice), or forgets it. The caller holds mu.
func (x *Index) reown(pool poolID, ids []deviceID) {
	for _, id := range ids {
		var best *sliceInfo
		var dev device
		for name := range x.pools[pool] {
			si := x.slices[name]
			i := slices.Index(si.ids, id)
			if i < 0 {
				continue
			}
			if best == nil || si.gen > best.gen || (si.gen == best.gen && si.seq > best.seq) {
				best, dev = &si, si.devs[i]
			}
		}
		if best == nil {
			delete(x.devices, id)
			continue
		}
		x.devices[id] = dev
	}
}

// touchPool adds the nodes of pool's slices to touched. The caller holds
// mu.
func (x *Index) touchPool(pool poolID, touched map[string]bool) {
	for name := range x.pools[pool] {
		touched[x.slices[name].node] = true
	}
}

// newest is pool's newest generation among its slices. The caller holds
// mu.
func (x *Index) newest(pool poolID) int64 {
	var g int64
	for name := range x.pools[pool] {
		g = max(g, x.slices[name].gen)
	}
	return g
}

// set adds v to m[k]; unset removes it, and m[k] once empty.
func set[K, V comparable](m map[K]map[V]bool, k K, v V) {
	if m[k] == nil {
		m[k] = map[V]bool{}
	}
	m[k][v] = true
}

func unset[K, V comparable](m map[K]map[V]bool, k K, v V) {
	delete(m[k], v)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}

// stringAttribute is a device's string attribute name, written bare or
// qualified by its driver's domain.
func stringAttribute(d *resourceapi.Device, driver, name string) string {
	for _, k := range []resourceapi.QualifiedName{resourceapi.QualifiedName(name), resourceapi.QualifiedName(driver + "/" + name)} {
		if a, ok := d.Attributes[k]; ok && a.StringValue != nil {
			return *a.StringValue
		}
	}
	return ""
}

// UpdateClaim indexes a ResourceClaim.
func (x *Index) UpdateClaim(obj any) {
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	info := x.claimInfo(c)
	key := c.Namespace + "/" + c.Name
	x.mu.Lock()
	defer x.mu.Unlock()
	touched := x.dropClaim(key)
	x.claims[key] = info
	if !info.extended {
		for _, id := range info.allocated {
			set(x.holders, id, key)
			if d, ok := x.devices[id]; ok {
				touched[d.node] = true
			}
		}
	}
	x.refresh(touched)
}

// DeleteClaim forgets a deleted ResourceClaim.
func (x *Index) DeleteClaim(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.refresh(x.dropClaim(c.Namespace + "/" + c.Name))
}

// dropClaim forgets a claim and returns the nodes of the devices it
// held. The caller holds mu.
func (x *Index) dropClaim(key string) map[string]bool {
	touched := map[string]bool{}
	if c, ok := x.claims[key]; ok {
		for _, id := range c.allocated {
			unset(x.holders, id, key)
			if d, ok := x.devices[id]; ok {
				touched[d.node] = true
			}
		}
	}
	delete(x.claims, key)
	return touched
}

// claimInfo is what the index keeps of c.
func (x *Index) claimInfo(c *resourceapi.ResourceClaim) *claimInfo {
	cfg := x.cfg.Load()
	info := &claimInfo{extended: c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true"}
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" {
			info.consumer = r.UID
			break
		}
	}
	if a := c.Status.Allocation; a != nil {
		for _, r := range a.Devices.Results {
			if slices.Contains(cfg.Drivers, r.Driver) {
				info.allocated = append(info.allocated, deviceID{driver: r.Driver, pool: r.Pool, device: r.Device})
			}
		}
		return info
	}
	for i := range c.Spec.Devices.Requests {
		info.requested += requestedGPUs(cfg, &c.Spec.Devices.Requests[i])
		info.requestedSlices += requestedSlices(cfg, &c.Spec.Devices.Requests[i])
	}
	return info
}

// requestedSlices is how many MIG compute slices a request asks for: its
// exact count of a MIG class times the slices of the profile its
// selectors name (1 when they name none); of alternatives, the least.
func requestedSlices(cfg *Config, r *resourceapi.DeviceRequest) int64 {
	return leastExact(r, cfg.MIGDeviceClasses, selectedSlices)
}

// profileLiteral finds a CEL comparison of a device's "profile" attribute
// with a string literal, in either quote: the form NVIDIA's examples use,
// device.attributes["gpu.nvidia.com"].profile == "1g.10gb".
var profileLiteral = regexp.MustCompile(`\.profile\s*==\s*["']([0-9a-z.+]+)["']`)

// selectedSlices is the compute slices of the profile the selectors name
// (the fewest, when they name several, as with ||), 1 when they name none.
func selectedSlices(sel []resourceapi.DeviceSelector) int64 {
	var least int64
	for i := range sel {
		if sel[i].CEL == nil {
			continue
		}
		for _, m := range profileLiteral.FindAllStringSubmatch(sel[i].CEL.Expression, -1) {
			if n := int64(telemetry.ProfileSlices(m[1])); n > 0 && (least == 0 || n < least) {
				least = n
			}
		}
	}
	return max(least, 1)
}

// requestedGPUs is how many whole GPUs a request asks for: its exact
// count of a GPU class; of alternatives, the least.
func requestedGPUs(cfg *Config, r *resourceapi.DeviceRequest) int64 {
	return leastExact(r, cfg.DeviceClasses, func([]resourceapi.DeviceSelector) int64 { return 1 })
}

// leastExact is what request r asks for of classes: a request or
// subrequest of one of them in ExactCount mode counts its count (the API
// server defaults it to 1) times each device's size by its selectors;
// any other counts 0; of firstAvailable subrequests, the least.
func leastExact(r *resourceapi.DeviceRequest, classes []string, size func([]resourceapi.DeviceSelector) int64) int64 {
	count := func(class string, mode resourceapi.DeviceAllocationMode, n int64, sel []resourceapi.DeviceSelector) int64 {
		if !slices.Contains(classes, class) || (mode != "" && mode != resourceapi.DeviceAllocationModeExactCount) {
			return 0
		}
		return max(n, 1) * size(sel)
	}
	if e := r.Exactly; e != nil {
		return count(e.DeviceClassName, e.AllocationMode, e.Count, e.Selectors)
	}
	var least int64 = -1
	for i := range r.FirstAvailable {
		s := &r.FirstAvailable[i]
		if n := count(s.DeviceClassName, s.AllocationMode, s.Count, s.Selectors); least < 0 || n < least {
			least = n
		}
	}
	return max(least, 0)
}

// refresh recomputes and publishes the touched nodes. The caller holds mu.
func (x *Index) refresh(touched map[string]bool) {
	for node := range touched {
		if node == "" {
			continue
		}
		n := x.compute(node)
		cur := x.nodes.Load()
		next := &nodeMap{gpuNodes: cur.gpuNodes}
		if old := cur.m[node]; old != nil && old.Published > 0 {
			next.gpuNodes--
		}
		if n != nil && n.Published > 0 {
			next.gpuNodes++
		}
		next.m = cowmap.With(cur.m, node, n, n == nil)
		x.nodes.Store(next)
		for _, f := range x.listener {
			f(node)
		}
	}
}

// compute is what DRA says of node's GPUs, nil when nothing. The caller
// holds mu.
func (x *Index) compute(node string) *Node {
	n := &Node{held: map[string]struct{}{}}
	for name := range x.nodeSlices[node] {
		si := x.slices[name]
		if si.gen < x.newest(si.pool) {
			continue // outdated
		}
		for _, id := range si.ids {
			d, ok := x.devices[id]
			if !ok || d.slice != name {
				continue // counted in the slice it moved to
			}
			if d.parentUUID == "" {
				n.Published++
			}
			if len(x.holders[id]) == 0 {
				continue
			}
			switch {
			case d.parentUUID != "":
				n.held[d.parentUUID] = struct{}{}
			case d.uuid != "":
				n.held[d.uuid] = struct{}{}
			default:
				n.HeldNoUUID++
			}
		}
	}
	if n.Published == 0 && len(n.held) == 0 && n.HeldNoUUID == 0 {
		return nil
	}
	return n
}
