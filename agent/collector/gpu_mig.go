// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/telesched/telesched/agent/nvml"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// GPUDevice is what a device id the kubelet hands out (a GPU UUID or a MIG
// device UUID) stands for: a GPU of the sample, whole or one MIG device of
// it.
type GPUDevice struct {
	// GPU is the GPU's NVML index.
	GPU int32
	// MIGProfile is the MIG device's profile; "" for the whole GPU.
	MIGProfile string
}

// migProfileName names a MIG device's profile as NVIDIA's device plugin
// does (its resource is nvidia.com/mig-<profile>, a "+" made a "."):
// "<g>g.<gb>gb", or "<c>c.<g>g.<gb>gb" when the compute instance takes
// fewer slices than its GPU instance. The plugin (go-nvlib's
// MigProfileInfo) reads g and c from the GPU and compute instance
// profiles, which only a privileged user may list; the MIG
// device's attributes carry the same slice counts. The memory is the
// plugin's rounding of the instance's share of the GPU: the share rounded
// up to eighths, times the GPU's memory in GiB rounded up, rounded to the
// nearest GB. An A100 80GB's 9728 MiB instance: 9728/81920 = 0.119 -> 1/8,
// x 80 = "1g.10gb".
//
// The plugin's "+me" suffix (an instance holding the GPU's media
// extensions) comes from the instance profile id, which an unprivileged
// user cannot read. The attributes show it all the same: of the instances
// smaller than the whole GPU (maxDevices slices), only a "+me" one holds
// an optical flow accelerator (nvml.MIGDevice.OFAs says where that is
// seen). maxDevices 0 (unknown) names no "+me".
func migProfileName(d nvml.MIGDevice, gpuMemoryBytes uint64, maxDevices int) string {
	gb := migMemoryGB(d.MemoryBytes, gpuMemoryBytes)
	media := ""
	if d.OFAs > 0 && d.GPUInstanceSlices < maxDevices {
		media = "+me"
	}
	if d.ComputeInstanceSlices == d.GPUInstanceSlices {
		return fmt.Sprintf("%dg.%dgb%s", d.GPUInstanceSlices, gb, media)
	}
	return fmt.Sprintf("%dc.%dg.%dgb%s", d.ComputeInstanceSlices, d.GPUInstanceSlices, gb, media)
}

// migMemoryGB is the "gb" of a MIG profile's name; see migProfileName.
func migMemoryGB(instanceBytes, gpuBytes uint64) uint64 {
	if gpuBytes == 0 {
		return 0
	}
	const gib = 1 << 30
	eighths := math.Ceil(float64(instanceBytes) / float64(gpuBytes) * 8)
	gpuGiB := float64((gpuBytes + gib - 1) / gib)
	return uint64(math.Round(eighths / 8 * gpuGiB))
}

// migStatus maps a GPU's MIG layout to the API, and adds each MIG device's
// UUID to devices. computeSlicesTotal is the GPU's most MIG devices
// (nvmlDeviceGetMaxMigDeviceCount): a MIG device takes at least one compute
// slice, and every compute slice can be a MIG device of its own (a "1g" or
// "1c" profile), so the most MIG devices a GPU holds is its compute slices:
// 7 on an A100, H100 or H200, 4 on an A30. It is never published below the
// slices the GPU instances in place take.
func migStatus(layout nvml.MIGLayout, gpuIndex int32, gpuMemoryBytes uint64, devices map[string]GPUDevice) *telemetryv1alpha1.GPUMIG {
	used := map[int]int{} // GPU instance id -> its slices
	byName := map[string]*telemetryv1alpha1.MIGProfile{}
	slicesOf := map[string]int{}
	for _, d := range layout.Devices {
		name := migProfileName(d, gpuMemoryBytes, layout.MaxDevices)
		used[d.GPUInstanceID] = d.GPUInstanceSlices
		p, ok := byName[name]
		if !ok {
			p = &telemetryv1alpha1.MIGProfile{Profile: name, MemoryBytes: clampInt64(d.MemoryBytes)}
			byName[name] = p
			slicesOf[name] = d.ComputeInstanceSlices
		}
		p.Count++
		devices[d.UUID] = GPUDevice{GPU: gpuIndex, MIGProfile: name}
	}
	total := layout.MaxDevices
	inUse := 0
	for _, s := range used {
		inUse += s
	}
	mig := &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: int32(min(max(total, inUse), math.MaxInt32))}
	for _, p := range byName {
		mig.Profiles = append(mig.Profiles, *p)
	}
	// Largest devices first, then by name: a stable order.
	slices.SortFunc(mig.Profiles, func(a, b telemetryv1alpha1.MIGProfile) int {
		return cmp.Or(cmp.Compare(slicesOf[b.Profile], slicesOf[a.Profile]), cmp.Compare(a.Profile, b.Profile))
	})
	return mig
}
