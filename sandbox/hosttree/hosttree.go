// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package hosttree writes a simulated node's /proc and /sys: CPU counters,
// memory, pressure, NUMA nodes, hwmon sensors, thermal zones and RAPL
// energy counters, advanced over wall-clock time at a chosen utilization,
// power and temperature. The agent (and node_exporter, for comparison) read
// it through the same code paths as a real host. Files are replaced by
// rename, so a reader never sees a half-written file.
package hosttree

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Spec is the simulated hardware.
type Spec struct {
	CPUs      int // logical CPUs, split evenly over NUMANodes and Packages
	NUMANodes int
	Packages  int // CPU packages: one coretemp chip and one RAPL zone each
	MemoryKiB int64
	// IdleWatts and FullLoadWatts are the CPU-side power curve, split over
	// the packages (DRAM gets a tenth).
	IdleWatts, FullLoadWatts float64
	// PackageLimitWatts, when set, is each package's RAPL long-term power
	// limit (constraint_0_max_power_uw), from which the agent builds its
	// prior power curve.
	PackageLimitWatts float64
	// CPUModel, when set, is /proc/cpuinfo's model name.
	CPUModel string
	// CritMilliCelsius is the coretemp critical limit.
	CritMilliCelsius int64
	// PCIDevices are PCI functions to list in /sys/bus/pci/devices (GPUs,
	// whose NUMA node the agent reads there).
	PCIDevices []PCIDevice
}

// PCIDevice is one PCI function of the simulated host.
type PCIDevice struct {
	Address  string // domain:bus:device.function, e.g. "0000:07:00.0"
	Vendor   uint16
	Device   uint16
	Class    uint32
	NUMANode int
	// Root is the PCI root bus the function sits below ("pci0000:00"):
	// its /sys/bus/pci/devices entry is then a link into
	// /sys/devices/<Root>/, as sysfs makes it
	// (Documentation/ABI/testing/sysfs-bus-pci), a directory otherwise.
	Root string
}

// Large is a 2-socket, 64-CPU server.
var Large = Spec{CPUs: 64, NUMANodes: 2, Packages: 2, MemoryKiB: 256 << 20, IdleWatts: 120, FullLoadWatts: 420, CritMilliCelsius: 100_000}

// Host is a simulated node's tree.
type Host struct {
	Dir  string
	spec Spec

	mu          sync.Mutex
	last        time.Time
	utilization float64 // 0..1
	tempMilli   int64
	// tempsFailed makes every temperature file read as a failed sensor
	// (FailTemperatures).
	tempsFailed bool
	watts       float64 // CPU-side power when set by SetWatts (haveWatts)
	haveWatts   bool
	userTicks   []float64
	idleTicks   []float64
	energyUJ    []float64 // per package, then per DRAM zone

	// writeMu serializes writes; written is each file's content as last
	// written, so that Advance rewrites only the files whose content
	// changed (the counters every time, memory and temperatures when they
	// were set), as a fleet of hosts in one process must to keep pace.
	writeMu sync.Mutex
	written map[string]string
}

const raplRange = 262_143_328_850 // max_energy_range_uj of a typical package

// New writes the tree for spec under dir.
func New(dir string, spec Spec) (*Host, error) {
	if spec.CPUs < 1 || spec.NUMANodes < 1 || spec.Packages < 1 || spec.CPUs%spec.NUMANodes != 0 || spec.CPUs%spec.Packages != 0 {
		return nil, fmt.Errorf("hosttree: %d CPUs must split evenly over %d NUMA nodes and %d packages", spec.CPUs, spec.NUMANodes, spec.Packages)
	}
	h := &Host{
		Dir: dir, spec: spec, last: time.Now(), utilization: 0.1, tempMilli: 45_000,
		userTicks: make([]float64, spec.CPUs), idleTicks: make([]float64, spec.CPUs),
		energyUJ: make([]float64, 2*spec.Packages),
		written:  map[string]string{},
	}
	files := map[string]string{
		"/proc/loadavg":                   "1.00 0.80 0.70 2/900 31337\n",
		"/proc/pressure/cpu":              "some avg10=0.50 avg60=0.40 avg300=0.30 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"/proc/pressure/memory":           "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n",
		"/proc/pressure/io":               "some avg10=0.10 avg60=0.05 avg300=0.01 total=9999\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=99\n",
		"/sys/devices/system/cpu/present": fmt.Sprintf("0-%d\n", spec.CPUs-1),
		"/sys/devices/system/cpu/online":  fmt.Sprintf("0-%d\n", spec.CPUs-1),
		"/sys/devices/system/node/online": fmt.Sprintf("0-%d\n", spec.NUMANodes-1),
	}
	perNode := spec.CPUs / spec.NUMANodes
	perPkg := spec.CPUs / spec.Packages
	for cpu := 0; cpu < spec.CPUs; cpu++ {
		base := fmt.Sprintf("/sys/devices/system/cpu/cpu%d", cpu)
		pkg := cpu / perPkg
		files[base+"/topology/physical_package_id"] = fmt.Sprintf("%d\n", pkg)
		files[base+"/topology/core_id"] = fmt.Sprintf("%d\n", cpu%perPkg)
		files[base+"/thermal_throttle/core_throttle_count"] = "0\n"
		files[base+"/thermal_throttle/package_throttle_count"] = "0\n"
	}
	for n := 0; n < spec.NUMANodes; n++ {
		base := fmt.Sprintf("/sys/devices/system/node/node%d", n)
		var dist []string
		for m := 0; m < spec.NUMANodes; m++ {
			if m == n {
				dist = append(dist, "10")
			} else {
				dist = append(dist, "21")
			}
		}
		files[base+"/distance"] = strings.Join(dist, " ") + "\n"
		files[base+"/cpulist"] = fmt.Sprintf("%d-%d\n", n*perNode, (n+1)*perNode-1)
		files[base+"/hugepages/hugepages-2048kB/nr_hugepages"] = "0\n"
		files[base+"/hugepages/hugepages-2048kB/free_hugepages"] = "0\n"
		files[base+"/hugepages/hugepages-2048kB/surplus_hugepages"] = "0\n"
		for cpu := n * perNode; cpu < (n+1)*perNode; cpu++ {
			// ghw reads a node's CPUs from its cpuN entries and their topology.
			files[fmt.Sprintf("%s/cpu%d/topology/core_id", base, cpu)] = fmt.Sprintf("%d\n", cpu%perPkg)
			files[fmt.Sprintf("%s/cpu%d/topology/physical_package_id", base, cpu)] = fmt.Sprintf("%d\n", cpu/perPkg)
		}
	}
	if spec.CPUModel != "" {
		var b strings.Builder
		for cpu := range spec.CPUs {
			fmt.Fprintf(&b, "processor\t: %d\nmodel name\t: %s\n\n", cpu, spec.CPUModel)
		}
		files["/proc/cpuinfo"] = b.String()
	}
	for p := 0; p < spec.Packages; p++ {
		hw := fmt.Sprintf("/sys/class/hwmon/hwmon%d", p)
		files[hw+"/name"] = "coretemp\n"
		files[hw+"/temp1_label"] = fmt.Sprintf("Package id %d\n", p)
		files[hw+"/temp1_max"] = fmt.Sprintf("%d\n", spec.CritMilliCelsius-16_000)
		files[hw+"/temp1_crit"] = fmt.Sprintf("%d\n", spec.CritMilliCelsius)
		files[hw+"/temp1_crit_alarm"] = "0\n"
		for c := 0; c < 8; c++ {
			files[fmt.Sprintf("%s/temp%d_label", hw, c+2)] = fmt.Sprintf("Core %d\n", c)
			files[fmt.Sprintf("%s/temp%d_crit", hw, c+2)] = fmt.Sprintf("%d\n", spec.CritMilliCelsius)
		}
		zone := fmt.Sprintf("/sys/class/powercap/intel-rapl:%d", p)
		files[zone+"/name"] = fmt.Sprintf("package-%d\n", p)
		files[zone+"/max_energy_range_uj"] = fmt.Sprintf("%d\n", raplRange)
		if spec.PackageLimitWatts > 0 {
			files[zone+"/constraint_0_name"] = "long_term\n"
			files[zone+"/constraint_0_max_power_uw"] = fmt.Sprintf("%d\n", int64(spec.PackageLimitWatts*1e6))
		}
		// The DRAM subzone, listed in /sys/class/powercap beside its
		// package as the kernel lists every zone there.
		dram := fmt.Sprintf("/sys/class/powercap/intel-rapl:%d:0", p)
		files[dram+"/name"] = "dram\n"
		files[dram+"/max_energy_range_uj"] = fmt.Sprintf("%d\n", raplRange)
	}
	for _, d := range spec.PCIDevices {
		if d.Root == "" {
			continue
		}
		real := filepath.Join(h.Dir, "sys/devices", d.Root, d.Address)
		link := filepath.Join(h.Dir, "sys/bus/pci/devices", d.Address)
		if err := os.MkdirAll(real, 0o755); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return nil, err
		}
		if err := os.Symlink("../../../devices/"+d.Root+"/"+d.Address, link); err != nil {
			return nil, err
		}
	}
	for _, d := range spec.PCIDevices {
		dir := "/sys/bus/pci/devices/" + d.Address
		files[dir+"/vendor"] = fmt.Sprintf("0x%04x\n", d.Vendor)
		files[dir+"/device"] = fmt.Sprintf("0x%04x\n", d.Device)
		files[dir+"/class"] = fmt.Sprintf("0x%06x\n", d.Class)
		files[dir+"/numa_node"] = fmt.Sprintf("%d\n", d.NUMANode)
	}
	for z := 0; z < 2; z++ {
		tz := fmt.Sprintf("/sys/class/thermal/thermal_zone%d", z)
		files[tz+"/type"] = []string{"x86_pkg_temp\n", "acpitz\n"}[z]
		files[tz+"/trip_point_0_type"] = "critical\n"
		files[tz+"/trip_point_0_temp"] = fmt.Sprintf("%d\n", spec.CritMilliCelsius+5_000)
	}
	for path, content := range files {
		if err := h.write(path, content); err != nil {
			return nil, err
		}
	}
	if err := h.Advance(); err != nil {
		return nil, err
	}
	return h, nil
}

// SetUtilization sets the CPU utilization, 0 to 1, from now on.
func (h *Host) SetUtilization(u float64) {
	h.mu.Lock()
	h.utilization = min(1, max(0, u))
	h.mu.Unlock()
}

// SetWatts sets the CPU-side power from now on, in place of the spec's
// straight line between IdleWatts and FullLoadWatts.
func (h *Host) SetWatts(w float64) {
	h.mu.Lock()
	h.watts, h.haveWatts = max(0, w), true
	h.mu.Unlock()
}

// SetTemperature sets the package temperature, in millidegrees Celsius.
func (h *Host) SetTemperature(milli int64) {
	h.mu.Lock()
	h.tempMilli = milli
	h.mu.Unlock()
}

// FailTemperatures makes every temperature file (hwmon tempN_input,
// thermal_zoneN/temp) hold a value no sensor can have, as the agent's
// thermal collector reads a failed sensor (see agent/collector's
// ThermalCollector: a read error or an impossible value fails the
// sensor alike), from the next Advance; false restores the readings.
func (h *Host) FailTemperatures(failed bool) {
	h.mu.Lock()
	h.tempsFailed = failed
	h.mu.Unlock()
}

// tempFailed is what a failed temperature file holds: below absolute
// zero, the -274000 some broken thermal zones report (the collector
// refuses it as out of range).
const tempFailed = "-274000\n"

// Advance moves every counter forward by the time since the last call and
// rewrites the files that change: /proc/stat and RAPL energy every time;
// meminfo, NUMA meminfo and temperatures when their content differs from
// what this host last wrote.
func (h *Host) Advance() error { return h.AdvanceTo(time.Now()) }

// AdvanceTo is Advance with the time given: to now from the last call. A
// time before the last call's does nothing: counters never go back.
func (h *Host) AdvanceTo(now time.Time) error {
	h.mu.Lock()
	if now.Before(h.last) {
		h.mu.Unlock()
		return nil
	}
	dt := now.Sub(h.last).Seconds()
	h.last = now
	u, temp, spec, failed := h.utilization, h.tempMilli, h.spec, h.tempsFailed
	var stat strings.Builder
	stat.WriteString("cpu  0 0 0 0 0 0 0 0 0 0\n")
	for cpu := range h.userTicks {
		h.userTicks[cpu] += dt * 100 * u // USER_HZ is 100
		h.idleTicks[cpu] += dt * 100 * (1 - u)
		fmt.Fprintf(&stat, "cpu%d %d 0 0 %d 0 0 0 0 0 0\n", cpu, uint64(h.userTicks[cpu]), uint64(h.idleTicks[cpu]))
	}
	stat.WriteString("intr 123456\nctxt 654321\nbtime 1700000000\nprocesses 4242\nprocs_running 3\nprocs_blocked 0\n")
	watts := spec.IdleWatts + (spec.FullLoadWatts-spec.IdleWatts)*u
	if h.haveWatts {
		watts = h.watts
	}
	for p := 0; p < spec.Packages; p++ {
		h.energyUJ[p] += dt * 1e6 * watts * 0.9 / float64(spec.Packages)
		h.energyUJ[spec.Packages+p] += dt * 1e6 * watts * 0.1 / float64(spec.Packages)
	}
	energy := append([]float64(nil), h.energyUJ...)
	h.mu.Unlock()

	used := int64(float64(spec.MemoryKiB) * (0.2 + 0.5*u))
	files := map[string]string{
		"/proc/stat":    stat.String(),
		"/proc/meminfo": fmt.Sprintf("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nBuffers:        1024 kB\nCached:         2048 kB\nHugePages_Total:       0\nHugePages_Free:        0\nHugepagesize:       2048 kB\nHugetlb:               0 kB\n", spec.MemoryKiB, spec.MemoryKiB-used, spec.MemoryKiB-used),
	}
	perNodeKiB := spec.MemoryKiB / int64(spec.NUMANodes)
	for n := 0; n < spec.NUMANodes; n++ {
		files[fmt.Sprintf("/sys/devices/system/node/node%d/meminfo", n)] = fmt.Sprintf(
			"Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\nNode %d MemUsed:        %d kB\n",
			n, perNodeKiB, n, perNodeKiB-used/int64(spec.NUMANodes), n, used/int64(spec.NUMANodes))
	}
	for p := 0; p < spec.Packages; p++ {
		hw := fmt.Sprintf("/sys/class/hwmon/hwmon%d", p)
		files[hw+"/temp1_input"] = tempFile(failed, temp)
		for c := 0; c < 8; c++ {
			files[fmt.Sprintf("%s/temp%d_input", hw, c+2)] = tempFile(failed, temp-int64(1000*(c%3)))
		}
		zone := fmt.Sprintf("/sys/class/powercap/intel-rapl:%d", p)
		files[zone+"/energy_uj"] = fmt.Sprintf("%d\n", uint64(energy[p])%raplRange)
		files[fmt.Sprintf("/sys/class/powercap/intel-rapl:%d:0/energy_uj", p)] = fmt.Sprintf("%d\n", uint64(energy[spec.Packages+p])%raplRange)
	}
	for z := 0; z < 2; z++ {
		// The zones read a little below the package sensor, as on real
		// hosts, so the hottest sensor is the package with its hwmon limits.
		files[fmt.Sprintf("/sys/class/thermal/thermal_zone%d/temp", z)] = tempFile(failed, temp-int64(1000+2000*z))
	}
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	for path, content := range files {
		if err := h.write(path, content); err != nil {
			return err
		}
	}
	return nil
}

// tempFile is a temperature file's content: milli, or tempFailed.
func tempFile(failed bool, milli int64) string {
	if failed {
		return tempFailed
	}
	return fmt.Sprintf("%d\n", milli)
}

// RateCounter reports whether hostPath is a counter an agent turns into a
// rate over its sample (/proc/stat's CPU times, a RAPL zone's energy_uj):
// a simulated host must be up to date when such a file is read, or the
// time since its last update becomes an error in the rate.
func RateCounter(hostPath string) bool {
	return hostPath == "/proc/stat" || strings.HasSuffix(hostPath, "/energy_uj")
}

// ReadStep: a read of a rate counter advances the host when its last
// advance is older than this, so the counters of one read (a RAPL zone's
// packages and DRAM) come from one advance.
const ReadStep = time.Millisecond

// BeforeRead advances the host before an agent reads hostPath in its tree
// (the agent's host read hook), when hostPath is a RateCounter and the
// last advance is older than ReadStep. The counters are then as of the
// read, as a real host's are; advanced on a timer instead, a 1 s window
// holds a varying number of steps on a loaded machine, and a steady load
// reads as watts that jump by tens of percent.
func (h *Host) BeforeRead(hostPath string) error {
	if !RateCounter(hostPath) {
		return nil
	}
	now := time.Now()
	h.mu.Lock()
	fresh := now.Sub(h.last) < ReadStep
	h.mu.Unlock()
	if fresh {
		return nil
	}
	return h.AdvanceTo(now)
}

// Run calls Advance every period until stop is closed.
func (h *Host) Run(period time.Duration, stop <-chan struct{}) error {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
			if err := h.Advance(); err != nil {
				return err
			}
		}
	}
}

// write replaces a file atomically, so a reader never sees it half
// written; a file whose content is what this host last wrote is left as
// it is. The caller holds writeMu, or owns h alone as New does.
func (h *Host) write(hostPath, content string) error {
	last, seen := h.written[hostPath]
	if seen && last == content {
		return nil
	}
	full := filepath.Join(h.Dir, hostPath)
	if !seen {
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
	}
	tmp := full + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, full); err != nil {
		return err
	}
	h.written[hostPath] = content
	return nil
}
