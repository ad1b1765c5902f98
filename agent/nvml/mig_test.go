// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"errors"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/agent/nvml/nvmltest"
)

func TestMIGDevices(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(s *dgxa100.Server)
		missing string // symbol the loaded library lacks
		want    MIGLayout
		wantIs  error
		wantErr bool
	}{
		{
			name:  "A100 with seven 1g.10gb",
			setup: func(s *dgxa100.Server) { nvmltest.MIG(s, 0, 7, nvmltest.A100Seven1g) },
			want: MIGLayout{MaxDevices: 7, Devices: func() []MIGDevice {
				var out []MIGDevice
				for j := range 7 {
					// 9728 MiB = 9728 << 20 = 10200547328 bytes
					out = append(out, MIGDevice{UUID: nvmltest.MIGUUID(0, j), GPUInstanceID: 7 + j,
						GPUInstanceSlices: 1, ComputeInstanceSlices: 1, MemoryBytes: 10200547328})
				}
				return out
			}()},
		},
		{
			name:  "H100 with a 3g.40gb and two 2g.20gb; the other indexes are empty",
			setup: func(s *dgxa100.Server) { nvmltest.MIG(s, 0, 7, nvmltest.H100Mixed) },
			want: MIGLayout{MaxDevices: 7, Devices: []MIGDevice{
				{UUID: nvmltest.MIGUUID(0, 0), GPUInstanceID: 2, GPUInstanceSlices: 3, ComputeInstanceSlices: 3, MemoryBytes: 40192 << 20},
				{UUID: nvmltest.MIGUUID(0, 1), GPUInstanceID: 3, GPUInstanceSlices: 2, ComputeInstanceSlices: 2, MemoryBytes: 20096 << 20},
				{UUID: nvmltest.MIGUUID(0, 2), GPUInstanceID: 4, GPUInstanceSlices: 2, ComputeInstanceSlices: 2, MemoryBytes: 20096 << 20},
			}},
		},
		{
			name:   "MIG off: no MIG device count",
			setup:  func(s *dgxa100.Server) {},
			wantIs: ErrNotSupported,
		},
		{
			name:    "a driver missing the newer symbols",
			setup:   func(s *dgxa100.Server) { nvmltest.MIG(s, 0, 7, nvmltest.A100Seven1g) },
			missing: "nvmlDeviceGetMigDeviceHandleByIndex",
			wantIs:  ErrNotSupported,
		},
		{
			name: "a MIG device that fails is left out and named",
			setup: func(s *dgxa100.Server) {
				nvmltest.MIG(s, 0, 7, nvmltest.H100Mixed)
				d := nvmltest.Device(s, 0)
				inner := d.GetMigDeviceHandleByIndexFunc
				d.GetMigDeviceHandleByIndexFunc = func(j int) (gonvml.Device, gonvml.Return) {
					if j == 1 {
						return nil, gonvml.ERROR_UNKNOWN
					}
					return inner(j)
				}
			},
			want: MIGLayout{MaxDevices: 7, Devices: []MIGDevice{
				{UUID: nvmltest.MIGUUID(0, 0), GPUInstanceID: 2, GPUInstanceSlices: 3, ComputeInstanceSlices: 3, MemoryBytes: 40192 << 20},
				{UUID: nvmltest.MIGUUID(0, 2), GPUInstanceID: 4, GPUInstanceSlices: 2, ComputeInstanceSlices: 2, MemoryBytes: 20096 << 20},
			}},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newServer(t)
			for i := range s.Devices {
				nvmltest.Healthy(gpu(s, i))
			}
			tc.setup(s)
			var priv nvmltest.Privileged
			priv.WatchServer(s)
			s.LookupSymbolFunc = func(symbol string) error {
				if symbol == tc.missing {
					return errors.New("undefined symbol")
				}
				return nil
			}
			if tc.missing != "" {
				// A call of a symbol the driver lacks would crash: the mock
				// fails the test instead.
				gpu(s, 0).GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) {
					t.Fatal("nvmlDeviceGetMaxMigDeviceCount called on a driver without nvmlDeviceGetMigDeviceHandleByIndex")
					return 0, gonvml.ERROR_UNKNOWN
				}
			}
			l := NewWith(s)
			mustInit(t, l)
			devs, err := l.Devices()
			if err != nil {
				t.Fatal(err)
			}
			got, err := devs[0].MIGDevices()
			switch {
			case tc.wantIs != nil:
				if !errors.Is(err, tc.wantIs) {
					t.Errorf("MIGDevices error = %v, want %v", err, tc.wantIs)
				}
			case tc.wantErr:
				if err == nil || errors.Is(err, ErrNotSupported) {
					t.Errorf("MIGDevices error = %v, want a failure", err)
				}
			case err != nil:
				t.Errorf("MIGDevices: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("MIGDevices (-want +got):\n%s", diff)
			}
			if calls := priv.Calls(); len(calls) > 0 {
				t.Errorf("privileged NVML calls made: %v", calls)
			}
		})
	}
}

// TestPrivilegedCallsAreSeen checks the watch that TestMIGDevices relies on:
// a privileged call on a GPU or on a MIG device handle is recorded.
func TestPrivilegedCallsAreSeen(t *testing.T) {
	s, _ := newServer(t)
	nvmltest.MIG(s, 0, 7, nvmltest.A100Seven1g)
	var priv nvmltest.Privileged
	priv.WatchServer(s)
	_, _ = s.Devices[0].GetGpuInstances(&gonvml.GpuInstanceProfileInfo{})
	h, _ := s.Devices[0].GetMigDeviceHandleByIndex(0)
	_, _ = h.GetGpuInstanceById(1)
	want := []string{"nvmlDeviceGetGpuInstances", "nvmlDeviceGetGpuInstanceById"}
	if diff := cmp.Diff(want, priv.Calls()); diff != "" {
		t.Errorf("recorded calls (-want +got):\n%s", diff)
	}
}
