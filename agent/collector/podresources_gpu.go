// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/podresources"
)

// GPUResources says which of the kubelet's allocations are GPUs.
type GPUResources struct {
	// Names are the device-plugin resources that hand out whole GPUs, or
	// MIG devices under the device plugin's "single" MIG strategy
	// (--gpu-resource-names).
	Names []string
	// MIGPrefix starts the device-plugin resources of MIG devices, one per
	// profile, under the "mixed" MIG strategy (--mig-resource-prefix).
	MIGPrefix string
	// DRADrivers are the DRA drivers whose claimed devices are GPUs
	// (--gpu-dra-drivers).
	DRADrivers []string
}

// DefaultGPUResources are the names NVIDIA's device plugin and DRA driver
// use: nvidia.com/gpu, nvidia.com/mig-<profile>, gpu.nvidia.com.
func DefaultGPUResources() GPUResources {
	return GPUResources{Names: []string{"nvidia.com/gpu"}, MIGPrefix: "nvidia.com/mig-", DRADrivers: []string{"gpu.nvidia.com"}}
}

// allocateGPUs marks the GPUs of s, and counts the MIG devices of each
// profile, that the kubelet has allocated to containers: s.GPUs[].allocated
// and s.GPUs[].mig.profiles[].allocated. A device is known by its id, a
// GPU UUID or a MIG device UUID (s.GPUDevices). The device plugin hands
// those out as device ids, with "::<n>" appended to a GPU shared by
// time-slicing. A DRA claim names its device by pool and device name, which
// only the driver's ResourceSlice ties to a UUID, and the agent does not
// read the API server here: a claimed device is mapped when its CDI device
// names or its device name contain a known UUID. An allocation of a GPU
// resource that cannot be mapped makes every GPU's allocation unknown
// (left absent), and the error says which.
func allocateGPUs(resp *podresources.Response, s *Sample, cfg GPUResources) error {
	if len(s.GPUs) == 0 {
		return nil
	}
	whole := map[int32]bool{}
	mig := map[int32]map[string]map[string]bool{} // GPU -> profile -> MIG UUIDs
	var unmapped []string
	take := func(id, what string) bool {
		d, ok := s.GPUDevices[id]
		if !ok {
			return false
		}
		if d.MIGProfile == "" {
			whole[d.GPU] = true
			return true
		}
		if mig[d.GPU] == nil {
			mig[d.GPU] = map[string]map[string]bool{}
		}
		if mig[d.GPU][d.MIGProfile] == nil {
			mig[d.GPU][d.MIGProfile] = map[string]bool{}
		}
		mig[d.GPU][d.MIGProfile][id] = true
		return true
	}
	for _, pod := range resp.Pods {
		for _, ctr := range pod.Containers {
			where := pod.Namespace + "/" + pod.Name + "/" + ctr.Name
			for _, dev := range ctr.Devices {
				name := dev.ResourceName
				if !slices.Contains(cfg.Names, name) && (cfg.MIGPrefix == "" || !strings.HasPrefix(name, cfg.MIGPrefix)) {
					continue
				}
				for _, id := range dev.DeviceIDs {
					id, _, _ = strings.Cut(id, "::")
					if !take(id, name) {
						unmapped = append(unmapped, fmt.Sprintf("%s: %s device %q", where, name, id))
					}
				}
			}
			for _, dr := range ctr.DynamicResources {
				for _, cr := range dr.ClaimResources {
					if !slices.Contains(cfg.DRADrivers, cr.DriverName) {
						continue
					}
					names := append([]string{cr.DeviceName}, cr.CDIDevices...)
					if !takeByName(names, s.GPUDevices, take) {
						unmapped = append(unmapped, fmt.Sprintf("%s: claim %s/%s device %s/%s/%s", where,
							dr.ClaimNamespace, dr.ClaimName, cr.DriverName, cr.PoolName, cr.DeviceName))
					}
				}
			}
		}
	}
	if len(unmapped) > 0 {
		slices.Sort(unmapped)
		return fmt.Errorf("GPU allocations left out: %d allocated devices name no GPU or MIG device of this node by UUID, e.g. %s", len(unmapped), unmapped[0])
	}
	for i := range s.GPUs {
		g := &s.GPUs[i]
		if g.MIG == nil && !ptr.Deref(g.MIGEnabled, false) {
			g.Allocated = ptr.To(whole[g.Index])
			continue
		}
		if g.MIG == nil {
			continue
		}
		for j := range g.MIG.Profiles {
			p := &g.MIG.Profiles[j]
			p.Allocated = ptr.To(min(int32(len(mig[g.Index][p.Profile])), p.Count))
		}
	}
	return nil
}

// takeByName takes the first known device whose UUID one of names
// contains, MIG devices before GPUs: a name holding both is the MIG
// device's.
func takeByName(names []string, devices map[string]GPUDevice, take func(id, what string) bool) bool {
	ids := make([]string, 0, len(devices))
	for id := range devices {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		am, bm := devices[a].MIGProfile != "", devices[b].MIGProfile != ""
		if am != bm {
			if am {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, n := range names {
		lower := strings.ToLower(n)
		for _, id := range ids {
			if strings.Contains(lower, strings.ToLower(id)) {
				return take(id, n)
			}
		}
	}
	return false
}
