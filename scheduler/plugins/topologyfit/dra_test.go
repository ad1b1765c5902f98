// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/apis/config"
)

const draDriver = "gpu.nvidia.com"

// fixtureUUID is the UUID test/fixtures gives GPU i.
func fixtureUUID(i int) string {
	return fmt.Sprintf("GPU-5ab4f5d1-8c3e-%04x-b1f0-6a2e9c4d7e%02x", i, i)
}

// gpuSlice publishes gpus whole GPUs of node through NVIDIA's DRA driver,
// device gpu-i with the UUID of the node's telemetry GPU i.
func gpuSlice(node string, gpus int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: draDriver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
	}}
	for i := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"uuid": {StringValue: ptr.To(fixtureUUID(i))},
		}})
	}
	return s
}

// allocatedClaim is claim name allocated GPUs idx of node.
func allocatedClaim(name, node string, idx ...int) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, i := range idx {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: draDriver, Pool: node, Device: fmt.Sprintf("gpu-%d", i)})
	}
	return c
}

// claimRequest is an unallocated claim asking for gpus whole GPUs.
func claimRequest(name string, gpus int64) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: gpus}}}
	return c
}

// withClaim gives a pod the claim name.
func withClaim(p *v1.Pod, name string) *v1.Pod {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To(name)})
	return p
}

func TestFilterKeepsWholeGPUPodsOffClaimedGPUs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		claims []*resourceapi.ResourceClaim
		pod    *v1.Pod
		want   *fwk.Status
	}{
		{name: "no claims", pod: makePod("p", 4, "1", "1Gi")},
		{
			name:   "claims hold 6 of 8 GPUs",
			claims: []*resourceapi.ResourceClaim{allocatedClaim("a", "n1", 0, 1, 2, 3), allocatedClaim("b", "n1", 4, 5)},
			pod:    makePod("p", 4, "1", "1Gi"),
			// 8 matching - 6 held = 2 < 4
			want: unschedulable("node has 2 healthy unallocated GPUs, pod needs 4 (2 of 8 GPUs healthy and matching, 0 requested by pods on the node, 6 held by ResourceClaims)"),
		},
		{
			name:   "the free NUMA node is the one claims left",
			claims: []*resourceapi.ResourceClaim{allocatedClaim("a", "n1", 0, 1, 2, 3)},
			pod:    makePod("p", 4, "1", "1Gi", numaPolicy, singleNUMA),
		},
		{
			name:   "claims hold a GPU on each NUMA node",
			claims: []*resourceapi.ResourceClaim{allocatedClaim("a", "n1", 0, 4)},
			pod:    makePod("p", 4, "1", "1Gi", numaPolicy, singleNUMA),
			want:   unschedulable("no NUMA node has 1 free CPUs, 1Gi free memory and 4 free GPUs: node 0 has 48 CPUs, 383.0Gi, 3 GPUs; node 1 has 48 CPUs, 383.0Gi, 3 GPUs"),
		},
		{
			name:   "a claim pod is DynamicResources' to filter",
			claims: []*resourceapi.ResourceClaim{allocatedClaim("a", "n1", 0, 1, 2, 3, 4, 5, 6, 7), claimRequest("mine", 4)},
			pod:    withClaim(makePod("p", 0, "1", "1Gi"), "mine"),
			want:   fwk.NewStatus(fwk.Skip), // PreFilter: nothing to check
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pl := newPlugin(config.StaleTelemetryIgnore, telNode("n1", 2, h100s(8, 4)))
			pl.book.Claims().UpdateSlice(gpuSlice("n1", 8))
			for _, c := range tc.claims {
				pl.book.Claims().UpdateClaim(c)
			}
			if diff := cmp.Diff(tc.want, filter(pl, tc.pod, nodeInfo("n1", 0))); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScoreCountsClaimGPUs: a pod whose claim asks for 2 GPUs scores by
// the free GPUs as a pod requesting 2 by extended resource does: on n2,
// where claims hold 6 of 8, it fills the free 2 (pack 100); on n1, 2 of 8
// (pack 25). Neither node publishes NVLink or PCIe roots, so both sit in
// the aligned band [12, 24] of gpuPodScoreTogether: n2 24, n1
// 12+25*12/100 = 15.
func TestScoreCountsClaimGPUs(t *testing.T) {
	t.Parallel()
	nodes := []scoreNode{
		{name: "n1", tel: telNode("n1", 2, h100s(8, 4))},
		{name: "n2", tel: telNode("n2", 2, h100s(8, 4))},
	}
	pl := scorePlugin(50, 4000, nodes)
	pl.book.Claims().UpdateSlice(gpuSlice("n2", 8))
	pl.book.Claims().UpdateClaim(allocatedClaim("held", "n2", 0, 1, 2, 3, 4, 5))
	pl.book.Claims().UpdateClaim(claimRequest("mine", 2))
	got, st := scoreAll(t, pl, withClaim(makePod("p", 0, "1", "1Gi"), "mine"), nodes)
	if !st.IsSuccess() {
		t.Fatalf("PreScore: %v", st)
	}
	if diff := cmp.Diff(map[string]int64{"n1": 15, "n2": 24}, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

// TestDRAGPUNodesAreGPUNodes: a node whose GPUs only ResourceSlices
// publish (no allocatable GPU, no GPU telemetry) keeps CPUs for its free
// GPUs as a device-plugin GPU node does: 4 GPUs * 32 CPUs each = all of
// its 128, so a CPU pod is penalized there (100 * (100-50)/100 = 50).
func TestDRAGPUNodesAreGPUNodes(t *testing.T) {
	t.Parallel()
	nodes := []scoreNode{{name: "cpu"}, {name: "dra"}}
	pl := scorePlugin(50, 32000, nodes)
	pl.book.Claims().UpdateSlice(gpuSlice("dra", 4))
	got, st := scoreAll(t, pl, makePod("p", 0, "1", "1Gi"), nodes)
	if !st.IsSuccess() {
		t.Fatalf("PreScore: %v", st)
	}
	if diff := cmp.Diff(map[string]int64{"cpu": 100, "dra": 50}, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

func TestClaimHints(t *testing.T) {
	t.Parallel()
	gpuPod := makePod("p", 2, "1", "1Gi")
	cpuPod := makePod("p", 0, "1", "1Gi")
	held := allocatedClaim("a", "n1", 0, 1)
	freed := claimRequest("a", 2)
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		old, new any
		hint     func(pl *TopologyFit) fwk.QueueingHintFn
		want     fwk.QueueingHint
	}{
		{"claim deallocated", gpuPod, held, freed, claimHint, fwk.Queue},
		{"claim deleted", gpuPod, held, nil, claimHint, fwk.Queue},
		{"claim allocated", gpuPod, freed, held, claimHint, fwk.QueueSkip},
		{"claim deallocated, CPU pod", cpuPod, held, freed, claimHint, fwk.QueueSkip},
		{"slice lost GPUs", gpuPod, gpuSlice("n1", 8), gpuSlice("n1", 6), sliceHint, fwk.Queue},
		{"slice deleted", gpuPod, gpuSlice("n1", 8), nil, sliceHint, fwk.Queue},
		{"slice added", gpuPod, nil, gpuSlice("n1", 8), sliceHint, fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pl := newPlugin(config.StaleTelemetryIgnore)
			got, err := tc.hint(pl)(klog.Background(), tc.pod, tc.old, tc.new)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func claimHint(pl *TopologyFit) fwk.QueueingHintFn { return pl.claimHint }
func sliceHint(pl *TopologyFit) fwk.QueueingHintFn { return pl.sliceHint }

// fakeTracker is the framework's SharedDRAManager claims, as
// DynamicResources leaves them after its Reserve.
type fakeTracker map[string]*resourceapi.ResourceClaim

func (f fakeTracker) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := f[namespace+"/"+name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("claim %s/%s not found", namespace, name)
}

// TestReserveHoldsTheClaimsDevicesBeforeTheInformerDoes: between
// DynamicResources' Reserve and the API write of the allocation, only the
// SharedDRAManager knows which GPUs a claim pod took. A pod requesting
// nvidia.com/gpu on a node that publishes its GPUs both ways must keep off
// them from TopologyFit's Reserve on, and get them back on Unreserve.
func TestReserveHoldsTheClaimsDevicesBeforeTheInformerDoes(t *testing.T) {
	t.Parallel()
	pl := newPlugin(config.StaleTelemetryIgnore, telNode("n1", 1, h100s(4, 4)))
	pl.book.Claims().UpdateSlice(gpuSlice("n1", 4))
	pl.book.Claims().UpdateClaim(claimRequest("mine", 2)) // as the informer has it
	pl.draTracker = fakeTracker{"default/mine": allocatedClaim("mine", "n1", 0, 1)}
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if err := indexer.Add(claimRequest("mine", 2)); err != nil {
		t.Fatal(err)
	}
	pl.draLister = resourcelisters.NewResourceClaimLister(indexer)
	claimPod := withClaim(makePod("claimer", 0, "1", "1Gi"), "mine")
	wholePod := makePod("whole", 3, "1", "1Gi")

	if st := filter(pl, wholePod, nodeInfo("n1", 0)); st != nil {
		t.Fatalf("before Reserve: Filter = %v, want the 4 GPUs free", st)
	}
	if st := pl.Reserve(context.Background(), nil, claimPod, "n1"); st != nil {
		t.Fatalf("Reserve = %v", st)
	}
	want := unschedulable("node has 2 healthy unallocated GPUs, pod needs 3 (2 of 4 GPUs healthy and matching, 0 requested by pods on the node, 2 held by ResourceClaims)")
	if diff := cmp.Diff(want, filter(pl, wholePod, nodeInfo("n1", 0))); diff != "" {
		t.Errorf("after Reserve, Filter (-want +got):\n%s", diff)
	}
	pl.Unreserve(context.Background(), nil, claimPod, "n1")
	if st := filter(pl, wholePod, nodeInfo("n1", 0)); st != nil {
		t.Errorf("after Unreserve: Filter = %v, want the 4 GPUs free again", st)
	}
}

// TestFilterHoldsClaimPodsToTheNUMAPolicy: a single-numa-node pod whose
// claim asks for 4 GPUs needs a NUMA node with 4 free GPUs, as the same
// pod asking nvidia.com/gpu: 4 does; GPUs other claims hold are not free;
// a claim already allocated has its devices, so only its CPUs and memory
// are checked.
func TestFilterHoldsClaimPodsToTheNUMAPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		numa   int
		gpus   []gpu
		claims []*resourceapi.ResourceClaim
		pod    *v1.Pod
		want   *fwk.Status
	}{
		{
			name: "2 GPUs a NUMA node, by extended resource",
			numa: 4, gpus: h100s(8, 2),
			pod:  makePod("p", 4, "1", "1Gi", numaPolicy, singleNUMA),
			want: unschedulable("no NUMA node has 1 free CPUs, 1Gi free memory and 4 free GPUs: node 0 has 48 CPUs, 383.0Gi, 2 GPUs; node 1 has 48 CPUs, 383.0Gi, 2 GPUs; node 2 has 48 CPUs, 383.0Gi, 2 GPUs; node 3 has 48 CPUs, 383.0Gi, 2 GPUs"),
		},
		{
			name: "2 GPUs a NUMA node, by claim",
			numa: 4, gpus: h100s(8, 2),
			claims: []*resourceapi.ResourceClaim{claimRequest("mine", 4)},
			pod:    withClaim(makePod("p", 0, "1", "1Gi", numaPolicy, singleNUMA), "mine"),
			want:   unschedulable("no NUMA node has 1 free CPUs, 1Gi free memory and 4 free GPUs: node 0 has 48 CPUs, 383.0Gi, 2 GPUs; node 1 has 48 CPUs, 383.0Gi, 2 GPUs; node 2 has 48 CPUs, 383.0Gi, 2 GPUs; node 3 has 48 CPUs, 383.0Gi, 2 GPUs"),
		},
		{
			name: "4 GPUs a NUMA node, by claim",
			numa: 2, gpus: h100s(8, 4),
			claims: []*resourceapi.ResourceClaim{claimRequest("mine", 4)},
			pod:    withClaim(makePod("p", 0, "1", "1Gi", numaPolicy, singleNUMA), "mine"),
		},
		{
			name: "other claims hold a GPU on each NUMA node",
			numa: 2, gpus: h100s(8, 4),
			claims: []*resourceapi.ResourceClaim{allocatedClaim("a", "n1", 0, 4), claimRequest("mine", 4)},
			pod:    withClaim(makePod("p", 0, "1", "1Gi", numaPolicy, singleNUMA), "mine"),
			want:   unschedulable("no NUMA node has 1 free CPUs, 1Gi free memory and 4 free GPUs: node 0 has 48 CPUs, 383.0Gi, 3 GPUs; node 1 has 48 CPUs, 383.0Gi, 3 GPUs"),
		},
		{
			name: "its own claim already holds 4 GPUs",
			numa: 4, gpus: h100s(8, 2),
			claims: []*resourceapi.ResourceClaim{allocatedClaim("mine", "n1", 0, 1, 2, 3)},
			pod:    withClaim(makePod("p", 0, "1", "1Gi", numaPolicy, singleNUMA), "mine"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pl := newPlugin(config.StaleTelemetryIgnore, telNode("n1", tc.numa, tc.gpus))
			pl.book.Claims().UpdateSlice(gpuSlice("n1", len(tc.gpus)))
			for _, c := range tc.claims {
				pl.book.Claims().UpdateClaim(c)
			}
			alloc := int64(0)
			if tc.pod.Spec.ResourceClaims == nil {
				alloc = int64(len(tc.gpus))
			}
			if diff := cmp.Diff(tc.want, filter(pl, tc.pod, nodeInfo("n1", alloc))); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}
