// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nvml is the agent's narrow view of NVIDIA's management library
// (NVML): the device readings the GPU collector needs, as plain Go values.
// It is the only package of the project that imports go-nvml; no go-nvml type
// leaves it. NVML return codes become Go errors here: ErrNotSupported for a
// reading the device does not have, ErrLibraryNotFound for a node without
// the driver, and an *Error carrying the code for any other failure.
package nvml

import gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

// Library is NVML as the agent uses it. Its methods may be called from
// several goroutines.
type Library interface {
	// Init loads libnvidia-ml.so.1, initializes NVML and registers for
	// critical XID events on every GPU that supports them. Its error Is
	// ErrLibraryNotFound when the library cannot be loaded or the kernel
	// driver is not loaded. Init after a successful Init does nothing.
	Init() error
	// Shutdown releases NVML. It does nothing unless Init succeeded.
	Shutdown() error
	// Devices returns the GPUs ordered by NVML index. When some GPUs
	// cannot be opened it returns the others and an error naming the
	// failed indexes.
	Devices() ([]Device, error)
	// XIDEvents returns the critical XID events that arrived since the
	// last call, without blocking. Its error Is ErrNotSupported when no
	// GPU could be registered for them.
	XIDEvents() ([]XIDEvent, error)
}

// Device is one GPU. Every getter reads NVML anew. A getter's error Is
// ErrNotSupported when the GPU does not have the reading.
type Device interface {
	// Index is the NVML index the device was opened at.
	Index() int
	// UUID is the GPU's UUID, e.g. "GPU-5ab4f5d1-...".
	UUID() (string, error)
	// Name is the product name, e.g. "NVIDIA A100-SXM4-40GB".
	Name() (string, error)
	// PCIBusID is the PCI bus id as NVML writes it, e.g.
	// "00000000:07:00.0".
	PCIBusID() (string, error)
	// Memory is the framebuffer memory.
	Memory() (Memory, error)
	// UtilizationPercent is the share of the last sample period in which a
	// kernel ran, 0 to 100.
	UtilizationPercent() (uint32, error)
	// TemperatureCelsius is the GPU die temperature.
	TemperatureCelsius() (uint32, error)
	// SlowdownTemperatureCelsius is the temperature at which the GPU
	// slows down.
	SlowdownTemperatureCelsius() (uint32, error)
	// ShutdownTemperatureCelsius is the temperature at which the GPU
	// shuts down.
	ShutdownTemperatureCelsius() (uint32, error)
	// PowerUsageMilliwatts is the power draw of the GPU and its board.
	PowerUsageMilliwatts() (uint32, error)
	// PowerLimitMilliwatts is the enforced power limit.
	PowerLimitMilliwatts() (uint32, error)
	// TotalEnergyMillijoules is the energy counter since the driver
	// loaded.
	TotalEnergyMillijoules() (uint64, error)
	// ECCUncorrectedVolatile is the count of uncorrected ECC errors since
	// the driver loaded. ErrNotSupported when ECC is off or unsupported.
	ECCUncorrectedVolatile() (uint64, error)
	// RemappedRows is the state of the memory row remapper (Ampere and
	// later).
	RemappedRows() (RemappedRows, error)
	// ClocksEventReasons are the reasons the clocks are held down now.
	ClocksEventReasons() (ClocksEventReasons, error)
	// MIGEnabled is whether MIG mode is currently on.
	MIGEnabled() (bool, error)
	// MIGDevices lists the MIG devices of a GPU in MIG mode, through the
	// calls NVML allows any user (see mig.go). Its error Is
	// ErrNotSupported on a GPU without MIG or a driver without the calls.
	MIGDevices() (MIGLayout, error)
	// NVLinks lists the GPU's active NVLinks. Its error Is
	// ErrNotSupported on a GPU without NVLink or a driver without the
	// calls.
	NVLinks() ([]NVLink, error)
}

// MIGLayout is a GPU's MIG devices.
type MIGLayout struct {
	// MaxDevices is the most MIG devices the GPU can hold
	// (nvmlDeviceGetMaxMigDeviceCount): one per compute slice.
	MaxDevices int
	// Devices are the MIG devices that exist now, by MIG device index.
	Devices []MIGDevice
}

// MIGDevice is one MIG device: one compute instance of a GPU instance.
type MIGDevice struct {
	// UUID is the MIG device's UUID, e.g. "MIG-5ab4f5d1-...".
	UUID string
	// GPUInstanceID is the id of its GPU instance, shared by the compute
	// instances carved from it.
	GPUInstanceID int
	// GPUInstanceSlices and ComputeInstanceSlices are the slices its GPU
	// instance and its compute instance take: the "3g" and "1c" of
	// "1c.3g.40gb".
	GPUInstanceSlices     int
	ComputeInstanceSlices int
	// MemoryBytes is its GPU instance's memory.
	MemoryBytes uint64
	// OFAs are the optical flow accelerators its GPU instance holds
	// (nvmlDeviceGetAttributes' sharedOfaCount). Of the profiles smaller
	// than the whole GPU, only a "+me" one (media extensions) holds one: a
	// real H200's GPU instance profiles list OFA 1 for 1g.18gb+me and
	// 7g.141gb and 0 for every other (agent/nvml/testdata/h200-vm,
	// host.txt and nvmlprobe.jsonl), and NVIDIA's DGX A100 mock
	// (go-nvml's mock/dgxa100) 1 for 1g.5gb+me and 7g.40gb.
	OFAs int
}

// NVLinkRemote is what an NVLink connects to.
type NVLinkRemote int

// The ends of an NVLink (nvmlIntNvLinkDeviceType_t).
const (
	// NVLinkRemoteUnknown: the driver did not say, or is too old to.
	NVLinkRemoteUnknown NVLinkRemote = iota
	NVLinkRemoteGPU
	NVLinkRemoteSwitch
	NVLinkRemoteOther // an IBM NPU
)

// NVLink is one active NVLink of a GPU.
type NVLink struct {
	// Link is the link's number on the GPU.
	Link int
	// Remote is the kind of device at the other end.
	Remote NVLinkRemote
	// RemoteBusID is the PCI bus id of the device at the other end, as
	// NVML writes it ("00000000:07:00.0"); "" when NVML did not give one.
	RemoteBusID string
}

// Memory is a GPU's framebuffer memory, in bytes.
type Memory struct {
	TotalBytes uint64
	UsedBytes  uint64
}

// RemappedRows is the state of a GPU's row remapper.
type RemappedRows struct {
	// Corrected and Uncorrected are the rows remapped for correctable and
	// uncorrectable errors.
	Corrected   int
	Uncorrected int
	// Pending is true when a remap waits for a GPU reset.
	Pending bool
	// Failed is true when a remap failed.
	Failed bool
}

// XIDEvent is one critical XID event.
type XIDEvent struct {
	// UUID is the GPU the event is about; empty when NVML did not tie it
	// to one, in which case it may concern any GPU.
	UUID string
	// XID is the Xid error code, e.g. 48 (double-bit ECC error) or 79
	// (GPU has fallen off the bus).
	XID uint64
}

// ClocksEventReasons is NVML's bitmask of clock-event (throttle) reasons.
type ClocksEventReasons uint64

// The clock-event reasons (nvmlClocksEventReason*).
const (
	ClocksEventGPUIdle                   ClocksEventReasons = gonvml.ClocksEventReasonGpuIdle
	ClocksEventApplicationsClocksSetting ClocksEventReasons = gonvml.ClocksEventReasonApplicationsClocksSetting
	ClocksEventSwPowerCap                ClocksEventReasons = gonvml.ClocksEventReasonSwPowerCap
	ClocksEventHwSlowdown                ClocksEventReasons = gonvml.ClocksThrottleReasonHwSlowdown
	ClocksEventSyncBoost                 ClocksEventReasons = gonvml.ClocksEventReasonSyncBoost
	ClocksEventSwThermalSlowdown         ClocksEventReasons = gonvml.ClocksEventReasonSwThermalSlowdown
	ClocksEventHwThermalSlowdown         ClocksEventReasons = gonvml.ClocksThrottleReasonHwThermalSlowdown
	ClocksEventHwPowerBrakeSlowdown      ClocksEventReasons = gonvml.ClocksThrottleReasonHwPowerBrakeSlowdown
	ClocksEventDisplayClockSetting       ClocksEventReasons = gonvml.ClocksEventReasonDisplayClockSetting
)
