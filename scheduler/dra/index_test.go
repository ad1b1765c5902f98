// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

const driver = "gpu.nvidia.com"

// gpuDevice is a whole GPU as NVIDIA's driver publishes it.
func gpuDevice(name, uuid string) resourceapi.Device {
	return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type": {StringValue: ptr.To("gpu")}, AttributeUUID: {StringValue: ptr.To(uuid)},
	}}
}

// migDevice is a MIG device of the GPU parent.
func migDevice(name, uuid, parent string) resourceapi.Device {
	return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type": {StringValue: ptr.To("mig")}, AttributeUUID: {StringValue: ptr.To(uuid)}, AttributeParentUUID: {StringValue: ptr.To(parent)},
	}}
}

func slice(name, node, drv string, devs ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{
		Driver: drv, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}, Devices: devs,
	}}
}

// allocated is a claim allocated the devices of pool.
func allocated(name, pool string, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: pool, Device: d})
	}
	return c
}

// requesting is an unallocated claim of the requests.
func requesting(name string, reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	c.Spec.Devices.Requests = reqs
	return c
}

func exactly(class string, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
}

type nodeFacts struct {
	Published, Held int64
	HeldUUIDs       []string
}

func facts(n *Node, uuids ...string) nodeFacts {
	f := nodeFacts{Published: -1}
	if n == nil {
		return f
	}
	f = nodeFacts{Published: n.Published, Held: n.HeldCount()}
	for _, u := range uuids {
		if n.Held(u) {
			f.HeldUUIDs = append(f.HeldUUIDs, u)
		}
	}
	return f
}

func TestIndexJoinsClaimedDevicesToNodes(t *testing.T) {
	uuids := []string{"GPU-a", "GPU-b", "GPU-c", "GPU-d"}
	cases := []struct {
		name   string
		events func(x *Index)
		want   nodeFacts // of node n1; Published -1: nothing known
	}{
		{
			name: "slice publishes GPUs, nothing held",
			events: func(x *Index) {
				x.UpdateSlice(slice("s1", "n1", driver, gpuDevice("gpu-0", "GPU-a"), gpuDevice("gpu-1", "GPU-b")))
			},
			want: nodeFacts{Published: 2},
		},
		{
			name: "allocated claim holds its device by UUID",
			events: func(x *Index) {
				x.UpdateSlice(slice("s1", "n1", driver, gpuDevice("gpu-0", "GPU-a"), gpuDevice("gpu-1", "GPU-b")))
				x.UpdateClaim(allocated("c1", "n1", "gpu-1"))
			},
			want: nodeFacts{Published: 2, Held: 1, HeldUUIDs: []string{"GPU-b"}},
		},
		{
			name: "claim seen before its slice is joined when the slice comes",
			events: func(x *Index) {
				x.UpdateClaim(allocated("c1", "n1", "gpu-0", "gpu-1"))
				x.UpdateSlice(slice("s1", "n1", driver, gpuDevice("gpu-0", "GPU-a"), gpuDevice("gpu-1", "GPU-b"), gpuDevice("gpu-2", "GPU-c")))
			},
			want: nodeFacts{Published: 3, Held: 2, HeldUUIDs: []string{"GPU-a", "GPU-b"}},
		},
		{
			name: "MIG device holds its parent GPU and is not a published GPU",
			events: func(x *Index) {
				x.UpdateSlice(slice("s1", "n1", driver, gpuDevice("gpu-0", "GPU-a"), migDevice("gpu-1-mig-9-4-4", "MIG-x", "GPU-b")))
				x.UpdateClaim(allocated("c1", "n1", "gpu-1-mig-9-4-4"))
			},
			want: nodeFacts{Published: 1, Held: 1, HeldUUIDs: []string{"GPU-b"}},
		},
		{
			name: "deallocated claim frees its device",
			events: func(x *Index) {
				x.UpdateSlice(slice("s1", "n1", driver, gpuDevice("gpu-0", "GPU-a")))
				x.UpdateClaim(allocated("c1", "n1", "gpu-0"))
				x.UpdateClaim(requesting("c1", exactly("gpu.nvidia.com", 1)))
			},
			want: nodeFacts{Published: 1},
		},
		{
			name: "deleted claim, as a tombstone, frees its device",
			events: func(x *Index) {
				x.UpdateSlice(slice("s1", "n1", driver, gpuDevice("gpu-0", "GPU-a")))
				x.UpdateClaim(allocated("c1", "n1", "gpu-0"))
				x.DeleteClaim(toolscache.DeletedFinalStateUnknown{Obj: allocated("c1", "n1", "gpu-0")})
			},
			want: nodeFacts{Published: 1},
		},
		{
			name: "extended-resource claim is left to the pod's requests",
			events: func(x *Index) {
				x.UpdateSlice(slice("s1", "n1", driver, gpuDevice("gpu-0", "GPU-a")))
				c := allocated("c1", "n1", "gpu-0")
				c.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
				x.UpdateClaim(c)
			},
			want: nodeFacts{Published: 1},
		},
		{
			name: "other driver's devices are not GPUs",
			events: func(x *Index) {
				x.UpdateSlice(slice("s1", "n1", "nic.example.com", gpuDevice("nic-0", "GPU-a")))
			},
			want: nodeFacts{Published: -1},
		},
		{
			name: "deleted slice forgets its node",
			events: func(x *Index) {
				x.UpdateSlice(slice("s1", "n1", driver, gpuDevice("gpu-0", "GPU-a")))
				x.DeleteSlice(slice("s1", "n1", driver))
			},
			want: nodeFacts{Published: -1},
		},
		{
			name: "held device without a UUID counts",
			events: func(x *Index) {
				x.UpdateSlice(slice("s1", "n1", driver, resourceapi.Device{Name: "gpu-0"}))
				x.UpdateClaim(allocated("c1", "n1", "gpu-0"))
			},
			want: nodeFacts{Published: 1, Held: 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x := New(DefaultConfig())
			tc.events(x)
			if diff := cmp.Diff(tc.want, facts(x.Node("n1"), uuids...)); diff != "" {
				t.Errorf("node n1 (-want +got):\n%s", diff)
			}
			if x.Node("n2") != nil {
				t.Errorf("node n2: got %+v, want nothing", x.Node("n2"))
			}
		})
	}
}

func TestIndexCountsGPUNodes(t *testing.T) {
	x := New(DefaultConfig())
	x.UpdateSlice(slice("s1", "n1", driver, gpuDevice("gpu-0", "GPU-a")))
	x.UpdateSlice(slice("s2", "n2", driver, gpuDevice("gpu-0", "GPU-b")))
	x.UpdateSlice(slice("s2", "n2", driver)) // n2's GPU went away
	if diff := cmp.Diff([]any{1, true, false}, []any{x.GPUNodes(), x.HasGPUs("n1"), x.HasGPUs("n2")}); diff != "" {
		t.Errorf("GPU nodes, n1, n2 (-want +got):\n%s", diff)
	}
}

// withUID sets the pod's UID.
func withUID(p *v1.Pod, uid types.UID) *v1.Pod {
	p.UID = uid
	return p
}

func TestPodGPUs(t *testing.T) {
	withClaims := func(claims ...v1.PodResourceClaim) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		p.Spec.ResourceClaims = claims
		return p
	}
	direct := func(name string) v1.PodResourceClaim {
		return v1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To(name)}
	}
	templated := withClaims(v1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To("tmpl")})
	templated.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To("p-gpus-x7")}}
	x := New(DefaultConfig())
	x.UpdateSlice(slice("s1", "n1", driver, gpuDevice("gpu-0", "GPU-a"), gpuDevice("gpu-1", "GPU-b"), migDevice("gpu-2-mig", "MIG-x", "GPU-c")))
	x.UpdateClaim(allocated("two", "n1", "gpu-0", "gpu-1"))
	x.UpdateClaim(allocated("mig", "n1", "gpu-2-mig"))
	x.UpdateClaim(requesting("three", exactly("gpu.nvidia.com", 3)))
	x.UpdateClaim(requesting("default-count", exactly("gpu.nvidia.com", 0)))
	x.UpdateClaim(requesting("all", resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeAll}}))
	x.UpdateClaim(requesting("nic", exactly("nic.example.com", 2)))
	x.UpdateClaim(requesting("p-gpus-x7", exactly("gpu.nvidia.com", 2)))
	shared := allocated("shared", "n1", "gpu-0")
	shared.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "first-user", UID: "uid-first"}, {Resource: "pods", Name: "p", UID: "uid-p"}}
	x.UpdateClaim(shared)
	x.UpdateClaim(requesting("first", resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "big", DeviceClassName: "gpu.nvidia.com", Count: 4}, {Name: "small", DeviceClassName: "gpu.nvidia.com", Count: 2},
	}}))
	cases := []struct {
		name string
		pod  *v1.Pod
		want int64
	}{
		{"no claims", withClaims(), 0},
		{"allocated claim: its whole GPUs", withClaims(direct("two")), 2},
		{"allocated MIG device is no whole GPU", withClaims(direct("mig")), 0},
		{"unallocated claim: exact count of a GPU class", withClaims(direct("three")), 3},
		{"unset count is one", withClaims(direct("default-count")), 1},
		{"All mode counts once allocated", withClaims(direct("all")), 0},
		{"other class", withClaims(direct("nic")), 0},
		{"claims add up", withClaims(direct("two"), direct("three")), 5},
		{"template's claim by the pod's status", templated, 2},
		{"first available: the least", withClaims(direct("first")), 2},
		{"claim not yet seen", withClaims(direct("missing")), 0},
		{"shared claim: its GPUs are the first consumer's", withUID(withClaims(direct("shared")), "uid-first"), 1},
		{"shared claim: another consumer adds no GPU", withUID(withClaims(direct("shared")), "uid-p"), 0},
		{"shared claim: a pod not yet among its consumers adds none", withUID(withClaims(direct("shared")), "uid-new"), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, x.PodGPUs(tc.pod)); diff != "" {
				t.Errorf("PodGPUs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIndexFollowsDevicesAcrossSlicesOfAPool: a driver may move a device
// from one slice of its pool to another, and the informer may deliver the
// gaining slice's update first. The device stays known (here: the GPU its
// claim holds stays held), whichever slice is updated first.
func TestIndexFollowsDevicesAcrossSlicesOfAPool(t *testing.T) {
	for _, gainingFirst := range []bool{true, false} {
		x := New(DefaultConfig())
		two := func(name string, devs ...resourceapi.Device) *resourceapi.ResourceSlice {
			s := slice(name, "n1", driver, devs...)
			s.Spec.Pool.ResourceSliceCount = 2
			return s
		}
		x.UpdateSlice(two("s1", gpuDevice("gpu-0", "GPU-0"), gpuDevice("gpu-1", "GPU-1")))
		x.UpdateSlice(two("s2", gpuDevice("gpu-2", "GPU-2")))
		x.UpdateClaim(allocated("c", "n1", "gpu-1"))
		gaining, losing := two("s2", gpuDevice("gpu-1", "GPU-1"), gpuDevice("gpu-2", "GPU-2")), two("s1", gpuDevice("gpu-0", "GPU-0"))
		if gainingFirst {
			x.UpdateSlice(gaining)
			x.UpdateSlice(losing)
		} else {
			x.UpdateSlice(losing)
			x.UpdateSlice(gaining)
		}
		want := nodeFacts{Published: 3, Held: 1, HeldUUIDs: []string{"GPU-1"}}
		if diff := cmp.Diff(want, facts(x.Node("n1"), "GPU-0", "GPU-1", "GPU-2")); diff != "" {
			t.Errorf("gaining slice updated first %v: node (-want +got):\n%s", gainingFirst, diff)
		}
	}
}

// TestIndexCountsOnlyAPoolsNewestGeneration: a driver that republishes
// its pool bumps the pool's generation, and the old generation's slices
// are outdated until they are deleted (resource.k8s.io/v1
// ResourcePool.Generation: consumers use only the highest generation).
// A node's GPUs are those of its pools' newest generation, not both.
func TestIndexCountsOnlyAPoolsNewestGeneration(t *testing.T) {
	x := New(DefaultConfig())
	gen := func(name string, g int64, devs ...resourceapi.Device) *resourceapi.ResourceSlice {
		s := slice(name, "n1", driver, devs...)
		s.Spec.Pool.Generation = g
		return s
	}
	x.UpdateSlice(gen("old", 1, gpuDevice("gpu-0", "GPU-0"), gpuDevice("gpu-1", "GPU-1")))
	x.UpdateSlice(gen("new", 2, gpuDevice("gpu-0", "GPU-0"), gpuDevice("gpu-1", "GPU-1")))
	x.UpdateClaim(allocated("c", "n1", "gpu-0"))
	if diff := cmp.Diff(nodeFacts{Published: 2, Held: 1, HeldUUIDs: []string{"GPU-0"}}, facts(x.Node("n1"), "GPU-0", "GPU-1")); diff != "" {
		t.Errorf("both generations listed: node (-want +got):\n%s", diff)
	}
	x.DeleteSlice(gen("old", 1))
	if diff := cmp.Diff(nodeFacts{Published: 2, Held: 1, HeldUUIDs: []string{"GPU-0"}}, facts(x.Node("n1"), "GPU-0", "GPU-1")); diff != "" {
		t.Errorf("old generation deleted: node (-want +got):\n%s", diff)
	}
	// An outdated slice that arrives late counts for nothing either.
	x.UpdateSlice(gen("older", 0, gpuDevice("gpu-0", "GPU-0"), gpuDevice("gpu-9", "GPU-9")))
	if diff := cmp.Diff(nodeFacts{Published: 2, Held: 1, HeldUUIDs: []string{"GPU-0"}}, facts(x.Node("n1"), "GPU-0", "GPU-1")); diff != "" {
		t.Errorf("an older generation added late: node (-want +got):\n%s", diff)
	}
}

// TestPodHeldGPUs: the GPUs a pod's allocated claims hold, by UUID, with
// the compute slices of its MIG devices on each (a MIG device's GPU is its
// parentUUID); an unallocated claim, a device without a UUID and a shared
// claim's later consumer hold none.
func TestPodHeldGPUs(t *testing.T) {
	x := New(DefaultConfig())
	mig3 := migDevice("gpu-2-mig-1", "MIG-y", "GPU-c")
	mig3.Attributes[AttributeProfile] = resourceapi.DeviceAttribute{StringValue: ptr.To("3g.40gb")}
	noUUID := resourceapi.Device{Name: "gpu-9"}
	x.UpdateSlice(slice("s1", "n1", driver, gpuDevice("gpu-0", "GPU-a"), gpuDevice("gpu-1", "GPU-b"),
		migDevice("gpu-2-mig-0", "MIG-x", "GPU-c"), mig3, noUUID))
	x.UpdateClaim(allocated("two", "n1", "gpu-0", "gpu-1"))
	x.UpdateClaim(allocated("migs", "n1", "gpu-2-mig-0", "gpu-2-mig-1"))
	x.UpdateClaim(allocated("anon", "n1", "gpu-9"))
	x.UpdateClaim(requesting("three", exactly("gpu.nvidia.com", 3)))
	shared := allocated("shared", "n1", "gpu-0")
	shared.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "first-user", UID: "uid-first"}}
	x.UpdateClaim(shared)
	pod := func(uid types.UID, names ...string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: uid}}
		for _, n := range names {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: n, ResourceClaimName: ptr.To(n)})
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want map[string]int64
	}{
		{"whole GPUs", pod("", "two"), map[string]int64{"GPU-a": 0, "GPU-b": 0}},
		{"MIG devices: their GPU, their slices", pod("", "migs"), map[string]int64{"GPU-c": 4}},
		{"both", pod("", "two", "migs"), map[string]int64{"GPU-a": 0, "GPU-b": 0, "GPU-c": 4}},
		{"a device without a UUID", pod("", "anon"), nil},
		{"unallocated", pod("", "three"), nil},
		{"shared claim, first consumer", pod("uid-first", "shared"), map[string]int64{"GPU-a": 0}},
		{"shared claim, another pod", pod("uid-other", "shared"), nil},
		{"no claims", pod(""), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, x.PodHeldGPUs(tc.pod)); diff != "" {
				t.Errorf("PodHeldGPUs (-want +got):\n%s", diff)
			}
		})
	}
}
