// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/nvml"
	"github.com/telesched/telesched/agent/nvml/nvmltest"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

func TestMIGProfileName(t *testing.T) {
	tests := []struct {
		name      string
		dev       nvml.MIGDevice
		gpuMemory uint64
		want      string
	}{
		// 9728/81920 = 0.119 -> 1/8; x 80 GiB = 10
		{name: "A100 80GB 1g", dev: nvml.MIGDevice{GPUInstanceSlices: 1, ComputeInstanceSlices: 1, MemoryBytes: 9728 << 20}, gpuMemory: 81920 << 20, want: "1g.10gb"},
		// 4864/40960 = 0.119 -> 1/8; x 40 = 5
		{name: "A100 40GB 1g", dev: nvml.MIGDevice{GPUInstanceSlices: 1, ComputeInstanceSlices: 1, MemoryBytes: 4864 << 20}, gpuMemory: 40960 << 20, want: "1g.5gb"},
		// 40192/81559 = 0.493 -> 4/8; x ceil(79.6) = 80 -> 40
		{name: "H100 80GB 3g", dev: nvml.MIGDevice{GPUInstanceSlices: 3, ComputeInstanceSlices: 3, MemoryBytes: 40192 << 20}, gpuMemory: 81559 << 20, want: "3g.40gb"},
		// 20096/81559 = 0.246 -> 2/8; x 80 = 20
		{name: "H100 80GB 2g", dev: nvml.MIGDevice{GPUInstanceSlices: 2, ComputeInstanceSlices: 2, MemoryBytes: 20096 << 20}, gpuMemory: 81559 << 20, want: "2g.20gb"},
		// A real H200 (agent/nvml/testdata/h200-vm): 150754820096 bytes,
		// 141 GiB rounded up; the GPU-instance profiles' MemorySizeMB from
		// nvmlDeviceGetGpuInstanceProfileInfo (nvmlprobe.jsonl) and the
		// names nvidia-smi mig -lgip gives them (host.txt).
		// 16384/143771 = 0.114 -> 1/8; x 141 = 17.6 -> 18
		{name: "H200 1g, real", dev: nvml.MIGDevice{GPUInstanceSlices: 1, ComputeInstanceSlices: 1, MemoryBytes: 16384 << 20}, gpuMemory: 150754820096, want: "1g.18gb"},
		// 33280/143771 = 0.231 -> 2/8; x 141 = 35.25 -> 35
		{name: "H200 2g, real", dev: nvml.MIGDevice{GPUInstanceSlices: 2, ComputeInstanceSlices: 2, MemoryBytes: 33280 << 20}, gpuMemory: 150754820096, want: "2g.35gb"},
		// 71424/143771 = 0.497 -> 4/8; x 141 = 70.5 -> 71
		{name: "H200 3g, real", dev: nvml.MIGDevice{GPUInstanceSlices: 3, ComputeInstanceSlices: 3, MemoryBytes: 71424 << 20}, gpuMemory: 150754820096, want: "3g.71gb"},
		{name: "H200 4g, real", dev: nvml.MIGDevice{GPUInstanceSlices: 4, ComputeInstanceSlices: 4, MemoryBytes: 71424 << 20}, gpuMemory: 150754820096, want: "4g.71gb"},
		// 143360/143771 = 0.997 -> 8/8; x 141 = 141
		{name: "H200 7g, real", dev: nvml.MIGDevice{GPUInstanceSlices: 7, ComputeInstanceSlices: 7, MemoryBytes: 143360 << 20}, gpuMemory: 150754820096, want: "7g.141gb"},
		{name: "compute instance smaller than its GPU instance", dev: nvml.MIGDevice{GPUInstanceSlices: 3, ComputeInstanceSlices: 1, MemoryBytes: 40192 << 20}, gpuMemory: 81559 << 20, want: "1c.3g.40gb"},
		{name: "no GPU memory", dev: nvml.MIGDevice{GPUInstanceSlices: 1, ComputeInstanceSlices: 1, MemoryBytes: 1 << 30}, gpuMemory: 0, want: "1g.0gb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := migProfileName(tc.dev, tc.gpuMemory, 7); got != tc.want {
				t.Errorf("migProfileName = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMIGProfileNameMediaExtensions: a "+me" instance is told by its
// optical flow accelerator, which of the instances smaller than the GPU
// only "+me" ones hold. The figures are a real H200's GPU instance
// profiles (agent/nvml/testdata/h200-vm/nvmlprobe.jsonl, and the names
// nvidia-smi mig -lgip gives them in host.txt: 1g.18gb+me with OFA 1,
// 1g.18gb with 0, 7g.141gb with 1) and NVIDIA's DGX A100 mock's
// (go-nvml's mock/dgxa100 MIGProfiles).
func TestMIGProfileNameMediaExtensions(t *testing.T) {
	const h200 = 150754820096
	a100 := dgxa100.MIGProfiles.GpuInstanceProfiles
	fromMock := func(id int) nvml.MIGDevice {
		p := a100[id]
		return nvml.MIGDevice{GPUInstanceSlices: int(p.SliceCount), ComputeInstanceSlices: int(p.SliceCount), MemoryBytes: p.MemorySizeMB << 20, OFAs: int(p.OfaCount)}
	}
	tests := []struct {
		name      string
		dev       nvml.MIGDevice
		gpuMemory uint64
		max       int
		want      string
	}{
		{name: "H200 1g.18gb+me, real (profile 20)", dev: nvml.MIGDevice{GPUInstanceSlices: 1, ComputeInstanceSlices: 1, MemoryBytes: 16384 << 20, OFAs: 1}, gpuMemory: h200, max: 7, want: "1g.18gb+me"},
		{name: "H200 1g.18gb, real (profile 19)", dev: nvml.MIGDevice{GPUInstanceSlices: 1, ComputeInstanceSlices: 1, MemoryBytes: 16384 << 20, OFAs: 0}, gpuMemory: h200, max: 7, want: "1g.18gb"},
		{name: "H200 7g.141gb, real (profile 0): the whole GPU's OFA is no +me", dev: nvml.MIGDevice{GPUInstanceSlices: 7, ComputeInstanceSlices: 7, MemoryBytes: 143360 << 20, OFAs: 1}, gpuMemory: h200, max: 7, want: "7g.141gb"},
		{name: "A100 40GB 1g.5gb+me, NVIDIA's mock", dev: fromMock(gonvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1), gpuMemory: 40960 << 20, max: 7, want: "1g.5gb+me"},
		{name: "A100 40GB 1g.5gb, NVIDIA's mock", dev: fromMock(gonvml.GPU_INSTANCE_PROFILE_1_SLICE), gpuMemory: 40960 << 20, max: 7, want: "1g.5gb"},
		{name: "A100 40GB 1g.10gb, NVIDIA's mock", dev: fromMock(gonvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2), gpuMemory: 40960 << 20, max: 7, want: "1g.10gb"},
		{name: "A100 40GB 7g.40gb, NVIDIA's mock", dev: fromMock(gonvml.GPU_INSTANCE_PROFILE_7_SLICE), gpuMemory: 40960 << 20, max: 7, want: "7g.40gb"},
		{name: "unknown GPU size: no +me", dev: nvml.MIGDevice{GPUInstanceSlices: 1, ComputeInstanceSlices: 1, MemoryBytes: 16384 << 20, OFAs: 1}, gpuMemory: h200, max: 0, want: "1g.18gb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := migProfileName(tc.dev, tc.gpuMemory, tc.max); got != tc.want {
				t.Errorf("migProfileName = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGPUCollectorMIG(t *testing.T) {
	tests := []struct {
		name  string
		setup func(s *dgxa100.Server)
		// memory of GPU 0
		total       uint64
		want        *telemetryv1alpha1.GPUMIG
		wantDevices map[string]GPUDevice
	}{
		{
			name:  "A100 80GB, seven 1g.10gb",
			total: 81920 << 20,
			setup: func(s *dgxa100.Server) { nvmltest.MIG(s, 0, 7, nvmltest.A100Seven1g) },
			want: &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7, Profiles: []telemetryv1alpha1.MIGProfile{
				{Profile: "1g.10gb", Count: 7, MemoryBytes: 9728 << 20},
			}},
			wantDevices: func() map[string]GPUDevice {
				m := map[string]GPUDevice{nvmltest.UUID(0): {GPU: 0}}
				for j := range 7 {
					m[nvmltest.MIGUUID(0, j)] = GPUDevice{GPU: 0, MIGProfile: "1g.10gb"}
				}
				return m
			}(),
		},
		{
			name:  "H100 80GB, one 3g.40gb and two 2g.20gb: larger first",
			total: 81559 << 20,
			setup: func(s *dgxa100.Server) { nvmltest.MIG(s, 0, 7, nvmltest.H100Mixed) },
			want: &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7, Profiles: []telemetryv1alpha1.MIGProfile{
				{Profile: "3g.40gb", Count: 1, MemoryBytes: 40192 << 20},
				{Profile: "2g.20gb", Count: 2, MemoryBytes: 20096 << 20},
			}},
			wantDevices: map[string]GPUDevice{
				nvmltest.UUID(0):       {GPU: 0},
				nvmltest.MIGUUID(0, 0): {GPU: 0, MIGProfile: "3g.40gb"},
				nvmltest.MIGUUID(0, 1): {GPU: 0, MIGProfile: "2g.20gb"},
				nvmltest.MIGUUID(0, 2): {GPU: 0, MIGProfile: "2g.20gb"},
			},
		},
		{
			name:  "MIG on, no MIG device yet",
			total: 81920 << 20,
			setup: func(s *dgxa100.Server) { nvmltest.MIG(s, 0, 7, nil) },
			want:  &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7},
			wantDevices: map[string]GPUDevice{
				nvmltest.UUID(0): {GPU: 0},
			},
		},
		{
			name:  "MIG on, a driver that still reports utilization 0: absent all the same",
			total: 81920 << 20,
			setup: func(s *dgxa100.Server) {
				nvmltest.MIG(s, 0, 7, nvmltest.A100Seven1g[:1])
				a100(s, 0).GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
					return gonvml.Utilization{}, gonvml.SUCCESS
				}
			},
			want: &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7, Profiles: []telemetryv1alpha1.MIGProfile{
				{Profile: "1g.10gb", Count: 1, MemoryBytes: 9728 << 20},
			}},
			wantDevices: map[string]GPUDevice{
				nvmltest.UUID(0):       {GPU: 0},
				nvmltest.MIGUUID(0, 0): {GPU: 0, MIGProfile: "1g.10gb"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newA100Server(t)
			srv.DeviceGetCountFunc = func() (int, gonvml.Return) { return 1, gonvml.SUCCESS }
			a100(srv, 0).MemoryInfo = gonvml.Memory{Total: tc.total, Used: 1 << 30}
			tc.setup(srv)
			var priv nvmltest.Privileged
			priv.WatchServer(srv)
			c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100"))
			t.Cleanup(c.Close)
			s := &Sample{}
			if err := c.Collect(context.Background(), s); err != nil {
				t.Fatalf("Collect: %v", err)
			}
			g := s.GPUs[0]
			if diff := cmp.Diff(tc.want, g.MIG); diff != "" {
				t.Errorf("mig (-want +got):\n%s", diff)
			}
			if g.UtilizationPercent != nil {
				t.Errorf("utilizationPercent = %d on a GPU in MIG mode, want absent", *g.UtilizationPercent)
			}
			if !ptr.Deref(g.MIGEnabled, false) {
				t.Errorf("migEnabled = %v, want true", g.MIGEnabled)
			}
			if diff := cmp.Diff(tc.wantDevices, s.GPUDevices); diff != "" {
				t.Errorf("GPUDevices (-want +got):\n%s", diff)
			}
			if calls := priv.Calls(); len(calls) > 0 {
				t.Errorf("privileged NVML calls made: %v", calls)
			}
		})
	}
}
