package sandbox

import (
	"fmt"

	"github.com/telesched/telesched/sandbox/hosttree"
	"github.com/telesched/telesched/sandbox/sim"
)

// HeaterNode is the simulated node whose fan fails mid-scenario.
const HeaterNode = "cpu-heater"

// Fleet is the simulated part of the sandbox's cluster: a mix of CPU and
// GPU nodes with different power curves.
func Fleet() []sim.NodeSpec {
	cpu := func(name, role string, idle, full, base float64) sim.NodeSpec {
		return sim.NodeSpec{Name: name, Role: role, BaseUtilization: base, Host: hosttree.Spec{
			CPUs: 32, NUMANodes: 1, Packages: 1, MemoryKiB: 128 << 20, IdleWatts: idle, FullLoadWatts: full, CritMilliCelsius: 100_000,
		}}
	}
	big := func(name, role string, idle, full, base float64, gpus []sim.GPUSpec) sim.NodeSpec {
		return sim.NodeSpec{Name: name, Role: role, BaseUtilization: base, GPUs: gpus, Host: hosttree.Spec{
			CPUs: 64, NUMANodes: 2, Packages: 2, MemoryKiB: 512 << 20, IdleWatts: idle, FullLoadWatts: full, CritMilliCelsius: 100_000,
		}}
	}
	return []sim.NodeSpec{
		cpu("cpu-efficient", "cool CPU node, efficient (70-230 W)", 70, 230, 0.10),
		cpu("cpu-legacy", "cool CPU node, older and power-hungry (150-450 W)", 150, 450, 0.12),
		cpu("cpu-busy", "busy: 86% CPU from work the scheduler does not see", 90, 300, 0.86),
		cpu(HeaterNode, "efficient (80-260 W); its fan fails mid-run, later repaired", 80, 260, 0.15),
		big("cpu-numa2", "2-NUMA CPU node (120-420 W)", 120, 420, 0.20, nil),
		big("gpu-a100x8", "8 x A100, 4 per NUMA node", 200, 600, 0.10, gpus(8, 4, a100)),
		big("gpu-h100x4", "4 x H100, 2 per NUMA node", 180, 560, 0.10, gpus(4, 2, h100)),
	}
}

var a100 = sim.GPUSpec{
	Model: "NVIDIA A100-SXM4-40GB", MemoryBytes: 40 << 30, IdleWatts: 55, TDPWatts: 400,
	SlowdownCelsius: 87, ShutdownCelsius: 92, PCIDeviceID: 0x20b0, PCIDeviceIDFull: 0x20b010de,
	ComputeCapMajor: 8, ComputeCapMinor: 0, MemoryUsedIdle: 500 << 20, MemoryUsedLoaded: 30 << 30,
}

var h100 = sim.GPUSpec{
	Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, IdleWatts: 70, TDPWatts: 700,
	SlowdownCelsius: 90, ShutdownCelsius: 95, PCIDeviceID: 0x2330, PCIDeviceIDFull: 0x233010de,
	ComputeCapMajor: 9, ComputeCapMinor: 0, MemoryUsedIdle: 600 << 20, MemoryUsedLoaded: 60 << 30,
}

// gpus returns n GPUs of a model, perNUMA on each NUMA node in turn.
func gpus(n, perNUMA int, model sim.GPUSpec) []sim.GPUSpec {
	out := make([]sim.GPUSpec, n)
	for i := range out {
		g := model
		g.NUMANode = i / perNUMA
		g.PCIAddress = fmt.Sprintf("0000:%02x:00.0", 0x07+0x10*i)
		g.UUID = fmt.Sprintf("GPU-5a4d0b1c-0000-4000-8000-%012x", uint64(model.PCIDeviceID)<<16|uint64(i))
		out[i] = g
	}
	return out
}
