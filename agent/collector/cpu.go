// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"math"
	"path"
	"time"

	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// CPUCollector reads CPU utilization from /proc/stat, load from
// /proc/loadavg, CPU and I/O pressure from /proc/pressure, and thermal
// throttle counters from sysfs. Utilization is over the time since the
// previous call, summed from the per-CPU lines: a CPU whose counters went
// backwards (hotplug, a kernel reset) or that was not online at both reads
// is left out of that interval rather than skewing it.
type CPUCollector struct {
	root hostfs.Root

	prev    map[int]cpuTimes // per-CPU times of the previous call
	spare   map[int]cpuTimes // the map before prev, reused for the next call's
	scratch []perCPUTimes
	// statBuf holds /proc/stat between reads, grown when it does not fit;
	// small holds the small files (loadavg, pressure, CPU lists).
	statBuf []byte
	small   [256]byte
	// throttle counters of the previous call, per CPU and per package, for
	// "throttling now": nil before the first reading.
	prevCoreThrottle map[string]int64 // by cpuN
	prevPkgThrottle  map[int64]int64  // by physical package id
	// seenCore and seenPkg are the throttle events seen since the start.
	seenCore, seenPkg int64
	// throttleCPUs lists the CPUs with thermal_throttle counters and their
	// packages, made for the online CPUs in throttleOnline (the cpuN lines
	// of /proc/stat) and made again when that set changes or a listed file
	// cannot be read.
	throttleCPUs   []throttleCPU
	throttleOnline []int
	throttleListed bool
	// throttleEvery is how often the counters are read; 0 reads them
	// every sample. Between reads a sample carries the last reading.
	throttleEvery  time.Duration
	throttleReadAt time.Time
	lastThrottle   *telemetryv1alpha1.CPUThrottleStatus
}

// DefaultThrottleInterval is how often the agent reads the CPUs' thermal
// throttle counters (--throttle-interval). They are one sysfs file per CPU
// (two per package), most of a sample's cost on a large server, and they
// count events since boot (Documentation/ABI/testing/sysfs-devices-system-cpu,
// thermal_throttle), so a read every few seconds still sees every event: a
// rise between two reads is throttling. It is the default --interval, the
// longest the publisher holds back a move, so a throttling episode is
// published at most that long after the agent would have seen it reading
// every sample; the temperatures that lead to it are read every sample.
const DefaultThrottleInterval = 5 * time.Second

// throttleCPU is one CPU's thermal_throttle directory and its physical
// package; hasPkg is false when the package id could not be read.
type throttleCPU struct {
	name, dir         string
	coreFile, pkgFile string // its core_ and package_throttle_count
	pkg               int64
	hasPkg            bool
}

// NewCPUCollector returns a CPU collector reading under root.
func NewCPUCollector(root hostfs.Root) *CPUCollector {
	return &CPUCollector{root: root}
}

// WithThrottleInterval sets how often the thermal throttle counters are
// read; a sample in between carries the last reading, throttling or not.
// 0 reads them every sample. It returns c.
func (c *CPUCollector) WithThrottleInterval(d time.Duration) *CPUCollector {
	c.throttleEvery = max(0, d)
	return c
}

// Name implements Collector.
func (c *CPUCollector) Name() telemetryv1alpha1.SourceName { return telemetryv1alpha1.SourceCPU }

// Collect implements Collector.
func (c *CPUCollector) Collect(_ context.Context, s *Sample) error {
	if cap(c.statBuf) == 0 {
		c.statBuf = make([]byte, 16<<10)
	}
	data, err := c.root.ReadInto("/proc/stat", c.statBuf[:cap(c.statBuf)])
	if len(data) >= cap(c.statBuf) {
		c.statBuf = make([]byte, 2*len(data)) // it did not fit: next time it does
	}
	if err != nil {
		if hostfs.IsAbsent(err) {
			return Unavailable("NoProcStat", "%s does not exist: is /proc mounted under --host-root?", c.root.Path("/proc/stat"))
		}
		return Failed("ReadError", err, "reading /proc/stat")
	}
	cur, err := parseProcStat(data, c.scratch[:0])
	c.scratch = cur
	if err != nil {
		return Failed("ParseError", err, "parsing /proc/stat")
	}
	if len(cur) == 0 {
		return Failed("ParseError", errMalformed, "/proc/stat lists no CPU")
	}

	first := c.prev == nil
	var busySum, totalSum uint64
	perCPU := make(map[int]float64, len(cur))
	next := c.spare
	if next == nil {
		next = make(map[int]cpuTimes, len(cur))
	}
	clear(next)
	for _, t := range cur {
		next[t.id] = t.cpuTimes
		p, ok := c.prev[t.id]
		if !ok || t.anyBelow(p) {
			continue // new, back online, or reset: no valid delta this interval
		}
		total := t.total() - p.total()
		if total == 0 {
			continue
		}
		idle := t.idleTicks() - p.idleTicks()
		busy := total - min(idle, total)
		busySum += busy
		totalSum += total
		perCPU[t.id] = float64(busy) / float64(total)
	}
	c.prev, c.spare = next, c.prev
	if first {
		// The throttle counters' baseline, like the times'.
		c.throttleReadAt, c.lastThrottle = s.Time, c.throttle(cur)
		return ErrWarmingUp
	}
	if totalSum == 0 {
		return Failed("NoProgress", nil, "no CPU counter advanced since the previous sample")
	}

	online := int32(len(cur))
	logical := online
	if n, err := c.cpuCount("/sys/devices/system/cpu/present"); err == nil {
		logical = int32(n)
	}
	if n, err := c.cpuCount("/sys/devices/system/cpu/online"); err == nil {
		online = int32(n)
	}

	busy := float64(busySum) / float64(totalSum)
	st := &telemetryv1alpha1.CPUStatus{
		LogicalCores:       logical,
		OnlineCores:        online,
		UtilizationPercent: percent(busy),
	}
	if data, err := c.root.ReadInto("/proc/loadavg", c.small[:]); err == nil {
		if l, err := parseLoadAvg(data); err == nil {
			st.LoadAverage = &telemetryv1alpha1.LoadAverage{OneMinuteMilli: l.load1, FiveMinuteMilli: l.load5, FifteenMinuteMilli: l.load15}
		}
	}
	st.Pressure = readPressure(c.root, "/proc/pressure/cpu", c.small[:])
	st.ThermalThrottle = c.throttleDue(cur, s.Time)
	s.ThrottleEvents.Core, s.ThrottleEvents.Package = c.seenCore, c.seenPkg

	s.CPU = st
	s.CPUBusy = busy
	s.PerCPUBusy = perCPU
	s.IOPressure = readPressure(c.root, "/proc/pressure/io", c.small[:])
	return nil
}

func (c *CPUCollector) cpuCount(hostPath string) (int, error) {
	data, err := c.root.ReadInto(hostPath, c.small[:])
	if err != nil {
		return 0, err
	}
	return countCPUList(data)
}

// readPressure reads a PSI file; nil when the kernel has no PSI (absent
// file, EOPNOTSUPP with psi=0) or the file does not parse.
func readPressure(root hostfs.Root, hostPath string, buf []byte) *telemetryv1alpha1.PressureStatus {
	data, err := root.ReadInto(hostPath, buf)
	if err != nil {
		return nil
	}
	p, err := parsePressure(data)
	if err != nil {
		return nil
	}
	st := &telemetryv1alpha1.PressureStatus{
		SomeAvg10BasisPoints:  int32(p.someAvg10),
		SomeTotalMicroseconds: p.someTotalUS,
	}
	if p.hasFull {
		st.FullAvg10BasisPoints = ptr.To(int32(p.fullAvg10))
	}
	return st
}

// throttleDue reads the throttle counters when --throttle-interval has
// passed since the last read (or the clock went back), else returns a copy
// of the last reading.
func (c *CPUCollector) throttleDue(online []perCPUTimes, now time.Time) *telemetryv1alpha1.CPUThrottleStatus {
	if c.throttleEvery == 0 || now.Before(c.throttleReadAt) || now.Sub(c.throttleReadAt) >= c.throttleEvery {
		c.throttleReadAt, c.lastThrottle = now, c.throttle(online)
	}
	if c.lastThrottle == nil {
		return nil
	}
	out := *c.lastThrottle
	return &out
}

// throttle reads the thermal_throttle counters: core counts per CPU,
// package counts once per physical package (every CPU of a package repeats
// its package's count). The totals are sums over what could be read; the
// node is throttling when a counter read at both this and the previous
// reading rose. A CPU that went offline (its thermal_throttle directory
// goes with it), came back, or could not be read once changes the sums but
// is no throttling (Documentation/ABI/testing/sysfs-devices-system-cpu:
// the counts are events since boot, per CPU and per package). Nil when the
// kernel exposes no counters.
//
// The directories and package ids are listed once and listed again when
// the online CPUs change (online holds /proc/stat's cpuN lines, which the
// kernel writes for online CPUs only: fs/proc/stat.c, show_stat) or a
// listed counter cannot be read, so a sample reads one file per CPU, not a
// directory walk and two files per CPU.
func (c *CPUCollector) throttle(online []perCPUTimes) *telemetryv1alpha1.CPUThrottleStatus {
	if !c.throttleListed || !sameCPUs(online, c.throttleOnline) {
		c.listThrottle(online)
	}
	core, pkg, ok := c.readThrottle()
	if !ok {
		c.listThrottle(online)
		core, pkg, _ = c.readThrottle()
	}
	if len(core) == 0 && len(pkg) == 0 {
		return nil
	}
	st := &telemetryv1alpha1.CPUThrottleStatus{}
	for cpu, v := range core {
		st.CoreEventsTotal += v
		if p, ok := c.prevCoreThrottle[cpu]; ok && v > p {
			st.Throttling = true
			c.seenCore += v - p
		}
	}
	for id, v := range pkg {
		st.PackageEventsTotal += v
		if p, ok := c.prevPkgThrottle[id]; ok && v > p {
			st.Throttling = true
			c.seenPkg += v - p
		}
	}
	c.prevCoreThrottle, c.prevPkgThrottle = core, pkg
	return st
}

// listThrottle lists the CPUs' thermal_throttle directories and packages.
func (c *CPUCollector) listThrottle(online []perCPUTimes) {
	c.throttleOnline = c.throttleOnline[:0]
	for _, t := range online {
		c.throttleOnline = append(c.throttleOnline, t.id)
	}
	c.throttleCPUs, c.throttleListed = c.throttleCPUs[:0], true
	dirs, err := c.root.Glob("/sys/devices/system/cpu/cpu[0-9]*/thermal_throttle")
	if err != nil {
		return
	}
	for _, dir := range dirs {
		t := throttleCPU{name: path.Base(path.Dir(dir)), dir: dir,
			coreFile: path.Join(dir, "core_throttle_count"), pkgFile: path.Join(dir, "package_throttle_count")}
		if id, err := c.root.ReadInt(path.Join(path.Dir(dir), "topology/physical_package_id")); err == nil {
			t.pkg, t.hasPkg = id, true
		}
		c.throttleCPUs = append(c.throttleCPUs, t)
	}
}

// readThrottle reads the listed counters; ok is false when one of them
// could not be read. A package count we could not attribute to a package
// (its CPU's physical_package_id did not read when listed) is not read: it
// would be counted twice.
func (c *CPUCollector) readThrottle() (core map[string]int64, pkg map[int64]int64, ok bool) {
	ok = true
	core = make(map[string]int64, len(c.throttleCPUs))
	pkg = map[int64]int64{}
	for _, t := range c.throttleCPUs {
		if v, err := c.root.ReadInt(t.coreFile); err == nil && v >= 0 {
			core[t.name] = v
		} else {
			ok = false
		}
		if !t.hasPkg {
			continue
		}
		if _, seen := pkg[t.pkg]; seen {
			continue
		}
		if v, err := c.root.ReadInt(t.pkgFile); err == nil && v >= 0 {
			pkg[t.pkg] = v
		} else {
			ok = false
		}
	}
	return core, pkg, ok
}

// sameCPUs reports whether online lists the CPU ids in ids, in order.
func sameCPUs(online []perCPUTimes, ids []int) bool {
	if len(online) != len(ids) {
		return false
	}
	for i, t := range online {
		if t.id != ids[i] {
			return false
		}
	}
	return true
}

// percent converts a fraction to a whole percentage in [0, 100].
func percent(f float64) int32 {
	return int32(math.Round(100 * math.Max(0, math.Min(1, f))))
}
