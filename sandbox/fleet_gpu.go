// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"regexp"
	"strconv"

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

// migComputeSlices is the most MIG devices an A100 or H100 holds: its
// compute slices.
const migComputeSlices = 7

// migProfile is a MIG profile's name: "<slices>g.<memory>gb".
var migProfile = regexp.MustCompile(`^([1-7])g\.([0-9]+)gb$`)

// migDevice is the MIG device of profile on a GPU of gpuMemoryBytes: its
// compute slices (1, 2, 3, 4 or 7) and memory. MIG gives a 1-slice device
// an eighth of the GPU's memory, 2 slices a quarter, 3 and 4 slices half,
// 7 all of it (NVIDIA's MIG user guide, "Supported MIG profiles"); the
// memory is 95 % of the name's GB, as the profiles' devices report it
// (9728 MiB for 1g.10gb on an A100 80GB), which the agent names back the
// same way.
func migDevice(profile string, gpuMemoryBytes uint64) (sim.MIGDevice, error) {
	m := migProfile.FindStringSubmatch(profile)
	if m == nil {
		return sim.MIGDevice{}, fmt.Errorf("%q is not a MIG profile <slices>g.<memory>gb", profile)
	}
	slices, _ := strconv.Atoi(m[1])
	gb, _ := strconv.ParseUint(m[2], 10, 32)
	eighths := map[int]uint64{1: 1, 2: 2, 3: 4, 4: 4, 7: 8}[slices]
	gpuGB := gpuMemoryBytes >> 30
	if eighths == 0 || gb != gpuGB*eighths/8 {
		return sim.MIGDevice{}, fmt.Errorf("%q is no MIG profile of a %d GB GPU (1g.%dgb, 2g.%dgb, 3g.%dgb, 4g.%dgb, 7g.%dgb)",
			profile, gpuGB, gpuGB/8, gpuGB/4, gpuGB/2, gpuGB/2, gpuGB)
	}
	return sim.MIGDevice{Profile: profile, Slices: slices, MemoryMiB: gb * 1024 * 95 / 100}, nil
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
	if g.DRA {
		return fmt.Errorf("%s.gpus.dra: the sandbox publishes whole GPUs as ResourceSlices, not MIG devices; drop gpus.mig or gpus.dra", at)
	}
	n := mig.GPUs
	switch {
	case n == 0:
		n = g.Count
	case n < 0 || n > g.Count:
		return fmt.Errorf("%s.gpus.mig.gpus: %d must be within 1-%d (gpus.count)", at, mig.GPUs, g.Count)
	}
	switch mig.Strategy {
	case sim.MIGMixed:
	case sim.MIGSingle:
		if n != g.Count {
			return fmt.Errorf("%s.gpus.mig.gpus: %d of %d GPUs in MIG mode; the single strategy needs all of them (use mixed)", at, n, g.Count)
		}
	default:
		return fmt.Errorf("%s.gpus.mig.strategy: %q is not one of single, mixed", at, mig.Strategy)
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
		slices := 0
		devs := make([]sim.MIGDevice, 0, len(layout))
		for j, p := range layout {
			d, err := migDevice(p, spec.GPUs[i].MemoryBytes)
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
			devs = append(devs, d)
		}
		if slices > migComputeSlices {
			return fmt.Errorf("%s: %d compute slices, a GPU has %d", lat, slices, migComputeSlices)
		}
		spec.GPUs[i].MIG = devs
	}
	spec.MIGStrategy = mig.Strategy
	return nil
}
