// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/telesched/telesched/agent/speed"
	"github.com/telesched/telesched/sandbox/hosttree"
	"github.com/telesched/telesched/sandbox/sim"
)

// DefaultFleetYAML is the sandbox's own fleet (fleets/default.yaml).
//
//go:embed fleets/default.yaml
var DefaultFleetYAML []byte

// FleetFile is a simulated fleet, as `telesched-sandbox --fleet FILE`
// reads it (YAML or JSON; unknown fields are refused).
type FleetFile struct {
	// Nodes are the node kinds; Count of each.
	Nodes []FleetNode `json:"nodes"`
	// PowerBudgets are the racks' power budgets, each a PowerBudget over
	// the nodes of its rack.
	PowerBudgets []FleetBudget `json:"powerBudgets,omitempty"`
}

// FleetBudget is a rack's power budget.
type FleetBudget struct {
	// Name is the PowerBudget's name.
	Name string `json:"name"`
	// Rack selects the nodes whose rack is this.
	Rack               string `json:"rack"`
	BudgetWatts        int64  `json:"budgetWatts"`
	ReserveWatts       int64  `json:"reserveWatts,omitempty"`
	UnmeteredNodeWatts *int64 `json:"unmeteredNodeWatts,omitempty"`
}

// RackLabel is the label that names a simulated node's rack.
const RackLabel = "sandbox.telesched.io/rack"

// Fleet is a parsed fleet: the simulated nodes and the racks' budgets.
type Fleet struct {
	Nodes   []sim.NodeSpec
	Budgets []FleetBudget
}

// FleetNode is one kind of simulated node.
type FleetNode struct {
	// Name is the node's name, or with Count > 1 the prefix of name-0,
	// name-1 ….
	Name  string `json:"name"`
	Count int    `json:"count,omitempty"`
	// Role says what the node is for, in the output.
	Role      string `json:"role,omitempty"`
	CPUs      int    `json:"cpus"`
	Memory    string `json:"memory"`
	NUMANodes int    `json:"numaNodes,omitempty"`
	Packages  int    `json:"packages,omitempty"`
	// PowerCurve is the CPU-side power, watts, at 0 %, 10 % … 100 % load:
	// 11 non-decreasing values, as SPECpower_ssj2008 results publish them.
	PowerCurve       []float64 `json:"powerCurve"`
	PowerCurveSource string    `json:"powerCurveSource,omitempty"`
	// PackageLimitWatts, when set, is each package's RAPL power limit, from
	// which the agent builds a prior curve before it has samples.
	PackageLimitWatts float64 `json:"packageLimitWatts,omitempty"`
	CPUModel          string  `json:"cpuModel,omitempty"`
	// BaseUtilizationPercent is load the scheduler does not see.
	BaseUtilizationPercent float64 `json:"baseUtilizationPercent,omitempty"`
	// Thermal is the node's thermal response; zero values take the
	// defaults (see sandbox/sim).
	Thermal FleetThermal `json:"thermal,omitempty"`
	// FanFault: this node's fan fails during the heat phase and is
	// repaired after. At most one node.
	FanFault bool `json:"fanFault,omitempty"`
	// Rack is the rack the nodes sit in: the value of their RackLabel,
	// which powerBudgets select.
	Rack string     `json:"rack,omitempty"`
	GPUs *FleetGPUs `json:"gpus,omitempty"`
}

// FleetThermal is a node's thermal response.
type FleetThermal struct {
	AmbientCelsius         float64 `json:"ambientCelsius,omitempty"`
	CelsiusPerWatt         float64 `json:"celsiusPerWatt,omitempty"`
	TimeConstant           string  `json:"timeConstant,omitempty"`
	LeakageWattsPerCelsius float64 `json:"leakageWattsPerCelsius,omitempty"`
	// CriticalCelsius is the package's critical limit; 100 by default.
	CriticalCelsius float64 `json:"criticalCelsius,omitempty"`
}

// FleetGPUs are a node's GPUs.
type FleetGPUs struct {
	// Type is a100, a100-80gb, h100, h100-nvl or h200.
	Type  string `json:"type"`
	Count int    `json:"count"`
	// PerNUMA GPUs sit on each NUMA node in turn.
	PerNUMA int `json:"perNUMA"`
	// MIG puts GPUs in MIG mode (fleet_gpu.go); none by default.
	MIG *FleetMIG `json:"mig,omitempty"`
	// NVLink is how the GPUs are linked: nvswitch (one fabric), pairs
	// (0-1, 2-3, ...) or none (the default).
	NVLink string `json:"nvlink,omitempty"`
	// DRA publishes the GPUs as ResourceSlices of driver gpu.nvidia.com
	// instead of the node's nvidia.com/gpu.
	DRA bool `json:"dra,omitempty"`
}

// gpuTypes are the GPU types a fleet file can name.
var gpuTypes = map[string]sim.GPUSpec{"a100": a100, "a100-80gb": a100x80, "h100": h100, "h100-nvl": h100nvl, "h200": h200}

// ReadFleet reads a fleet file.
func ReadFleet(path string) (*Fleet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fleet, err := ParseFleet(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fleet, nil
}

// ParseFleet parses and checks a fleet; its errors name the field.
func ParseFleet(data []byte) (*Fleet, error) {
	var f FleetFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, err
	}
	specs, err := f.nodeSpecs()
	if err != nil {
		return nil, err
	}
	racks := map[string]int{}
	for _, s := range specs {
		if s.Rack != "" {
			racks[s.Rack]++
		}
	}
	names := map[string]bool{}
	for i, b := range f.PowerBudgets {
		at := fmt.Sprintf("powerBudgets[%d]", i)
		switch {
		case len(validation.IsDNS1123Subdomain(b.Name)) > 0:
			return nil, fmt.Errorf("%s.name: %q: %s", at, b.Name, strings.Join(validation.IsDNS1123Subdomain(b.Name), "; "))
		case names[b.Name]:
			return nil, fmt.Errorf("%s.name: budget %q is named twice", at, b.Name)
		case racks[b.Rack] == 0:
			return nil, fmt.Errorf("%s.rack: no node is in rack %q", at, b.Rack)
		case b.BudgetWatts < 1:
			return nil, fmt.Errorf("%s.budgetWatts: %d must be at least 1", at, b.BudgetWatts)
		case b.ReserveWatts < 0 || b.ReserveWatts >= b.BudgetWatts:
			return nil, fmt.Errorf("%s.reserveWatts: %d must be at least 0 and below budgetWatts", at, b.ReserveWatts)
		case b.UnmeteredNodeWatts != nil && *b.UnmeteredNodeWatts < 0:
			return nil, fmt.Errorf("%s.unmeteredNodeWatts: %d must not be negative", at, *b.UnmeteredNodeWatts)
		}
		names[b.Name] = true
	}
	return &Fleet{Nodes: specs, Budgets: f.PowerBudgets}, nil
}

func (f *FleetFile) nodeSpecs() ([]sim.NodeSpec, error) {
	if len(f.Nodes) == 0 {
		return nil, errors.New("nodes: at least one node is required")
	}
	var specs []sim.NodeSpec
	names := map[string]bool{}
	faults := 0
	for i, n := range f.Nodes {
		at := fmt.Sprintf("nodes[%d]", i)
		ns, err := n.specs(at)
		if err != nil {
			return nil, err
		}
		for _, s := range ns {
			if names[s.Name] {
				return nil, fmt.Errorf("%s.name: node %q is named twice", at, s.Name)
			}
			names[s.Name] = true
		}
		if n.FanFault {
			faults += len(ns)
		}
		specs = append(specs, ns...)
	}
	if faults > 1 {
		return nil, fmt.Errorf("nodes[].fanFault: %d nodes have a fan fault; the scenario fails one fan at most", faults)
	}
	slots := 0
	for _, s := range specs {
		slots += alignedSlots(s, trainingGPUs)
	}
	if slots < trainingPods {
		return nil, fmt.Errorf("nodes: the scenario's %d GPU pods need %d GPUs each on one NUMA node; the fleet has room for %d", trainingPods, trainingGPUs, slots)
	}
	return specs, nil
}

func (n FleetNode) specs(at string) ([]sim.NodeSpec, error) {
	if errs := validation.IsDNS1123Label(n.Name); len(errs) > 0 {
		return nil, fmt.Errorf("%s.name: %q: %s", at, n.Name, strings.Join(errs, "; "))
	}
	count := n.Count
	switch {
	case count == 0:
		count = 1
	case count < 0 || count > 100:
		return nil, fmt.Errorf("%s.count: %d must be within 1-100", at, n.Count)
	}
	numa, pkgs := max(n.NUMANodes, 1), n.Packages
	if pkgs == 0 {
		pkgs = numa
	}
	if n.CPUs < 1 || n.CPUs > 1024 || n.CPUs%numa != 0 || n.CPUs%pkgs != 0 {
		return nil, fmt.Errorf("%s.cpus: %d must be within 1-1024 and split evenly over %d NUMA nodes and %d packages", at, n.CPUs, numa, pkgs)
	}
	mem, err := resource.ParseQuantity(n.Memory)
	if err != nil || mem.Value() < 1<<30 {
		return nil, fmt.Errorf("%s.memory: %q must be a quantity of at least 1Gi", at, n.Memory)
	}
	if len(n.PowerCurve) != 11 {
		return nil, fmt.Errorf("%s.powerCurve: %d values, want 11 (watts at 0%%, 10%% ... 100%% load)", at, len(n.PowerCurve))
	}
	var curve [11]float64
	for k, w := range n.PowerCurve {
		if w < 0 || w > 100_000 || (k > 0 && w < n.PowerCurve[k-1]) {
			return nil, fmt.Errorf("%s.powerCurve[%d]: %v W must be within 0-100000 and not below the point before it", at, k, w)
		}
		curve[k] = w
	}
	if n.BaseUtilizationPercent < 0 || n.BaseUtilizationPercent > 100 {
		return nil, fmt.Errorf("%s.baseUtilizationPercent: %v must be within 0-100", at, n.BaseUtilizationPercent)
	}
	if n.PackageLimitWatts < 0 || n.PackageLimitWatts > 1000 {
		return nil, fmt.Errorf("%s.packageLimitWatts: %v must be within 0-1000", at, n.PackageLimitWatts)
	}
	t := n.Thermal
	var tau time.Duration
	if t.TimeConstant != "" {
		if tau, err = time.ParseDuration(t.TimeConstant); err != nil || tau <= 0 || tau > time.Hour {
			return nil, fmt.Errorf("%s.thermal.timeConstant: %q must be a duration within 0-1h", at, t.TimeConstant)
		}
	}
	switch {
	case t.AmbientCelsius < 0 || t.AmbientCelsius > 60:
		return nil, fmt.Errorf("%s.thermal.ambientCelsius: %v must be within 0-60", at, t.AmbientCelsius)
	case t.CelsiusPerWatt < 0 || t.CelsiusPerWatt > 5:
		return nil, fmt.Errorf("%s.thermal.celsiusPerWatt: %v must be within 0-5", at, t.CelsiusPerWatt)
	case t.LeakageWattsPerCelsius < 0 || t.LeakageWattsPerCelsius*t.CelsiusPerWatt >= 0.5:
		return nil, fmt.Errorf("%s.thermal.leakageWattsPerCelsius: %v must be positive and below 0.5 / celsiusPerWatt (heat and leakage would run away)", at, t.LeakageWattsPerCelsius)
	case t.CriticalCelsius != 0 && (t.CriticalCelsius < 50 || t.CriticalCelsius > 150):
		return nil, fmt.Errorf("%s.thermal.criticalCelsius: %v must be within 50-150", at, t.CriticalCelsius)
	}
	crit := int64(100_000)
	if t.CriticalCelsius != 0 {
		crit = int64(t.CriticalCelsius * 1000)
	}
	var gpus []sim.GPUSpec
	var gpuOpts sim.NodeSpec // the GPUs' MIG strategy, NVLink and DRA
	if g := n.GPUs; g != nil {
		model, ok := gpuTypes[g.Type]
		switch {
		case !ok:
			return nil, fmt.Errorf("%s.gpus.type: %q is not one of a100, a100-80gb, h100, h100-nvl, h200", at, g.Type)
		case g.Count < 1 || g.Count > 16:
			return nil, fmt.Errorf("%s.gpus.count: %d must be within 1-16", at, g.Count)
		case g.PerNUMA < 1 || g.Count%g.PerNUMA != 0 || g.Count/g.PerNUMA > numa:
			return nil, fmt.Errorf("%s.gpus.perNUMA: %d must divide count %d into at most %d NUMA nodes", at, g.PerNUMA, g.Count, numa)
		}
		gpus = gpuList(g.Count, g.PerNUMA, model)
		gpuOpts.GPUs = gpus
		if err := g.applyGPUOptions(at, &gpuOpts); err != nil {
			return nil, err
		}
	}
	if n.Rack != "" {
		if errs := validation.IsValidLabelValue(n.Rack); len(errs) > 0 {
			return nil, fmt.Errorf("%s.rack: %q: %s", at, n.Rack, strings.Join(errs, "; "))
		}
	}
	role := n.Role
	if n.PowerCurveSource != "" {
		role += fmt.Sprintf(" [%s: %.0f-%.0f W]", n.PowerCurveSource, curve[0], curve[10])
	}
	cpuModel := n.CPUModel
	if cpuModel == "" {
		cpuModel = specpowerCPUs[n.PowerCurveSource]
	}
	table := speed.Resolver{Shipped: speed.Shipped()}
	cpuMilli, _, _ := table.CPU(cpuModel)
	for i := range gpus {
		m, _, _ := table.GPU(gpus[i].Model)
		gpus[i].Speed = float64(m) / 1000
	}
	var out []sim.NodeSpec
	for i := range count {
		name := n.Name
		if count > 1 {
			name = fmt.Sprintf("%s-%d", n.Name, i)
		}
		out = append(out, sim.NodeSpec{
			Name: name, Rack: n.Rack, Role: strings.TrimSpace(role), BaseUtilization: n.BaseUtilizationPercent / 100, GPUs: gpus,
			Curve: curve, CurveSource: n.PowerCurveSource, FanFault: n.FanFault,
			MIGStrategy: gpuOpts.MIGStrategy, NVLink: gpuOpts.NVLink, DRA: gpuOpts.DRA,
			AmbientCelsius: t.AmbientCelsius, CelsiusPerWatt: t.CelsiusPerWatt, ThermalTimeConstant: tau, LeakageWattsPerCelsius: t.LeakageWattsPerCelsius,
			CPUSpeed: float64(cpuMilli) / 1000,
			Host: hosttree.Spec{
				CPUs: n.CPUs, NUMANodes: numa, Packages: pkgs, MemoryKiB: mem.Value() >> 10,
				IdleWatts: curve[0], FullLoadWatts: curve[10], CritMilliCelsius: crit,
				PackageLimitWatts: n.PackageLimitWatts, CPUModel: cpuModel,
			},
		})
	}
	return out, nil
}

// specpowerCPUs are the CPUs of the SPECpower_ssj2008 results the fleets'
// curves come from, as /proc/cpuinfo names them: a node of such a curve
// without a cpuModel of its own runs that CPU, and its agent looks its
// speed up in the shipped table (agent/speed) as a real node's would.
// From SPEC's SPECpower_ssj2008 results export (the systems' CPUs) and
// public /proc/cpuinfo dumps of those parts (the names).
var specpowerCPUs = map[string]string{
	"power_ssj2008-20170829-00780": "Intel(R) Xeon(R) Platinum 8180 CPU @ 2.50GHz",
	"power_ssj2008-20170829-00781": "Intel(R) Xeon(R) Platinum 8180 CPU @ 2.50GHz",
	"power_ssj2008-20171010-00789": "Intel(R) Xeon(R) Platinum 8180 CPU @ 2.50GHz",
	"power_ssj2008-20160705-00737": "Intel(R) Xeon(R) CPU E5-4669 v4 @ 2.20GHz",
	"power_ssj2008-20120306-00434": "Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz",
	"power_ssj2008-20120306-00435": "Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz",
	"power_ssj2008-20120306-00436": "Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz",
	"power_ssj2008-20100315-00239": "Intel(R) Xeon(R) CPU           X5670  @ 2.93GHz",
	"power_ssj2008-20080116-00034": "Intel(R) Xeon(R) CPU           E5440  @ 2.83GHz",
	"power_ssj2008-20080115-00026": "Intel(R) Xeon(R) CPU           E5345  @ 2.33GHz",
	"power_ssj2008-20080115-00030": "Intel(R) Xeon(R) CPU            5160  @ 3.00GHz",
}

// DefaultFleet is the sandbox's default fleet (fleets/default.yaml).
func DefaultFleet() *Fleet {
	fleet, err := ParseFleet(DefaultFleetYAML)
	if err != nil {
		panic("sandbox/fleets/default.yaml: " + err.Error())
	}
	return fleet
}

// heaterOf is the node whose fan fails, "" when none has a fan fault.
func heaterOf(specs []sim.NodeSpec) string {
	for _, s := range specs {
		if s.FanFault {
			return s.Name
		}
	}
	return ""
}

var a100 = sim.GPUSpec{
	Model: "NVIDIA A100-SXM4-40GB", MemoryBytes: 40 << 30, IdleWatts: 55, TDPWatts: 400,
	SlowdownCelsius: 87, ShutdownCelsius: 92, PCIDeviceID: 0x20b0, PCIDeviceIDFull: 0x20b010de,
	ComputeCapMajor: 8, ComputeCapMinor: 0, MemoryUsedIdle: 500 << 20, MemoryUsedLoaded: 30 << 30,
}

var a100x80 = sim.GPUSpec{
	Model: "NVIDIA A100-SXM4-80GB", MemoryBytes: 80 << 30, IdleWatts: 60, TDPWatts: 400,
	SlowdownCelsius: 87, ShutdownCelsius: 92, PCIDeviceID: 0x20b2, PCIDeviceIDFull: 0x20b210de,
	ComputeCapMajor: 8, ComputeCapMinor: 0, MemoryUsedIdle: 600 << 20, MemoryUsedLoaded: 60 << 30,
}

var h100 = sim.GPUSpec{
	Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, IdleWatts: 70, TDPWatts: 700,
	SlowdownCelsius: 90, ShutdownCelsius: 95, PCIDeviceID: 0x2330, PCIDeviceIDFull: 0x233010de,
	ComputeCapMajor: 9, ComputeCapMinor: 0, MemoryUsedIdle: 600 << 20, MemoryUsedLoaded: 60 << 30,
}

// h100nvl is an NVIDIA H100 NVL, the PCIe H100 of 94 GB sold in
// NVLink-bridged pairs, as real ones show themselves in nvidia-smi:
// "NVIDIA H100 NVL", 95830 MiB of which 594 reserved (NVML's used memory
// counts the reservation: the H200 of agent/nvml/testdata/h200-vm shows
// 616 MiB reserved in nvidia-smi and 615 MiB used to the agent), 60-68 W
// idle at 0 %, a 400 W limit (one host ran it at 310 W of 200-400 W),
// device id 0x232110DE. nvidia-smi prints its temperature limits as
// margins, the same as the H200's: 32 °C with 55 °C left to the T.Limit
// (the max operating temperature, 87 °C), slowdown 2 °C and shutdown 8 °C
// past it: 89 and 95 °C, as the H200 (34 + 53 = 87; its NVML slowdown
// threshold 89 °C). Sources: thamada/nvidia-smi nvsim/H100NVLx2_smi.py
// (nvidia-smi -q, two GPUs, driver 550.54.14), rackerlabs/genestack-blog
// docs/blog/posts/2025-12-01-nvidia-gpu-setup.md (four idle GPUs, driver
// 580.105.08), and the GPU Operator's default MIG configuration
// (NVIDIA/mig-parted deployments/systemd/config-default.yaml), whose
// "H100 NVL" device filter is 0x232110DE.
var h100nvl = sim.GPUSpec{
	Model: "NVIDIA H100 NVL", MemoryBytes: 95830 << 20, IdleWatts: 62, TDPWatts: 400,
	SlowdownCelsius: 89, ShutdownCelsius: 95, PCIDeviceID: 0x2321, PCIDeviceIDFull: 0x232110de,
	ComputeCapMajor: 9, ComputeCapMinor: 0, MemoryUsedIdle: 594 << 20, MemoryUsedLoaded: 70 << 30,
}

// h200 is an NVIDIA H200 SXM as a real one reports itself to the agent
// (agent/nvml/testdata/h200-vm: its name, 150754820096 bytes, 78 W idle,
// a 700 W limit, slowdown at 89 and shutdown at 95 °C); its PCI device id
// is pci.ids' "GH100 [H200 SXM 141GB]".
var h200 = sim.GPUSpec{
	Model: "NVIDIA H200", MemoryBytes: 150754820096, IdleWatts: 78, TDPWatts: 700,
	SlowdownCelsius: 89, ShutdownCelsius: 95, PCIDeviceID: 0x2335, PCIDeviceIDFull: 0x233510de,
	ComputeCapMajor: 9, ComputeCapMinor: 0, MemoryUsedIdle: 615 << 20, MemoryUsedLoaded: 120 << 30,
}

// gpuList returns n GPUs of a model, perNUMA on each NUMA node in turn.
func gpuList(n, perNUMA int, model sim.GPUSpec) []sim.GPUSpec {
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
