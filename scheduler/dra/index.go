// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dra indexes the GPUs that Dynamic Resource Allocation
// (resource.k8s.io/v1) publishes and allocates: per node, the GPU devices
// its ResourceSlices publish and those that ResourceClaims hold, joined to
// the node's NodeTelemetry GPUs by UUID; and per pod, the GPUs its claims
// hold or ask for. It is fed by the scheduler's ResourceSlice and
// ResourceClaim informers, one event at a time (never a list per cycle),
// and decides nothing: the plugins own what they do with it.
//
// The rules, in full:
//
//   - A GPU device is a device of a driver in Config.Drivers
//     (TopologyFitArgs.gpuDriverNames, default gpu.nvidia.com), published
//     in a ResourceSlice with spec.nodeName set (a slice for several nodes
//     is not a node's GPU). Its UUID is its attribute "uuid" (or
//     "<driver>/uuid"), which every release of NVIDIA's DRA driver
//     (k8s-dra-driver-gpu) publishes, for a whole GPU and a MIG device
//     alike; a MIG device also has "parentUUID", its GPU's.
//   - A pool's devices are those of its newest generation's slices
//     (spec.pool.generation): older slices are outdated until their
//     driver deletes them, and count for nothing. A device listed in
//     several slices of a pool counts once, in the newest (it moved).
//   - A claim holds the GPU devices of its allocation
//     (status.allocation.devices.results of those drivers). A MIG device
//     holds its parent GPU for whole-GPU use: the GPU is not free to a
//     pod that wants it whole. A claim the scheduler generated for a pod's
//     extended resource (annotation resource.kubernetes.io/extended-resource-claim)
//     is skipped: the pod's extended-resource request counts those GPUs
//     already, in the node's requested resources.
//   - A pod's GPUs (PodGPUs) are, over its spec.resourceClaims (a
//     template's claim by status.resourceClaimStatuses): an allocated
//     claim's whole GPUs (its GPU devices without a parentUUID); an
//     unallocated claim's requests of a class in Config.DeviceClasses
//     (gpuDeviceClassNames, default gpu.nvidia.com) in ExactCount mode,
//     by their count; of firstAvailable subrequests, the least count
//     (a subrequest of another class counts 0). Requests in All mode count
//     once allocated. A pod's MIG slices (PodMIGSlices) are, likewise, an
//     allocated claim's MIG devices' compute slices (telemetry.ProfileSlices
//     of their "profile" attribute, 1 for a device without one); an
//     unallocated claim's requests of a class in Config.MIGDeviceClasses
//     (migDeviceClassNames, default mig.nvidia.com), their count times the
//     slices of the profile their selectors name (a CEL expression
//     comparing the "profile" attribute to a literal), else 1, the least.
//     A claim several pods share counts for the first pod
//     it is reserved for (status.reservedFor), and for no other: they run
//     on the same GPUs, whose watts that pod's reservation carries.
package dra

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
)

// Attribute names NVIDIA's DRA driver publishes on its devices.
const (
	AttributeUUID       = "uuid"
	AttributeParentUUID = "parentUUID"
	// AttributeProfile is a MIG device's profile ("1g.10gb").
	AttributeProfile = "profile"
)

// Config says which devices are GPUs.
type Config struct {
	// DeviceClasses are the DeviceClasses whose requests count as whole
	// GPUs before their claim is allocated.
	DeviceClasses []string
	// MIGDeviceClasses are the DeviceClasses whose requests count as MIG
	// devices before their claim is allocated.
	MIGDeviceClasses []string
	// Drivers are the DRA drivers whose devices are GPUs.
	Drivers []string
}

// DefaultConfig counts NVIDIA's DRA driver's GPUs and MIG devices (driver
// gpu.nvidia.com; DeviceClasses gpu.nvidia.com and mig.nvidia.com).
func DefaultConfig() Config {
	return Config{DeviceClasses: []string{"gpu.nvidia.com"}, MIGDeviceClasses: []string{"mig.nvidia.com"}, Drivers: []string{"gpu.nvidia.com"}}
}

// Node is what DRA says of a node's GPUs; immutable once published.
type Node struct {
	// Published is how many whole GPUs (devices without a parentUUID) the
	// node's ResourceSlices publish.
	Published int64
	// held are the UUIDs of the GPUs claims hold (a MIG device's parent's).
	held map[string]struct{}
	// HeldNoUUID is how many held GPU devices have no UUID attribute.
	HeldNoUUID int64
}

// Held reports whether a claim holds the GPU of that UUID, whole or a MIG
// device of it.
func (n *Node) Held(uuid string) bool {
	if n == nil {
		return false
	}
	_, ok := n.held[uuid]
	return ok
}

// HeldCount is how many GPUs claims hold on the node: those with a UUID,
// and the devices without one.
func (n *Node) HeldCount() int64 {
	if n == nil {
		return 0
	}
	return int64(len(n.held)) + n.HeldNoUUID
}

// deviceID names a device across slices and allocations.
type deviceID struct{ driver, pool, device string }

// poolID names a pool: its driver's, across the driver's slices.
type poolID struct{ driver, pool string }

// sliceInfo is a slice's node, pool and GPU devices.
type sliceInfo struct {
	node string
	pool poolID
	gen  int64  // its pool's generation when it was written
	seq  uint64 // the index's update count when it was indexed, for ties
	ids  []deviceID
	devs []device // ids' devices, in order
}

// device is a published GPU device.
type device struct {
	// slice is the slice the device is counted in: of the slices of its
	// pool that list it, the newest generation's, the last indexed among
	// equals (a device moves between slices of a pool; informers deliver
	// the slices' updates in any order).
	slice      string
	node       string
	uuid       string
	parentUUID string
	// slices are a MIG device's compute slices, by its profile (1 when it
	// names none); 0 for a whole GPU.
	slices int64
}

// claimInfo is what the index keeps of a claim.
type claimInfo struct {
	allocated []deviceID
	requested int64 // whole GPUs requested, for an unallocated claim
	// requestedSlices are the MIG compute slices its MIG requests ask
	// for, for an unallocated claim.
	requestedSlices int64
	extended        bool
	// consumer is the first pod the claim is reserved for
	// (status.reservedFor), whose GPUs they are; "" while none.
	consumer types.UID
}

// Index is the GPUs of DRA, per node and per claim. Readers take a read
// lock on the claims or none (nodes are a copy-on-write map).
type Index struct {
	cfg atomic.Pointer[Config]

	watchOnce sync.Once
	watchErr  error
	synced    []func() bool

	nodes atomic.Pointer[nodeMap]

	mu         sync.RWMutex
	slices     map[string]sliceInfo         // by name: its node's GPU devices
	nodeSlices map[string]map[string]bool   // node -> names of its slices
	pools      map[poolID]map[string]bool   // pool -> names of its slices
	seq        uint64                       // slices indexed so far
	devices    map[deviceID]device          // published GPU devices
	holders    map[deviceID]map[string]bool // device -> claims allocated it
	claims     map[string]*claimInfo        // by namespace/name
	listener   []func(node string)
}

// New returns an empty index counting GPUs by cfg.
func New(cfg Config) *Index {
	x := &Index{
		slices: map[string]sliceInfo{}, nodeSlices: map[string]map[string]bool{}, pools: map[poolID]map[string]bool{}, devices: map[deviceID]device{},
		holders: map[deviceID]map[string]bool{}, claims: map[string]*claimInfo{},
	}
	x.SetConfig(cfg)
	x.nodes.Store(&nodeMap{})
	return x
}

// SetConfig sets which devices are GPUs; call it before the informers
// start.
func (x *Index) SetConfig(cfg Config) {
	c := Config{DeviceClasses: slices.Clone(cfg.DeviceClasses), MIGDeviceClasses: slices.Clone(cfg.MIGDeviceClasses), Drivers: slices.Clone(cfg.Drivers)}
	x.cfg.Store(&c)
}

// Config is what the index counts as GPUs.
func (x *Index) Config() Config { return *x.cfg.Load() }

// Watch follows ResourceSlices and ResourceClaims through the scheduler's
// informers (those the DynamicResources plugin reads too). Only the first
// call registers anything.
func (x *Index) Watch(factory informers.SharedInformerFactory) error {
	x.watchOnce.Do(func() { x.watchErr = x.watch(factory) })
	return x.watchErr
}

func (x *Index) watch(factory informers.SharedInformerFactory) error {
	s, err := factory.Resource().V1().ResourceSlices().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    x.UpdateSlice,
		UpdateFunc: func(_, obj any) { x.UpdateSlice(obj) },
		DeleteFunc: x.DeleteSlice,
	})
	if err != nil {
		return fmt.Errorf("watching ResourceSlices: %w", err)
	}
	c, err := factory.Resource().V1().ResourceClaims().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    x.UpdateClaim,
		UpdateFunc: func(_, obj any) { x.UpdateClaim(obj) },
		DeleteFunc: x.DeleteClaim,
	})
	if err != nil {
		return fmt.Errorf("watching ResourceClaims: %w", err)
	}
	x.synced = []func() bool{s.HasSynced, c.HasSynced}
	return nil
}

// Synced reports whether the handlers have had their first lists (true
// without Watch).
func (x *Index) Synced() bool {
	for _, f := range x.synced {
		if !f() {
			return false
		}
	}
	return true
}

// OnChange registers f, called with a node's name after what DRA says of
// its GPUs changed (the index's lock is held: f must be quick).
func (x *Index) OnChange(f func(node string)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.listener = append(x.listener, f)
}

// Node is what DRA says of the node's GPUs; nil when nothing.
func (x *Index) Node(name string) *Node {
	if x == nil {
		return nil
	}
	return x.nodes.Load().m[name]
}

// HasGPUs reports whether the node's ResourceSlices publish a whole GPU.
func (x *Index) HasGPUs(name string) bool {
	n := x.Node(name)
	return n != nil && n.Published > 0
}

// GPUNodes is how many nodes publish a whole GPU.
func (x *Index) GPUNodes() int {
	if x == nil {
		return 0
	}
	return x.nodes.Load().gpuNodes
}

// nodeMap is the published nodes, copied on write.
type nodeMap struct {
	m        map[string]*Node
	gpuNodes int // nodes with Published > 0
}
