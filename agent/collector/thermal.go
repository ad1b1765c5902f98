// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/heat"
)

const (
	thermalClassDir = "/sys/class/thermal"

	// Sources of a TempSensor.
	tempSourceHwmon       = "hwmon"
	tempSourceThermalZone = "thermal_zone"

	// defaultRediscoverEvery is how often a collector lists its sensor
	// files again even when none has disappeared, to find hot-plugged
	// devices and changed limits.
	defaultRediscoverEvery = 5 * time.Minute

	// The range of temperatures the API accepts, in millidegrees Celsius.
	minMilliCelsius = -273150
	maxMilliCelsius = 1000000
)

// errOutOfRange is a sensor value outside what the API accepts, e.g. the
// -274000 some broken thermal zones report.
var errOutOfRange = errors.New("temperature out of range")

// errSensorFault is an hwmon sensor that flags a fault (tempN_fault 1)
// after it has read well.
var errSensorFault = errors.New("the sensor flags a fault")

// ThermalCollector reads every temperature sensor of the node: each thermal
// zone (/sys/class/thermal/thermal_zoneN) and each hwmon temperature channel
// (/sys/class/hwmon/hwmonN/tempM_*).
//
// Sensor names are unique within the node:
//   - a thermal zone is "<type>/thermal_zoneN", e.g. "x86_pkg_temp/thermal_zone2";
//   - an hwmon channel is "<chip>/<label>", where label is tempM_label or
//     "tempM" when the channel has no label (or shares its label with
//     another channel of the chip), and chip is the hwmon name when no other
//     chip has that name, else "<name>.<k>" with k counting the chips of
//     that name in the order of their device paths ("coretemp.0/Package id
//     0", "coretemp.1/Package id 1", "nvme.0/Composite").
//
// The hwmon chips the thermal core registers for thermal zones are skipped,
// since the zone itself is read, and so are hwmon channels switched off
// (tempN_enable 0). A sensor that flags itself faulty (tempN_fault 1) is
// left out of the sample: Documentation/hwmon/sysfs-interface.rst says its
// measurement "should not be trusted". One that does so from the start is
// left out silently, as such flags mark unconnected inputs for good on many
// boards; one that read well and then flags a fault fails like a read, as
// below.
//
// A sensor whose temperature cannot be read fails closed: the read of a
// temperature file fails when its driver cannot get a reading (the hwmon
// sysfs ABI, Documentation/hwmon/sysfs-interface.rst, only fixes -ENODATA
// for a disabled channel; drivers pass up their bus errors, EIO, ENXIO,
// EREMOTEIO or EAGAIN, as a dead or unreachable sensor does), or the file
// holds a value no sensor can have. Such a sensor is never reported as
// 0 °C, and is never left out silently: the source is Degraded (Available,
// reason Degraded, see Degraded), its message naming each such sensor and
// its error. The sensor's last good reading is held in its place, counted
// in the hottest sensor and the headroom like a fresh one so that a node
// last seen hot does not read cool, for at most the hold time (see
// WithSensorHold; DefaultSensorHold) from when it was read. After that the
// sensor is left out, and the source stays Degraded, naming it, for as long
// as its reads fail. When no sensor reads and none is held, the source is
// Failed.
//
// The collector lists sensor files and reads labels and limits only at
// discovery: on the first call, when a sensor file disappears, and every
// few minutes. Each cycle reads only the temperatures, alarms and faults.
type ThermalCollector struct {
	root            hostfs.Root
	rediscoverEvery time.Duration
	// hold is how long a sensor's last good reading stands in for it
	// while its reads fail.
	hold time.Duration

	discovered   bool
	discoveredAt time.Time
	sensors      []tempSensor
	// last is the last good reading of each discovered sensor, by name,
	// and when it was taken.
	last map[string]lastReading
}

// lastReading is a sensor's last good reading and its sample time.
type lastReading struct {
	sensor TempSensor
	at     time.Time
}

// DefaultSensorHold is how long the thermal collector holds a sensor's
// last good reading while its reads fail (--sensor-hold-duration). A
// minute rides out a bus that fails a few reads in a row (SMBus contention
// with firmware, a sensor busy converting) without a hot node reading cool,
// and it spans the publisher's heartbeat (30s), so the held reading is
// written with the source Degraded before the sensor is left out. It is no
// longer than the scheduler's default telemetryMaxAge (60s): no held
// reading is older than a whole sample the scheduler would still accept.
const DefaultSensorHold = time.Minute

var _ Collector = (*ThermalCollector)(nil)

// NewThermalCollector returns a collector that reads thermal zones and hwmon
// temperature sensors under root.
func NewThermalCollector(root hostfs.Root) *ThermalCollector {
	return &ThermalCollector{root: root, rediscoverEvery: defaultRediscoverEvery, hold: DefaultSensorHold, last: map[string]lastReading{}}
}

// WithSensorHold sets how long, from when it was taken, a sensor's last
// good reading stands in for it while its reads fail; 0 holds none. It
// returns c.
func (c *ThermalCollector) WithSensorHold(d time.Duration) *ThermalCollector {
	c.hold = max(0, d)
	return c
}

// Name returns telemetryv1alpha1.SourceThermal.
func (c *ThermalCollector) Name() telemetryv1alpha1.SourceName {
	return telemetryv1alpha1.SourceThermal
}

// Collect fills s.Thermal with every sensor that could be read and the
// held readings of those that could not. It returns a Degraded error,
// with s.Thermal filled, when some sensor could not be read.
func (c *ThermalCollector) Collect(ctx context.Context, s *Sample) error {
	rediscovered := false
	if !c.discovered || s.Time.Sub(c.discoveredAt) >= c.rediscoverEvery || s.Time.Before(c.discoveredAt) {
		c.discover(s.Time)
		rediscovered = true
	}
	th, stale, err := c.read(s.Time)
	if stale && !rediscovered {
		// A sensor file went away (a module unloaded, a drive removed,
		// hwmonN renumbered): list the sensors again and read anew.
		c.discover(s.Time)
		th, _, err = c.read(s.Time)
	}
	s.Thermal = th
	return err
}

// tempSensor is one temperature sensor found at discovery.
type tempSensor struct {
	name   string
	source string
	// input is the host path of the temperature in millidegrees Celsius.
	input string
	// fault is the host path of the fault flag, "" when there is none.
	fault string
	// alarms are the host paths of the max/crit alarm flags.
	alarms []string
	// max and crit are the limits read at discovery; vendor a known limit
	// for the part when the sensor reports neither (see amdTjmax).
	max, crit, vendor *int64
}

// discover lists the node's temperature sensors and reads their names and
// limits.
func (c *ThermalCollector) discover(now time.Time) {
	c.sensors = append(discoverZones(c.root), discoverHwmonTemps(c.root, discoverHwmon(c.root), readCPUModel(c.root))...)
	c.discovered = true
	c.discoveredAt = now
	// A sensor that is gone (its chip or zone removed) is no longer
	// held or named.
	names := make(map[string]bool, len(c.sensors))
	for _, ts := range c.sensors {
		names[ts.name] = true
	}
	for name := range c.last {
		if !names[name] {
			delete(c.last, name)
		}
	}
}

// read reads every discovered sensor at sample time now. stale is true
// when a sensor file no longer exists.
func (c *ThermalCollector) read(now time.Time) (th *Thermal, stale bool, err error) {
	if len(c.sensors) == 0 {
		return nil, false, Unavailable("NoSensors", "no thermal zones or hwmon temperature sensors (typical in VMs)")
	}
	var (
		out      []TempSensor
		faulty   int
		failed   []string // what each unreadable sensor's message says
		errs     []error
		firstErr error
	)
	// fail records a sensor that could not be read and holds its last
	// reading.
	fail := func(ts *tempSensor, err error) {
		if firstErr == nil {
			firstErr = err
		}
		errs = append(errs, fmt.Errorf("%s: %w", ts.name, err))
		held, note := c.held(ts.name, now)
		if held != nil {
			out = append(out, *held)
		}
		failed = append(failed, ts.name+": "+readError(err)+"; "+note)
	}
	var flag [32]byte // a fault or alarm file: "0" or "1"
	for i := range c.sensors {
		ts := &c.sensors[i]
		if ts.fault != "" {
			if b, err := c.root.ReadInto(ts.fault, flag[:]); err == nil {
				if f, err := parseFlag(b); err == nil && f {
					if _, readBefore := c.last[ts.name]; readBefore {
						// It read, and now flags a fault: it
						// fails like a read.
						fail(ts, fmt.Errorf("%s: %w", path.Base(ts.fault), errSensorFault))
						continue
					}
					faulty++
					continue
				}
			} else if hostfs.IsAbsent(err) {
				stale = true
			}
		}
		v, err := readMilliCelsius(c.root, ts.input)
		if err != nil {
			if hostfs.IsAbsent(err) {
				stale = true
			}
			fail(ts, err)
			continue
		}
		sensor := TempSensor{
			Name:               ts.name,
			Source:             ts.source,
			MilliCelsius:       v,
			MaxMilliCelsius:    ts.max,
			CritMilliCelsius:   ts.crit,
			VendorMilliCelsius: ts.vendor,
		}
		for _, a := range ts.alarms {
			b, err := c.root.ReadInto(a, flag[:])
			if err != nil {
				if hostfs.IsAbsent(err) {
					stale = true
				}
				continue
			}
			if f, err := parseFlag(b); err == nil && f {
				sensor.Alarm = true
			}
		}
		c.last[ts.name] = lastReading{sensor: sensor, at: now}
		out = append(out, sensor)
	}
	if len(out) == 0 {
		if len(failed) == 0 {
			return nil, stale, Failed("SensorFault", nil, "all %d temperature sensors flag a fault", faulty)
		}
		reason := "ReadError"
		switch {
		case hostfs.IsPermission(firstErr):
			reason = "PermissionDenied"
		case errors.Is(firstErr, errSensorFault):
			reason = "SensorFault"
		}
		return nil, stale, Failed(reason, firstErr, "none of %d temperature sensors could be read (%d faulty)", len(c.sensors), faulty)
	}
	th = &Thermal{Sensors: out}
	if len(failed) > 0 {
		return th, stale, Degraded(errors.Join(errs...), "%d of %d temperature sensors unreadable: %s", len(failed), len(c.sensors), strings.Join(failed, "; "))
	}
	return th, stale, nil
}

// held returns what stands in for a sensor whose read failed at now: its
// last good reading while that is at most the hold time old, else nil;
// and what the source's message says of it.
func (c *ThermalCollector) held(name string, now time.Time) (*TempSensor, string) {
	last, ok := c.last[name]
	if !ok {
		return nil, "no earlier reading to hold"
	}
	until := last.at.Add(c.hold)
	reading := fmt.Sprintf("%s read at %s", heat.Celsius(last.sensor.MilliCelsius), last.at.UTC().Format(time.RFC3339))
	if now.After(until) {
		return nil, fmt.Sprintf("left out since %s (its last reading, %s, was held %v)", until.UTC().Format(time.RFC3339), reading, c.hold)
	}
	sn := last.sensor
	sn.Held = true
	return &sn, fmt.Sprintf("holding its last reading, %s, until %s", reading, until.UTC().Format(time.RFC3339))
}

// readError is a failed read's error for a message: the file's name and
// the errno ("temp1_input: input/output error") rather than the whole
// path under the host root, or the parse error.
func readError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return path.Base(pe.Path) + ": " + pe.Err.Error()
	}
	return err.Error()
}

// readMilliCelsius reads a temperature file. Broken sensors fail the read
// (EIO, ENODATA, EAGAIN, ENXIO) or report values no sensor can have; both
// are errors, never 0 °C.
func readMilliCelsius(r hostfs.Root, hostPath string) (int64, error) {
	var buf [64]byte
	b, err := r.ReadInto(hostPath, buf[:])
	if err != nil {
		return 0, err
	}
	return parseMilliCelsius(b)
}

// parseMilliCelsius parses a temperature in millidegrees Celsius and checks
// it is one the API accepts.
func parseMilliCelsius(b []byte) (int64, error) {
	v, err := hostfs.ParseInt(b)
	if err != nil {
		return 0, err
	}
	if v < minMilliCelsius || v > maxMilliCelsius {
		return 0, fmt.Errorf("%w: %d m°C", errOutOfRange, v)
	}
	return v, nil
}

// minPlausibleLimit is the lowest temperature limit taken as one. Real
// max and crit limits sit far above room temperature (the lowest in the
// kernel's hwmon documentation are drive maxima of 50-70 °C), while
// firmware bugs publish limits below it: the Gigabyte X570-UD's ACPI zone
// has a 20.8 °C critical trip (agent/testdata/corpus/amd-x570-ud-zen2).
// Such a limit would mark a cool node Overheating for good; the sensor is
// held against the absolute limit instead, like any sensor without one.
const minPlausibleLimit = 40_000

// parseLimit parses a temperature limit (hwmon tempN_max/_crit, a trip
// point). A limit below minPlausibleLimit (drivers report 0 for an unset
// one), or above the API's range, is no real hardware limit and reads as
// none.
func parseLimit(b []byte) (int64, bool) {
	v, err := hostfs.ParseInt(b)
	if err != nil || v < minPlausibleLimit || v > maxMilliCelsius {
		return 0, false
	}
	return v, true
}

// readLimit reads a temperature limit file; nil when absent or no limit.
func readLimit(r hostfs.Root, hostPath string) *int64 {
	b, err := r.ReadFile(hostPath)
	if err != nil {
		return nil
	}
	if v, ok := parseLimit(b); ok {
		return &v
	}
	return nil
}

// discoverZones lists the thermal zones that have a temperature file, in
// zone order, with their critical and hot trip points as limits.
func discoverZones(r hostfs.Root) []tempSensor {
	dirs, err := r.Glob(thermalClassDir + "/thermal_zone*")
	if err != nil {
		return nil
	}
	type zone struct {
		index int
		dir   string
	}
	var zones []zone
	for _, d := range dirs {
		if idx, ok := parseIndex(path.Base(d), "thermal_zone"); ok && r.Exists(d+"/temp") {
			zones = append(zones, zone{idx, d})
		}
	}
	sort.Slice(zones, func(i, j int) bool { return zones[i].index < zones[j].index })
	out := make([]tempSensor, 0, len(zones))
	for _, z := range zones {
		typ := "unknown"
		if b, err := r.ReadFile(z.dir + "/type"); err == nil {
			if t := cleanName(b, maxChipNameLen); t != "" {
				typ = t
			}
		}
		var trips []tripPoint
		files, _ := r.Glob(z.dir + "/trip_point_*_type")
		for _, f := range files {
			n, ok := parseChannel(path.Base(f), "trip_point_", "type")
			if !ok {
				continue
			}
			tb, err := r.ReadFile(f)
			if err != nil {
				continue
			}
			vb, err := r.ReadFile(z.dir + "/trip_point_" + strconv.Itoa(n) + "_temp")
			if err != nil {
				continue
			}
			trips = append(trips, tripPoint{typ: tb, temp: vb})
		}
		max, crit := zoneLimits(trips)
		out = append(out, tempSensor{
			name:   typ + "/thermal_zone" + strconv.Itoa(z.index),
			source: tempSourceThermalZone,
			input:  z.dir + "/temp",
			max:    max,
			crit:   crit,
		})
	}
	return out
}

// tripPoint is the raw contents of a zone's trip_point_N_type and
// trip_point_N_temp.
type tripPoint struct {
	typ, temp []byte
}

// zoneLimits turns a zone's trip points into limits: the lowest "critical"
// trip is its critical limit and the lowest "hot" trip its max limit.
// "passive" and "active" trips start cooling, not limits, and are ignored,
// as are trips whose temperature is no limit (see parseLimit).
func zoneLimits(trips []tripPoint) (max, crit *int64) {
	for _, t := range trips {
		v, ok := parseLimit(t.temp)
		if !ok {
			continue
		}
		var p **int64
		switch strings.TrimSpace(string(t.typ)) {
		case "critical":
			p = &crit
		case "hot":
			p = &max
		default:
			continue
		}
		if *p == nil || v < **p {
			*p = &v
		}
	}
	return max, crit
}

// discoverHwmonTemps lists the temperature channels (tempN_input) of the
// given chips, with labels and limits, in chip and channel order. Chips
// that mirror a thermal zone are skipped. cpuModel is /proc/cpuinfo's model
// name, for the vendor limits of CPU sensors that report none.
func discoverHwmonTemps(r hostfs.Root, chips []*hwmonChip, cpuModel string) []tempSensor {
	var out []tempSensor
	for _, chip := range chips {
		if chip.thermalZone {
			continue
		}
		channels := chip.channels("temp", "input")
		labels := make([]string, len(channels))
		seen := make(map[string]int, len(channels))
		for i, n := range channels {
			labels[i] = chip.label(r, "temp", n)
			seen[labels[i]]++
		}
		for i, n := range channels {
			prefix := "temp" + strconv.Itoa(n)
			if !channelEnabled(r, chip, prefix) {
				continue
			}
			label := labels[i]
			if _, isChannel := parseIndex(label, "temp"); seen[label] > 1 || (isChannel && label != prefix) {
				// A label two channels share, or one that reads as
				// another channel's name: fall back to the channel
				// name, which is unique within the chip.
				label = prefix
			}
			ts := tempSensor{
				name:   chip.id + "/" + label,
				source: tempSourceHwmon,
				input:  chip.path(prefix + "_input"),
				max:    readLimitIf(r, chip, prefix+"_max"),
				crit:   readLimitIf(r, chip, prefix+"_crit"),
			}
			if ts.max == nil && ts.crit == nil {
				ts.vendor = vendorLimitFor(chip.name, labels[i], cpuModel)
			}
			if chip.has(prefix + "_fault") {
				ts.fault = chip.path(prefix + "_fault")
			}
			for _, a := range []string{"_alarm", "_max_alarm", "_crit_alarm"} {
				if chip.has(prefix + a) {
					ts.alarms = append(ts.alarms, chip.path(prefix+a))
				}
			}
			out = append(out, ts)
		}
	}
	return out
}

// channelEnabled reports whether an hwmon channel is on: it has no
// "<prefix>_enable" attribute, or that does not read 0. A channel switched
// off is no failure: Documentation/hwmon/sysfs-interface.rst has its reads
// return -ENODATA ("When disabled the sensor read will return -ENODATA").
func channelEnabled(r hostfs.Root, chip *hwmonChip, prefix string) bool {
	if !chip.has(prefix + "_enable") {
		return true
	}
	b, err := r.ReadFile(chip.path(prefix + "_enable"))
	if err != nil {
		return true
	}
	on, err := parseFlag(b)
	return err != nil || on
}

// readLimitIf reads a chip's limit attribute when the chip has it.
func readLimitIf(r hostfs.Root, chip *hwmonChip, attr string) *int64 {
	if !chip.has(attr) {
		return nil
	}
	return readLimit(r, chip.path(attr))
}
