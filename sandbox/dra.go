// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/sandbox/sim"
)

// draDriver is NVIDIA's DRA driver's name, and the DeviceClass of its
// whole GPUs (TopologyFitArgs' gpuDriverNames and gpuDeviceClassNames
// default to it).
const draDriver = sim.DRADriver

// publishDRA publishes a DRA node's GPUs as its DRA driver would: the
// DeviceClass of the driver's devices (once) and a ResourceSlice of the
// node's pool, a device gpu-<i> per GPU with its UUID and product name.
func (s *sandbox) publishDRA(ctx context.Context, spec sim.NodeSpec) error {
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: draDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", draDriver)},
		}}},
	}
	if _, err := s.kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating DeviceClass %s: %w", draDriver, err)
	}
	rs := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   draDriver,
			Pool:     resourceapi.ResourcePool{Name: spec.Name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(spec.Name),
		},
	}
	for i, g := range spec.GPUs {
		rs.Spec.Devices = append(rs.Spec.Devices, resourceapi.Device{
			Name: draDevice(i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"uuid":        {StringValue: ptr.To(g.UUID)},
				"productName": {StringValue: ptr.To(g.Model)},
				"index":       {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(int64(g.MemoryBytes), resource.BinarySI)},
			},
		})
	}
	if _, err := s.kube.ResourceV1().ResourceSlices().Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ResourceSlice %s: %w", rs.Name, err)
	}
	return nil
}

// draDevice is GPU i's device name in its node's ResourceSlice.
func draDevice(i int) string { return sim.DRADevice(i) }

// claimOf is the ResourceClaim of a pod of claimGPUs: one request of
// exactly that many devices of DeviceClass draDriver, named as the pod.
func claimOf(p podSpec, namespace string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: namespace},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpus",
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: draDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: p.claimGPUs,
			},
		}}}},
	}
}

// withClaim makes pod use its ResourceClaim (claimOf).
func withClaim(pod *corev1.Pod, p podSpec) {
	c := &pod.Spec.Containers[0]
	c.Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(p.name)}}
}

// claimUUIDs are the UUIDs of the GPUs of node spec that pod's
// ResourceClaims were allocated (their status.allocation, which
// DynamicResources writes before it binds the pod).
func (w *watcher) claimUUIDs(pod *corev1.Pod, spec sim.NodeSpec) []string {
	var out []string
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimName == nil {
			continue
		}
		claim, err := w.kube.ResourceV1().ResourceClaims(pod.Namespace).Get(w.ctx, *rc.ResourceClaimName, metav1.GetOptions{})
		if err != nil || claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			for i, g := range spec.GPUs {
				if r.Driver == draDriver && r.Pool == spec.Name && r.Device == draDevice(i) {
					out = append(out, g.UUID)
				}
			}
		}
	}
	return out
}
