// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/relay"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

const (
	powercapClassDir = "/sys/class/powercap"

	// acpiPowerMeterChip is the hwmon name of the ACPI 4.0 power meter
	// driver (Documentation/hwmon/acpi_power_meter.rst), which measures
	// the whole platform.
	acpiPowerMeterChip = "power_meter"

	raplPermissionMessage = "energy_uj is readable by root only since CVE-2020-8694; read it through the powercap relay (the powercap-relay container of the shipped DaemonSets, the agent's --powercap-relay-socket), or run the agent as root"

	// powercapDevices is where the powercap class's zones live: each
	// /sys/class/powercap entry links into it.
	powercapDevices = "/sys/devices/virtual/powercap/"
)

// PowerCollector measures the node's power over the interval between two
// calls, from one node meter plus the GPUs, the first of these that reads:
//
//  1. The ACPI power meter (hwmon "power_meter", power1_average in µW;
//     Documentation/hwmon/acpi_power_meter.rst, ACPI 10.4 "Power
//     Meters"): the platform's own meter, which measures the whole server
//     (CPUs, memory, fans, disks, NICs, power-supply losses, GPUs), the
//     power the scheduler holds against a feed's limit. It wins over RAPL
//     where both read.
//  2. RAPL through /sys/class/powercap (Intel, and AMD through the same
//     tree): each package zone ("package-N", also "package-N-die-M") and each
//     dram subzone ("dram-N"), read from energy_uj as a rate over the
//     interval, with wraparound at max_energy_range_uj. RAPL measures the
//     CPU packages and their DRAM only
//     (Documentation/power/powercap/powercap.rst), less than the server
//     draws. Core and uncore subzones lie inside their package and are not
//     added; psys (the whole platform, on client parts) overlaps package
//     and dram and is not added either. intel-rapl-mmio zones repeat the
//     MSR package domain and are dropped when the MSR zone of the same
//     name exists.
//  3. Other hwmon power sensors (powerN_average, else powerN_input, in µW)
//     or, on chips without those, energy counters (energyN_input, µJ, as a
//     rate). PMBus "pout" channels are skipped on chips with a "pin"
//     channel, and amd_energy's per-core counters, which its per-socket
//     counters include, are skipped. They come after RAPL because the hwmon
//     ABI (Documentation/hwmon/sysfs-interface.rst) says only that a
//     channel measures power, not of what: most measure one device or rail
//     (amdgpu's GPU, amd_energy's and fam15h_power's CPU, an ina2xx shunt,
//     a PMBus voltage regulator's input), not the node.
//
// GPUs come from the GPU collector, which runs before this one and leaves
// Sample.GPUs: zones "gpu-<index>" from PowerWatts (or, without it, from
// the EnergyJoules counter). Their sum is GPUWatts, and it is added to
// Watts, except with the ACPI meter, whose measure already includes them.
// GPUs alone are a valid power source.
//
// Rates from counters need a baseline: the first call, and the first call
// after a counter reset or a meter's reappearance, returns ErrWarmingUp.
// Gauges (hwmon power, the ACPI meter, GPU PowerWatts) need none, so a node
// measured by gauges alone reports from the first call. A meter's interval
// is the time between its reads in this call and the previous one, as the
// collector's clock gives them when it starts reading each group of
// meters (the GPUs': when the collector starts, right after the GPU
// collector):
// not Sample.Time, which is when the sample was due. On a busy host the
// sampling loop wakes late and the collectors before this one take longer
// at some ticks than at others; counters divided by the due interval read
// those delays as watts (a tick 50 ms late after one on time reads 5 %
// high at a 1 s interval). A zone's EnergyJoules adds up its deltas
// (counters) or the trapezoid of its readings (gauges) over every interval
// it was read at both ends; the node's EnergyJoules adds up the intervals
// that were reported.
//
// When RAPL is read (no ACPI power meter reads) but cannot be read
// (permission denied on energy_uj since CVE-2020-8694, or an I/O error) and
// an hwmon meter works, the sample has Power from it, RAPLError returns the
// RAPL failure and the collector logs it once. When no meter works,
// Collect returns the RAPL failure (else the first meter's) as a Failed
// SourceError, even on a node with GPUs: power without the CPUs whose
// meter exists but cannot be read would understate the node.
//
// Power.Sources names the node meter the sample's watts came from (and
// nvml with GPUs); PackageLimitWatts carries the RAPL package limits
// whichever meter that is: they come from powercap's constraint files,
// not from energy_uj, and say what the CPUs' load can add.
type PowerCollector struct {
	root            hostfs.Root
	rediscoverEvery time.Duration
	clock           clock.PassiveClock

	discovered   bool
	discoveredAt time.Time
	rapl         []*meter
	acpi         []*meter
	hwmon        []*meter
	gpus         map[string]*meter // by GPU UUID
	cpuModel     string

	// calls counts the calls to Collect; a meter read in the previous
	// call has an interval to measure over.
	calls uint64
	// energyJoules is the energy of every reported interval since the
	// agent started.
	energyJoules float64
	// raplErr is why RAPL could not be read in the last call.
	raplErr *SourceError
	// raplRelay is the powercap relay's socket (WithRAPLRelay), "" for
	// none; viaRelay is true once energy_uj was refused and the relay
	// reads it instead.
	raplRelay string
	viaRelay  bool
}

var _ Collector = (*PowerCollector)(nil)

// NewPowerCollector returns a collector that reads RAPL, hwmon and ACPI
// power meters under root, and GPU power from the sample.
func NewPowerCollector(root hostfs.Root) *PowerCollector {
	return &PowerCollector{root: root, rediscoverEvery: defaultRediscoverEvery, clock: clock.RealClock{}, gpus: map[string]*meter{}}
}

// WithClock sets the clock that times the meters' reads (tests that
// replay a tree at times of their own).
func (c *PowerCollector) WithClock(clk clock.PassiveClock) *PowerCollector {
	c.clock = clk
	return c
}

// WithRAPLRelay reads RAPL's energy_uj, when the agent may not (root's
// since CVE-2020-8694), through the powercap relay listening at socket
// (relay.RunPowercap; a path in the agent's own filesystem). It returns c.
func (c *PowerCollector) WithRAPLRelay(socket string) *PowerCollector {
	c.raplRelay = socket
	return c
}

// Name returns telemetryv1alpha1.SourcePower.
func (c *PowerCollector) Name() telemetryv1alpha1.SourceName {
	return telemetryv1alpha1.SourcePower
}

// RAPLError returns why RAPL could not be read in the last call, or nil
// when it was read, not needed (the ACPI power meter read) or the node
// has none. When it is not nil and Collect returned nil, the sample's
// power came from an hwmon meter.
func (c *PowerCollector) RAPLError() error {
	if c.raplErr == nil {
		return nil
	}
	return c.raplErr
}

// meter is one power meter and what the collector remembers of it.
type meter struct {
	name   string
	source telemetryv1alpha1.PowerSource
	// path is the host file of the value; "" for a GPU.
	path string
	// counter is true for an energy counter in µJ, false for a power
	// gauge in µW.
	counter bool
	// maxRange is the value at which the counter wraps to 0
	// (max_energy_range_uj); 0 when unknown, and then a counter that goes
	// back is taken as reset.
	maxRange uint64
	// zone is a RAPL zone's directory under powercapDevices
	// ("intel-rapl/intel-rapl:0"), which the powercap relay reads; ""
	// when its class entry does not link there.
	zone string
	// limitWatts is a RAPL package zone's long-term power limit's maximum
	// (constraint_0_max_power_uw, the package's TDP on Intel parts); 0
	// when the zone has none, or for other meters.
	limitWatts float64

	have      bool      // a value has been read
	at        time.Time // when it was read
	call      uint64    // in which call to Collect
	prev      uint64    // the counter's last value
	prevWatts float64   // the gauge's last value
	energyJ   float64   // energy measured since the agent started
}

// update takes a new value read at now in the given call to Collect: only
// a meter read in the call before has an interval to measure over. ready
// is false when a counter has no baseline yet.
func (m *meter) update(v uint64, now time.Time, call uint64) (watts, joules float64, ready bool) {
	continuous := m.have && m.call+1 == call && now.After(m.at)
	dt := now.Sub(m.at).Seconds()
	if m.counter {
		if continuous {
			if d, ok := energyDelta(m.prev, v, m.maxRange); ok {
				joules = float64(d) / 1e6
				watts = joules / dt
				ready = true
			}
		}
		m.prev = v
	} else {
		watts = float64(v) / 1e6
		ready = true
		if continuous {
			// Trapezoid between the last reading and this one.
			joules = (m.prevWatts + watts) / 2 * dt
		}
		m.prevWatts = watts
	}
	m.have, m.at, m.call = true, now, call
	m.energyJ += joules
	return watts, joules, ready
}

// energyDelta is how far an energy counter advanced from prev to cur. A
// counter that went back wrapped at maxRange: it ran from prev up to
// maxRange and from 0 to cur. It is a reset instead (ok false) when the
// range is unknown (0) or prev lies beyond it.
func energyDelta(prev, cur, maxRange uint64) (uint64, bool) {
	if cur >= prev {
		return cur - prev, true
	}
	if maxRange == 0 || prev > maxRange {
		return 0, false
	}
	// cur < prev <= maxRange, so this neither underflows nor overflows.
	return cur + (maxRange - prev), true
}

// groupResult is one reading of a set of meters.
type groupResult struct {
	zones         []PowerZone
	watts, joules float64
	ready         bool
	// stalled is true when every meter is an energy counter and none
	// advanced over a whole interval: a zone the firmware exposes but does
	// not update, not a node drawing 0 W.
	stalled bool
	// interval is the time since the group's previous read, when ready.
	interval time.Duration
}

// readGroup reads every meter of a group and times the read by the
// collector's clock, as it starts. It reads all values before it changes any meter's
// state, so a group that fails leaves its meters as they were (they take
// a new baseline when next read).
func (c *PowerCollector) readGroup(meters []*meter) (groupResult, error) {
	at := c.clock.Now()
	if c.viaRelay && len(meters) > 0 && meters[0].source == telemetryv1alpha1.PowerSourceRAPL {
		values, err := c.readRelay(meters)
		if err != nil {
			return groupResult{}, err
		}
		return c.updateGroup(meters, values, at), nil
	}
	values := make([]uint64, len(meters))
	for i, m := range meters {
		v, err := c.root.ReadUint(m.path)
		if err != nil {
			if m.source == telemetryv1alpha1.PowerSourceRAPL && c.raplRelay != "" && hostfs.IsPermission(err) {
				c.viaRelay = true
				return c.readGroup(meters)
			}
			return groupResult{}, err
		}
		values[i] = v
	}
	return c.updateGroup(meters, values, at), nil
}

// readRelay reads RAPL meters' counters through the powercap relay.
func (c *PowerCollector) readRelay(meters []*meter) ([]uint64, error) {
	zones := make([]string, len(meters))
	for i, m := range meters {
		if m.zone == "" {
			return nil, fmt.Errorf("%s: energy_uj is root's, and %s does not link under %s, where the powercap relay reads", m.path, path.Dir(m.path), powercapDevices)
		}
		zones[i] = m.zone
	}
	values, err := relay.ReadPowercap(c.raplRelay, zones)
	if err != nil {
		return nil, fmt.Errorf("energy_uj is root's; reading it through the powercap relay %s: %w", c.raplRelay, err)
	}
	return values, nil
}

// updateGroup feeds each meter its value.
func (c *PowerCollector) updateGroup(meters []*meter, values []uint64, now time.Time) groupResult {
	res := groupResult{ready: true}
	moved := false
	for i, m := range meters {
		prev, since := m.prev, now.Sub(m.at)
		w, j, ok := m.update(values[i], now, c.calls)
		if ok {
			res.interval = since
		}
		res.ready = res.ready && ok
		res.watts += w
		res.joules += j
		res.zones = append(res.zones, PowerZone{Name: m.name, Source: m.source, Watts: w, EnergyJoules: m.energyJ})
		moved = moved || !m.counter || values[i] != prev
	}
	res.stalled = res.ready && !moved
	return res
}

// Collect fills s.Power.
func (c *PowerCollector) Collect(ctx context.Context, s *Sample) error {
	c.calls++
	now := s.Time
	gpusRead := c.clock.Now()

	if !c.discovered || now.Sub(c.discoveredAt) >= c.rediscoverEvery || now.Before(c.discoveredAt) {
		c.discover(now)
	}

	base, baseSource, failures := c.readBase(now)
	gpu, haveGPU := c.readGPUs(s.GPUs, gpusRead)

	var raplErr *SourceError
	for _, f := range failures {
		if f.source == telemetryv1alpha1.PowerSourceRAPL {
			raplErr = f.err
		}
	}
	switch {
	case base == nil:
		c.raplErr = raplErr
	case baseSource == telemetryv1alpha1.PowerSourceACPI:
		c.raplErr = nil // not read
	default:
		c.noteRAPL(ctx, raplErr)
	}

	switch {
	case base == nil && raplErr != nil:
		// A node meter exists but none could be read. RAPL's failure
		// comes first: it is the one an operator can fix.
		return raplErr
	case base == nil && len(failures) > 0:
		return failures[0].err
	case base == nil && !haveGPU:
		return Unavailable("NoPowerMeter", "no powercap (RAPL), hwmon power sensor or ACPI power meter (typical in VMs)")
	case (base != nil && !base.ready) || (haveGPU && !gpu.ready):
		return ErrWarmingUp
	}

	p := &Power{}
	var joules float64
	if base != nil {
		p.Zones = base.zones
		p.Watts = base.watts
		p.Sources = append(p.Sources, baseSource)
		joules = base.joules
		p.PackageLimitWatts = c.packageLimits()
		if c.cpuModel != "" {
			p.CPUModel = c.cpuModel
		}
	}
	if haveGPU {
		p.Zones = append(p.Zones, gpu.zones...)
		gw := gpu.watts
		p.GPUWatts = &gw
		p.Sources = append(p.Sources, telemetryv1alpha1.PowerSourceNVML)
		if baseSource != telemetryv1alpha1.PowerSourceACPI {
			p.Watts += gpu.watts
			joules += gpu.joules
		}
	}
	c.energyJoules += joules
	p.EnergyJoules = c.energyJoules
	s.Power = p
	return nil
}

// packageLimits are the RAPL package zones' power limits, nil unless every
// package zone has one. They are read at discovery, so they are known
// whichever meter measures the node.
func (c *PowerCollector) packageLimits() []float64 {
	var out []float64
	for _, m := range c.rapl {
		if strings.HasPrefix(m.name, "dram") {
			continue
		}
		if m.limitWatts <= 0 {
			return nil
		}
		out = append(out, m.limitWatts)
	}
	return out
}

// meterFailure is a node meter that could not be read.
type meterFailure struct {
	source telemetryv1alpha1.PowerSource
	err    *SourceError
}

// readBase reads the first node meter, in the order ACPI power meter,
// RAPL, other hwmon sensors (see PowerCollector), that can be read, and
// says why the ones before it could not. A meter file that has gone away
// makes the collector list the meters again, once.
func (c *PowerCollector) readBase(now time.Time) (*groupResult, telemetryv1alpha1.PowerSource, []meterFailure) {
	for attempt := 0; ; attempt++ {
		var failures []meterFailure
		stale := false
		for _, g := range []struct {
			source telemetryv1alpha1.PowerSource
			meters []*meter
		}{
			{telemetryv1alpha1.PowerSourceACPI, c.acpi},
			{telemetryv1alpha1.PowerSourceRAPL, c.rapl},
			{telemetryv1alpha1.PowerSourceHwmon, c.hwmon},
		} {
			if len(g.meters) == 0 {
				continue
			}
			res, err := c.readGroup(g.meters)
			if err == nil && res.stalled {
				failures = append(failures, meterFailure{g.source, Failed("NoProgress", nil,
					"the %s energy counters did not advance over %v (the firmware exposes the zones but does not update them)", g.source, res.interval.Round(time.Millisecond))})
				continue
			}
			if err == nil {
				return &res, g.source, failures
			}
			if hostfs.IsAbsent(err) && attempt == 0 {
				stale = true
				break
			}
			failures = append(failures, meterFailure{g.source, meterError(g.source, err)})
		}
		if !stale {
			return nil, "", failures
		}
		c.discover(now)
	}
}

// meterError says why a node meter could not be read.
func meterError(source telemetryv1alpha1.PowerSource, err error) *SourceError {
	switch {
	case source == telemetryv1alpha1.PowerSourceRAPL && hostfs.IsPermission(err):
		return Failed("PermissionDenied", err, raplPermissionMessage)
	case hostfs.IsPermission(err):
		return Failed("PermissionDenied", err, "reading the %s power meter", source)
	}
	return Failed("ReadError", err, "reading the %s power meter", source)
}

// noteRAPL records why RAPL could not be read while a fallback meter was,
// and logs when that changes.
func (c *PowerCollector) noteRAPL(ctx context.Context, err *SourceError) {
	prev := c.raplErr
	c.raplErr = err
	switch {
	case err != nil && (prev == nil || prev.Reason != err.Reason):
		klog.FromContext(ctx).Info("RAPL cannot be read; power comes from a fallback meter",
			"reason", err.Reason, "message", err.Message, "err", err.Err)
	case err == nil && prev != nil:
		klog.FromContext(ctx).Info("RAPL can be read again")
	}
}

// readGPUs turns the GPUs' power into meters named "gpu-<index>": from
// PowerWatts where the GPU reports it, else from its EnergyJoules counter.
// GPUs that report neither are left out.
func (c *PowerCollector) readGPUs(gpus []telemetryv1alpha1.GPUStatus, now time.Time) (groupResult, bool) {
	var (
		meters []*meter
		values []uint64
	)
	seen := make(map[string]bool, len(gpus))
	for _, g := range gpus {
		var (
			v       uint64
			counter bool
		)
		switch {
		case g.PowerWatts != nil && *g.PowerWatts >= 0:
			v = uint64(*g.PowerWatts) * 1_000_000 // W -> µW
		case g.EnergyJoules != nil && *g.EnergyJoules >= 0 && *g.EnergyJoules <= maxGPUEnergyJoules:
			v, counter = uint64(*g.EnergyJoules)*1_000_000, true // J -> µJ
		default:
			continue
		}
		key := g.UUID
		if key == "" {
			key = "index-" + strconv.Itoa(int(g.Index))
		}
		name := "gpu-" + strconv.Itoa(int(g.Index))
		m := c.gpus[key]
		if m == nil || m.counter != counter || m.name != name {
			m = &meter{name: name, source: telemetryv1alpha1.PowerSourceNVML, counter: counter}
			c.gpus[key] = m
		}
		seen[key] = true
		meters = append(meters, m)
		values = append(values, v)
	}
	for key := range c.gpus {
		if !seen[key] {
			delete(c.gpus, key)
		}
	}
	if len(meters) == 0 {
		return groupResult{}, false
	}
	return c.updateGroup(meters, values, now), true
}

// maxGPUEnergyJoules keeps a GPU energy counter in µJ within uint64.
const maxGPUEnergyJoules = 1<<64/1_000_000 - 1

// discover lists the node meters. A meter that was known before keeps its
// baseline and energy.
func (c *PowerCollector) discover(now time.Time) {
	old := make(map[string]*meter)
	for _, ms := range [][]*meter{c.rapl, c.acpi, c.hwmon} {
		for _, m := range ms {
			old[m.path] = m
		}
	}
	keep := func(ms []*meter) []*meter {
		for i, m := range ms {
			if o := old[m.path]; o != nil && o.counter == m.counter && o.name == m.name && o.source == m.source {
				o.maxRange, o.limitWatts = m.maxRange, m.limitWatts
				ms[i] = o
			}
		}
		return ms
	}
	c.rapl = keep(discoverRAPL(c.root))
	acpi, hw := discoverHwmonPower(c.root, discoverHwmon(c.root))
	c.acpi, c.hwmon = keep(acpi), keep(hw)
	c.cpuModel = readCPUModel(c.root)
	c.discovered, c.discoveredAt = true, now
}

// raplZone is one powercap zone directory of the intel-rapl or
// intel-rapl-mmio control type.
type raplZone struct {
	dir  string
	mmio bool
	pkg  int // N of intel-rapl:N
	sub  int // M of intel-rapl:N:M; -1 for a top-level zone
	name string
}

// parseRAPLZone parses a powercap zone directory name: "intel-rapl:N"
// (top level, sub -1), "intel-rapl:N:M" (a subzone), and the same with
// "intel-rapl-mmio".
func parseRAPLZone(base string) (mmio bool, pkg, sub int, ok bool) {
	rest, found := strings.CutPrefix(base, "intel-rapl:")
	if !found {
		if rest, found = strings.CutPrefix(base, "intel-rapl-mmio:"); !found {
			return false, 0, 0, false
		}
		mmio = true
	}
	first, second, hasSub := strings.Cut(rest, ":")
	if pkg, ok = parseCanonicalUint(first); !ok {
		return false, 0, 0, false
	}
	if !hasSub {
		return mmio, pkg, -1, true
	}
	if sub, ok = parseCanonicalUint(second); !ok {
		return false, 0, 0, false
	}
	return mmio, pkg, sub, true
}

// raplMeterName is the name under which a RAPL zone counts toward node
// power, or "" when it does not count: a top-level zone by its own name
// ("package-0", psys excluded), a dram subzone as "dram" plus its
// package's suffix ("dram-0", "dram-0-die-1"), other subzones not at all.
func raplMeterName(z raplZone, parentName string) string {
	if z.sub < 0 {
		if z.name == "psys" {
			return ""
		}
		if z.name == "" {
			return path.Base(z.dir)
		}
		return z.name
	}
	if z.name != "dram" {
		return ""
	}
	if suffix, ok := strings.CutPrefix(parentName, "package"); ok && suffix != "" {
		return "dram" + suffix
	}
	return "dram-" + strconv.Itoa(z.pkg)
}

// discoverRAPL lists the RAPL meters that count toward node power, in
// package order.
func discoverRAPL(r hostfs.Root) []*meter {
	var zones []raplZone
	for _, pattern := range []string{powercapClassDir + "/intel-rapl:*", powercapClassDir + "/intel-rapl-mmio:*"} {
		dirs, _ := r.Glob(pattern)
		for _, d := range dirs {
			mmio, pkg, sub, ok := parseRAPLZone(path.Base(d))
			if !ok {
				continue
			}
			z := raplZone{dir: d, mmio: mmio, pkg: pkg, sub: sub}
			if b, err := r.ReadFile(d + "/name"); err == nil {
				z.name = cleanName(b, maxChipNameLen)
			}
			zones = append(zones, z)
		}
	}
	sort.Slice(zones, func(i, j int) bool {
		a, b := zones[i], zones[j]
		if a.mmio != b.mmio {
			return !a.mmio
		}
		if a.pkg != b.pkg {
			return a.pkg < b.pkg
		}
		return a.sub < b.sub
	})
	type top struct {
		mmio bool
		pkg  int
	}
	parents := make(map[top]string)
	for _, z := range zones {
		if z.sub < 0 {
			parents[top{z.mmio, z.pkg}] = z.name
		}
	}
	var meters []*meter
	counted := make(map[string]bool)
	for _, z := range zones {
		name := raplMeterName(z, parents[top{z.mmio, z.pkg}])
		// An mmio zone repeats the MSR zone of the same name; zones are
		// sorted MSR first.
		if name == "" || counted[name] || !r.Exists(z.dir+"/energy_uj") {
			continue
		}
		counted[name] = true
		m := &meter{name: name, source: telemetryv1alpha1.PowerSourceRAPL, path: z.dir + "/energy_uj", counter: true}
		if link, err := r.Readlink(z.dir); err == nil {
			// "../../devices/virtual/powercap/intel-rapl/intel-rapl:0"
			if _, zone, ok := strings.Cut(link, strings.TrimPrefix(powercapDevices, "/sys/")); ok {
				m.zone = zone
			}
		}
		if v, err := r.ReadUint(z.dir + "/max_energy_range_uj"); err == nil {
			m.maxRange = v
		}
		if z.sub < 0 {
			m.limitWatts = raplLimitWatts(r, z.dir)
		}
		meters = append(meters, m)
	}
	return meters
}

// maxRAPLLimitWatts bounds a plausible package power limit: firmware
// that sets no limit reports one of thousands of watts (4090 W in
// node_exporter's fixture), which is no limit at all.
const maxRAPLLimitWatts = 1000

// raplLimitWatts is a package zone's power limit from powercap (kernel
// Documentation/power/powercap/powercap.rst): constraint_0 is the
// long-term limit (PL1); its max_power_uw is the most it may be set to,
// the part's TDP on Intel parts, else its power_limit_uw. 0 when neither
// is there or plausible (AMD's powercap zones have no constraints).
func raplLimitWatts(r hostfs.Root, dir string) float64 {
	for _, f := range []string{"/constraint_0_max_power_uw", "/constraint_0_power_limit_uw"} {
		if v, err := r.ReadUint(dir + f); err == nil && v > 0 && v <= maxRAPLLimitWatts*1_000_000 {
			return float64(v) / 1e6
		}
	}
	return 0
}

// discoverHwmonPower lists the power meters of hwmon chips: the ACPI power
// meter's and the others'.
func discoverHwmonPower(r hostfs.Root, chips []*hwmonChip) (acpi, other []*meter) {
	for _, chip := range chips {
		source := telemetryv1alpha1.PowerSourceHwmon
		if chip.name == acpiPowerMeterChip {
			source = telemetryv1alpha1.PowerSourceACPI
		}
		ms := hwmonPowerMeters(r, chip, source)
		if source == telemetryv1alpha1.PowerSourceACPI {
			acpi = append(acpi, ms...)
		} else {
			other = append(other, ms...)
		}
	}
	return acpi, other
}

// hwmonPowerMeters lists one chip's power meters: its power channels
// (powerN_average, else powerN_input) or, when it has none, its energy
// channels (energyN_input). Channels one of its other channels includes
// are left out (see PowerCollector).
func hwmonPowerMeters(r hostfs.Root, chip *hwmonChip, source telemetryv1alpha1.PowerSource) []*meter {
	type channel struct {
		n     int
		attr  string
		label string
	}
	var chans []channel
	seen := make(map[int]bool)
	for _, suffix := range []string{"average", "input"} {
		for _, n := range chip.channels("power", suffix) {
			if !seen[n] {
				seen[n] = true
				chans = append(chans, channel{n: n, attr: "power" + strconv.Itoa(n) + "_" + suffix})
			}
		}
	}
	kind, counter := "power", false
	if len(chans) == 0 {
		kind, counter = "energy", true
		for _, n := range chip.channels("energy", "input") {
			chans = append(chans, channel{n: n, attr: "energy" + strconv.Itoa(n) + "_input"})
		}
	}
	sort.Slice(chans, func(i, j int) bool { return chans[i].n < chans[j].n })
	hasPin := false
	for i := range chans {
		chans[i].label = chip.label(r, kind, chans[i].n)
		hasPin = hasPin || strings.HasPrefix(strings.ToLower(chans[i].label), "pin")
	}
	var meters []*meter
	names := make(map[string]bool)
	for _, ch := range chans {
		if skipPowerChannel(chip.name, ch.label, hasPin) {
			continue
		}
		label := ch.label
		if names[label] {
			label = kind + strconv.Itoa(ch.n)
		}
		names[label] = true
		meters = append(meters, &meter{name: chip.id + "/" + label, source: source, path: chip.path(ch.attr), counter: counter})
	}
	return meters
}

// skipPowerChannel reports whether a channel is part of another channel
// of its chip: a PMBus output ("pout1") where the chip has an input
// ("pin"), or an amd_energy core counter ("Ecore000"), which its socket
// counter ("Esocket0") includes.
func skipPowerChannel(chip, label string, hasPin bool) bool {
	l := strings.ToLower(label)
	if hasPin && strings.HasPrefix(l, "pout") {
		return true
	}
	return chip == "amd_energy" && !strings.HasPrefix(l, "esocket")
}
