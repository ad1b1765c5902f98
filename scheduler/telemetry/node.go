// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"fmt"
	"slices"
	"strings"
	"time"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/heat"
)

// Node is the scheduler's view of one node's telemetry, computed once per
// update. A Has* field false means the agent did not report that section;
// the values beside it are then zero and must not be read. The thermal
// fields are the one exception the other way: while the node's thermal
// source fails, they hold its last reading (ThermalFailed, ThermalKnown).
//
// The fields Filter and Score read for every node come first, in the view's
// first two cache lines (TestNodeLayout): reading a node's view in a
// scheduling cycle costs memory latency far more than arithmetic.
type Node struct {
	// First cache line: freshness, CPU, memory and thermal headroom.
	// Observed is when the scheduler's cache first saw this sample, by the
	// scheduler's clock: freshness is judged from it (Fresh).
	Observed         time.Time
	MemoryTotalBytes int64
	UnlimitedMilli   int64 // hottest sensor without a limit, milli-°C (HasUnlimited)
	HeadroomMilli    int64 // smallest headroom over sensors with a limit
	CPUPercent       int32
	LogicalCores     int32
	MemoryPercent    int32
	HasCPU           bool
	HasMemory        bool
	HasThermal       bool
	HasHeadroom      bool

	// Second cache line: throttling, power, GPUs.
	// Throttling is CPU thermal throttling (a per-CPU throttle counter
	// rose) during the last interval; sensor alarms are not throttling.
	Throttling    bool
	HasPower      bool
	ModelReady    bool
	IdleWatts     int32
	FullLoadWatts int32
	GPUWatts      int32
	Watts         int32
	// HasGPUSource is true when the agent could read NVML (zero GPUs is
	// then a fact, not a gap).
	HasGPUSource bool
	HasLimit     bool // see LimitMilli
	HasUnlimited bool // see UnlimitedMilli
	GPUs         []GPU

	// Read when a node is rejected, on updates and for GPU and NUMA pods.
	Name string
	// SampleTime is when the agent took the sample, by the agent's clock:
	// for display, never compared with the scheduler's. ClockOffset is
	// SampleTime - Observed: a little below zero for an agent in step (the
	// time from sampling to the cache), far off for one whose clock is
	// wrong; Skewed when beyond the cache's tolerance.
	SampleTime    time.Time
	ClockOffset   time.Duration
	Skewed        bool
	Interval      time.Duration
	HottestSensor string
	HottestMilli  int64 // milli-°C
	LimitMilli    int64 // the hottest sensor's effective limit
	// HeadroomSensor is the sensor HeadroomMilli belongs to, at
	// HeadroomSensorMilli; UnlimitedSensor the one UnlimitedMilli is.
	HeadroomSensor      string
	HeadroomSensorMilli int64
	UnlimitedSensor     string
	NUMA                []NUMANode
	// Windows is the node's window summary; nil when its agent published
	// none (status.windows absent, or nothing plausible in it).
	Windows *Windows
	// Models are the node's learned power and thermal models; nil when
	// its agent published none, or only implausible ones.
	Models *Models
	// Rejected says what of the node's published telemetry the scheduler
	// refused as breaking physics (Plausibility), "" when nothing: such a
	// model reads as absent and such watts as missing (HasPower false).
	Rejected string
	// LastWatts is the node's last plausible measured watts, seen by the
	// scheduler at LastWattsObserved: Watts for a view with power, and the
	// watts of an earlier view for one whose sample lacks them (no power
	// section, or watts refused). HasLastWatts is false when the node never
	// had any.
	LastWatts    int32
	HasLastWatts bool
	// PowerSources are where the node's published watts came from
	// (status.power.sources), kept when the watts were refused; 0 without
	// a power section. LastPowerSources are where LastWatts came from.
	// (Beside HasLastWatts: they fill that line's padding.)
	PowerSources, LastPowerSources PowerSources
	LastWattsObserved              time.Time
	// ThermalFailed says how the node's thermal source failed in this
	// sample ("thermal section refused by the API server (...)", "thermal
	// source failed (SensorFault: ...)"), "" when it did not: Available, or
	// Unavailable (a node without sensors has no heat to report). Such a
	// sample has no thermal section; the view's thermal fields are then the
	// last reading the cache saw, carried over from the view before
	// (Cache.Set), or absent when it had none. ThermalKnown says how long
	// they count.
	ThermalFailed string
	// ThermalObserved is when the cache saw the sample the view's thermal
	// fields come from: Observed, or an earlier view's for held ones.
	ThermalObserved time.Time
	// CPUSpeed is the work a logical CPU does per second against the
	// reference core's (status.speed.cpuCoreMilli / 1000); 1 when the
	// agent published no speed. CPUSpeedSource says where it came from:
	// "reference" (unknown, judged as the reference) when published so or
	// not published at all.
	CPUSpeed       float64
	CPUSpeedSource telemetryv1alpha1.SpeedSource

	// resourceVersion orders views of the same object; 0 when unknown.
	resourceVersion uint64
	// written is when the node's agent last wrote the object's status, by
	// the API server's clock, to the second (writtenAt); zero when unknown.
	written time.Time
	// AgentReady is true while a pod of the node's agent is Ready, as the
	// cache last saw it (Cache.SetAgents): the agent writes on every move
	// past a deadband and its readiness fails when it stops sampling or
	// publishing, so its last write still holds, for up to agentMaxAge.
	// agentMaxAge is 0 while no agent pod is Ready.
	agentMaxAge time.Duration
	AgentReady  bool
	// unwritten is true for a view decoded from an object whose managed
	// fields hold no write of the agent's to the status: someone else
	// wrote it.
	unwritten bool
	_         [6]byte // to a multiple of a cache line (TestNodeLayout)
}

// GPU is one GPU of a node.
type GPU struct {
	Index            int32
	UUID             string
	Model            string
	NUMANode         int32 // -1 when unknown
	MemoryTotalBytes int64
	MemoryUsedBytes  int64
	Healthy          bool
	HasTemperature   bool
	TemperatureMilli int64
	HasSlowdown      bool
	SlowdownMilli    int64
	ThermalThrottled bool
	// HasPower and PowerWatts are the GPU's measured draw (powerWatts).
	HasPower   bool
	PowerWatts int32
	// MIG is true when the GPU is in MIG mode (migEnabled): it runs no pod
	// of its own, its MIG devices do. ComputeSlices and MIGProfiles are its
	// published layout (mig), 0 and nil when not published.
	MIG           bool
	ComputeSlices int32
	MIGProfiles   []MIGProfile
	// Allocated is whether the kubelet allocated the whole GPU to a pod:
	// 1 or 0, -1 when not published.
	Allocated int8
	// NVSwitch is true when the GPU's NVLinks go to NVSwitches.
	NVSwitch bool
	// LinkGroup is the GPU's NVLink group (nvlink.group): the lowest index
	// of the GPUs it reaches over NVLink; -1 without NVLink.
	LinkGroup int32
	// Peers has bit i set for each GPU of index i this one reaches over a
	// direct NVLink (indexes 0 to 63, the API's bound).
	Peers uint64
	// PCIeRoot is the PCIe root complex above the GPU, "" when unknown.
	PCIeRoot string
	// Speed is the work the whole GPU does per second against the
	// reference GPU's (status.speed.gpus[] of its model / 1000); 1 when
	// unknown, and SpeedSource then "reference".
	Speed       float64
	SpeedSource telemetryv1alpha1.SpeedSource
}

// TooHot says why the GPU is too hot for a GPU pod, by EnergyAware's rule
// (gpuSlowdownMarginCelsius): at or past its slowdown temperature less
// marginMilli, or in thermal slowdown already (NVML's SwThermalSlowdown
// or HwThermalSlowdown clock-event reason); "" when it is not. A GPU
// whose temperature or slowdown NVML does not report, and that is not
// slowing down, is not too hot.
func (g *GPU) TooHot(marginMilli int64) string {
	switch {
	case g.nearSlowdown(marginMilli):
		return fmt.Sprintf("GPU %d at %s >= slowdown %s - margin %s", g.Index,
			heat.Celsius(g.TemperatureMilli), heat.Celsius(g.SlowdownMilli), heat.Celsius(marginMilli))
	case g.ThermalThrottled:
		return fmt.Sprintf("GPU %d in thermal slowdown", g.Index)
	}
	return ""
}

// Hot is TooHot without the reason: whether the GPU is too hot, with no
// allocation, for the paths that only count.
func (g *GPU) Hot(marginMilli int64) bool {
	return g.ThermalThrottled || g.nearSlowdown(marginMilli)
}

// nearSlowdown: the GPU's temperature is at or past its slowdown
// temperature less marginMilli, both reported.
func (g *GPU) nearSlowdown(marginMilli int64) bool {
	return g.HasTemperature && g.HasSlowdown && g.TemperatureMilli >= g.SlowdownMilli-marginMilli
}

// MIGProfile is one MIG profile of a GPU in MIG mode: Count devices of
// MemoryBytes each, taking Slices of the GPU's compute slices each.
type MIGProfile struct {
	// Profile is the profile's name, e.g. "1g.10gb" or "1g.10gb+me".
	Profile string
	// Resource is the profile as the device plugin names its resource
	// after the prefix (ProfileResource): "1g.10gb", "1g.10gb.me".
	Resource    string
	MemoryBytes int64
	Count       int32
	// Slices is the compute slices of one device, the profile's leading
	// "<n>g"; 0 when the name does not start so.
	Slices int32
	// Allocated is how many of the devices the kubelet allocated, -1 when
	// not published.
	Allocated int32
}

// ProfileResource is a MIG profile as NVIDIA's device plugin names its
// resource under the mixed strategy, after the prefix nvidia.com/mig-:
// the profile with each "+" made a ".", since a resource name may not
// hold a "+" ("1g.10gb+me" is nvidia.com/mig-1g.10gb.me;
// k8s-device-plugin, internal/rm/rm.go).
func ProfileResource(profile string) string {
	return strings.ReplaceAll(profile, "+", ".")
}

// ProfileSlices is the compute slices a MIG profile's device takes: the
// number before its first "g" ("1g.10gb": 1, "3g.40gb": 3), or, for a
// compute instance that shares its GPU instance with others, the number
// before its "c" ("1c.3g.40gb": 1 of the GPU instance's 3, NVIDIA's MIG
// User Guide, "MIG Device Names"); 0 when the name is neither.
func ProfileSlices(profile string) int32 {
	n, rest := leadingNumber(profile)
	switch {
	case n == 0:
		return 0
	case slicesMark(rest, 'g'):
		return n
	case len(rest) > 2 && slicesMark(rest, 'c'):
		if g, tail := leadingNumber(rest[2:]); g > 0 && slicesMark(tail, 'g') {
			return n
		}
	}
	return 0
}

// slicesMark reports whether s starts with unit (the "g" of "3g.40gb",
// the "c" of "1c.3g.40gb") followed by a dot or nothing.
func slicesMark(s string, unit byte) bool {
	return s != "" && s[0] == unit && (len(s) == 1 || s[1] == '.')
}

// leadingNumber is the decimal number s starts with (0 when none, and
// when it passes 2^20) and what follows it.
func leadingNumber(s string) (int32, string) {
	var n int32
	i := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if n >= 1<<20 {
			return 0, s[i:]
		}
		n = n*10 + int32(s[i]-'0')
	}
	return n, s[i:]
}

// gpuLayout fills g's MIG layout, allocation, PCIe root and NVLink from
// the published status.
func gpuLayout(g *GPU, st *telemetryv1alpha1.GPUStatus) {
	g.MIG = st.MIGEnabled != nil && *st.MIGEnabled
	g.Allocated, g.LinkGroup, g.PCIeRoot = -1, -1, st.PCIeRoot
	if st.Allocated != nil {
		g.Allocated = 0
		if *st.Allocated {
			g.Allocated = 1
		}
	}
	if m := st.MIG; m != nil && g.MIG {
		g.ComputeSlices = m.ComputeSlicesTotal
		g.MIGProfiles = make([]MIGProfile, 0, len(m.Profiles))
		for _, p := range m.Profiles {
			mp := MIGProfile{Profile: p.Profile, Resource: ProfileResource(p.Profile), MemoryBytes: p.MemoryBytes, Count: p.Count, Slices: ProfileSlices(p.Profile), Allocated: -1}
			if p.Allocated != nil {
				mp.Allocated = min(*p.Allocated, p.Count)
			}
			g.MIGProfiles = append(g.MIGProfiles, mp)
		}
	}
	if l := st.NVLink; l != nil {
		g.NVSwitch, g.LinkGroup = l.NVSwitch, l.Group
		for _, p := range l.Peers {
			if p >= 0 && p < 64 {
				g.Peers |= 1 << p
			}
		}
	}
}

// speedFrom fills the view's CPU and GPU speeds from the status's speed
// section (nil: none published, every figure the reference).
func speedFrom(n *Node, sp *telemetryv1alpha1.SpeedStatus) {
	n.CPUSpeed, n.CPUSpeedSource = 1, telemetryv1alpha1.SpeedSourceReference
	if sp != nil && sp.CPUCoreMilli > 0 {
		n.CPUSpeed, n.CPUSpeedSource = float64(sp.CPUCoreMilli)/1000, sp.CPUSource
	}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		g.Speed, g.SpeedSource = 1, telemetryv1alpha1.SpeedSourceReference
		if sp == nil {
			continue
		}
		for _, s := range sp.GPUs {
			if s.Model == g.Model && s.Milli > 0 {
				g.Speed, g.SpeedSource = float64(s.Milli)/1000, s.Source
				break
			}
		}
	}
}

// PowerSources is a set of the power sources of status.power.sources, one
// bit each.
type PowerSources uint8

// The power sources, in the order String lists them.
const (
	PowerRAPL PowerSources = 1 << iota
	PowerACPI
	PowerHwmon
	PowerNVML
)

var powerSourceNames = [...]telemetryv1alpha1.PowerSource{
	telemetryv1alpha1.PowerSourceRAPL, telemetryv1alpha1.PowerSourceACPI, telemetryv1alpha1.PowerSourceHwmon, telemetryv1alpha1.PowerSourceNVML,
}

// PowerSourcesOf is the set of sources listed; unknown names are left out.
func PowerSourcesOf(sources []telemetryv1alpha1.PowerSource) PowerSources {
	var s PowerSources
	for _, src := range sources {
		if i := slices.Index(powerSourceNames[:], src); i >= 0 {
			s |= 1 << i
		}
	}
	return s
}

// List is the set's sources, in the order of the constants.
func (s PowerSources) List() []telemetryv1alpha1.PowerSource {
	var l []telemetryv1alpha1.PowerSource
	for i, name := range powerSourceNames {
		if s&(1<<i) != 0 {
			l = append(l, name)
		}
	}
	return l
}

// String is the set's sources joined by "+", e.g. "rapl+nvml"; "" for
// none.
func (s PowerSources) String() string {
	var b []byte
	for _, name := range s.List() {
		if len(b) > 0 {
			b = append(b, '+')
		}
		b = append(b, name...)
	}
	return string(b)
}

// NUMANode is one NUMA node of a node.
type NUMANode struct {
	ID           int32
	LogicalCores int32
	// AllocatedExclusiveCPUs is -1 when the kubelet's allocations are not
	// published.
	AllocatedExclusiveCPUs int32
	MemoryTotalBytes       int64
	MemoryFreeBytes        int64
	// CPUPercent is -1 when unknown.
	CPUPercent int32
}

// Headroom is the node's effective thermal headroom (package heat), for
// messages; hot paths use heat.Effective on the first cache line's fields.
func (n *Node) Headroom(absoluteMilli int64) heat.Headroom {
	if !n.HasThermal {
		return heat.Headroom{}
	}
	var limited, unlimited *int64
	if n.HasHeadroom {
		limited = &n.HeadroomMilli
	}
	if n.HasUnlimited {
		unlimited = &n.UnlimitedMilli
	}
	return heat.Of(limited, n.HeadroomSensor, n.HeadroomSensorMilli, unlimited, n.UnlimitedSensor, absoluteMilli)
}

// Fresh reports whether the cache saw the sample at most MaxAge(maxAge)
// before now, both by the scheduler's clock. A view the cache never stored
// has no Observed time and is stale.
func (n *Node) Fresh(now time.Time, maxAge time.Duration) bool {
	return !n.Observed.IsZero() && now.Sub(n.Observed) <= n.MaxAge(maxAge)
}

// MaxAge is how old the node's sample may be and still be fresh, for a
// plugin whose telemetryMaxAge is maxAge: maxAge, or longer while the
// node's agent pod is Ready (the cache's --telemetry-max-age-ready-agent).
func (n *Node) MaxAge(maxAge time.Duration) time.Duration {
	return max(maxAge, n.agentMaxAge)
}

// Age is how long before now the cache saw the sample.
func (n *Node) Age(now time.Time) time.Duration {
	return now.Sub(n.Observed)
}

// DefaultThermalHold is how long a node whose thermal source failed (the
// API server refused its thermal section, or its sensors could not be
// read) keeps its last thermal reading, as if it were fresh: as long as
// DefaultPowerHold, and far shorter than the time a loaded node takes to
// heat from cool to its limit is long. After it, the node's heat is
// unknown (ThermalKnown). Change it with --telemetry-thermal-hold.
const DefaultThermalHold = 2 * time.Minute

// ThermalKnown reports whether the view's thermal fields tell the node's
// heat at now: always, unless its thermal source failed in this sample;
// then only while they hold a reading the cache saw at most hold before
// now. A node without sensors (its source Unavailable) has no heat to
// tell, and its heat counts as known: nothing is hot. The thermal fields
// of a view whose heat is unknown still say what was last read, and a
// reading too hot stays too hot (tooHot reads them whatever the time).
func (n *Node) ThermalKnown(now time.Time, hold time.Duration) bool {
	return n.ThermalFailed == "" || (n.HasThermal && !n.ThermalObserved.IsZero() && now.Sub(n.ThermalObserved) <= hold)
}

// thermalFailure says how a Failed thermal source failed, for rejections.
func thermalFailure(s telemetryv1alpha1.SourceStatus) string {
	if s.Reason == "RejectedByAPIServer" { // agent/publisher's trim
		return "thermal section refused by the API server (" + s.Message + ")"
	}
	return "thermal source failed (" + s.Reason + ": " + s.Message + ")"
}

// holdThermal carries the last thermal reading over from old (the view
// before n, may be nil) to n when n's thermal source failed, and stamps
// when n's reading was seen. The caller holds the cache's lock, or owns n.
func holdThermal(n, old *Node) {
	switch {
	case n.HasThermal:
		n.ThermalObserved = n.Observed
	case n.ThermalFailed != "" && old != nil && old.HasThermal:
		n.HasThermal, n.HottestSensor, n.HottestMilli = true, old.HottestSensor, old.HottestMilli
		n.HasLimit, n.LimitMilli = old.HasLimit, old.LimitMilli
		n.HasHeadroom, n.HeadroomMilli, n.HeadroomSensor, n.HeadroomSensorMilli = old.HasHeadroom, old.HeadroomMilli, old.HeadroomSensor, old.HeadroomSensorMilli
		n.HasUnlimited, n.UnlimitedMilli, n.UnlimitedSensor = old.HasUnlimited, old.UnlimitedMilli, old.UnlimitedSensor
		n.ThermalObserved = old.ThermalObserved
	}
}

// FromStatus builds the view of a node from its NodeTelemetry status.
func FromStatus(name string, st *telemetryv1alpha1.NodeTelemetryStatus) *Node {
	n := &Node{
		Name:       name,
		SampleTime: st.SampleTime.Time,
		Interval:   time.Duration(st.IntervalSeconds) * time.Second,
	}
	if c := st.CPU; c != nil {
		n.HasCPU, n.CPUPercent, n.LogicalCores = true, c.UtilizationPercent, c.OnlineCores
		n.Throttling = c.ThermalThrottle != nil && c.ThermalThrottle.Throttling
	}
	if m := st.Memory; m != nil {
		n.HasMemory, n.MemoryPercent, n.MemoryTotalBytes = true, m.UtilizationPercent, m.TotalBytes
	}
	if t := st.Thermal; t != nil {
		n.HasThermal, n.HottestSensor, n.HottestMilli = true, t.HottestSensor, t.HottestMilliCelsius
		if t.LimitMilliCelsius != nil {
			n.HasLimit, n.LimitMilli = true, *t.LimitMilliCelsius
		}
		if t.HeadroomMilliCelsius != nil {
			n.HasHeadroom, n.HeadroomMilli = true, *t.HeadroomMilliCelsius
			n.HeadroomSensor, n.HeadroomSensorMilli = t.HeadroomSensor, heat.SensorTemp(t, t.HeadroomSensor)
		}
		if t.HottestUnlimitedMilliCelsius != nil {
			n.HasUnlimited, n.UnlimitedMilli, n.UnlimitedSensor = true, *t.HottestUnlimitedMilliCelsius, t.HottestUnlimitedSensor
		}
		n.Throttling = n.Throttling || t.Throttling
	}
	if p := st.Power; p != nil {
		n.HasPower, n.Watts, n.PowerSources = true, p.Watts, PowerSourcesOf(p.Sources)
		if p.GPUWatts != nil {
			n.GPUWatts = *p.GPUWatts
		}
		if m := p.Model; m != nil && m.Ready && m.IdleWatts != nil && m.FullLoadWatts != nil {
			n.ModelReady, n.IdleWatts, n.FullLoadWatts = true, *m.IdleWatts, *m.FullLoadWatts
		}
	}
	n.Models = modelsFrom(st)
	n.Windows = windowsFrom(st)
	for _, s := range st.Sources {
		if s.Name == telemetryv1alpha1.SourceGPU && s.State == telemetryv1alpha1.SourceAvailable {
			n.HasGPUSource = true
		}
		if s.Name == telemetryv1alpha1.SourceThermal && s.State == telemetryv1alpha1.SourceFailed && st.Thermal == nil {
			n.ThermalFailed = thermalFailure(s)
		}
	}
	for _, g := range st.GPUs {
		gpu := GPU{
			Index: g.Index, UUID: g.UUID, Model: g.Model, NUMANode: -1,
			MemoryTotalBytes: g.MemoryTotalBytes, MemoryUsedBytes: g.MemoryUsedBytes,
			Healthy: g.Health.Healthy,
			ThermalThrottled: slices.Contains(g.ThrottleReasons, telemetryv1alpha1.GPUThrottleSwThermalSlowdown) ||
				slices.Contains(g.ThrottleReasons, telemetryv1alpha1.GPUThrottleHwThermalSlowdown),
		}
		if g.NUMANode != nil {
			gpu.NUMANode = *g.NUMANode
		}
		if g.TemperatureMilliCelsius != nil {
			gpu.HasTemperature, gpu.TemperatureMilli = true, *g.TemperatureMilliCelsius
		}
		if g.SlowdownMilliCelsius != nil {
			gpu.HasSlowdown, gpu.SlowdownMilli = true, *g.SlowdownMilliCelsius
		}
		if g.PowerWatts != nil {
			gpu.HasPower, gpu.PowerWatts = true, *g.PowerWatts
		}
		gpuLayout(&gpu, &g)
		n.GPUs = append(n.GPUs, gpu)
	}
	if len(st.GPUs) > 0 {
		n.HasGPUSource = true
	}
	speedFrom(n, st.Speed)
	for _, m := range st.NUMA {
		numa := NUMANode{
			ID: m.ID, LogicalCores: m.LogicalCores, AllocatedExclusiveCPUs: -1,
			MemoryTotalBytes: m.MemoryTotalBytes, MemoryFreeBytes: m.MemoryFreeBytes, CPUPercent: -1,
		}
		if m.AllocatedExclusiveCPUs != nil {
			numa.AllocatedExclusiveCPUs = *m.AllocatedExclusiveCPUs
		}
		if m.CPUUtilizationPercent != nil {
			numa.CPUPercent = *m.CPUUtilizationPercent
		}
		n.NUMA = append(n.NUMA, numa)
	}
	return n
}
