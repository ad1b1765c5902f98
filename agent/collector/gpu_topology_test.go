// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/google/go-cmp/cmp"
	testclock "k8s.io/utils/clock/testing"

	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/nvml"
	"github.com/telesched/telesched/agent/nvml/nvmltest"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// pciLinkTree makes a sysfs tree whose /sys/bus/pci/devices/<bus id> links
// point below /sys/devices/<root>/..., as the kernel's do: GPU i of
// nvmltest.BusID under roots[i].
func pciLinkTree(t *testing.T, roots []string) hostfs.Root {
	t.Helper()
	dir := t.TempDir()
	for i, r := range roots {
		addr, err := ParsePCIAddress(nvmltest.BusID(i))
		if err != nil {
			t.Fatal(err)
		}
		dev := filepath.Join(dir, "sys/devices", r, "0000:00:01.1", addr.String())
		if err := os.MkdirAll(dev, 0o755); err != nil {
			t.Fatal(err)
		}
		links := filepath.Join(dir, "sys/bus/pci/devices")
		if err := os.MkdirAll(links, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("../../../devices", r, "0000:00:01.1", addr.String()), filepath.Join(links, addr.String())); err != nil {
			t.Fatal(err)
		}
	}
	return hostfs.New(dir)
}

type topo struct {
	PCIeRoot string
	NVLink   *telemetryv1alpha1.GPUNVLink
}

func TestGPUCollectorTopology(t *testing.T) {
	roots := []string{"pci0000:00", "pci0000:00", "pci0000:40", "pci0000:40", "pci0000:80", "pci0000:80", "pci0000:c0", "pci0000:c0"}
	tests := []struct {
		name    string
		setup   func(s *dgxa100.Server)
		missing string
		want    []topo
	}{
		{
			name:  "DGX A100: every GPU on the NVSwitches, one group",
			setup: nvmltest.NVSwitchFabric,
			want: func() []topo {
				var out []topo
				for i := range 8 {
					out = append(out, topo{roots[i], &telemetryv1alpha1.GPUNVLink{ActiveLinks: 12, NVSwitch: true, Group: 0}})
				}
				return out
			}(),
		},
		{
			name:  "pairs 0-1, 2-3, 4-5, 6-7: a group each",
			setup: nvmltest.NVLinkPairs,
			want: func() []topo {
				var out []topo
				for i := range 8 {
					out = append(out, topo{roots[i], &telemetryv1alpha1.GPUNVLink{ActiveLinks: 4, Peers: []int32{int32(i ^ 1)}, Group: int32(i &^ 1)}})
				}
				return out
			}(),
		},
		{
			name: "a chain 0-1-2 and 5-7, the rest unlinked: groups by component, lowest index",
			setup: func(s *dgxa100.Server) {
				gpuLink := func(i int) nvmltest.Link {
					return nvmltest.Link{Remote: gonvml.NVLINK_DEVICE_TYPE_GPU, BusID: nvmltest.BusID(i)}
				}
				nvmltest.NVLinks(a100(s, 0), 12, []nvmltest.Link{gpuLink(1)})
				nvmltest.NVLinks(a100(s, 1), 12, []nvmltest.Link{gpuLink(0), gpuLink(2)})
				nvmltest.NVLinks(a100(s, 2), 12, []nvmltest.Link{gpuLink(1)})
				nvmltest.NVLinks(a100(s, 3), 12, nil)
				nvmltest.NVLinks(a100(s, 5), 12, []nvmltest.Link{gpuLink(7)})
				nvmltest.NVLinks(a100(s, 7), 12, []nvmltest.Link{gpuLink(5)})
			},
			want: []topo{
				{roots[0], &telemetryv1alpha1.GPUNVLink{ActiveLinks: 1, Peers: []int32{1}, Group: 0}},
				{roots[1], &telemetryv1alpha1.GPUNVLink{ActiveLinks: 2, Peers: []int32{0, 2}, Group: 0}},
				{roots[2], &telemetryv1alpha1.GPUNVLink{ActiveLinks: 1, Peers: []int32{1}, Group: 0}},
				{roots[3], nil}, {roots[4], nil},
				{roots[5], &telemetryv1alpha1.GPUNVLink{ActiveLinks: 1, Peers: []int32{7}, Group: 5}},
				{roots[6], nil},
				{roots[7], &telemetryv1alpha1.GPUNVLink{ActiveLinks: 1, Peers: []int32{5}, Group: 5}},
			},
		},
		{
			name:  "no NVLink: PCIe roots only",
			setup: func(*dgxa100.Server) {},
			want: func() []topo {
				var out []topo
				for i := range 8 {
					out = append(out, topo{roots[i], nil})
				}
				return out
			}(),
		},
		{
			name:    "a driver missing the newer symbols: links counted, switches not guessed",
			setup:   nvmltest.NVSwitchFabric,
			missing: "nvmlDeviceGetNvLinkRemoteDeviceType",
			want: func() []topo {
				var out []topo
				for i := range 8 {
					out = append(out, topo{roots[i], &telemetryv1alpha1.GPUNVLink{ActiveLinks: 12, Group: int32(i)}})
				}
				return out
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := nvmltest.NewDGXA100()
			for i := range srv.Devices {
				nvmltest.Steady(a100(srv, i))
			}
			nvmltest.PCIBusIDs(srv)
			tc.setup(srv)
			srv.LookupSymbolFunc = func(symbol string) error {
				if symbol == tc.missing {
					return os.ErrNotExist
				}
				return nil
			}
			if tc.missing != "" {
				for i := range srv.Devices {
					a100(srv, i).GetNvLinkRemoteDeviceTypeFunc = func(int) (gonvml.IntNvLinkDeviceType, gonvml.Return) {
						t.Fatal("nvmlDeviceGetNvLinkRemoteDeviceType called on a driver without it")
						return 0, gonvml.ERROR_UNKNOWN
					}
				}
			}
			c := NewGPUCollector(nvml.NewWith(srv), pciLinkTree(t, roots))
			t.Cleanup(c.Close)
			gpus, err := collectGPUs(t, context.Background(), c)
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			var got []topo
			for _, g := range gpus {
				got = append(got, topo{g.PCIeRoot, g.NVLink})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("topology (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGPUCollectorTopologyReadOnChange pins when the topology is read: at
// the first sample, not again while the GPUs stay the same, again after the
// interval and when the set of GPUs changes.
func TestGPUCollectorTopologyReadOnChange(t *testing.T) {
	srv, _ := nvmltest.NewDGXA100()
	for i := range srv.Devices {
		nvmltest.Steady(a100(srv, i))
	}
	nvmltest.PCIBusIDs(srv)
	nvmltest.NVLinkPairs(srv)
	reads := 0
	inner := a100(srv, 0).GetNvLinkStateFunc
	a100(srv, 0).GetNvLinkStateFunc = func(l int) (gonvml.EnableState, gonvml.Return) {
		if l == 0 {
			reads++
		}
		return inner(l)
	}
	clk := testclock.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	c := NewGPUCollector(nvml.NewWith(srv), hostfs.New(t.TempDir())).WithTopologyInterval(10 * time.Minute)
	c.clock = clk
	t.Cleanup(c.Close)
	collect := func() {
		t.Helper()
		if _, err := collectGPUs(t, context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	var got []int
	collect() // first: read
	got = append(got, reads)
	collect() // same GPUs: cached
	got = append(got, reads)
	clk.Step(10 * time.Minute) // the interval: read
	collect()
	got = append(got, reads)
	srv.DeviceGetCountFunc = func() (int, gonvml.Return) { return 7, gonvml.SUCCESS } // a GPU gone: read
	collect()
	got = append(got, reads)
	if diff := cmp.Diff([]int{1, 1, 2, 3}, got); diff != "" {
		t.Errorf("topology reads after each sample (-want +got):\n%s", diff)
	}
}
