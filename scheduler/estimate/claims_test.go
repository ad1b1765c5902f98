// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/scheduler/dra"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// claimPod is a pod of 1 CPU whose claim "gpus" asks for two whole GPUs
// of gpu.nvidia.com, and gpus extended-resource GPUs.
func claimPod(gpus int64) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "p"}, Spec: v1.PodSpec{
		ResourceClaims: []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("gpus")}},
		Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
			Claims:   []v1.ResourceClaim{{Name: "gpus"}},
		}}},
	}}
	if gpus > 0 {
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = q
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"nvidia.com/gpu": q}
	}
	return p
}

func twoGPUClaim() *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gpus"}}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}
	return c
}

func TestBookCountsClaimedGPUs(t *testing.T) {
	cases := []struct {
		name string
		cfg  dra.Config
		pod  *v1.Pod
		want Demand
	}{
		{name: "claim's GPUs", cfg: dra.DefaultConfig(), pod: claimPod(0), want: Demand{CPUMilli: 1000, ClaimGPUs: 2}},
		{name: "claim's and extended resource's", cfg: dra.DefaultConfig(), pod: claimPod(1), want: Demand{CPUMilli: 1000, GPUs: 1, ClaimGPUs: 2}},
		{name: "class not counted", cfg: dra.Config{Drivers: []string{"gpu.nvidia.com"}}, pod: claimPod(0), want: Demand{CPUMilli: 1000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBook(telemetry.NewCache(), DefaultOptions())
			if err := b.ShareDRA("TopologyFit", tc.cfg); err != nil {
				t.Fatal(err)
			}
			b.Claims().UpdateClaim(twoGPUClaim())
			if diff := cmp.Diff(tc.want, b.Requested(tc.pod)); diff != "" {
				t.Errorf("Requested (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShareDRAProfilesMustAgree(t *testing.T) {
	b := NewBook(telemetry.NewCache(), DefaultOptions())
	if err := b.ShareDRA("profile a's TopologyFit", dra.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	err := b.ShareDRA("profile b's TopologyFit", dra.Config{Drivers: []string{"gpu.nvidia.com"}})
	want := "DRA GPU device classes and drivers (gpuDeviceClassNames, gpuDriverNames): profile a's TopologyFit sets [gpu.nvidia.com] [gpu.nvidia.com], profile b's TopologyFit sets [] [gpu.nvidia.com]: every profile must count a pod's demand alike, since one reservation book counts it for all of them"
	if diff := cmp.Diff(want, errString(err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestPodWattsPricesClaimedGPUs: a GPU of a node whose GPU power model
// says 300 W busy and 60 W idle adds 240 W, claimed or requested alike.
func TestPodWattsPricesClaimedGPUs(t *testing.T) {
	n := r740Node(40)
	n.GPUs = []telemetry.GPU{{UUID: "GPU-a"}, {UUID: "GPU-b"}}
	n.Models = &telemetry.Models{}
	*n.Models = *r740Node(40).Models
	n.Models.GPUBasis, n.Models.GPUBusyWatts, n.Models.GPUIdleWatts = telemetry.BasisFitted, 300, 60
	byResource, _ := PodWatts(n, Demand{GPUs: 1}, Demand{})
	byClaim, _ := PodWatts(n, Demand{ClaimGPUs: 1}, Demand{})
	if diff := cmp.Diff([]float64{240, 240}, []float64{byResource.Mean, byClaim.Mean}); diff != "" {
		t.Errorf("watts of a GPU by resource, by claim (-want +got):\n%s", diff)
	}
}
