// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"errors"
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// MIGDevices reads the MIG layout through the calls nvml.h documents for
// any user: nvmlDeviceGetMaxMigDeviceCount and
// nvmlDeviceGetMigDeviceHandleByIndex on the GPU, and on each MIG device
// handle nvmlDeviceGetUUID, nvmlDeviceGetAttributes (slice counts and
// memory) and nvmlDeviceGetGpuInstanceId. It never calls what nvml.h marks
// "Requires privileged user" (nvmlDeviceGetGpuInstances,
// nvmlDeviceGetGpuInstanceById, nvmlGpuInstanceGetComputeInstances, ...)
// nor nvmlDeviceGetGpuInstanceProfileInfo, which may answer
// NVML_ERROR_NO_PERMISSION: the agent runs unprivileged, and NVIDIA's
// device plugin, which names profiles through those, runs as root.
//
// A GPU without MIG mode on has no MIG devices: nvml.h says
// nvmlDeviceGetMaxMigDeviceCount "returns zero if MIG is not supported or
// enabled", which is ErrNotSupported here.
func (d *device) MIGDevices() (MIGLayout, error) {
	if !d.calls.migDevices {
		return MIGLayout{}, missingCall("nvmlDeviceGetMaxMigDeviceCount")
	}
	maxDevices, ret := d.h.GetMaxMigDeviceCount()
	if err := errorFor("nvmlDeviceGetMaxMigDeviceCount", ret); err != nil {
		return MIGLayout{}, err
	}
	if maxDevices <= 0 {
		return MIGLayout{}, fmt.Errorf("nvmlDeviceGetMaxMigDeviceCount: 0, MIG is off: %w", ErrNotSupported)
	}
	layout := MIGLayout{MaxDevices: maxDevices}
	var errs []error
	for i := range maxDevices {
		h, ret := d.h.GetMigDeviceHandleByIndex(i)
		if ret == gonvml.ERROR_NOT_FOUND {
			continue // no MIG device at this index: the indexes are sparse
		}
		if err := errorFor("nvmlDeviceGetMigDeviceHandleByIndex", ret); err != nil {
			errs = append(errs, fmt.Errorf("MIG device %d: %w", i, err))
			continue
		}
		m, err := readMIGDevice(h)
		if err != nil {
			errs = append(errs, fmt.Errorf("MIG device %d: %w", i, err))
			continue
		}
		layout.Devices = append(layout.Devices, m)
	}
	return layout, errors.Join(errs...)
}

// readMIGDevice reads one MIG device handle.
func readMIGDevice(h gonvml.Device) (MIGDevice, error) {
	uuid, ret := h.GetUUID()
	if err := errorFor("nvmlDeviceGetUUID", ret); err != nil {
		return MIGDevice{}, err
	}
	attrs, ret := h.GetAttributes()
	if err := errorFor("nvmlDeviceGetAttributes", ret); err != nil {
		return MIGDevice{}, err
	}
	gi, ret := h.GetGpuInstanceId()
	if err := errorFor("nvmlDeviceGetGpuInstanceId", ret); err != nil {
		return MIGDevice{}, err
	}
	if attrs.GpuInstanceSliceCount == 0 || attrs.ComputeInstanceSliceCount == 0 {
		return MIGDevice{}, fmt.Errorf("nvmlDeviceGetAttributes: %s has %d GPU instance and %d compute instance slices, want at least 1",
			uuid, attrs.GpuInstanceSliceCount, attrs.ComputeInstanceSliceCount)
	}
	return MIGDevice{
		UUID:                  uuid,
		GPUInstanceID:         gi,
		GPUInstanceSlices:     int(attrs.GpuInstanceSliceCount),
		ComputeInstanceSlices: int(attrs.ComputeInstanceSliceCount),
		MemoryBytes:           attrs.MemorySizeMB << 20, // nvml.h: "Device memory size (in MiB)"
		OFAs:                  int(attrs.SharedOfaCount),
	}, nil
}
