// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/nvml/nvmltest"
	"github.com/telesched/telesched/sandbox/sim"
)

// draDriver is NVIDIA's DRA driver's name, and the DeviceClass of its
// whole GPUs (TopologyFitArgs' gpuDriverNames and gpuDeviceClassNames
// default to it); draMIGClass is the DeviceClass of its MIG devices
// (migDeviceClassNames).
const (
	draDriver   = sim.DRADriver
	draMIGClass = "mig.nvidia.com"
)

// draClasses are NVIDIA's DRA driver's DeviceClasses, as its Helm chart
// creates them (deployments/helm/dra-driver-nvidia-gpu/templates/
// deviceclass-gpu.yaml and deviceclass-mig.yaml in
// NVIDIA/k8s-dra-driver-gpu): its devices of type gpu, and of type mig.
func draClasses() []*resourceapi.DeviceClass {
	class := func(name, typ string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
				CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q && device.attributes[%q].type == %q", draDriver, draDriver, typ)},
			}}},
		}
	}
	return []*resourceapi.DeviceClass{class(draDriver, "gpu"), class(draMIGClass, "mig")}
}

// draDevices are a DRA node's devices as NVIDIA's DRA driver publishes
// them (cmd/gpu-kubelet-plugin/deviceinfo.go and mig.go there): a GPU
// not in MIG mode as device gpu-<i> of type gpu, with its UUID, product
// name, index and memory; each MIG device of a GPU in MIG mode as a
// device of type mig (sim.DRAMIGDevice), with its own UUID, its parent's
// (parentUUID), its profile, the product name and its memory. The GPU of
// MIG devices is not published whole.
func draDevices(spec sim.NodeSpec) []resourceapi.Device {
	str := func(v string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(v)} }
	var out []resourceapi.Device
	for i, g := range spec.GPUs {
		if g.MIG == nil {
			out = append(out, resourceapi.Device{
				Name: draDevice(i),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"type": str("gpu"), "uuid": str(g.UUID), "productName": str(g.Model), "index": {IntValue: ptr.To(int64(i))},
				},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
					"memory": {Value: *resource.NewQuantity(int64(g.MemoryBytes), resource.BinarySI)},
				},
			})
			continue
		}
		for j, d := range g.MIG {
			out = append(out, resourceapi.Device{
				Name: sim.DRAMIGDevice(i, j, d.Profile),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"type": str("mig"), "uuid": str(nvmltest.MIGUUID(i, j)), "parentUUID": str(g.UUID),
					"profile": str(d.Profile), "productName": str(g.Model),
				},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
					"memory": {Value: *resource.NewQuantity(int64(d.MemoryMiB)<<20, resource.BinarySI)},
				},
			})
		}
	}
	return out
}

// publishDRA publishes a DRA node's GPUs as its DRA driver would: the
// driver's DeviceClasses (once) and a ResourceSlice of the node's pool
// with its devices (draDevices).
func (s *sandbox) publishDRA(ctx context.Context, spec sim.NodeSpec) error {
	for _, class := range draClasses() {
		if _, err := s.kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating DeviceClass %s: %w", class.Name, err)
		}
	}
	rs := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   draDriver,
			Pool:     resourceapi.ResourcePool{Name: spec.Name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(spec.Name),
			Devices:  draDevices(spec),
		},
	}
	if _, err := s.kube.ResourceV1().ResourceSlices().Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ResourceSlice %s: %w", rs.Name, err)
	}
	return nil
}

// draDevice is GPU i's device name in its node's ResourceSlice.
func draDevice(i int) string { return sim.DRADevice(i) }

// claimOf is the ResourceClaim of a pod of claimGPUs or claimMIG: one
// request of exactly claimGPUs devices of DeviceClass draDriver, or of
// one MIG device of class draMIGClass whose profile is claimMIG (the
// selector NVIDIA's examples use), named as the pod.
func claimOf(p podSpec, namespace string) *resourceapi.ResourceClaim {
	req := &resourceapi.ExactDeviceRequest{
		DeviceClassName: draDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: p.claimGPUs,
	}
	if p.claimMIG != "" {
		req = &resourceapi.ExactDeviceRequest{
			DeviceClassName: draMIGClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.attributes[%q].profile == %q", draDriver, p.claimMIG),
			}}},
		}
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: namespace},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpus", Exactly: req}}}},
	}
}

// releaseClaims deallocates and deletes the ResourceClaims of namespace,
// whose pods are gone, as kube-controller-manager's resourceclaim
// controller would (none runs here): the scheduler puts a finalizer on a
// claim it allocates, and a deleted claim keeps its devices allocated
// until its allocation is cleared. It returns once none is left.
func (s *sandbox) releaseClaims(ctx context.Context, namespace string) error {
	claims := s.kube.ResourceV1().ResourceClaims(namespace)
	list, err := claims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the ResourceClaims of %s: %w", namespace, err)
	}
	for _, c := range list.Items {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := claims.Get(ctx, c.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cur.Status.Allocation != nil || len(cur.Status.ReservedFor) > 0 {
				cur.Status = resourceapi.ResourceClaimStatus{}
				if cur, err = claims.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			if len(cur.Finalizers) > 0 {
				cur.Finalizers = nil
				if _, err := claims.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deallocating ResourceClaim %s/%s: %w", namespace, c.Name, err)
		}
	}
	if err := claims.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("deleting the ResourceClaims of %s: %w", namespace, err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := claims.List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
}

// withClaim makes pod use its ResourceClaim (claimOf).
func withClaim(pod *corev1.Pod, p podSpec) {
	c := &pod.Spec.Containers[0]
	c.Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(p.name)}}
}

// claimUUIDs are the UUIDs of the GPUs and MIG devices of node spec that
// pod's ResourceClaims were allocated (their status.allocation, which
// DynamicResources writes before it binds the pod), how many of them are
// whole GPUs, and the compute slices of the MIG devices.
func (w *watcher) claimUUIDs(pod *corev1.Pod, spec sim.NodeSpec) (uuids []string, gpus, migSlices int64) {
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimName == nil {
			continue
		}
		claim, err := w.kube.ResourceV1().ResourceClaims(pod.Namespace).Get(w.ctx, *rc.ResourceClaimName, metav1.GetOptions{})
		if err != nil || claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != draDriver || r.Pool != spec.Name {
				continue
			}
			for i, g := range spec.GPUs {
				if g.MIG == nil && r.Device == draDevice(i) {
					uuids = append(uuids, g.UUID)
					gpus++
				}
				for j, d := range g.MIG {
					if r.Device == sim.DRAMIGDevice(i, j, d.Profile) {
						uuids = append(uuids, nvmltest.MIGUUID(i, j))
						migSlices += int64(d.Slices)
					}
				}
			}
		}
	}
	return uuids, gpus, migSlices
}
