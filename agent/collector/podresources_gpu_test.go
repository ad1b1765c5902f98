// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/podresources"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func TestAllocateGPUs(t *testing.T) {
	// GPU 0 whole, GPU 1 in MIG mode with 3g.40gb x1 and 2g.20gb x2.
	sample := func() *Sample {
		return &Sample{
			GPUs: []telemetryv1alpha1.GPUStatus{
				{Index: 0, UUID: "GPU-aaa", MIGEnabled: ptr.To(false)},
				{Index: 1, UUID: "GPU-bbb", MIGEnabled: ptr.To(true), MIG: &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7, Profiles: []telemetryv1alpha1.MIGProfile{
					{Profile: "3g.40gb", Count: 1}, {Profile: "2g.20gb", Count: 2},
				}}},
			},
			GPUDevices: map[string]GPUDevice{
				"GPU-aaa": {GPU: 0}, "GPU-bbb": {GPU: 1},
				"MIG-b1": {GPU: 1, MIGProfile: "3g.40gb"}, "MIG-b2": {GPU: 1, MIGProfile: "2g.20gb"}, "MIG-b3": {GPU: 1, MIGProfile: "2g.20gb"},
			},
		}
	}
	ctr := func(devs []*podresourcesv1.ContainerDevices, dra []*podresourcesv1.DynamicResource) *podresourcesv1.ListPodResourcesResponse {
		return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{
			Name: "p", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: devs, DynamicResources: dra}},
		}}}
	}
	type alloc struct {
		GPU0     *bool
		GPU1     *bool
		Profiles []*int32 // 3g.40gb, 2g.20gb
	}
	tests := []struct {
		name    string
		resp    *podresourcesv1.ListPodResourcesResponse
		want    alloc
		wantErr bool
	}{
		{
			name: "nothing allocated: false and zeros, not absent",
			resp: ctr(nil, nil),
			want: alloc{GPU0: ptr.To(false), Profiles: []*int32{ptr.To[int32](0), ptr.To[int32](0)}},
		},
		{
			name: "device plugin: the whole GPU and MIG devices (mixed strategy), the same MIG device twice counted once",
			resp: ctr([]*podresourcesv1.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-aaa"}},
				{ResourceName: "nvidia.com/mig-2g.20gb", DeviceIds: []string{"MIG-b2", "MIG-b2"}},
				{ResourceName: "example.com/fpga", DeviceIds: []string{"fpga-0"}}, // not a GPU resource: ignored
			}, nil),
			// 2g.20gb: {MIG-b2} = 1
			want: alloc{GPU0: ptr.To(true), Profiles: []*int32{ptr.To[int32](0), ptr.To[int32](1)}},
		},
		{
			name: "time-slicing replicas: GPU-aaa::3 is GPU-aaa; single strategy: a MIG UUID under nvidia.com/gpu",
			resp: ctr([]*podresourcesv1.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-aaa::3", "MIG-b1"}},
			}, nil),
			want: alloc{GPU0: ptr.To(true), Profiles: []*int32{ptr.To[int32](1), ptr.To[int32](0)}},
		},
		{
			name: "DRA: a CDI device name holding the UUID",
			resp: ctr(nil, []*podresourcesv1.DynamicResource{{ClaimName: "gpu", ClaimNamespace: "ns", ClaimResources: []*podresourcesv1.ClaimResource{
				{DriverName: "gpu.nvidia.com", PoolName: "node-a", DeviceName: "gpu-0", CdiDevices: []*podresourcesv1.CDIDevice{{Name: "k8s.gpu.nvidia.com/device=gpu-aaa"}}},
				{DriverName: "gpu.nvidia.com", PoolName: "node-a", DeviceName: "gpu-1-mig-MIG-b3"},
			}}}),
			want: alloc{GPU0: ptr.To(true), Profiles: []*int32{ptr.To[int32](0), ptr.To[int32](1)}},
		},
		{
			name: "DRA: a device named without a UUID makes the allocation unknown",
			resp: ctr([]*podresourcesv1.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-aaa"}},
			}, []*podresourcesv1.DynamicResource{{ClaimName: "gpu", ClaimNamespace: "ns", ClaimResources: []*podresourcesv1.ClaimResource{
				{DriverName: "gpu.nvidia.com", PoolName: "node-a", DeviceName: "gpu-1", CdiDevices: []*podresourcesv1.CDIDevice{{Name: "k8s.gpu.nvidia.com/claim=1234-gpu-1"}}},
			}}}),
			want:    alloc{Profiles: []*int32{nil, nil}},
			wantErr: true,
		},
		{
			name: "another DRA driver: ignored",
			resp: ctr(nil, []*podresourcesv1.DynamicResource{{ClaimResources: []*podresourcesv1.ClaimResource{
				{DriverName: "dra.example.com", DeviceName: "nic-0"},
			}}}),
			want: alloc{GPU0: ptr.To(false), Profiles: []*int32{ptr.To[int32](0), ptr.To[int32](0)}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sample()
			// The kubelet's answer as the agent reads it off the wire.
			b, err := proto.Marshal(tc.resp)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := podresources.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			err = allocateGPUs(resp, s, DefaultGPUResources())
			if (err != nil) != tc.wantErr {
				t.Errorf("allocateGPUs error = %v, want error %v", err, tc.wantErr)
			}
			got := alloc{GPU0: s.GPUs[0].Allocated, GPU1: s.GPUs[1].Allocated}
			for _, p := range s.GPUs[1].MIG.Profiles {
				got.Profiles = append(got.Profiles, p.Allocated)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("allocations (-want +got):\n%s", diff)
			}
		})
	}
}
