// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package thermal

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// wholeGPU is GPU i of a node, not in MIG mode, at tempC of slowdown 90°C,
// drawing 400 W, allocated as alloc says (-1: not published).
func wholeGPU(i int32, tempC int64, alloc int8) telemetry.GPU {
	return telemetry.GPU{Index: i, UUID: "GPU-" + string(rune('a'+i)), Healthy: true, HasTemperature: true, TemperatureMilli: tempC * 1000,
		HasSlowdown: true, SlowdownMilli: 90_000, HasPower: true, PowerWatts: 400, Allocated: alloc}
}

// migGPU is GPU i in MIG mode (7 slices) with the profiles given.
func migGPU(i int32, tempC int64, profiles ...telemetry.MIGProfile) telemetry.GPU {
	g := wholeGPU(i, tempC, -1)
	g.MIG, g.ComputeSlices, g.MIGProfiles = true, 7, profiles
	return g
}

func migProfile(name string, count, allocated int32) telemetry.MIGProfile {
	return telemetry.MIGProfile{Profile: name, Count: count, Allocated: allocated, Slices: telemetry.ProfileSlices(name)}
}

// gpuPodOf is a running pod asking for the extended resources given.
func gpuPodOf(name string, res map[v1.ResourceName]string) *v1.Pod {
	limits := v1.ResourceList{}
	for r, q := range res {
		limits[r] = resource.MustParse(q)
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: k8stypes.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: "n", Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Limits: limits, Requests: limits}}}}}
}

// claimed is pod with the ResourceClaim named claim.
func claimed(pod *v1.Pod, claim string) *v1.Pod {
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: claim, ResourceClaimName: ptr.To(claim)}}
	return pod
}

type holding struct {
	Held  map[string]float64 // pod -> share
	Maybe []string
}

// TestGPUHolders: a pod is evicted for a hot GPU only when the evidence
// pins it there: a claim's allocation names the GPU; a device-plugin pod
// is the node's only pod of its resource with every allocation published,
// or every GPU that may hold its devices is hot. Where the agent's
// published allocations cannot tell two device-plugin pods apart, neither
// is held, and both are named as pods that may hold it.
func TestGPUHolders(t *testing.T) {
	gpu := v1.ResourceName("nvidia.com/gpu")
	one := map[v1.ResourceName]string{gpu: "1"}
	cpu := gpuPodOf("cpu", map[v1.ResourceName]string{v1.ResourceCPU: "2"})
	for _, tc := range []struct {
		name string
		gpus []telemetry.GPU
		pods []*v1.Pod
		gi   int
		want holding
	}{{
		name: "the node's only GPU pod holds the allocated hot GPU",
		gpus: []telemetry.GPU{wholeGPU(0, 88, 1), wholeGPU(1, 50, 0)},
		pods: []*v1.Pod{gpuPodOf("a", one), cpu}, gi: 0,
		want: holding{Held: map[string]float64{"a": 1}},
	}, {
		name: "two GPU pods, one GPU hot: the allocations do not say whose",
		gpus: []telemetry.GPU{wholeGPU(0, 88, 1), wholeGPU(1, 50, 1)},
		pods: []*v1.Pod{gpuPodOf("a", one), gpuPodOf("b", one), cpu}, gi: 0,
		want: holding{Maybe: []string{"ns/a", "ns/b"}},
	}, {
		name: "two GPU pods, both GPUs hot: each holds a hot GPU",
		gpus: []telemetry.GPU{wholeGPU(0, 88, 1), wholeGPU(1, 89, 1)},
		pods: []*v1.Pod{gpuPodOf("a", one), gpuPodOf("b", one)}, gi: 1,
		want: holding{Held: map[string]float64{"a": 1, "b": 1}},
	}, {
		name: "the only GPU pod, allocations not published: which GPU is unknown",
		gpus: []telemetry.GPU{wholeGPU(0, 88, -1), wholeGPU(1, 50, -1)},
		pods: []*v1.Pod{gpuPodOf("a", one)}, gi: 0,
		want: holding{Maybe: []string{"ns/a"}},
	}, {
		name: "the only GPU pod on a one-GPU node, allocations not published",
		gpus: []telemetry.GPU{wholeGPU(0, 88, -1)},
		pods: []*v1.Pod{gpuPodOf("a", one)}, gi: 0,
		want: holding{Held: map[string]float64{"a": 1}},
	}, {
		name: "a GPU published free holds no device-plugin pod",
		gpus: []telemetry.GPU{wholeGPU(0, 88, 0), wholeGPU(1, 50, 1)},
		pods: []*v1.Pod{gpuPodOf("a", one)}, gi: 0,
		want: holding{},
	}, {
		name: "a claim names its GPU; the device-plugin pod is on the other",
		gpus: []telemetry.GPU{wholeGPU(0, 50, 1), func() telemetry.GPU { g := wholeGPU(1, 88, -1); g.UUID = "GPU-claimed"; return g }()},
		pods: []*v1.Pod{gpuPodOf("a", one), claimed(gpuPodOf("c", nil), "c-gpu")}, gi: 1,
		want: holding{Held: map[string]float64{"c": 1}},
	}, {
		name: "MIG devices: each profile's only pod, by its slices of those allocated",
		gpus: []telemetry.GPU{
			migGPU(0, 88, migProfile("3g.40gb", 2, 1), migProfile("1g.10gb", 1, 1)),
			migGPU(1, 50, migProfile("3g.40gb", 2, 0)),
		},
		pods: []*v1.Pod{
			gpuPodOf("m3", map[v1.ResourceName]string{"nvidia.com/mig-3g.40gb": "1"}),
			gpuPodOf("m1", map[v1.ResourceName]string{"nvidia.com/mig-1g.10gb": "1"}),
		}, gi: 0,
		want: holding{Held: map[string]float64{"m3": 0.75, "m1": 0.25}},
	}, {
		name: "MIG devices of a profile two pods hold, on two GPUs, one hot",
		gpus: []telemetry.GPU{
			migGPU(0, 88, migProfile("3g.40gb", 2, 1)),
			migGPU(1, 50, migProfile("3g.40gb", 2, 1)),
		},
		pods: []*v1.Pod{
			gpuPodOf("x", map[v1.ResourceName]string{"nvidia.com/mig-3g.40gb": "1"}),
			gpuPodOf("y", map[v1.ResourceName]string{"nvidia.com/mig-3g.40gb": "1"}),
		}, gi: 0,
		want: holding{Maybe: []string{"ns/x", "ns/y"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			book := estimate.NewBook(telemetry.NewCache(), estimate.DefaultOptions())
			x := book.Claims()
			x.UpdateSlice(&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n-gpus"}, Spec: resourceapi.ResourceSliceSpec{
				Driver: "gpu.nvidia.com", NodeName: ptr.To("n"), Pool: resourceapi.ResourcePool{Name: "n", ResourceSliceCount: 1},
				Devices: []resourceapi.Device{{Name: "gpu-1", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"uuid": {StringValue: ptr.To("GPU-claimed")}}}},
			}})
			claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-gpu"}}
			claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-1"},
			}}}
			x.UpdateClaim(claim)
			n := &telemetry.Node{Name: "n", GPUs: tc.gpus}
			hot := make([]bool, len(tc.gpus))
			for i := range tc.gpus {
				hot[i] = tc.gpus[i].Hot(3_000)
			}
			held, maybe := GPUHolders(n, tc.gi, hot, tc.pods, book)
			got := holding{Maybe: maybe}
			for _, h := range held {
				if got.Held == nil {
					got.Held = map[string]float64{}
				}
				got.Held[h.Pod.Name] = h.Share
				if h.How == "" {
					t.Errorf("%s held with no reason", h.Pod.Name)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GPUHolders (-want +got):\n%s", diff)
			}
		})
	}
}
