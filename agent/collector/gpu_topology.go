// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/nvml"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// DefaultGPUTopologyInterval is how often the GPUs' PCIe roots and NVLinks
// are read again while the set of GPUs stays the same
// (--gpu-topology-interval). They change only when the hardware or the
// driver does, which changes the set of GPUs too, and reading them costs up
// to NVML_NVLINK_MAX_LINKS (36) calls per link kind per GPU, so they are not
// read every sample; the interval is a backstop for a link that goes down
// or comes back.
const DefaultGPUTopologyInterval = 10 * time.Minute

// gpuTopology is the GPUs' topology as last read.
type gpuTopology struct {
	key    string // the GPUs it was read for: index, UUID and bus id of each
	readAt time.Time
	byGPU  map[int32]gpuLinks
}

// gpuLinks is one GPU's place in the topology.
type gpuLinks struct {
	pcieRoot string
	nvlink   *telemetryv1alpha1.GPUNVLink
}

// topologyKey identifies a set of GPUs: a topology read for one holds for
// the same set.
func topologyKey(gpus []telemetryv1alpha1.GPUStatus) string {
	var sb strings.Builder
	for _, g := range gpus {
		fmt.Fprintf(&sb, "%d/%s/%s;", g.Index, g.UUID, g.PCIBusID)
	}
	return sb.String()
}

// readTopology reads the PCIe root of every GPU from sysfs and the NVLinks
// of every GPU from NVML. devs are the GPUs by NVML index. It returns the
// problems met: those GPUs' parts are left absent.
func readTopology(root hostfs.Root, gpus []telemetryv1alpha1.GPUStatus, devs map[int32]nvml.Device) (map[int32]gpuLinks, []error) {
	out := make(map[int32]gpuLinks, len(gpus))
	links := map[int32][]nvml.NVLink{}
	var problems []error
	for _, g := range gpus {
		var gl gpuLinks
		if g.PCIBusID != "" {
			r, err := pcieRoot(root, g.PCIBusID)
			if err != nil {
				problems = append(problems, fmt.Errorf("GPU %d: PCIe root: %w", g.Index, err))
			}
			gl.pcieRoot = r
		}
		out[g.Index] = gl
		d, ok := devs[g.Index]
		if !ok {
			continue
		}
		l, err := d.NVLinks()
		switch {
		case errors.Is(err, nvml.ErrNotSupported):
		case err != nil:
			problems = append(problems, fmt.Errorf("GPU %d: NVLinks: %w", g.Index, err))
		default:
			links[g.Index] = l
		}
	}
	for idx, nv := range nvlinkStatus(gpus, links) {
		gl := out[idx]
		gl.nvlink = nv
		out[idx] = gl
	}
	return out, problems
}

// pcieRootName is a PCI root bus as sysfs names its directory under
// /sys/devices: "pci" domain ":" bus.
var pcieRootName = regexp.MustCompile(`^pci[0-9a-f]{4,8}:[0-9a-f]{2}$`)

// pcieRoot names the PCIe root complex above the PCI function busID as the
// DRA standard attribute resource.kubernetes.io/pcieRoot does: the
// "pciDDDD:BB" directory of /sys/devices that the device's
// /sys/bus/pci/devices/<address> link resolves under. The kernel places
// every PCI device below its host bridge's directory (Documentation/
// ABI/testing/sysfs-bus-pci: /sys/bus/pci/devices/ holds links into
// /sys/devices). "" and no error when sysfs does not have the device.
func pcieRoot(root hostfs.Root, busID string) (string, error) {
	addr, err := ParsePCIAddress(busID)
	if err != nil {
		return "", err
	}
	link := sysPCIDevices + "/" + addr.String()
	target, err := root.Readlink(link)
	if hostfs.IsAbsent(err) || errors.Is(err, syscall.EINVAL) {
		// Absent, or a directory rather than sysfs's link (a copied
		// tree): the root is not known.
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !path.IsAbs(target) {
		target = path.Join(path.Dir(link), target)
	}
	rest, ok := strings.CutPrefix(target, "/sys/devices/")
	if !ok {
		return "", fmt.Errorf("%s links to %s, not below /sys/devices", link, target)
	}
	first, _, _ := strings.Cut(rest, "/")
	if !pcieRootName.MatchString(first) {
		return "", fmt.Errorf("%s links to %s, not below a PCI root bus (/sys/devices/pciDDDD:BB)", link, target)
	}
	return first, nil
}

// nvlinkStatus maps the GPUs' active NVLinks to the API. A link whose far
// end has the bus id of another GPU makes that GPU a peer; a link to an
// NVSwitch puts the GPU on that switch's fabric, where it reaches every GPU
// linked to the same switches. A link whose far end the driver does not
// name (drivers without nvmlDeviceGetNvLinkRemoteDeviceType) and that is
// no GPU of the node is counted as active and joins nothing: the agent
// does not guess a switch. The group is the lowest index of the connected
// component. GPUs with no active link are absent.
func nvlinkStatus(gpus []telemetryv1alpha1.GPUStatus, links map[int32][]nvml.NVLink) map[int32]*telemetryv1alpha1.GPUNVLink {
	byBus := map[string]int32{}
	for _, g := range gpus {
		if a, err := ParsePCIAddress(g.PCIBusID); err == nil {
			byBus[a.String()] = g.Index
		}
	}
	parent := map[int32]int32{}
	var find func(int32) int32
	find = func(i int32) int32 {
		p, ok := parent[i]
		if !ok || p == i {
			return i
		}
		r := find(p)
		parent[i] = r
		return r
	}
	union := func(a, b int32) {
		ra, rb := find(a), find(b)
		if ra == rb {
			return
		}
		// The lowest index is the root: it names the group.
		parent[max(ra, rb)] = min(ra, rb)
	}
	onSwitch := map[string]int32{} // switch bus id -> a GPU on it
	out := map[int32]*telemetryv1alpha1.GPUNVLink{}
	for _, g := range gpus {
		ls := links[g.Index]
		if len(ls) == 0 {
			continue
		}
		nv := &telemetryv1alpha1.GPUNVLink{ActiveLinks: int32(min(len(ls), 64))}
		var peers []int32
		for _, l := range ls {
			remote := ""
			if a, err := ParsePCIAddress(l.RemoteBusID); err == nil {
				remote = a.String()
			}
			peer, isGPU := byBus[remote]
			switch {
			case l.Remote == nvml.NVLinkRemoteSwitch:
				nv.NVSwitch = true
				// Switches the driver does not name share one fabric.
				if first, ok := onSwitch[remote]; ok {
					union(first, g.Index)
				} else {
					onSwitch[remote] = g.Index
				}
			case (l.Remote == nvml.NVLinkRemoteGPU || l.Remote == nvml.NVLinkRemoteUnknown) && isGPU && peer != g.Index:
				peers = append(peers, peer)
				union(peer, g.Index)
			}
		}
		if !nv.NVSwitch {
			slices.Sort(peers)
			nv.Peers = slices.Compact(peers)
		}
		out[g.Index] = nv
	}
	for idx, nv := range out {
		nv.Group = find(idx)
	}
	return out
}
