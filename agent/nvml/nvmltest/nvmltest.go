// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nvmltest sets up go-nvml's mock servers for tests: fixed GPU
// UUIDs and the event calls the mocks leave unset.
package nvmltest

import (
	"fmt"
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// EventQueue is an NVML event set whose events a test queues in Queue.
type EventQueue struct {
	mock.EventSet
	Queue []gonvml.EventData
}

// NewEventQueue returns an empty queue; Wait returns ERROR_TIMEOUT when it
// is empty, as NVML does.
func NewEventQueue() *EventQueue {
	q := &EventQueue{}
	q.WaitFunc = func(uint32) (gonvml.EventData, gonvml.Return) {
		if len(q.Queue) == 0 {
			return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
		}
		ev := q.Queue[0]
		q.Queue = q.Queue[1:]
		return ev, gonvml.SUCCESS
	}
	q.FreeFunc = func() gonvml.Return { return gonvml.SUCCESS }
	return q
}

// UUID is the UUID NewDGXA100 gives GPU i.
func UUID(i int) string { return fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i) }

// Device returns GPU i of a DGX A100 mock.
func Device(s *dgxa100.Server, i int) *dgxa100.Device { return s.Devices[i].(*dgxa100.Device) }

// NewDGXA100 returns go-nvml's DGX A100 mock (8 GPUs) with UUID(i) for GPU
// i, XID events supported on every GPU, delivered from the returned queue,
// no MIG device and no NVLink (see MIG, NVLinks to set them).
func NewDGXA100() (*dgxa100.Server, *EventQueue) {
	s := dgxa100.New()
	q := NewEventQueue()
	s.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) { return q, gonvml.SUCCESS }
	for i := range s.Devices {
		d := Device(s, i)
		d.UUID = UUID(i)
		d.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) { return gonvml.EventTypeAll, gonvml.SUCCESS }
		d.RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return { return gonvml.SUCCESS }
		d.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 0, gonvml.SUCCESS }
		NoNVLink(d)
	}
	return s, q
}

// Healthy makes a mock GPU answer the health and state calls the agent's
// GPU collector makes as a healthy, unthrottled GPU does: ECC on with no
// uncorrected errors, no row remaps, no clock-event reasons, MIG off, and
// every event type supported.
func Healthy(d *dgxa100.Device) {
	d.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) { return gonvml.EventTypeAll, gonvml.SUCCESS }
	d.RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return { return gonvml.SUCCESS }
	d.GetEccModeFunc = func() (gonvml.EnableState, gonvml.EnableState, gonvml.Return) {
		return gonvml.FEATURE_ENABLED, gonvml.FEATURE_ENABLED, gonvml.SUCCESS
	}
	d.GetTotalEccErrorsFunc = func(gonvml.MemoryErrorType, gonvml.EccCounterType) (uint64, gonvml.Return) { return 0, gonvml.SUCCESS }
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) { return 0, 0, false, false, gonvml.SUCCESS }
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) { return gonvml.ClocksEventReasonNone, gonvml.SUCCESS }
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, gonvml.Return) { return gonvml.ClocksThrottleReasonNone, gonvml.SUCCESS }
	d.GetMigModeFunc = func() (int, int, gonvml.Return) {
		return gonvml.DEVICE_MIG_DISABLE, gonvml.DEVICE_MIG_DISABLE, gonvml.SUCCESS
	}
	d.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 0, gonvml.SUCCESS }
	NoNVLink(d)
}

// Steady makes a mock GPU healthy (see Healthy) and answers the telemetry
// calls the DGX A100 mock leaves unset with fixed readings: 50% busy, 60 °C
// (slowdown 90 °C, shutdown 95 °C), 250 W of a 400 W limit, 1000 J since
// the driver loaded.
func Steady(d *dgxa100.Device) {
	Healthy(d)
	d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{Gpu: 50, Memory: 25}, gonvml.SUCCESS
	}
	d.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 60, gonvml.SUCCESS }
	d.GetTemperatureThresholdFunc = func(th gonvml.TemperatureThresholds) (uint32, gonvml.Return) {
		switch th {
		case gonvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
			return 90, gonvml.SUCCESS
		case gonvml.TEMPERATURE_THRESHOLD_SHUTDOWN:
			return 95, gonvml.SUCCESS
		}
		return 0, gonvml.ERROR_NOT_SUPPORTED
	}
	d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 250_000, gonvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, gonvml.Return) { return 400_000, gonvml.SUCCESS }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) { return 1_000_000, gonvml.SUCCESS }
}

// BusID is the PCI bus id the helpers here give GPU i, as NVML writes it.
func BusID(i int) string { return fmt.Sprintf("00000000:%02X:00.0", 0x07+0x10*i) }

// CBusID is a PCI bus id as NVML's C struct holds it.
func CBusID(s string) [32]int8 {
	var b [32]int8
	for i := range min(len(s), len(b)-1) {
		b[i] = int8(s[i])
	}
	return b
}

// PCIBusIDs makes GPU i of s answer nvmlDeviceGetPciInfo with BusID(i), which
// the DGX A100 mock leaves empty.
func PCIBusIDs(s *dgxa100.Server) {
	for i := range s.Devices {
		d := Device(s, i)
		id := CBusID(BusID(i))
		d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
			return gonvml.PciInfo{BusId: id, PciDeviceId: 0x20B010DE}, gonvml.SUCCESS
		}
	}
}

// MIGSpec is one MIG device a test puts on a mock GPU.
type MIGSpec struct {
	GPUInstanceID         int
	GPUInstanceSlices     int
	ComputeInstanceSlices int
	MemoryMiB             uint64
	// OFAs are its shared optical flow accelerators: 1 on a "+me" profile
	// and on the whole-GPU profile (nvmlDeviceGetAttributes' sharedOfaCount).
	OFAs int
}

// MIGUUID is the UUID MIG gives MIG device j of GPU i.
func MIGUUID(i, j int) string { return fmt.Sprintf("MIG-00000000-0000-0000-%04d-%012d", i, j) }

// MIG turns MIG mode on for GPU i of s with the given MIG devices, at MIG
// device indexes 0, 1, ... (UUID MIGUUID(i, j)), and maxDevices as the
// GPU's most MIG devices. The GPU, as NVML does in MIG mode, reports no
// utilization (NVML_ERROR_NOT_SUPPORTED), nor do its MIG devices.
func MIG(s *dgxa100.Server, i, maxDevices int, devs []MIGSpec) {
	MIGOn(Device(s, i), i, maxDevices, devs)
}

// MIGOn is MIG for a device d of index i that need not be one of the
// server's eight (a node of more GPUs adds dgxa100.NewDevice ones).
func MIGOn(d *dgxa100.Device, i, maxDevices int, devs []MIGSpec) {
	d.MigMode = gonvml.DEVICE_MIG_ENABLE
	d.GetMigModeFunc = func() (int, int, gonvml.Return) {
		return gonvml.DEVICE_MIG_ENABLE, gonvml.DEVICE_MIG_ENABLE, gonvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
	}
	d.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return maxDevices, gonvml.SUCCESS }
	handles := make([]*mock.Device, len(devs))
	for j, spec := range devs {
		uuid := MIGUUID(i, j)
		h := &mock.Device{}
		h.GetUUIDFunc = func() (string, gonvml.Return) { return uuid, gonvml.SUCCESS }
		h.GetAttributesFunc = func() (gonvml.DeviceAttributes, gonvml.Return) {
			return gonvml.DeviceAttributes{
				GpuInstanceSliceCount:     uint32(spec.GPUInstanceSlices),
				ComputeInstanceSliceCount: uint32(spec.ComputeInstanceSlices),
				MemorySizeMB:              spec.MemoryMiB,
				SharedOfaCount:            uint32(spec.OFAs),
			}, gonvml.SUCCESS
		}
		h.GetGpuInstanceIdFunc = func() (int, gonvml.Return) { return spec.GPUInstanceID, gonvml.SUCCESS }
		h.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
		}
		handles[j] = h
	}
	d.GetMigDeviceHandleByIndexFunc = func(j int) (gonvml.Device, gonvml.Return) {
		if j < 0 || j >= maxDevices {
			return nil, gonvml.ERROR_INVALID_ARGUMENT
		}
		if j >= len(handles) {
			return nil, gonvml.ERROR_NOT_FOUND
		}
		return handles[j], gonvml.SUCCESS
	}
}

// A100Seven1g is an A100 80GB's MIG layout of seven 1g.10gb devices (9728
// MiB each, as nvidia-smi lists the profile).
var A100Seven1g = func() []MIGSpec {
	var out []MIGSpec
	for gi := range 7 {
		out = append(out, MIGSpec{GPUInstanceID: 7 + gi, GPUInstanceSlices: 1, ComputeInstanceSlices: 1, MemoryMiB: 9728})
	}
	return out
}()

// H100Mixed is an H100 80GB's MIG layout of one 3g.40gb and two 2g.20gb
// devices (40192 and 20096 MiB, as nvidia-smi lists the profiles).
var H100Mixed = []MIGSpec{
	{GPUInstanceID: 2, GPUInstanceSlices: 3, ComputeInstanceSlices: 3, MemoryMiB: 40192},
	{GPUInstanceID: 3, GPUInstanceSlices: 2, ComputeInstanceSlices: 2, MemoryMiB: 20096},
	{GPUInstanceID: 4, GPUInstanceSlices: 2, ComputeInstanceSlices: 2, MemoryMiB: 20096},
}

// NoNVLink makes a mock GPU answer as one without NVLink:
// NVML_ERROR_NOT_SUPPORTED for every link.
func NoNVLink(d *dgxa100.Device) {
	d.GetNvLinkStateFunc = func(int) (gonvml.EnableState, gonvml.Return) {
		return gonvml.FEATURE_DISABLED, gonvml.ERROR_NOT_SUPPORTED
	}
}

// Link is one end of an NVLink a test wires: the remote end's kind and bus id.
type Link struct {
	Remote gonvml.IntNvLinkDeviceType
	BusID  string
}

// NVLinks gives a mock GPU the links: links[l] is link l, up; links past
// them up to total exist and are down; past total the GPU has none
// (NVML_ERROR_INVALID_ARGUMENT).
func NVLinks(d *dgxa100.Device, total int, links []Link) {
	d.GetNvLinkStateFunc = func(l int) (gonvml.EnableState, gonvml.Return) {
		switch {
		case l < 0 || l >= total:
			return 0, gonvml.ERROR_INVALID_ARGUMENT
		case l < len(links):
			return gonvml.FEATURE_ENABLED, gonvml.SUCCESS
		}
		return gonvml.FEATURE_DISABLED, gonvml.SUCCESS
	}
	d.GetNvLinkRemotePciInfoFunc = func(l int) (gonvml.PciInfo, gonvml.Return) {
		if l < 0 || l >= len(links) {
			return gonvml.PciInfo{}, gonvml.ERROR_INVALID_ARGUMENT
		}
		return gonvml.PciInfo{BusId: CBusID(links[l].BusID)}, gonvml.SUCCESS
	}
	d.GetNvLinkRemoteDeviceTypeFunc = func(l int) (gonvml.IntNvLinkDeviceType, gonvml.Return) {
		if l < 0 || l >= len(links) {
			return 0, gonvml.ERROR_INVALID_ARGUMENT
		}
		return links[l].Remote, gonvml.SUCCESS
	}
}

// SwitchBusID is the PCI bus id of NVSwitch n on the mock machines here.
func SwitchBusID(n int) string { return fmt.Sprintf("00000000:%02X:00.0", 0xC4+n) }

// NVSwitchFabric wires every GPU of s as a DGX A100 is: 12 NVLinks, two to
// each of six NVSwitches.
func NVSwitchFabric(s *dgxa100.Server) {
	for i := range s.Devices {
		var links []Link
		for l := range 12 {
			links = append(links, Link{Remote: gonvml.NVLINK_DEVICE_TYPE_SWITCH, BusID: SwitchBusID(l / 2)})
		}
		NVLinks(Device(s, i), 12, links)
	}
}

// NVLinkPairs wires GPUs 0-1, 2-3, ... of s with four NVLinks each (of 12),
// as PCIe cards with NVLink bridges are. Bus ids are BusID's.
func NVLinkPairs(s *dgxa100.Server) {
	for i := range s.Devices {
		peer := i ^ 1
		var links []Link
		for range 4 {
			links = append(links, Link{Remote: gonvml.NVLINK_DEVICE_TYPE_GPU, BusID: BusID(peer)})
		}
		NVLinks(Device(s, i), 12, links)
	}
}

// Privileged records calls of what nvml.h marks "Requires privileged
// user" (and nvmlDeviceGetGpuInstanceProfileInfo, which may answer
// NVML_ERROR_NO_PERMISSION), which the agent must never make.
type Privileged struct {
	mu    sync.Mutex
	calls []string
}

// Calls returns the privileged calls made so far.
func (p *Privileged) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

func (p *Privileged) record(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, name)
}

// Watch makes d's privileged calls record themselves in p and answer
// NVML_ERROR_NO_PERMISSION, as they do for an unprivileged user.
func (p *Privileged) Watch(d *mock.Device) {
	noPerm := gonvml.ERROR_NO_PERMISSION
	d.GetGpuInstancesFunc = func(*gonvml.GpuInstanceProfileInfo) ([]gonvml.GpuInstance, gonvml.Return) {
		p.record("nvmlDeviceGetGpuInstances")
		return nil, noPerm
	}
	d.GetGpuInstanceByIdFunc = func(int) (gonvml.GpuInstance, gonvml.Return) {
		p.record("nvmlDeviceGetGpuInstanceById")
		return nil, noPerm
	}
	d.GetGpuInstanceProfileInfoFunc = func(int) (gonvml.GpuInstanceProfileInfo, gonvml.Return) {
		p.record("nvmlDeviceGetGpuInstanceProfileInfo")
		return gonvml.GpuInstanceProfileInfo{}, noPerm
	}
	d.GetGpuInstancePossiblePlacementsFunc = func(*gonvml.GpuInstanceProfileInfo) ([]gonvml.GpuInstancePlacement, gonvml.Return) {
		p.record("nvmlDeviceGetGpuInstancePossiblePlacements")
		return nil, noPerm
	}
	d.GetGpuInstanceRemainingCapacityFunc = func(*gonvml.GpuInstanceProfileInfo) (int, gonvml.Return) {
		p.record("nvmlDeviceGetGpuInstanceRemainingCapacity")
		return 0, noPerm
	}
	d.CreateGpuInstanceFunc = func(*gonvml.GpuInstanceProfileInfo) (gonvml.GpuInstance, gonvml.Return) {
		p.record("nvmlDeviceCreateGpuInstance")
		return nil, noPerm
	}
	d.CreateGpuInstanceWithPlacementFunc = func(*gonvml.GpuInstanceProfileInfo, *gonvml.GpuInstancePlacement) (gonvml.GpuInstance, gonvml.Return) {
		p.record("nvmlDeviceCreateGpuInstanceWithPlacement")
		return nil, noPerm
	}
	d.SetMigModeFunc = func(int) (gonvml.Return, gonvml.Return) {
		p.record("nvmlDeviceSetMigMode")
		return noPerm, noPerm
	}
}

// WatchServer watches every GPU of s and every MIG device handle they hand
// out (see Watch).
func (p *Privileged) WatchServer(s *dgxa100.Server) {
	for i := range s.Devices {
		d := Device(s, i)
		p.Watch(&d.Device)
		if inner := d.GetMigDeviceHandleByIndexFunc; inner != nil {
			d.GetMigDeviceHandleByIndexFunc = func(j int) (gonvml.Device, gonvml.Return) {
				h, ret := inner(j)
				if m, ok := h.(*mock.Device); ok {
					p.Watch(m)
				}
				return h, ret
			}
		}
	}
}
