// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/telesched/telesched/agent/nvml"
	"github.com/telesched/telesched/agent/nvml/nvmltest"
)

// NVML returns the node's GPUs as an NVML library for the agent: go-nvml's
// DGX A100 mock server, cut to the node's GPU count or grown past its
// eight GPUs with more of its mock devices, with each GPU's identity from
// its spec and its readings from the load model. Nil for a node without
// GPUs.
func (n *Node) NVML() nvml.Library {
	if len(n.Spec.GPUs) == 0 {
		return nil
	}
	s := dgxa100.New()
	q := nvmltest.NewEventQueue() // no XID events in the sandbox
	s.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) { return q, gonvml.SUCCESS }
	count := len(n.Spec.GPUs)
	devs := make([]*dgxa100.Device, count)
	for i := range devs {
		if i < len(s.Devices) {
			devs[i] = s.Devices[i].(*dgxa100.Device)
		} else {
			devs[i] = dgxa100.NewDevice(i)
		}
	}
	s.DeviceGetCountFunc = func() (int, gonvml.Return) { return count, gonvml.SUCCESS }
	s.DeviceGetHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) {
		if i < 0 || i >= count {
			return nil, gonvml.ERROR_INVALID_ARGUMENT
		}
		return devs[i], gonvml.SUCCESS
	}
	s.DeviceGetHandleByUUIDFunc = func(uuid string) (gonvml.Device, gonvml.Return) {
		for _, d := range devs {
			if d.UUID == uuid {
				return d, gonvml.SUCCESS
			}
		}
		return nil, gonvml.ERROR_INVALID_ARGUMENT
	}
	s.DeviceGetHandleByPciBusIdFunc = func(bus string) (gonvml.Device, gonvml.Return) {
		for i, d := range devs {
			if n.Spec.GPUs[i].PCIAddress == bus || d.PciBusID == bus {
				return d, gonvml.SUCCESS
			}
		}
		return nil, gonvml.ERROR_INVALID_ARGUMENT
	}
	for i := range count {
		spec := n.Spec.GPUs[i]
		d := devs[i]
		d.UUID, d.Name = spec.UUID, spec.Model
		d.CudaComputeCapability.Major, d.CudaComputeCapability.Minor = spec.ComputeCapMajor, spec.ComputeCapMinor
		d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
			return gonvml.PciInfo{BusId: busID(spec.PCIAddress), PciDeviceId: spec.PCIDeviceIDFull}, gonvml.SUCCESS
		}
		d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
			used := n.gpu(i).memUsed
			return gonvml.Memory{Total: spec.MemoryBytes, Used: used, Free: spec.MemoryBytes - used}, gonvml.SUCCESS
		}
		d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			u := n.gpu(i).utilization
			return gonvml.Utilization{Gpu: u, Memory: u / 2}, gonvml.SUCCESS
		}
		d.GetTemperatureFunc = func(sensor gonvml.TemperatureSensors) (uint32, gonvml.Return) {
			if sensor != gonvml.TEMPERATURE_GPU {
				return 0, gonvml.ERROR_INVALID_ARGUMENT
			}
			return n.gpu(i).celsius, gonvml.SUCCESS
		}
		d.GetTemperatureThresholdFunc = func(th gonvml.TemperatureThresholds) (uint32, gonvml.Return) {
			switch th {
			case gonvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
				return spec.SlowdownCelsius, gonvml.SUCCESS
			case gonvml.TEMPERATURE_THRESHOLD_SHUTDOWN:
				return spec.ShutdownCelsius, gonvml.SUCCESS
			}
			return 0, gonvml.ERROR_NOT_SUPPORTED
		}
		d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return n.gpu(i).milliwatts, gonvml.SUCCESS }
		d.GetEnforcedPowerLimitFunc = func() (uint32, gonvml.Return) { return uint32(spec.TDPWatts * 1000), gonvml.SUCCESS }
		d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) { return n.gpu(i).energyMJ, gonvml.SUCCESS }
		nvmltest.Healthy(d)
		if spec.MIG != nil {
			nvmltest.MIGOn(d, i, spec.ComputeSlices, migSpecs(spec))
			d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
				used := n.gpu(i).memUsed
				return gonvml.Memory{Total: spec.MemoryBytes, Used: used, Free: spec.MemoryBytes - used}, gonvml.SUCCESS
			}
		}
		n.wireNVLinks(d, i)
	}
	return nvml.NewWith(s)
}

// migSpecs are GPU g's MIG devices as nvmltest.MIG sets them up, each its
// own GPU instance, numbered as MIG numbers an A100's.
func migSpecs(g GPUSpec) []nvmltest.MIGSpec {
	out := make([]nvmltest.MIGSpec, len(g.MIG))
	for j, d := range g.MIG {
		// An optical flow accelerator on a "+me" instance and on the whole
		// GPU's, as a real GPU's instance profiles list them
		// (nvml.MIGDevice.OFAs).
		ofas := 0
		if strings.HasSuffix(d.Profile, "+me") || d.Slices == g.ComputeSlices {
			ofas = 1
		}
		out[j] = nvmltest.MIGSpec{GPUInstanceID: 1 + j, GPUInstanceSlices: d.Slices, ComputeInstanceSlices: d.Slices, MemoryMiB: d.MemoryMiB, OFAs: ofas}
	}
	return out
}

// wireNVLinks gives GPU i its NVLinks (NodeSpec.NVLink): 12, two to each
// of six NVSwitches, on a switch fabric, as a DGX A100's; 4 of 12 to its
// peer on a node of pairs, as an NVLink bridge's; none otherwise.
func (n *Node) wireNVLinks(d *dgxa100.Device, i int) {
	var links []nvmltest.Link
	switch n.Spec.NVLink {
	case NVLinkSwitch:
		for l := range 12 {
			links = append(links, nvmltest.Link{Remote: gonvml.NVLINK_DEVICE_TYPE_SWITCH, BusID: nvmltest.SwitchBusID(l / 2)})
		}
	case NVLinkPairs:
		if p := n.Spec.Peer(i); p >= 0 {
			for range 4 {
				links = append(links, nvmltest.Link{Remote: gonvml.NVLINK_DEVICE_TYPE_GPU, BusID: n.Spec.GPUs[p].PCIAddress})
			}
		}
	}
	if len(links) > 0 {
		nvmltest.NVLinks(d, 12, links)
	}
}

// busID is a PCI bus id as NVML's C struct holds it.
func busID(s string) [32]int8 {
	var b [32]int8
	for i := range min(len(s), 31) {
		b[i] = int8(s[i])
	}
	return b
}
