// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
)

func TestParsePCIAddress(t *testing.T) {
	tests := []struct {
		in      string
		want    PCIAddress
		wantSys string
		wantErr bool
	}{
		// NVML: 8-digit domain, uppercase
		{in: "00000000:07:00.0", want: PCIAddress{Bus: 0x07}, wantSys: "0000:07:00.0"},
		{in: "00000000:BD:00.0", want: PCIAddress{Bus: 0xbd}, wantSys: "0000:bd:00.0"},
		// sysfs and NVML's legacy id: 4-digit domain
		{in: "0000:06:00.0", want: PCIAddress{Bus: 0x06}, wantSys: "0000:06:00.0"},
		{in: "0001:3b:1f.7", want: PCIAddress{Domain: 1, Bus: 0x3b, Device: 0x1f, Function: 7}, wantSys: "0001:3b:1f.7"},
		// a VMD domain above 0xffff keeps all its digits in sysfs
		{in: "00010000:E1:00.0", want: PCIAddress{Domain: 0x10000, Bus: 0xe1}, wantSys: "10000:e1:00.0"},
		{in: "", wantErr: true},
		{in: "07:00.0", wantErr: true},                // no domain
		{in: "0000:07:00", wantErr: true},             // no function
		{in: "0000:07:20.0", wantErr: true},           // device 0x20 > 0x1f
		{in: "0000:07:00.8", wantErr: true},           // function 8 > 7
		{in: "000000000:07:00.0", wantErr: true},      // 9-digit domain
		{in: "0000:107:00.0", wantErr: true},          // 3-digit bus
		{in: "0000:0x:00.0", wantErr: true},           // not hex
		{in: "0000:+7:00.0", wantErr: true},           // sign
		{in: "0000:07:00.0\n", wantErr: true},         // trailing newline
		{in: "0000:07:00.0:extra", wantErr: true},     // trailing field
		{in: "0000:07:00.0.1", wantErr: true},         // trailing field
		{in: "GPU-00000000-0000-0000", wantErr: true}, // a UUID
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePCIAddress(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParsePCIAddress(%q) = %v, want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePCIAddress(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParsePCIAddress(%q) (-want +got):\n%s", tc.in, diff)
			}
			if diff := cmp.Diff(tc.wantSys, got.String()); diff != "" {
				t.Errorf("String() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseNUMANodeAttr(t *testing.T) {
	tests := []struct {
		in      string
		want    int32
		wantErr bool
	}{
		{in: "0\n", want: 0},
		{in: "1\n", want: 1},
		{in: "-1\n", want: -1},
		{in: "1023", want: 1023},
		{in: "1024", wantErr: true}, // above the API's maximum
		{in: "-2", wantErr: true},
		{in: "", wantErr: true},
		{in: "one", wantErr: true},
		{in: "99999999999999999999", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseNUMANodeAttr([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseNUMANodeAttr(%q) = %d, %v; want error %v", tc.in, got, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseNUMANodeAttr(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParsePCIHexAttr(t *testing.T) {
	tests := []struct {
		in      string
		bits    int
		want    uint64
		wantErr bool
	}{
		{in: "0x10de\n", bits: 16, want: 0x10de},
		{in: "0x030200\n", bits: 24, want: 0x030200},
		{in: "0x0302000", bits: 24, wantErr: true}, // 7 digits for 24 bits
		{in: "10de", bits: 16, wantErr: true},      // no 0x
		{in: "0x", bits: 16, wantErr: true},
		{in: "0x-1", bits: 16, wantErr: true},
		{in: "0X10DE", bits: 16, wantErr: true}, // sysfs writes a lowercase 0x
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parsePCIHexAttr([]byte(tc.in), tc.bits)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parsePCIHexAttr(%q, %d) = %#x, %v; want error %v", tc.in, tc.bits, got, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parsePCIHexAttr(%q, %d) (-want +got):\n%s", tc.in, tc.bits, diff)
			}
		})
	}
}

func TestListPCIDevices(t *testing.T) {
	nvidia := func(addr PCIAddress, node *int32) PCIDevice {
		return PCIDevice{Address: addr, Vendor: 0x10de, Device: 0x20b0, Class: 0x030200, NUMANode: node}
	}
	tests := []struct {
		name    string
		root    func(t *testing.T) hostfs.Root
		want    []PCIDevice
		wantErr bool
	}{
		{
			name: "two NUMA nodes",
			root: func(t *testing.T) hostfs.Root { return gpuTree(t, "two-node") },
			want: []PCIDevice{
				nvidia(PCIAddress{Bus: 0x07}, nil), // -1 on two nodes
				nvidia(PCIAddress{Bus: 0x0f}, ptr.To[int32](1)),
			},
		},
		{
			name: "one NUMA node",
			root: func(t *testing.T) hostfs.Root { return gpuTree(t, "one-node") },
			want: []PCIDevice{nvidia(PCIAddress{Bus: 0x07}, ptr.To[int32](0))}, // -1 on one node
		},
		{
			name: "empty root is no devices",
			root: func(t *testing.T) hostfs.Root { return hostfs.New(t.TempDir()) },
			want: []PCIDevice{},
		},
		{
			name: "a malformed device is left out, the others kept",
			root: func(t *testing.T) hostfs.Root {
				root := gpuTree(t, "two-node")
				if err := os.WriteFile(root.Path("/sys/bus/pci/devices/0000:07:00.0/class"), []byte("VGA\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return root
			},
			want:    []PCIDevice{nvidia(PCIAddress{Bus: 0x0f}, ptr.To[int32](1))},
			wantErr: true,
		},
		{
			name: "an unreadable numa_node leaves its device out",
			root: func(t *testing.T) hostfs.Root {
				return gpuTree(t, "two-node").WithFaults(map[string]error{
					"/sys/bus/pci/devices/0000:0f:00.0/numa_node": os.ErrPermission,
				})
			},
			want:    []PCIDevice{nvidia(PCIAddress{Bus: 0x07}, nil)},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ListPCIDevices(tc.root(t))
			if (err != nil) != tc.wantErr {
				t.Errorf("ListPCIDevices error = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ListPCIDevices (-want +got):\n%s", diff)
			}
		})
	}
}

// p100Snapshot is a real machine's /sys and /proc with one Tesla P100.
const p100Snapshot = "linux-amd64-xeon-e5-2695v4-tesla-p100"

func TestListPCIDevicesP100Snapshot(t *testing.T) {
	root := unpackSnapshot(t, p100Snapshot)
	devs, err := ListPCIDevices(root)
	if err != nil {
		t.Fatalf("ListPCIDevices: %v", err)
	}
	// The snapshot's /sys/bus/pci/devices has 29 links.
	if len(devs) != 29 {
		t.Errorf("got %d PCI devices, want 29", len(devs))
	}
	var gpus []PCIDevice
	for _, d := range devs {
		// NVIDIA (0x10de) 3D controllers (class 0x0302xx)
		if d.Vendor == 0x10de && d.Class>>8 == 0x0302 {
			gpus = append(gpus, d)
		}
	}
	want := []PCIDevice{{
		Address: PCIAddress{Bus: 0x06},
		Vendor:  0x10de,
		Device:  0x15f8, // Tesla P100 PCIe 16GB
		Class:   0x030200,
		// numa_node reads -1 and /sys/devices/system/node has only node0
		NUMANode: ptr.To[int32](0),
	}}
	if diff := cmp.Diff(want, gpus); diff != "" {
		t.Errorf("NVIDIA 3D controllers (-want +got):\n%s", diff)
	}

	// The GPU collector's lookup, from NVML's form of the bus id.
	addr, err := ParsePCIAddress("00000000:06:00.0")
	if err != nil {
		t.Fatal(err)
	}
	node, err := PCIDeviceNUMANode(root, addr)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ptr.To[int32](0), node); diff != "" {
		t.Errorf("PCIDeviceNUMANode(%s) (-want +got):\n%s", addr, diff)
	}
}

var sysfsPCIName = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$`)

func FuzzParsePCIAddress(f *testing.F) {
	for _, s := range []string{"00000000:07:00.0", "0000:BD:1f.7", "00010000:e1:00.0", "0:0:0.0", "::.", "0000:07:00.0:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParsePCIAddress(s)
		if err != nil {
			return
		}
		if a.Device > 0x1f || a.Function > 7 {
			t.Fatalf("ParsePCIAddress(%q) = %+v: device or function out of range", s, a)
		}
		sys := a.String()
		if !sysfsPCIName.MatchString(sys) {
			t.Fatalf("ParsePCIAddress(%q).String() = %q, not a sysfs name", s, sys)
		}
		again, err := ParsePCIAddress(sys)
		if err != nil || again != a {
			t.Fatalf("ParsePCIAddress(%q) = %+v, %v; want %+v (round trip of %q)", sys, again, err, a, s)
		}
	})
}

func FuzzParseNUMANodeAttr(f *testing.F) {
	for _, s := range []string{"0\n", "-1\n", "1023", "1024", "-2", "", " 3 ", "+1", "0x1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseNUMANodeAttr(b)
		if err != nil {
			return
		}
		if v < -1 || v > maxNUMANodeID {
			t.Fatalf("parseNUMANodeAttr(%q) = %d, out of [-1, %d]", b, v, maxNUMANodeID)
		}
	})
}

func FuzzParsePCIHexAttr(f *testing.F) {
	for _, s := range []string{"0x10de\n", "0x030200\n", "0x", "0xffff", "0x10000", "10de", "0x+1"} {
		f.Add([]byte(s), uint8(16))
		f.Add([]byte(s), uint8(24))
	}
	f.Fuzz(func(t *testing.T, b []byte, bits uint8) {
		bits = 4 * (1 + bits%16) // 4 to 64, whole hex digits
		v, err := parsePCIHexAttr(b, int(bits))
		if err != nil {
			return
		}
		if bits < 64 && v >= 1<<bits {
			t.Fatalf("parsePCIHexAttr(%q, %d) = %#x, wider than %d bits", b, bits, v, bits)
		}
	})
}
