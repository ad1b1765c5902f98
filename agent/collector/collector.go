// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package collector reads node telemetry from procfs, sysfs and NVML. Each
// source is one Collector in its own file; the agent runs a fixed list of
// them, in order, once per interval, into one Sample that feeds every output
// (the NodeTelemetry status, metrics and events).
package collector

import (
	"context"
	"errors"
	"fmt"
	"time"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/text"
)

// Collector reads one telemetry source into a Sample. Collectors may keep
// state between calls (previous counters) and are called from one goroutine.
type Collector interface {
	// Name is the source the collector reads.
	Name() telemetryv1alpha1.SourceName
	// Collect fills the collector's part of s. It returns nil when it did,
	// ErrWarmingUp when it needs one more call to have a baseline, a
	// *SourceError from Degraded when it filled its part but some of the
	// source could not be read, or another *SourceError that says why the
	// source is unavailable or failed (its part of s left empty). It never
	// fills zeros to stand for missing data.
	Collect(ctx context.Context, s *Sample) error
}

// ErrWarmingUp is returned by a collector whose values are rates over the
// interval (CPU utilization, power from energy counters) on its first call:
// it has recorded its baseline and reports from the next call on.
var ErrWarmingUp = errors.New("warming up: first reading is the baseline")

// SourceError says why a source could not be read: Unavailable when the
// node does not have it, Failed when it has it but reading failed, and
// Available (see Degraded) when it was read but only in part.
type SourceError struct {
	State   telemetryv1alpha1.SourceState
	Reason  string // CamelCase, e.g. NoPowercap
	Message string
	Err     error // the underlying error, if any
}

func (e *SourceError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Reason, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Reason, e.Message)
}

func (e *SourceError) Unwrap() error { return e.Err }

// Unavailable returns a SourceError for a source the node does not have.
func Unavailable(reason, format string, args ...any) *SourceError {
	return &SourceError{State: telemetryv1alpha1.SourceUnavailable, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Failed returns a SourceError for a source that exists but could not be
// read.
func Failed(reason string, err error, format string, args ...any) *SourceError {
	return &SourceError{State: telemetryv1alpha1.SourceFailed, Reason: reason, Message: fmt.Sprintf(format, args...), Err: err}
}

// ReasonDegraded is the reason of a source that was read, but only in
// part: its section is published, and the source's message names what is
// missing and why (see Degraded).
const ReasonDegraded = "Degraded"

// Degraded returns a SourceError for a source that was read but only in
// part, e.g. a thermal sensor whose read failed while the others read. The
// NodeTelemetry API has no state for it (SourceState is Available,
// Unavailable or Failed, and a section is published only while its source
// is Available), so the source stays Available, with reason Degraded and
// the message saying what could not be read; err, which may be nil, is
// what failed, for errors.Is. The collector fills its part of the sample
// as well as returning it.
func Degraded(err error, format string, args ...any) *SourceError {
	return &SourceError{State: telemetryv1alpha1.SourceAvailable, Reason: ReasonDegraded, Message: fmt.Sprintf(format, args...), Err: err}
}

// IsDegraded reports whether err is a source read only in part (see
// Degraded): its collector filled its part of the sample.
func IsDegraded(err error) bool {
	var se *SourceError
	return errors.As(err, &se) && se.State == telemetryv1alpha1.SourceAvailable
}

// Sample is one reading of every source, taken at Time. A nil section means
// its source was not read; the Sources list says why.
type Sample struct {
	Time time.Time

	// CPU is utilization, load, pressure and throttling. CPUBusy is the
	// same utilization as a fraction in [0, 1] at full precision, and
	// PerCPUBusy the busy fraction of each online logical CPU, by CPU id
	// (absent ids were offline or new).
	CPU        *telemetryv1alpha1.CPUStatus
	CPUBusy    float64
	PerCPUBusy map[int]float64
	// ThrottleEvents are the CPU thermal throttle events the agent has
	// seen since it started, core and package: the rises of each counter
	// between readings. Unlike the kernel's totals they never go back
	// when a CPU goes offline, so they are a counter Prometheus can take
	// increase() of.
	ThrottleEvents struct{ Core, Package int64 }
	// IOPressure is /proc/pressure/io. It is exported as metrics only.
	IOPressure *telemetryv1alpha1.PressureStatus

	Memory *telemetryv1alpha1.MemoryStatus
	NUMA   []telemetryv1alpha1.NUMANodeStatus

	Thermal *Thermal
	Power   *Power
	GPUs    []telemetryv1alpha1.GPUStatus
	// GPUDevices are the device ids the kubelet may hand out for the GPUs
	// (GPU UUIDs, MIG device UUIDs) and what each stands for; nil without
	// GPUs. The pod-resources collector maps allocations with them.
	GPUDevices map[string]GPUDevice

	// Sources is the state of every collector in this sample, in run order.
	Sources []telemetryv1alpha1.SourceStatus
}

// Thermal is every temperature sensor of the node.
type Thermal struct {
	Sensors []TempSensor
}

// TempSensor is one temperature reading from hwmon or a thermal zone.
type TempSensor struct {
	// Name is "<chip or zone type>/<label>", unique within the node.
	Name string
	// Source is "hwmon" or "thermal_zone".
	Source       string
	MilliCelsius int64
	// MaxMilliCelsius and CritMilliCelsius are the sensor's limits, nil
	// when it reports none.
	MaxMilliCelsius  *int64
	CritMilliCelsius *int64
	// VendorMilliCelsius is a limit the sensor does not report but its
	// vendor publishes for the part (see amdTjmax); nil when none is known.
	VendorMilliCelsius *int64
	// Alarm is true when the hardware raised an alarm (tempN_alarm,
	// _max_alarm, _crit_alarm); some are sticky until reboot. Fault
	// when it flags the sensor as faulty.
	Alarm bool
	Fault bool
	// Held is true when this sample's read of the sensor failed and the
	// reading is its last good one, held in its place for a bounded time
	// (see ThermalCollector): counted in the node's heat like any other,
	// but no new measurement.
	Held bool
}

// Power is the node's measured power over the last interval.
type Power struct {
	// Watts is the sum over zones, each physical domain counted once.
	Watts float64
	// Sources are the kinds of meter the zones came from.
	Sources []telemetryv1alpha1.PowerSource
	// GPUWatts is the part of Watts from NVML; nil without GPUs.
	GPUWatts *float64
	// EnergyJoules is the energy measured since the agent started.
	EnergyJoules float64
	Zones        []PowerZone
	// PackageLimitWatts are the RAPL package zones' power limits (see
	// raplLimitWatts), when every package has one, whichever meter
	// measures the node: what the hardware's identity says the CPUs draw
	// at full load.
	PackageLimitWatts []float64
	// CPUModel is /proc/cpuinfo's first "model name", "" when it has none.
	CPUModel string
}

// PowerZone is one power meter: a RAPL domain, an hwmon sensor, the ACPI
// power meter or a GPU.
type PowerZone struct {
	Name         string // e.g. "package-0", "dram-0", "hwmon/power1", "gpu-0"
	Source       telemetryv1alpha1.PowerSource
	Watts        float64
	EnergyJoules float64 // since the agent started
}

// Result is how one collector fared in one sample.
type Result struct {
	Name     telemetryv1alpha1.SourceName
	Duration time.Duration
	Err      error // nil, ErrWarmingUp, a *SourceError or another error
}

// Run calls each collector in order on a new Sample taken at now and
// records every source's state in Sample.Sources. A collector's error never
// stops the others.
func Run(ctx context.Context, collectors []Collector, now time.Time) (*Sample, []Result) {
	s := &Sample{Time: now, Sources: make([]telemetryv1alpha1.SourceStatus, 0, len(collectors))}
	results := make([]Result, 0, len(collectors))
	for _, c := range collectors {
		start := time.Now()
		err := c.Collect(ctx, s)
		results = append(results, Result{Name: c.Name(), Duration: time.Since(start), Err: err})
		st := SourceStatus(c.Name(), err)
		if n, ok := c.(Noter); ok && err == nil {
			st.Message = text.Truncate(n.Note(), 256)
		}
		s.Sources = append(s.Sources, st)
	}
	return s, results
}

// Noter is a collector that says something about an Available source, e.g.
// that it read a fallback; the note is the source's message.
type Noter interface {
	Note() string
}

// SourceStatus is the API state of a source given its collector's error.
func SourceStatus(name telemetryv1alpha1.SourceName, err error) telemetryv1alpha1.SourceStatus {
	st := telemetryv1alpha1.SourceStatus{Name: name, State: telemetryv1alpha1.SourceAvailable}
	var se *SourceError
	switch {
	case err == nil:
	case errors.Is(err, ErrWarmingUp):
		st.State = telemetryv1alpha1.SourceUnavailable
		st.Reason = "WarmingUp"
		st.Message = "first reading taken; values follow from the next sample"
	case errors.As(err, &se):
		st.State, st.Reason, st.Message = se.State, se.Reason, text.Truncate(se.Error(), 256)
		if se.Err == nil || se.State == telemetryv1alpha1.SourceAvailable {
			// A degraded source's message names each part that
			// failed, with its error.
			st.Message = text.Truncate(se.Message, 256)
		}
	default:
		st.State = telemetryv1alpha1.SourceFailed
		st.Reason = "ReadError"
		st.Message = text.Truncate(err.Error(), 256)
	}
	return st
}
