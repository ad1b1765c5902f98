// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sim drives the sandbox's simulated nodes: each has a hardware tree
// (sandbox/hosttree) and, for GPU nodes, go-nvml mock GPUs, which the real
// agent reads through its real collectors. The load model closes the loop:
// pods bound to a node raise its utilization, power and temperature.
//
// The model, per node, every step:
//
//	utilization = base + Σ CPU requests of its pods / its CPUs   (0..1; during the
//	              calibration sweep, the sweep's value instead)
//	CPU watts   = curve(utilization) + leakage × max(0, °C − 40)              (hosttree's RAPL counters)
//	target °C   = ambient + R × CPU watts + fault heat
//	temperature → target with the node's time constant
//	GPU busy    = allocated to a pod: 95 % utilization, else 0 %; a MIG
//	              device held by a pod: its compute slices' share of that
//	              (a GPU in MIG mode reports no utilization, as NVML)
//	GPU watts   = idle + (TDP − idle) × GPU utilization
//	GPU °C      = 32 + 40 × GPU utilization
//
// curve is the node's 11-point power curve (0 %, 10 % … 100 %), read
// linearly between its points: the sandbox's fleets take them from
// published SPECpower_ssj2008 results. The leakage term is the power a hot
// package and its fans add (transistor leakage grows with temperature,
// fans spin up), so heat and power feed each other as on real machines.
//
// Pods run at their CPU requests; a GPU pod's GPUs are taken on one NUMA
// node when one has enough free, as the kubelet's topology manager would.
package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/telesched/telesched/sandbox/hosttree"
)

// Model defaults; see the package comment. A NodeSpec's zero thermal
// values take these.
const (
	DefaultAmbientCelsius = 30.0
	// SizedForCelsius: a node without its own celsiusPerWatt is cooled so
	// that full load settles here at the default ambient.
	SizedForCelsius            = 88.0
	DefaultThermalTimeConstant = 6 * time.Second
	// DefaultLeakageWattsPerCelsius is the power added per °C above
	// LeakageFromCelsius.
	DefaultLeakageWattsPerCelsius = 0.2
	LeakageFromCelsius            = 40.0
	GPUBusyUtilization            = 0.95
	GPUIdleCelsius                = 32.0
	GPULoadCelsius                = 40.0
)

// GPUSpec is one simulated GPU.
type GPUSpec struct {
	Model            string // as NVML names it
	MemoryBytes      uint64
	IdleWatts        float64
	TDPWatts         float64
	SlowdownCelsius  uint32
	ShutdownCelsius  uint32
	NUMANode         int
	PCIAddress       string // "0000:07:00.0"
	PCIDeviceID      uint16 // NVIDIA's device id
	PCIDeviceIDFull  uint32 // device id << 16 | vendor, as NVML reports it
	UUID             string
	ComputeCapMajor  int
	ComputeCapMinor  int
	MemoryUsedIdle   uint64
	MemoryUsedLoaded uint64
	// ComputeSlices is the most MIG devices the GPU holds (7 on an A100
	// or H100); MIG its MIG devices, nil when MIG is off.
	ComputeSlices int
	MIG           []MIGDevice
	// PCIeRoot is the PCI root bus the GPU sits below, as sysfs names
	// its directory under /sys/devices ("pci0000:00"); "" for none.
	PCIeRoot string
	// Speed is the work the GPU does per second against the reference
	// GPU's (agent/speed's table for its model); 0 reads as 1.
	Speed float64
}

// NodeSpec is a simulated node.
type NodeSpec struct {
	Name string
	// Rack is the rack the node sits in (a label of its Node, which
	// PowerBudgets select); "" for none.
	Rack string
	// Role says what the node is for in the scenario, for the output.
	Role            string
	Host            hosttree.Spec
	BaseUtilization float64
	GPUs            []GPUSpec
	// Curve is the CPU-side power at 0 %, 10 % … 100 % utilization; all
	// zero takes the straight line between Host.IdleWatts and
	// Host.FullLoadWatts. CurveSource names where it comes from.
	Curve       [11]float64
	CurveSource string
	// FanFault: the scenario fails this node's fan.
	FanFault bool
	// MIGStrategy is the device plugin's MIG strategy (MIGSingle,
	// MIGMixed), "" on a node without MIG; NVLink how its GPUs are linked
	// (NVLinkSwitch, NVLinkPairs, "" none); DRA: its GPUs are published as
	// ResourceSlices, not as the GPU resource.
	MIGStrategy string
	NVLink      string
	DRA         bool
	// Thermal response: where the package settles is AmbientCelsius +
	// CelsiusPerWatt × CPU watts, approached with ThermalTimeConstant;
	// LeakageWattsPerCelsius is the leakage and fan term. Zero takes the
	// defaults.
	AmbientCelsius         float64
	CelsiusPerWatt         float64
	ThermalTimeConstant    time.Duration
	LeakageWattsPerCelsius float64
	// CPUSpeed is the work a logical CPU does per second at full load
	// against the reference core's (agent/speed's table for
	// Host.CPUModel); 0 reads as 1. A service pod's requests are sized on
	// the reference: it keeps 1/CPUSpeed of them busy here.
	CPUSpeed float64
}

// CPUPace is the node's CPU speed, 1 when unset.
func (spec NodeSpec) CPUPace() float64 {
	if spec.CPUSpeed <= 0 {
		return 1
	}
	return spec.CPUSpeed
}

// GPUPace is the mean speed of the node's GPUs, 1 when unset; 0 without
// GPUs.
func (spec NodeSpec) GPUPace() float64 {
	if len(spec.GPUs) == 0 {
		return 0
	}
	var sum float64
	for _, g := range spec.GPUs {
		if g.Speed > 0 {
			sum += g.Speed
		} else {
			sum++
		}
	}
	return sum / float64(len(spec.GPUs))
}

// Run is a load on a node for the energy it costs: CPUMilli of CPU busy
// and Busy GPUs (whole GPUs, a MIG device its share) for Seconds from
// Start.
type Run struct {
	CPUMilli, Busy, Seconds, Start float64
}

// Joules is the energy node spec spends, beyond what its base load
// draws, running service for horizon seconds from 0 and each of finite
// for its own Seconds from its Start: the node's steady power (EstimatedWattsShare,
// leakage at the settled temperature included) over each stretch in
// which the same loads run, less its power at its base load alone, times
// the stretch's length. It is the energy for the same work whatever the
// node's speed: the caller sizes the loads (a service keeps 1/speed of
// its requests busy; a finite load runs for its work over the speed).
func (spec NodeSpec) Joules(service Run, horizon float64, finite []Run) float64 {
	spec = spec.WithDefaults()
	cap := float64(spec.Host.CPUs) * 1000
	if cap <= 0 {
		return 0
	}
	base := spec.EstimatedWattsShare(spec.BaseUtilization, 0)
	ends := []float64{horizon}
	for _, f := range finite {
		ends = append(ends, f.Start, f.Start+f.Seconds)
	}
	slices.Sort(ends)
	var joules, from float64
	for _, to := range ends {
		if to <= from {
			continue
		}
		cpu, busy := 0.0, 0.0
		if from < horizon {
			cpu, busy = service.CPUMilli, service.Busy
		}
		for _, f := range finite {
			if from >= f.Start && from < f.Start+f.Seconds {
				cpu += f.CPUMilli
				busy += f.Busy
			}
		}
		joules += (spec.EstimatedWattsShare(spec.BaseUtilization+cpu/cap, busy) - base) * (to - from)
		from = to
	}
	return joules
}

// WithDefaults fills the zero thermal values and the curve.
func (spec NodeSpec) WithDefaults() NodeSpec {
	if spec.AmbientCelsius == 0 {
		spec.AmbientCelsius = DefaultAmbientCelsius
	}
	if spec.ThermalTimeConstant == 0 {
		spec.ThermalTimeConstant = DefaultThermalTimeConstant
	}
	if spec.LeakageWattsPerCelsius == 0 {
		spec.LeakageWattsPerCelsius = DefaultLeakageWattsPerCelsius
	}
	if spec.Curve == [11]float64{} {
		for k := range spec.Curve {
			spec.Curve[k] = spec.Host.IdleWatts + (spec.Host.FullLoadWatts-spec.Host.IdleWatts)*float64(k)/10
		}
	}
	if spec.CelsiusPerWatt == 0 {
		// Cooling sized for the node: full load settles at
		// SizedForCelsius in a 30°C room.
		full := spec.Curve[10] + spec.LeakageWattsPerCelsius*(SizedForCelsius-LeakageFromCelsius)
		spec.CelsiusPerWatt = (SizedForCelsius - DefaultAmbientCelsius) / math.Max(full, 1)
	}
	return spec
}

// CurveWatts is the curve at utilization u, 0..1.
func (spec NodeSpec) CurveWatts(u float64) float64 {
	x := math.Min(1, math.Max(0, u)) * 10
	i := min(int(x), 9)
	return spec.Curve[i] + (spec.Curve[i+1]-spec.Curve[i])*(x-float64(i))
}

// cpuWatts is the CPU-side power at utilization u and package temperature
// celsius.
func (spec NodeSpec) cpuWatts(u, celsius float64) float64 {
	return spec.CurveWatts(u) + spec.LeakageWattsPerCelsius*math.Max(0, celsius-LeakageFromCelsius)
}

// Steady is where the node settles at utilization u with fault heat: its
// package temperature and CPU-side power (heat and leakage solved
// together).
func (spec NodeSpec) Steady(u, fault float64) (celsius, watts float64) {
	celsius = spec.AmbientCelsius
	for range 100 {
		watts = spec.cpuWatts(u, celsius)
		next := spec.AmbientCelsius + spec.CelsiusPerWatt*watts + fault
		if math.Abs(next-celsius) < 1e-6 {
			return next, watts
		}
		celsius = next
	}
	return celsius, watts
}

// Node is a running simulated node.
type Node struct {
	Spec NodeSpec
	Dir  string // the tree the agent reads as its host root

	host *hosttree.Host

	// stepMu orders the steps, file writes included: the sandbox's
	// ticker and the agent reading the tree both step the node.
	stepMu sync.Mutex

	mu        sync.Mutex
	pods      map[types.UID]podLoad
	sweep     float64 // calibration sweep's utilization, when sweeping
	sweeping  bool
	faultHeat float64 // °C added by a fault
	extra     float64 // utilization added to the base load (SetExtraLoad)
	extraGPU  float64 // share added to each GPU's busy share (SetExtraLoad)
	celsius   float64
	gpuBusy   []bool
	migBusy   [][]bool  // per GPU, per MIG device
	gpuEnergy []float64 // millijoules
	last      time.Time
}

type podLoad struct {
	cpuMilli int64
	gpus     []int // claimed among them
	slices   []Slice
	// claimed are the GPUs of gpus, and claimedSlices the MIG devices of
	// slices, that a DRA claim named claim got; name is the pod's
	// (Request.Pod).
	claimed       []int
	claimedSlices []Slice
	name          types.NamespacedName
	claim         string
}

// NewNode writes the node's tree under dir.
func NewNode(dir string, spec NodeSpec) (*Node, error) {
	hs := spec.Host
	for _, g := range spec.GPUs {
		hs.PCIDevices = append(hs.PCIDevices, hosttree.PCIDevice{Address: g.PCIAddress, Vendor: 0x10de, Device: g.PCIDeviceID, Class: 0x030200, NUMANode: g.NUMANode, Root: g.PCIeRoot})
	}
	host, err := hosttree.New(dir, hs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Name, err)
	}
	spec = spec.WithDefaults()
	celsius, _ := spec.Steady(spec.BaseUtilization, 0)
	n := &Node{
		Spec: spec, Dir: dir, host: host, pods: map[types.UID]podLoad{},
		celsius: celsius,
		gpuBusy: make([]bool, len(spec.GPUs)), migBusy: make([][]bool, len(spec.GPUs)), gpuEnergy: make([]float64, len(spec.GPUs)),
		last: time.Now(),
	}
	for i, g := range spec.GPUs {
		n.migBusy[i] = make([]bool, len(g.MIG))
	}
	return n, n.Step()
}

// Sweep holds the node at a utilization, 0..1, whatever its base load and
// pods, until EndSweep: the sandbox sweeps it at start so the agent's power
// model sees a range of load, as a day of work would show it.
func (n *Node) Sweep(u float64) {
	n.mu.Lock()
	n.sweep, n.sweeping = u, true
	n.mu.Unlock()
}

// EndSweep returns the node to its base load and pods.
func (n *Node) EndSweep() {
	n.mu.Lock()
	n.sweeping = false
	n.mu.Unlock()
}

// SetFaultHeat adds degrees Celsius to the node's target temperature (a
// failed fan); 0 repairs it.
func (n *Node) SetFaultHeat(celsius float64) {
	n.mu.Lock()
	n.faultHeat = celsius
	n.mu.Unlock()
}

// FailSensors makes every temperature sensor of the node read as failed
// (hosttree.Host.FailTemperatures), or, with false, read again.
func (n *Node) FailSensors(failed bool) { n.host.FailTemperatures(failed) }

// SetExtraUtilization adds u (0..1) to the node's base CPU load and to
// each GPU's busy share: work the scheduler does not see rises (or, with
// 0, falls back).
func (n *Node) SetExtraUtilization(u float64) { n.SetExtraLoad(u, u) }

// SetExtraLoad adds cpu (0..1) to the node's base CPU load and gpu (0..1)
// to each GPU's busy share, apart: a node's CPUs may be near full load
// while its GPUs idle.
func (n *Node) SetExtraLoad(cpu, gpu float64) {
	n.mu.Lock()
	n.extra, n.extraGPU = cpu, gpu
	n.mu.Unlock()
}

// Watts is what the node draws now, CPU and GPUs, by the simulation.
func (n *Node) Watts() float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.Spec.cpuWatts(n.utilization(), n.celsius)
	for i, g := range n.Spec.GPUs {
		w += gpuWatts(g, n.loadShare(i))
	}
	return w
}

// SteadyWatts is what the node would draw, settled, with extra added to
// its CPU utilization and to each GPU's busy share (SetExtraUtilization)
// and its pods' CPU load changed by podMilli (negative: pods gone), its
// fault heat as now.
func (n *Node) SteadyWatts(extra float64, podMilli int64) float64 {
	return n.SteadyLoadWatts(extra, extra, podMilli)
}

// SteadyLoadWatts is SteadyWatts with the extra CPU load and GPU share
// apart (SetExtraLoad).
func (n *Node) SteadyLoadWatts(cpuExtra, gpuExtra float64, podMilli int64) float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	u := n.utilization() - n.extra + cpuExtra + float64(podMilli)/float64(n.Spec.Host.CPUs*1000)
	_, w := n.Spec.Steady(math.Min(1, math.Max(0, u)), n.faultHeat)
	for i, g := range n.Spec.GPUs {
		w += gpuWatts(g, math.Min(1, n.share(i)+gpuExtra))
	}
	return w
}

// loadShare is GPU i's busy share with the extra load. The caller holds
// n.mu.
func (n *Node) loadShare(i int) float64 {
	return math.Min(1, n.share(i)+n.extraGPU)
}

// AddPod runs a pod on the node. It returns the GPUs it took.
func (n *Node) AddPod(uid types.UID, cpuMilli int64, gpus int) []int {
	return n.AddPodDevices(uid, cpuMilli, Request{GPUs: gpus}).GPUs
}

// SetPodCPU sets a running pod's CPU load, in milli-CPUs (its load rises
// or falls); false when the pod does not run here.
func (n *Node) SetPodCPU(uid types.UID, cpuMilli int64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.pods[uid]
	if ok {
		p.cpuMilli = cpuMilli
		n.pods[uid] = p
	}
	return ok
}

// RemovePod stops a pod.
func (n *Node) RemovePod(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, g := range n.pods[uid].gpus {
		n.gpuBusy[g] = false
	}
	for _, sl := range n.pods[uid].slices {
		n.migBusy[sl.GPU][sl.Device] = false
	}
	delete(n.pods, uid)
}

// TakeGPUs picks count of a node's whole GPUs (not in MIG mode) not
// marked in busy (indexed like spec.GPUs): on a node of NVLink pairs, a
// pair of 2 takes a linked pair when one is free (linkedPair), as a
// topology-aware device plugin allocator does; else all on the lowest NUMA
// node that has enough free, else the lowest free ones, as the kubelet's
// topology manager would. It marks them busy and returns them.
func TakeGPUs(spec NodeSpec, busy []bool, count int) []int {
	if count <= 0 {
		return nil
	}
	if taken := linkedPair(spec, busy, count); taken != nil {
		return taken
	}
	free := map[int][]int{}
	var numaIDs []int
	for i, g := range spec.GPUs {
		if !busy[i] && g.MIG == nil {
			if _, ok := free[g.NUMANode]; !ok {
				numaIDs = append(numaIDs, g.NUMANode)
			}
			free[g.NUMANode] = append(free[g.NUMANode], i)
		}
	}
	sort.Ints(numaIDs)
	var taken []int
	for _, id := range numaIDs {
		if len(free[id]) >= count {
			taken = free[id][:count]
			break
		}
	}
	if taken == nil {
		for _, id := range numaIDs {
			for _, g := range free[id] {
				if len(taken) < count {
					taken = append(taken, g)
				}
			}
		}
	}
	for _, g := range taken {
		busy[g] = true
	}
	return taken
}

// HeldGPUs marks, per GPU, whether a pod holds it whole.
func (n *Node) HeldGPUs() []bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.gpuBusy)
}

// BusyGPUs is how many of the node's GPUs its pods hold whole.
func (n *Node) BusyGPUs() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	busy := 0
	for _, b := range n.gpuBusy {
		if b {
			busy++
		}
	}
	return busy
}

// BusyShare is the node's busy GPUs in whole GPUs: each GPU its pods hold
// whole, and each busy MIG device its share of its GPU (Share).
func (n *Node) BusyShare() float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	var share float64
	for i := range n.Spec.GPUs {
		share += n.share(i)
	}
	return share
}

// Utilization is the node's CPU utilization now, 0..1.
func (n *Node) Utilization() float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.utilization()
}

func (n *Node) utilization() float64 {
	if n.sweeping {
		return math.Min(1, math.Max(0, n.sweep))
	}
	var milli int64
	for _, p := range n.pods {
		milli += p.cpuMilli
	}
	u := n.Spec.BaseUtilization + n.extra + float64(milli)/float64(n.Spec.Host.CPUs*1000)
	return math.Min(1, math.Max(0, u))
}

// FaultHeatFor is the fault heat that takes the node, at its load now, to
// settle at celsius.
func (n *Node) FaultHeatFor(celsius float64) float64 {
	u := n.Utilization()
	lo, hi := -100.0, 200.0
	for range 60 { // Steady rises with the fault heat: bisect
		mid := (lo + hi) / 2
		if c, _ := n.Spec.Steady(u, mid); c < celsius {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// Fault is the fault heat now, °C.
func (n *Node) Fault() float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.faultHeat
}

// Celsius is the node's package temperature now.
func (n *Node) Celsius() float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.celsius
}

// The calibration ramp the sandbox runs every simulated node through
// before its scenario (CalibrationRamp), each level held CalibrationHold
// sampling intervals.
const (
	calibrationLevels = 16
	CalibrationHold   = 3
)

// CalibrationRamp is the utilization of each level of the calibration
// ramp: 5 % to 80 % in 5-point steps and back down to 5 %. A sample that
// straddles two levels mixes neighbours on the curve, not far-off points.
// The way back matters as much as the way up: a package's temperature,
// and so its leakage, lags its load by its time constant (seconds here,
// minutes on real heatsinks), so a level reached on the way up reads
// cooler, and fewer watts, than the same load held, and one reached on
// the way down warmer. Up alone, every bin above a node's own load read
// low, and the watts a pod adds where the node runs came out 2-15 % under
// the settled ones on the generations fleet (docs/benchmarks.md); up and
// down, the two errors meet in each bin. (A node that runs for days gives
// its agent far more, and in both directions.)
func CalibrationRamp() []float64 {
	var levels []float64
	for i := 1; i <= calibrationLevels; i++ {
		levels = append(levels, 0.05*float64(i))
	}
	for i := calibrationLevels - 1; i >= 1; i-- {
		levels = append(levels, 0.05*float64(i))
	}
	return levels
}

// StepsPerInterval is how many times per agent sampling interval the
// sandbox steps its nodes. An agent divides a RAPL counter's change by the
// time between its reads, as it must on hardware, whose counters move
// every millisecond; a simulated counter moves only at a step, so a
// sample's watts can be off by one step's energy: by a quarter at 4 steps
// an interval (a node at steady load read 144 to 191 W, and the curves its
// agent learned carried 13-128 W of uncertainty at 20-80 %), by a
// twentieth at 20 (TestSampledWattsAtAnyPhase).
const StepsPerInterval = 20

// Step advances the model by the time since the last step and rewrites the
// node's tree.
func (n *Node) Step() error { return n.stepIfOlder(0) }

// BeforeRead steps the node before an agent reads hostPath in its tree
// (the agent's host read hook), when the file is a counter the agent
// turns into a rate (hosttree.RateCounter) and the last step is older
// than hosttree.ReadStep. The counters the agent reads are so as of the
// read, as a real host's are, not as of a step up to
// 1/StepsPerInterval of an interval before it: on a loaded host, steps
// held up for a few hundred milliseconds turned into tens of percent of a
// sample's watts, and flat learned curves.
func (n *Node) BeforeRead(hostPath string) error {
	if !hosttree.RateCounter(hostPath) {
		return nil
	}
	return n.stepIfOlder(hosttree.ReadStep)
}

// stepIfOlder is Step when the last step is older than d.
func (n *Node) stepIfOlder(d time.Duration) error {
	n.stepMu.Lock()
	defer n.stepMu.Unlock()
	now := time.Now()
	n.mu.Lock()
	fresh := now.Sub(n.last) < d
	n.mu.Unlock()
	if fresh {
		return nil
	}
	return n.stepTo(now)
}

// StepTo is Step with the time given; a time before the last step's does
// nothing.
func (n *Node) StepTo(now time.Time) error {
	n.stepMu.Lock()
	defer n.stepMu.Unlock()
	return n.stepTo(now)
}

// stepTo is StepTo; the caller holds stepMu.
func (n *Node) stepTo(now time.Time) error {
	n.mu.Lock()
	if now.Before(n.last) {
		n.mu.Unlock()
		return nil
	}
	dt := now.Sub(n.last)
	n.last = now
	u := n.utilization()
	watts := n.Spec.cpuWatts(u, n.celsius)
	target := n.Spec.AmbientCelsius + n.Spec.CelsiusPerWatt*watts + n.faultHeat
	n.celsius += (target - n.celsius) * (1 - math.Exp(-dt.Seconds()/n.Spec.ThermalTimeConstant.Seconds()))
	for i, g := range n.Spec.GPUs {
		n.gpuEnergy[i] += gpuWatts(g, n.loadShare(i)) * dt.Seconds() * 1000
	}
	celsius := n.celsius
	n.mu.Unlock()
	n.host.SetUtilization(u)
	n.host.SetWatts(watts)
	n.host.SetTemperature(int64(celsius * 1000))
	return n.host.AdvanceTo(now)
}

// gpuWatts is a GPU's power with share of it busy (0..1: a whole GPU, or
// its busy MIG devices' compute slices over its ComputeSlices): its
// dynamic power, busy at GPUBusyUtilization, splits by compute slices, as
// its SMs do.
func gpuWatts(g GPUSpec, share float64) float64 {
	return g.IdleWatts + (g.TDPWatts-g.IdleWatts)*GPUBusyUtilization*share
}

// gpu is one GPU's readings for the NVML mock.
type gpu struct {
	utilization uint32
	celsius     uint32
	milliwatts  uint32
	energyMJ    uint64
	memUsed     uint64
}

func (n *Node) gpu(i int) gpu {
	n.mu.Lock()
	defer n.mu.Unlock()
	g, share := n.Spec.GPUs[i], n.loadShare(i)
	u := GPUBusyUtilization * share
	used := g.MemoryUsedIdle + uint64(float64(g.MemoryUsedLoaded-g.MemoryUsedIdle)*share)
	return gpu{
		utilization: uint32(math.Round(u * 100)),
		celsius:     uint32(math.Round(GPUIdleCelsius + GPULoadCelsius*u)),
		milliwatts:  uint32(gpuWatts(g, share) * 1000),
		energyMJ:    uint64(n.gpuEnergy[i]),
		memUsed:     used,
	}
}

// EstimatedWatts is the model's steady node power, CPU (leakage included)
// and GPUs, for a utilization and a number of busy GPUs: what the node
// would draw running that load.
func (spec NodeSpec) EstimatedWatts(utilization float64, busyGPUs int) float64 {
	return spec.EstimatedWattsShare(utilization, float64(busyGPUs))
}

// EstimatedWattsShare is EstimatedWatts with the busy GPUs in whole GPUs,
// MIG devices counting their share (BusyShare): the first GPUs busy in
// turn, the last in part.
func (spec NodeSpec) EstimatedWattsShare(utilization, busy float64) float64 {
	spec = spec.WithDefaults()
	_, w := spec.Steady(math.Min(1, math.Max(0, utilization)), 0)
	for i, g := range spec.GPUs {
		w += gpuWatts(g, math.Min(1, math.Max(0, busy-float64(i))))
	}
	return w
}
