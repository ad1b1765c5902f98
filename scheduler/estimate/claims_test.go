// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"math"
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
	want := "DRA GPU device classes and drivers (gpuDeviceClassNames, migDeviceClassNames, gpuDriverNames): profile a's TopologyFit sets [gpu.nvidia.com] [mig.nvidia.com] [gpu.nvidia.com], profile b's TopologyFit sets [] [] [gpu.nvidia.com]: every profile must count a pod's demand alike, since one reservation book counts it for all of them"
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

// migClaim is claim "gpus" asking for count MIG devices of class
// mig.nvidia.com, selected by the CEL expressions.
func migClaim(count int64, cel ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gpus"}}
	e := &resourceapi.ExactDeviceRequest{DeviceClassName: "mig.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	for _, x := range cel {
		e.Selectors = append(e.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: x}})
	}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "mig", Exactly: e}}
	return c
}

// migSlice publishes node's MIG devices through NVIDIA's DRA driver, as
// its kubelet plugin does (attributes type, uuid, parentUUID, profile):
// device gpu-0-mig-i of profile profiles[i], all on GPU 0.
func migSlice(node string, profiles ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-mig"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "gpu.nvidia.com", NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
	}}
	for i, p := range profiles {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: "gpu-0-mig-" + string(rune('0'+i)), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type":       {StringValue: ptr.To("mig")},
			"uuid":       {StringValue: ptr.To("MIG-" + string(rune('a'+i)))},
			"parentUUID": {StringValue: ptr.To("GPU-0")},
			"profile":    {StringValue: ptr.To(p)},
		}})
	}
	return s
}

// TestBookCountsClaimedMIGDevices: a claim's MIG devices (NVIDIA's DRA
// driver's class mig.nvidia.com) are MIG slices of the pod's demand, as
// nvidia.com/mig-<profile> resources are, and priced alike on a MIG node:
// the profile a selector names before allocation (the least of
// alternatives, 1 slice when none is named), the allocated devices'
// profiles after.
func TestBookCountsClaimedMIGDevices(t *testing.T) {
	allocated := func(devices ...string) *resourceapi.ResourceClaim {
		c := migClaim(int64(len(devices)))
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, d := range devices {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
				Request: "mig", Driver: "gpu.nvidia.com", Pool: "n", Device: d})
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		claim  *resourceapi.ResourceClaim
		slices int64
	}{
		{name: "a 3g.40gb by selector", claim: migClaim(1, `device.attributes["gpu.nvidia.com"].profile == "3g.40gb"`), slices: 3},
		{name: "two 1g.10gb, single quotes", claim: migClaim(2, `device.attributes['gpu.nvidia.com'].profile == '1g.10gb'`), slices: 2},
		{name: "a compute instance 2c.3g.40gb", claim: migClaim(1, `device.attributes["gpu.nvidia.com"].profile == "2c.3g.40gb"`), slices: 2},
		{name: "either 2g.20gb or 3g.40gb: the least", claim: migClaim(1, `device.attributes["gpu.nvidia.com"].profile == "3g.40gb" || device.attributes["gpu.nvidia.com"].profile == "2g.20gb"`), slices: 2},
		{name: "no profile named: 1 slice each", claim: migClaim(3), slices: 3},
		{name: "allocated 3g.40gb and 1g.10gb", claim: allocated("gpu-0-mig-0", "gpu-0-mig-2"), slices: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBook(telemetry.NewCache(), DefaultOptions())
			if err := b.ShareDRA("TopologyFit", dra.DefaultConfig()); err != nil {
				t.Fatal(err)
			}
			b.Claims().UpdateSlice(migSlice("n", "3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
			b.Claims().UpdateClaim(tc.claim)
			d := b.Requested(claimPod(0))
			if want := (Demand{CPUMilli: 1000, MIGSlices: tc.slices}); d != want {
				t.Errorf("Requested = %+v, want %+v", d, want)
			}
			// Priced as the same slices by MIG resource: 360 busy-minus-idle
			// watts a GPU of 7 slices (TestMIGSlicesOfMixedStrategyPods).
			w, _ := PodWatts(migNode(), Demand{MIGSlices: d.MIGSlices}, Demand{})
			if want := float64(tc.slices) * 360 / 7; math.Abs(w.Mean-want) > 1e-9 {
				t.Errorf("PodWatts = %.3f, want %.3f", w.Mean, want)
			}
		})
	}
}
