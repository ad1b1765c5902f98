// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/telesched/telesched/sandbox/sim"
)

// FleetMIG is a node kind's MIG layout.
type FleetMIG struct {
	// Strategy is the device plugin's MIG strategy: single (the MIG
	// devices are the GPU resource; every GPU in MIG mode, one profile) or
	// mixed (one resource per profile, nvidia.com/mig-<profile>; whole
	// GPUs stay the GPU resource).
	Strategy string `json:"strategy"`
	// GPUs is how many GPUs, the first ones, are in MIG mode; 0 all.
	GPUs int `json:"gpus,omitempty"`
	// Profiles is every MIG GPU's layout ("1g.10gb", ...); Layouts one
	// per MIG GPU instead. Exactly one of them.
	Profiles []string   `json:"profiles,omitempty"`
	Layouts  [][]string `json:"layouts,omitempty"`
}

// migComputeSlices and migMemorySlices are what an A100, H100 (80 or 94
// GB) or H200 in MIG mode divides: 7 compute slices and 8 memory slices
// (NVIDIA's MIG User Guide, "Supported MIG Profiles").
const (
	migComputeSlices = 7
	migMemorySlices  = 8
)

// migProfile is a MIG profile's name: "<slices>g.<memory>gb", with "+me"
// for the one instance a GPU may give its media extensions (the agent
// tells it by its optical flow accelerator).
var migProfile = regexp.MustCompile(`^([1-7])g\.([0-9]+)gb(\+me)?$`)

// migGPU is what a GPU type's MIG profiles are named by: the type's name
// in NVIDIA's tables and the memory, in GB, its 7g profile names.
type migGPU struct {
	name string
	gb   int
}

// migGPUs are the fleet's GPU types' (gpuTypes).
var migGPUs = map[string]migGPU{
	"a100":      {"A100 40GB", 40},
	"a100-80gb": {"A100 80GB", 80},
	"h100":      {"H100 80GB", 80},
	"h100-nvl":  {"H100 94GB", 94},
	"h200":      {"H200", 141},
}

// migShapes are the MIG profiles NVIDIA documents for the A100, H100 and
// H200 (MIG User Guide, "Supported MIG Profiles"), by compute and memory
// slices: 1g with 1 memory slice (1g.10gb of an 80 GB GPU) or 2 (1g.20gb),
// 2g with 2, 3g and 4g with 4, 7g with all 8. A profile's name gives the
// memory of its slices in GB, rounded (141 GB: 1g.18gb, 1g.35gb, 2g.35gb,
// 3g.71gb, 4g.71gb, 7g.141gb).
var migShapes = []struct{ compute, memory int }{{1, 1}, {1, 2}, {2, 2}, {3, 4}, {4, 4}, {7, 8}}

// migProfiles are a GPU type's profile names with their compute and
// memory slices, in migShapes' order.
func migProfiles(gpu migGPU) (names []string, shapes map[string][2]int) {
	shapes = map[string][2]int{}
	for _, sh := range migShapes {
		name := fmt.Sprintf("%dg.%dgb", sh.compute, (gpu.gb*sh.memory+migMemorySlices/2)/migMemorySlices)
		names = append(names, name)
		shapes[name] = [2]int{sh.compute, sh.memory}
	}
	return names, shapes
}

// migDevice is the MIG device of profile on a GPU of type gpuType: its
// compute slices and memory, and its memory slices. The memory is 95 % of
// the name's GB, as the profiles' devices report it (9728 MiB for 1g.10gb
// on an A100 80GB), which the agent names back the same way.
func migDevice(profile, gpuType string) (sim.MIGDevice, int, error) {
	m := migProfile.FindStringSubmatch(profile)
	if m == nil {
		return sim.MIGDevice{}, 0, fmt.Errorf("%q is not a MIG profile <slices>g.<memory>gb", profile)
	}
	gpu, ok := migGPUs[gpuType]
	if !ok {
		return sim.MIGDevice{}, 0, fmt.Errorf("GPU type %q has no MIG profiles here", gpuType)
	}
	names, shapes := migProfiles(gpu)
	base := strings.TrimSuffix(profile, "+me")
	sh, ok := shapes[base]
	if !ok {
		return sim.MIGDevice{}, 0, fmt.Errorf("%q is no MIG profile of an %s (%s)", profile, gpu.name, strings.Join(names, ", "))
	}
	if m[3] != "" && (sh[0] != 1 || sh[1] != 1) {
		// NVIDIA's tables list one media-extensions profile on these GPUs:
		// 1g with one memory slice (1g.10gb+me on an 80 GB GPU).
		return sim.MIGDevice{}, 0, fmt.Errorf("%q: only the 1g profile of one memory slice has media extensions on an %s (%s+me)", profile, gpu.name, names[0])
	}
	gb, _ := strconv.ParseUint(m[2], 10, 32)
	return sim.MIGDevice{Profile: profile, Slices: sh[0], MemoryMiB: gb * 1024 * 95 / 100}, sh[1], nil
}

// applyGPUOptions sets a node kind's MIG layout, NVLink and DRA on its
// GPUs and spec; at names the node kind in errors.
func (g *FleetGPUs) applyGPUOptions(at string, spec *sim.NodeSpec) error {
	switch g.NVLink {
	case "", "none":
	case sim.NVLinkSwitch:
		spec.NVLink = sim.NVLinkSwitch
	case sim.NVLinkPairs:
		if g.Count%2 != 0 || g.PerNUMA%2 != 0 {
			return fmt.Errorf("%s.gpus.nvlink: pairs need an even count and perNUMA (%d, %d): a pair sits on one NUMA node", at, g.Count, g.PerNUMA)
		}
		spec.NVLink = sim.NVLinkPairs
	default:
		return fmt.Errorf("%s.gpus.nvlink: %q is not one of nvswitch, pairs, none", at, g.NVLink)
	}
	for i := range spec.GPUs {
		spec.GPUs[i].ComputeSlices = migComputeSlices
		// Two GPUs to a PCIe root, as on a DGX A100's PCIe switches.
		spec.GPUs[i].PCIeRoot = fmt.Sprintf("pci0000:%02x", 0x10*(i/2))
	}
	spec.DRA = g.DRA
	mig := g.MIG
	if mig == nil {
		return nil
	}
	n := mig.GPUs
	switch {
	case n == 0:
		n = g.Count
	case n < 0 || n > g.Count:
		return fmt.Errorf("%s.gpus.mig.gpus: %d must be within 1-%d (gpus.count)", at, mig.GPUs, g.Count)
	}
	switch {
	case g.DRA && mig.Strategy != "":
		return fmt.Errorf("%s.gpus.mig.strategy: %q is the device plugin's; a DRA node publishes each MIG device as a device of class mig.nvidia.com (leave the strategy out)", at, mig.Strategy)
	case g.DRA, mig.Strategy == sim.MIGMixed:
	case mig.Strategy == sim.MIGSingle:
		if n != g.Count {
			return fmt.Errorf("%s.gpus.mig.gpus: %d of %d GPUs in MIG mode; the single strategy needs all of them (use mixed)", at, n, g.Count)
		}
	default:
		return fmt.Errorf("%s.gpus.mig.strategy: %q is not one of single, mixed (a DRA node takes none)", at, mig.Strategy)
	}
	layouts := mig.Layouts
	switch {
	case len(mig.Profiles) > 0 && len(layouts) > 0:
		return fmt.Errorf("%s.gpus.mig: profiles and layouts are both set; give one", at)
	case len(mig.Profiles) > 0:
		for range n {
			layouts = append(layouts, mig.Profiles)
		}
	case len(layouts) != n:
		return fmt.Errorf("%s.gpus.mig.layouts: %d layouts for %d GPUs in MIG mode", at, len(layouts), n)
	}
	single := ""
	for i, layout := range layouts {
		lat := fmt.Sprintf("%s.gpus.mig.layouts[%d]", at, i)
		if len(mig.Profiles) > 0 {
			lat = at + ".gpus.mig.profiles"
		}
		if len(layout) == 0 {
			return fmt.Errorf("%s: a GPU in MIG mode needs at least one MIG device", lat)
		}
		slices, memory, media := 0, 0, 0
		devs := make([]sim.MIGDevice, 0, len(layout))
		for j, p := range layout {
			if strings.HasSuffix(p, "+me") {
				if media++; media > 1 {
					return fmt.Errorf("%s[%d]: a second %q; a GPU has one set of media extensions", lat, j, p)
				}
			}
			d, mem, err := migDevice(p, g.Type)
			if err != nil {
				return fmt.Errorf("%s[%d]: %w", lat, j, err)
			}
			if mig.Strategy == sim.MIGSingle {
				if single == "" {
					single = p
				} else if p != single {
					return fmt.Errorf("%s[%d]: %q beside %q; the single strategy cuts every GPU into one profile (use mixed)", lat, j, p, single)
				}
			}
			slices += d.Slices
			memory += mem
			devs = append(devs, d)
		}
		if slices > migComputeSlices {
			return fmt.Errorf("%s: %d compute slices, a GPU has %d", lat, slices, migComputeSlices)
		}
		if memory > migMemorySlices {
			return fmt.Errorf("%s: %d memory slices, a GPU has %d", lat, memory, migMemorySlices)
		}
		spec.GPUs[i].MIG = devs
	}
	spec.MIGStrategy = mig.Strategy
	return nil
}
