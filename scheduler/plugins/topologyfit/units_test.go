// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/apis/config"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

const (
	a100x80       = "NVIDIA A100-SXM4-80GB"
	a100x80Memory = 85_899_345_920 // 80Gi
	slice10gb     = 10_200_547_328 // 9728Mi: NVML's 1g.10gb
	mig1g         = "nvidia.com/mig-1g.10gb"
)

// a100x80s returns n healthy A100-80GBs, perNUMA to a NUMA node.
func a100x80s(n, perNUMA int) []gpu {
	gs := make([]gpu, n)
	for i := range gs {
		gs[i] = gpu{numa: int32(i / perNUMA), healthy: true, model: a100x80, memory: a100x80Memory}
	}
	return gs
}

// migMode puts the GPUs idx in MIG mode, each cut into 7 1g.10gb devices
// (allocations unpublished).
func migMode(idx ...int) func(*telemetryv1alpha1.NodeTelemetryStatus) {
	return func(st *telemetryv1alpha1.NodeTelemetryStatus) {
		for _, i := range idx {
			st.GPUs[i].MIGEnabled = ptr.To(true)
			st.GPUs[i].UtilizationPercent = nil
			st.GPUs[i].MIG = &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7, Profiles: []telemetryv1alpha1.MIGProfile{
				{Profile: "1g.10gb", Count: 7, MemoryBytes: slice10gb},
			}}
		}
	}
}

// allMIG is migMode on all 8 GPUs.
var allMIG = migMode(0, 1, 2, 3, 4, 5, 6, 7)

// allocatedGPUs publishes each GPU's whole-GPU allocation.
func allocatedGPUs(held ...bool) func(*telemetryv1alpha1.NodeTelemetryStatus) {
	return func(st *telemetryv1alpha1.NodeTelemetryStatus) {
		for i, h := range held {
			st.GPUs[i].Allocated = ptr.To(h)
		}
	}
}

// linkedPairs links GPUs (0,1), (2,3), ... by direct NVLinks, no NVSwitch.
func linkedPairs(st *telemetryv1alpha1.NodeTelemetryStatus) {
	for i := range st.GPUs {
		peer := int32(i ^ 1)
		st.GPUs[i].NVLink = &telemetryv1alpha1.GPUNVLink{ActiveLinks: 12, Peers: []int32{peer}, Group: int32(i &^ 1)}
	}
}

// pcieRoots puts each GPU under the PCIe root named.
func pcieRoots(roots ...string) func(*telemetryv1alpha1.NodeTelemetryStatus) {
	return func(st *telemetryv1alpha1.NodeTelemetryStatus) {
		for i, r := range roots {
			st.GPUs[i].PCIeRoot = r
		}
	}
}

// resourcePod returns a pod requesting n of resource (requests and
// limits), 1 CPU and 1Gi, with annotations as key, value pairs.
func resourcePod(name string, res v1.ResourceName, n int64, annotations ...string) *v1.Pod {
	p := makePod(name, 0, "1", "1Gi", annotations...)
	q := *resource.NewQuantity(n, resource.DecimalSI)
	p.Spec.Containers[0].Resources.Requests[res] = q
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{res: q}
	return p
}

// nodeInfoAlloc is nodeInfo with the extended resources alloc allocatable.
func nodeInfoAlloc(name string, alloc map[v1.ResourceName]int64, pods ...*v1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	all := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("128"),
		v1.ResourceMemory: resource.MustParse("2Ti"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	for r, n := range alloc {
		all[r] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: all, Capacity: all}})
	return ni
}

// On a node of 8 A100-80GB in MIG mode, 7 1g.10gb devices each, under
// the device plugin's single strategy (nvidia.com/gpu counts MIG devices):
// 56 one-slice pods fit, one after the other, and the 57th is refused.
func TestMIGSingleStrategyFillsEverySlice(t *testing.T) {
	t.Parallel()
	pl := newPlugin(config.StaleTelemetryReject, telNode("n1", 2, a100x80s(8, 4), allMIG))
	alloc := map[v1.ResourceName]int64{gpuResource: 56}
	var pods []*v1.Pod
	for i := 1; i <= 56; i++ {
		if st := filter(pl, makePod("p", 1, "1", "1Gi"), nodeInfoAlloc("n1", alloc, pods...)); !st.IsSuccess() {
			t.Fatalf("slice pod %d of 56 refused: %v", i, st)
		}
		pods = append(pods, onNode(makePod("running", 1, "1", "1Gi"), "n1"))
	}
	got := filter(pl, makePod("p", 1, "1", "1Gi"), nodeInfoAlloc("n1", alloc, pods...))
	want := unschedulable("node has 0 healthy unallocated nvidia.com/gpu MIG devices, pod needs 1 (56 of 56 nvidia.com/gpu MIG devices healthy and matching, 56 requested by pods on the node)")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("57th slice pod (-want +got):\n%s", diff)
	}
}

func TestMIGUnits(t *testing.T) {
	t.Parallel()
	singleAlloc := map[v1.ResourceName]int64{gpuResource: 56}
	mixedAlloc := map[v1.ResourceName]int64{mig1g: 56}
	// GPUs 2, 3, 6, 7 in MIG mode: 2 whole GPUs and 14 slices per NUMA
	// node.
	halfMIG := telNode("n1", 2, a100x80s(8, 4), migMode(2, 3, 6, 7))
	halfAlloc := map[v1.ResourceName]int64{gpuResource: 4, mig1g: 28}
	for _, tc := range []struct {
		name  string
		tel   bool // halfMIG instead of all-MIG
		pod   *v1.Pod
		want  *fwk.Status
		alloc map[v1.ResourceName]int64
	}{
		{name: "single strategy: 9 slices on an empty node", alloc: singleAlloc, pod: makePod("p", 9, "1", "1Gi")},
		{name: "single strategy: 5 slices on one NUMA node (28 each)", alloc: singleAlloc, pod: makePod("p", 5, "1", "1Gi", numaPolicy, singleNUMA)},
		{
			name: "single strategy: gpu-min-memory compares the slice's memory", alloc: singleAlloc,
			pod:  makePod("p", 1, "1", "1Gi", gpuMinMem, "40Gi"),
			want: unschedulable("node has 0 healthy unallocated nvidia.com/gpu MIG devices with >= 40Gi, pod needs 1 (0 of 56 nvidia.com/gpu MIG devices healthy and matching, 0 requested by pods on the node)"),
		},
		{name: "mixed strategy: a slice", alloc: mixedAlloc, pod: resourcePod("p", mig1g, 1)},
		{name: "mixed strategy: the model annotation matches the parent GPU", alloc: mixedAlloc, pod: resourcePod("p", mig1g, 1, gpuModel, "a100")},
		{
			name: "mixed strategy: the model annotation is honoured", alloc: mixedAlloc,
			pod:  resourcePod("p", mig1g, 1, gpuModel, "h100"),
			want: unschedulable(`node has 0 healthy unallocated nvidia.com/mig-1g.10gb devices matching model "h100", pod needs 1 (0 of 56 nvidia.com/mig-1g.10gb devices healthy and matching, 0 requested by pods on the node)`),
		},
		{
			name: "mixed strategy: a profile the node does not have", alloc: mixedAlloc,
			pod:  resourcePod("p", "nvidia.com/mig-3g.40gb", 1),
			want: unschedulable("node has 0 healthy unallocated nvidia.com/mig-3g.40gb devices, pod needs 1 (0 of 0 nvidia.com/mig-3g.40gb devices healthy and matching, 0 requested by pods on the node)"),
		},
		{
			name: "mixed strategy: an all-MIG node has no whole GPU", alloc: mixedAlloc,
			pod:  makePod("p", 4, "1", "1Gi"),
			want: unschedulable("node has 0 healthy unallocated GPUs, pod needs 4 (0 of 0 GPUs healthy and matching, 0 requested by pods on the node; 8 GPUs in MIG mode)"),
		},
		{name: "half-MIG node: 4 whole GPUs", tel: true, alloc: halfAlloc, pod: makePod("p", 4, "1", "1Gi")},
		{
			name: "half-MIG node: 5 whole GPUs", tel: true, alloc: halfAlloc,
			pod:  makePod("p", 5, "1", "1Gi"),
			want: unschedulable("node has 4 healthy unallocated GPUs, pod needs 5 (4 of 4 GPUs healthy and matching, 0 requested by pods on the node; 4 GPUs in MIG mode)"),
		},
		{
			// 2 whole GPUs on each NUMA node.
			name: "half-MIG node: 3 whole GPUs on one NUMA node", tel: true, alloc: halfAlloc,
			pod:  makePod("p", 3, "8", "32Gi", numaPolicy, singleNUMA),
			want: unschedulable("no NUMA node has 8 free CPUs, 32Gi free memory and 3 free GPUs: node 0 has 48 CPUs, 383.0Gi, 2 GPUs; node 1 has 48 CPUs, 383.0Gi, 2 GPUs"),
		},
		{name: "half-MIG node: 14 slices on one NUMA node", tel: true, alloc: halfAlloc, pod: resourcePod("p", mig1g, 14, numaPolicy, singleNUMA)},
		{
			name: "half-MIG node: 15 slices on one NUMA node", tel: true, alloc: halfAlloc,
			pod:  resourcePod("p", mig1g, 15, numaPolicy, singleNUMA),
			want: unschedulable("no NUMA node has 1 free CPUs, 1Gi free memory and 15 free nvidia.com/mig-1g.10gb devices: node 0 has 48 CPUs, 383.0Gi, 14 nvidia.com/mig-1g.10gb devices; node 1 has 48 CPUs, 383.0Gi, 14 nvidia.com/mig-1g.10gb devices"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tel := telNode("n1", 2, a100x80s(8, 4), allMIG)
			if tc.tel {
				tel = halfMIG
			}
			pl := newPlugin(config.StaleTelemetryReject, tel)
			got := filter(pl, tc.pod, nodeInfoAlloc("n1", tc.alloc))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Filter (-want +got):\n%s\nmessage: %s", diff, got.Message())
			}
		})
	}
}

// NVIDIA's device plugin advertises a MIG profile with each "+" made a "."
// (a resource name may not hold a "+"; k8s-device-plugin,
// internal/rm/rm.go): the media-extensions device the agent publishes as
// "1g.10gb+me" is the resource nvidia.com/mig-1g.10gb.me. A pod asking
// for it fits where one is free, and is refused where it is taken.
func TestMIGMediaExtensionsResource(t *testing.T) {
	t.Parallel()
	const me = "nvidia.com/mig-1g.10gb.me"
	withME := func(allocated int32) func(*telemetryv1alpha1.NodeTelemetryStatus) {
		return func(st *telemetryv1alpha1.NodeTelemetryStatus) {
			st.GPUs[0].MIGEnabled = ptr.To(true)
			st.GPUs[0].UtilizationPercent = nil
			st.GPUs[0].MIG = &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7, Profiles: []telemetryv1alpha1.MIGProfile{
				{Profile: "1g.10gb+me", Count: 1, MemoryBytes: slice10gb, Allocated: ptr.To(allocated)},
				{Profile: "1g.10gb", Count: 6, MemoryBytes: slice10gb, Allocated: ptr.To(int32(0))},
			}}
		}
	}
	alloc := map[v1.ResourceName]int64{gpuResource: 7, me: 1, mig1g: 6}
	free := newPlugin(config.StaleTelemetryReject, telNode("n1", 2, a100x80s(8, 4), withME(0)))
	if st := filter(free, resourcePod("p", me, 1), nodeInfoAlloc("n1", alloc)); !st.IsSuccess() {
		t.Errorf("the free media-extensions device: %v", st)
	}
	taken := newPlugin(config.StaleTelemetryReject, telNode("n1", 2, a100x80s(8, 4), withME(1)))
	got := filter(taken, resourcePod("p", me, 1), nodeInfoAlloc("n1", alloc))
	want := unschedulable("node has 0 healthy unallocated nvidia.com/mig-1g.10gb.me devices, pod needs 1 (1 of 1 nvidia.com/mig-1g.10gb.me devices healthy and matching, 0 requested by pods on the node, 1 allocated by the kubelet in the sample)")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the taken media-extensions device (-want +got):\n%s", diff)
	}
}

// Which GPUs the pods on a node hold comes from the published allocations
// where the node publishes them, else from the guess that they fill the
// lowest NUMA node first. Pods placed since the sample (requested beyond
// what the sample shows allocated) are still placed by the guess.
func TestHeldGPUsFromPublishedAllocations(t *testing.T) {
	t.Parallel()
	pod := makePod("p", 4, "8", "32Gi", numaPolicy, singleNUMA)
	holding := func(gpus ...int64) []*v1.Pod {
		var pods []*v1.Pod
		for _, g := range gpus {
			pods = append(pods, onNode(makePod("running", g, "1", "1Gi"), "n1"))
		}
		return pods
	}
	refused := func(free0, free1 int) *fwk.Status {
		return unschedulable(fmt.Sprintf("no NUMA node has 8 free CPUs, 32Gi free memory and 4 free GPUs: node 0 has 48 CPUs, 383.0Gi, %d GPUs; node 1 has 48 CPUs, 383.0Gi, %d GPUs", free0, free1))
	}
	for _, tc := range []struct {
		name string
		mods []func(*telemetryv1alpha1.NodeTelemetryStatus)
		pods []*v1.Pod
		want *fwk.Status
	}{
		// The guess: the 4 held GPUs fill NUMA node 0; node 1 has 4.
		{name: "unpublished: guessed on NUMA node 0", pods: holding(4)},
		{
			// GPUs 0, 1 (node 0) and 4, 5 (node 1) allocated.
			name: "published: 2 held on each NUMA node",
			mods: []func(*telemetryv1alpha1.NodeTelemetryStatus){allocatedGPUs(true, true, false, false, true, true, false, false)},
			pods: holding(4),
			want: refused(2, 2),
		},
		{
			// GPUs 4, 5 allocated in the sample; 2 more placed since,
			// guessed on NUMA node 0.
			name: "published 2 on node 1, 2 placed since",
			mods: []func(*telemetryv1alpha1.NodeTelemetryStatus){allocatedGPUs(false, false, false, false, true, true, false, false)},
			pods: holding(2, 2),
			want: refused(2, 2),
		},
		{
			// GPUs 4..7 allocated in the sample (by pods the scheduler
			// may not know): they stay held; NUMA node 0 has 4.
			name: "published on NUMA node 1, no pod requesting",
			mods: []func(*telemetryv1alpha1.NodeTelemetryStatus){allocatedGPUs(false, false, false, false, true, true, true, true)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pl := newPlugin(config.StaleTelemetryReject, telNode("n1", 2, h100s(8, 4), tc.mods...))
			got := filter(pl, pod, nodeInfo("n1", 8, tc.pods...))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Filter (-want +got):\n%s\nmessage: %s", diff, got.Message())
			}
		})
	}
}

// A 2-GPU pod prefers a node where 2 free GPUs share an NVLink group, then
// one where they share a PCIe root. The kubelet's device plugin, not the
// scheduler, picks the node's GPUs: the score can only choose the node.
func TestScorePrefersLinkedGPUs(t *testing.T) {
	t.Parallel()
	roots := pcieRoots("pci0000:00", "pci0000:00", "pci0000:00", "pci0000:00", "pci0000:80", "pci0000:80", "pci0000:80", "pci0000:80")
	// Free GPUs 0 and 1 (a linked pair), or 0 and 2 (not linked), all
	// others allocated; every free pair is on NUMA node 0.
	freeLinked := allocatedGPUs(false, false, true, true, true, true, true, true)
	freeUnlinked := allocatedGPUs(false, true, false, true, true, true, true, true)
	nodes := []scoreNode{
		{name: "linked", tel: telNode("linked", 2, h100s(8, 4), linkedPairs, roots, freeLinked), allocGPUs: 8, held: []int64{6}},
		{name: "unlinked", tel: telNode("unlinked", 2, h100s(8, 4), linkedPairs, roots, freeUnlinked), allocGPUs: 8, held: []int64{6}},
		{name: "no-layout", tel: telNode("no-layout", 2, h100s(8, 4), freeUnlinked), allocGPUs: 8, held: []int64{6}},
	}
	got, st := scoreAll(t, scorePlugin(0, 0, nodes), makePod("p", 2, "1", "1Gi"), nodes)
	if !st.IsSuccess() {
		t.Fatalf("PreScore: %v", st)
	}
	// pack 100*2/2 = 100 everywhere. Bands (link, root, NUMA-aligned):
	// 0b111 [88, 100], 0b011 [37, 49], 0b001 [12, 24].
	want := map[string]int64{"linked": 100, "unlinked": 49, "no-layout": 24}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

// TestGPUReserveCountsMIGDevicesAsTheirGPUs: a GPU keeps its CPUs
// (gpuCPUReserveMilli, 4 a GPU) for GPU pods whether it runs one pod or
// is cut into MIG devices, and what pods hold of it counts by compute
// slices: 7 1g devices are one GPU. A pod asking for 105 of 128 CPUs
// loses its score on a free node of 8 GPUs, whole or all MIG (32 kept >
// 23 left), and on an all-MIG node whose 2 pods hold 8 devices (2 GPUs
// held, 6 free: 24 kept > 21 left); it keeps it on an all-MIG node whose
// pods hold 49 of its 56 devices (one GPU free: 4 kept). Counting MIG
// devices as GPUs, the reserve was gone once 8 devices (of 56) were held;
// counting only whole GPUs, an all-MIG node kept no CPUs at all, and CPU
// pods crowded out the devices' pods.
func TestGPUReserveCountsMIGDevicesAsTheirGPUs(t *testing.T) {
	t.Parallel()
	nodes := []scoreNode{
		{name: "whole", tel: telNode("whole", 2, a100x80s(8, 4)), allocGPUs: 8},
		{name: "mig-free", tel: telNode("mig-free", 2, a100x80s(8, 4), allMIG), allocGPUs: 56},
		{name: "mig-8-held", tel: telNode("mig-8-held", 2, a100x80s(8, 4), allMIG), allocGPUs: 56, held: []int64{4, 4}},
		{name: "mig-49-held", tel: telNode("mig-49-held", 2, a100x80s(8, 4), allMIG), allocGPUs: 56, held: []int64{7, 7, 7, 7, 7, 7, 7}},
		{name: "cpu", tel: telNode("cpu", 2, nil)},
	}
	pl := scorePlugin(50, 4000, nodes)
	got, st := scoreAll(t, pl, makePod("p", 0, "105", "1Gi"), nodes)
	if !st.IsSuccess() {
		t.Fatalf("PreScore: %v", st)
	}
	want := map[string]int64{"whole": 50, "mig-free": 50, "mig-8-held": 50, "mig-49-held": 100, "cpu": 100}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

// TestScoreMIGDevicesAreTogetherOnlyOnOneGPU: MIG devices have no
// peer-to-peer, over NVLink or PCIe, even between the GPU instances of one
// GPU (NVIDIA's MIG User Guide, "Application Considerations"), so MIG
// devices are never linked: 4 devices that one GPU's free devices can hold
// share its PCIe link and sit at the root level, below 4 NVLinked whole
// GPUs; devices spread over GPUs sit together at no level, whatever
// NVSwitch joins the GPUs. Before, one GPU's devices counted as linked,
// level with NVSwitched whole GPUs, and TopologyFit's band outweighed
// EnergyAware's joules for a 4-GPU training job that the single
// strategy's 4 1g devices run at 1/7 of the pace (the sandbox's gpu-mixed
// fleet, train-1: 420 minutes against 60); and devices of 8 NVSwitched
// GPUs, 2 free on each, counted as linked too:
//
//	units_test.go:366: scores (-want +got):
//	      map[string]int64{
//	      	"linked":     94,
//	    - 	"mig-across": 15,
//	    + 	"mig-across": 91,
//	    - 	"slices":     37,
//	    + 	"slices":     88,
//	      }
func TestScoreMIGDevicesAreTogetherOnlyOnOneGPU(t *testing.T) {
	t.Parallel()
	roots := pcieRoots("pci0000:00", "pci0000:00", "pci0000:00", "pci0000:00", "pci0000:80", "pci0000:80", "pci0000:80", "pci0000:80")
	nvswitch := func(st *telemetryv1alpha1.NodeTelemetryStatus) {
		for i := range st.GPUs {
			st.GPUs[i].NVLink = &telemetryv1alpha1.GPUNVLink{ActiveLinks: 12, NVSwitch: true, Group: 0}
		}
	}
	// Each GPU's 7 devices, 5 of them allocated: 2 free on each GPU.
	twoFreeEach := func(st *telemetryv1alpha1.NodeTelemetryStatus) {
		for i := range st.GPUs {
			st.GPUs[i].MIG.Profiles[0].Allocated = ptr.To[int32](5)
		}
	}
	nodes := []scoreNode{
		{name: "slices", tel: telNode("slices", 2, a100x80s(8, 4), allMIG, roots), allocGPUs: 56},
		{name: "linked", tel: telNode("linked", 2, a100x80s(8, 4), nvswitch, roots), allocGPUs: 8},
		{name: "mig-across", tel: telNode("mig-across", 2, a100x80s(8, 4), allMIG, twoFreeEach, nvswitch, roots), allocGPUs: 56},
	}
	got, st := scoreAll(t, scorePlugin(0, 0, nodes), makePod("p", 4, "1", "1Gi"), nodes)
	if !st.IsSuccess() {
		t.Fatalf("PreScore: %v", st)
	}
	// Bands (link, root, NUMA-aligned): linked 0b111 [88, 100], pack 4 of
	// 8 free GPUs (50): 88 + 50*12/100 = 94. slices 0b011 [37, 49], pack 4
	// of 56 free devices (7): 37 + 7*12/100 = 37. mig-across 0b001
	// [12, 24], pack 4 of 16 free devices (25): 12 + 25*12/100 = 15.
	want := map[string]int64{"slices": 37, "linked": 94, "mig-across": 15}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}
