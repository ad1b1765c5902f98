package collector

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
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
// since the zone itself is read. A sensor whose value cannot be read, or
// that flags itself faulty, is left out of the sample rather than reported
// as 0 °C.
//
// The collector lists sensor files and reads labels and limits only at
// discovery: on the first call, when a sensor file disappears, and every
// few minutes. Each cycle reads only the temperatures, alarms and faults.
type ThermalCollector struct {
	root            hostfs.Root
	rediscoverEvery time.Duration

	discovered   bool
	discoveredAt time.Time
	sensors      []tempSensor
}

var _ Collector = (*ThermalCollector)(nil)

// NewThermalCollector returns a collector that reads thermal zones and hwmon
// temperature sensors under root.
func NewThermalCollector(root hostfs.Root) *ThermalCollector {
	return &ThermalCollector{root: root, rediscoverEvery: defaultRediscoverEvery}
}

// Name returns telemetryv1alpha1.SourceThermal.
func (c *ThermalCollector) Name() telemetryv1alpha1.SourceName {
	return telemetryv1alpha1.SourceThermal
}

// Collect fills s.Thermal with every sensor that could be read.
func (c *ThermalCollector) Collect(ctx context.Context, s *Sample) error {
	rediscovered := false
	if !c.discovered || s.Time.Sub(c.discoveredAt) >= c.rediscoverEvery || s.Time.Before(c.discoveredAt) {
		c.discover(s.Time)
		rediscovered = true
	}
	th, stale, err := c.read()
	if stale && !rediscovered {
		// A sensor file went away (a module unloaded, a drive removed,
		// hwmonN renumbered): list the sensors again and read anew.
		c.discover(s.Time)
		th, _, err = c.read()
	}
	if err != nil {
		return err
	}
	s.Thermal = th
	return nil
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
}

// read reads every discovered sensor. stale is true when a sensor file no
// longer exists.
func (c *ThermalCollector) read() (th *Thermal, stale bool, err error) {
	if len(c.sensors) == 0 {
		return nil, false, Unavailable("NoSensors", "no thermal zones or hwmon temperature sensors (typical in VMs)")
	}
	var (
		out      []TempSensor
		faulty   int
		failed   int
		firstErr error
	)
	for i := range c.sensors {
		ts := &c.sensors[i]
		if ts.fault != "" {
			if b, err := c.root.ReadFile(ts.fault); err == nil {
				if f, err := parseFlag(b); err == nil && f {
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
			failed++
			if firstErr == nil {
				firstErr = err
			}
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
			b, err := c.root.ReadFile(a)
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
		out = append(out, sensor)
	}
	if len(out) == 0 {
		if failed == 0 {
			return nil, stale, Failed("SensorFault", nil, "all %d temperature sensors flag a fault", faulty)
		}
		reason := "ReadError"
		if hostfs.IsPermission(firstErr) {
			reason = "PermissionDenied"
		}
		return nil, stale, Failed(reason, firstErr, "none of %d temperature sensors could be read (%d faulty)", len(c.sensors), faulty)
	}
	return &Thermal{Sensors: out}, stale, nil
}

// readMilliCelsius reads a temperature file. Broken sensors fail the read
// (EIO, ENODATA, EAGAIN, ENXIO) or report values no sensor can have; both
// are errors, never 0 °C.
func readMilliCelsius(r hostfs.Root, hostPath string) (int64, error) {
	b, err := r.ReadFile(hostPath)
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

// readLimitIf reads a chip's limit attribute when the chip has it.
func readLimitIf(r hostfs.Root, chip *hwmonChip, attr string) *int64 {
	if !chip.has(attr) {
		return nil
	}
	return readLimit(r, chip.path(attr))
}
