// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/telesched/telesched/agent/hostfs"
)

// sysPCIDevices holds one directory per PCI function, named by its address.
const sysPCIDevices = "/sys/bus/pci/devices"

// maxNUMANodeID is the largest NUMA node id the API accepts; the kernel's
// MAX_NUMNODES is at most 1024.
const maxNUMANodeID = 1023

// PCIAddress is the address of a PCI function.
type PCIAddress struct {
	Domain   uint32
	Bus      uint8
	Device   uint8 // 0 to 0x1f
	Function uint8 // 0 to 7
}

// String is the address as sysfs names it: lowercase hex with a domain of
// at least four digits, e.g. "0000:07:00.0".
func (a PCIAddress) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", a.Domain, a.Bus, a.Device, a.Function)
}

// ParsePCIAddress parses "domain:bus:device.function" in hex of either
// case, with a domain of one to eight digits: NVML's "00000000:07:00.0"
// and sysfs's "0000:07:00.0" are the same address.
func ParsePCIAddress(s string) (PCIAddress, error) {
	domain, rest, ok1 := strings.Cut(s, ":")
	bus, rest, ok2 := strings.Cut(rest, ":")
	dev, fn, ok3 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !ok3 {
		return PCIAddress{}, fmt.Errorf("PCI address %q: want domain:bus:device.function", s)
	}
	d, err1 := parseHexDigits(domain, 8)
	b, err2 := parseHexDigits(bus, 2)
	v, err3 := parseHexDigits(dev, 2)
	f, err4 := parseHexDigits(fn, 1)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return PCIAddress{}, fmt.Errorf("PCI address %q: %w", s, err)
	}
	if v > 0x1f || f > 7 {
		return PCIAddress{}, fmt.Errorf("PCI address %q: device above 0x1f or function above 7", s)
	}
	return PCIAddress{Domain: uint32(d), Bus: uint8(b), Device: uint8(v), Function: uint8(f)}, nil
}

// parseHexDigits parses one to maxDigits hex digits, with no prefix or sign.
func parseHexDigits(s string, maxDigits int) (uint64, error) {
	if len(s) == 0 || len(s) > maxDigits {
		return 0, fmt.Errorf("%q: want 1 to %d hex digits", s, maxDigits)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return 0, fmt.Errorf("%q: want hex digits", s)
		}
	}
	return strconv.ParseUint(s, 16, 64)
}

// parsePCIHexAttr parses a sysfs PCI attribute such as vendor ("0x10de")
// or class ("0x030200"): "0x" and at most bits/4 hex digits.
func parsePCIHexAttr(b []byte, bits int) (uint64, error) {
	s := string(bytes.TrimSpace(b))
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok {
		return 0, fmt.Errorf("%q: want 0x and hex digits", s)
	}
	return parseHexDigits(digits, bits/4)
}

// parseNUMANodeAttr parses a device's numa_node attribute: a node id, or -1
// when the firmware gave the device no NUMA affinity.
func parseNUMANodeAttr(b []byte) (int32, error) {
	v, err := hostfs.ParseInt(b)
	if err != nil {
		return 0, fmt.Errorf("numa_node: %w", err)
	}
	if v < -1 || v > maxNUMANodeID {
		return 0, fmt.Errorf("numa_node %d: want -1 to %d", v, maxNUMANodeID)
	}
	return int32(v), nil
}

// countNUMANodes counts the NUMA nodes in /sys/devices/system/node; 0 when
// the kernel does not show them.
func countNUMANodes(root hostfs.Root) (int, error) {
	matches, err := root.Glob("/sys/devices/system/node/node*")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range matches {
		id := strings.TrimPrefix(path.Base(m), "node")
		if _, err := strconv.ParseUint(id, 10, 32); err == nil {
			n++
		}
	}
	return n, nil
}

// numaResolver turns raw numa_node values into NUMA nodes, counting the
// machine's nodes once, only if some device has no affinity.
type numaResolver struct {
	root  hostfs.Root
	nodes int // -1 until counted
	err   error
}

func newNUMAResolver(root hostfs.Root) *numaResolver {
	return &numaResolver{root: root, nodes: -1}
}

// resolve returns the node of a device whose numa_node reads raw: raw
// itself when it is a node id; for -1 (no affinity from the firmware) node
// 0 when the machine has exactly one node, where every device is on it, and
// nil otherwise.
func (r *numaResolver) resolve(raw int32) (*int32, error) {
	if raw >= 0 {
		return &raw, nil
	}
	if r.nodes < 0 {
		r.nodes, r.err = countNUMANodes(r.root)
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.nodes == 1 {
		zero := int32(0)
		return &zero, nil
	}
	return nil, nil
}

// numaNode reads the NUMA node of the PCI function at addr. It returns nil
// and no error when sysfs does not have the device or its numa_node (a
// kernel without NUMA).
func (r *numaResolver) numaNode(addr PCIAddress) (*int32, error) {
	return r.numaNodeFile(sysPCIDevices + "/" + addr.String() + "/numa_node")
}

// numaNodeFile is numaNode given the host path of the numa_node attribute.
func (r *numaResolver) numaNodeFile(file string) (*int32, error) {
	b, err := r.root.ReadFile(file)
	if hostfs.IsAbsent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	raw, err := parseNUMANodeAttr(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return r.resolve(raw)
}

// PCIDeviceNUMANode returns the NUMA node of the PCI function at addr, as
// the GPU and NUMA collectors report it: the device's numa_node; for -1
// (no affinity from the firmware) node 0 on a machine with one NUMA node
// and nil otherwise; nil when sysfs does not have the device.
func PCIDeviceNUMANode(root hostfs.Root, addr PCIAddress) (*int32, error) {
	return newNUMAResolver(root).numaNode(addr)
}

// PCIDevice is one PCI function in /sys/bus/pci/devices.
type PCIDevice struct {
	Address PCIAddress
	// Vendor and Device are the PCI ids, e.g. 0x10de (NVIDIA) and 0x15f8.
	Vendor uint16
	Device uint16
	// Class is base class, subclass and programming interface, e.g.
	// 0x030200: 0x03 display controller, 0x02 3D controller.
	Class uint32
	// NUMANode is the NUMA node, resolved as by PCIDeviceNUMANode.
	NUMANode *int32
}

// ListPCIDevices lists the PCI functions in /sys/bus/pci/devices, ordered
// by address as sysfs sorts them. A device whose attributes cannot be read
// or parsed is left out and named in the returned error; the others are
// still returned. No PCI directory (an empty root) is no devices, no error.
func ListPCIDevices(root hostfs.Root) ([]PCIDevice, error) {
	dirs, err := root.Glob(sysPCIDevices + "/*")
	if err != nil {
		return nil, err
	}
	r := newNUMAResolver(root)
	devs := make([]PCIDevice, 0, len(dirs))
	var errs []error
	for _, dir := range dirs {
		d, err := readPCIDevice(root, r, dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		devs = append(devs, d)
	}
	return devs, errors.Join(errs...)
}

func readPCIDevice(root hostfs.Root, r *numaResolver, dir string) (PCIDevice, error) {
	addr, err := ParsePCIAddress(path.Base(dir))
	if err != nil {
		return PCIDevice{}, fmt.Errorf("%s: %w", dir, err)
	}
	d := PCIDevice{Address: addr}
	attrs := []struct {
		name string
		bits int
		set  func(uint64)
	}{
		{"vendor", 16, func(v uint64) { d.Vendor = uint16(v) }},
		{"device", 16, func(v uint64) { d.Device = uint16(v) }},
		{"class", 24, func(v uint64) { d.Class = uint32(v) }},
	}
	for _, a := range attrs {
		file := dir + "/" + a.name
		b, err := root.ReadFile(file)
		if err != nil {
			return PCIDevice{}, err
		}
		v, err := parsePCIHexAttr(b, a.bits)
		if err != nil {
			return PCIDevice{}, fmt.Errorf("%s: %w", file, err)
		}
		a.set(v)
	}
	if d.NUMANode, err = r.numaNodeFile(dir + "/numa_node"); err != nil {
		return PCIDevice{}, err
	}
	return d, nil
}
