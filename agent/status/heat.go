// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"fmt"
	"slices"
	"strings"
	"time"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/heat"
)

// Defaults for HeatConfig.
const (
	DefaultHotHeadroomMilliCelsius  = heat.DefaultMarginMilliCelsius
	DefaultCoolHeadroomMilliCelsius = 8_000
)

// HeatConfig sets when a node counts as overheating, by package heat's
// definition. The gap between the two headrooms is the hysteresis that
// keeps the state, the Overheating condition and the Events from flapping
// around one threshold: a node becomes hot at the same headroom EnergyAware
// rejects it at, and stays Overheating until it has cooled past the gap.
type HeatConfig struct {
	// HotHeadroomMilliCelsius: the node becomes hot when its effective
	// thermal headroom falls to this or below.
	HotHeadroomMilliCelsius int64
	// CoolHeadroomMilliCelsius: a hot node cools when its headroom is back
	// at this or above and nothing throttles. It must not be below
	// HotHeadroomMilliCelsius.
	CoolHeadroomMilliCelsius int64
	// AbsoluteLimitMilliCelsius is the limit of a sensor that reports none
	// and has no known vendor limit.
	AbsoluteLimitMilliCelsius int64
	// GPUThrottleQuiet is how long a GPU must have gone unthrottled before
	// it starting to throttle again is news (a GPUThermalThrottling Event):
	// a GPU hovering at its slowdown temperature flips every few samples.
	GPUThrottleQuiet time.Duration
	// GPUThrottleMinInterval is the least time between two
	// GPUThermalThrottling Events of the node; the GPUs that start
	// throttling in between are named in the next one.
	GPUThrottleMinInterval time.Duration
}

// Defaults of HeatConfig.GPUThrottleQuiet and GPUThrottleMinInterval.
const (
	DefaultGPUThrottleQuiet       = 5 * time.Minute
	DefaultGPUThrottleMinInterval = 30 * time.Second
)

// DefaultHeatConfig returns the defaults, the same as EnergyAware's.
func DefaultHeatConfig() HeatConfig {
	return HeatConfig{
		HotHeadroomMilliCelsius:   DefaultHotHeadroomMilliCelsius,
		CoolHeadroomMilliCelsius:  DefaultCoolHeadroomMilliCelsius,
		AbsoluteLimitMilliCelsius: heat.DefaultAbsoluteLimitMilliCelsius,
		GPUThrottleQuiet:          DefaultGPUThrottleQuiet,
		GPUThrottleMinInterval:    DefaultGPUThrottleMinInterval,
	}
}

// Validate reports a HeatConfig that cannot work.
func (c HeatConfig) Validate() error {
	if c.HotHeadroomMilliCelsius < 0 {
		return fmt.Errorf("hot headroom %dm°C must not be negative", c.HotHeadroomMilliCelsius)
	}
	if c.CoolHeadroomMilliCelsius < c.HotHeadroomMilliCelsius {
		return fmt.Errorf("cool headroom %dm°C must be at least the hot headroom %dm°C", c.CoolHeadroomMilliCelsius, c.HotHeadroomMilliCelsius)
	}
	if c.AbsoluteLimitMilliCelsius < 30_000 || c.AbsoluteLimitMilliCelsius > 150_000 {
		return fmt.Errorf("absolute limit %dm°C must be 30°C to 150°C (EnergyAware's absoluteLimitCelsius range)", c.AbsoluteLimitMilliCelsius)
	}
	if c.GPUThrottleQuiet < 0 || c.GPUThrottleMinInterval < 0 {
		return fmt.Errorf("GPU throttle quiet period %v and event interval %v must not be negative", c.GPUThrottleQuiet, c.GPUThrottleMinInterval)
	}
	return nil
}

// HeatState is the node's heat after one sample.
type HeatState struct {
	// Known is false when the node has neither temperature sensors nor CPU
	// throttle counters.
	Known bool
	Hot   bool
	// Changed is true when Hot flipped with this sample.
	Changed bool
	// Headroom is the node's effective headroom in this sample.
	Headroom heat.Headroom
	Reason   string
	Message  string
}

// HeatTracker follows a node's heat from sample to sample.
type HeatTracker struct {
	cfg HeatConfig
	hot bool
}

// NewHeatTracker returns a tracker; cfg must be valid.
func NewHeatTracker(cfg HeatConfig) *HeatTracker {
	return &HeatTracker{cfg: cfg}
}

// Update takes the thermal status and CPU throttle state of a sample.
func (h *HeatTracker) Update(th *telemetryv1alpha1.ThermalStatus, cpu *telemetryv1alpha1.CPUStatus) HeatState {
	throttling := (cpu != nil && cpu.ThermalThrottle != nil && cpu.ThermalThrottle.Throttling) || (th != nil && th.Throttling)
	hr := heat.OfStatus(th, h.cfg.AbsoluteLimitMilliCelsius)
	if !hr.Known && !throttling && (cpu == nil || cpu.ThermalThrottle == nil) {
		st := HeatState{Known: false, Hot: false, Changed: h.hot, Reason: ReasonNoThermalData,
			Message: "no temperature sensor and no CPU throttle counters on this node"}
		h.hot = false
		return st
	}
	was := h.hot
	switch {
	case throttling, hr.TooHot(h.cfg.HotHeadroomMilliCelsius):
		h.hot = true
	case !hr.Known || hr.MilliCelsius >= h.cfg.CoolHeadroomMilliCelsius:
		h.hot = false
	}
	st := HeatState{Known: true, Hot: h.hot, Changed: h.hot != was, Headroom: hr}
	switch {
	case throttling:
		st.Reason = ReasonThermalThrottling
		st.Message = "the node's CPUs are thermally throttling"
		if hr.Known {
			st.Message += "; " + hr.String()
		}
	case h.hot:
		st.Reason = ReasonNearThermalLimit
		st.Message = fmt.Sprintf("%s; hot at %s headroom or less, cool again at %s", hr, celsius(h.cfg.HotHeadroomMilliCelsius), celsius(h.cfg.CoolHeadroomMilliCelsius))
	case hr.Known:
		st.Reason = ReasonWithinLimits
		st.Message = hr.String()
	default:
		st.Reason = ReasonWithinLimits
		st.Message = "no CPU thermal throttling; no temperature sensor"
	}
	if th != nil && th.Alarms > 0 {
		st.Message += fmt.Sprintf("; %d sensor alarm(s) raised (%s), not counted as heat: some alarms stay raised until reboot", th.Alarms, alarmed(th))
	}
	return st
}

// alarmed names the listed sensors with an alarm raised.
func alarmed(th *telemetryv1alpha1.ThermalStatus) string {
	var names []string
	for _, s := range th.Sensors {
		if s.Alarm {
			names = append(names, s.Name)
		}
	}
	if len(names) == 0 {
		return "not among the listed sensors"
	}
	return strings.Join(names, ", ")
}

func celsius(milli int64) string { return heat.Celsius(milli) }

// GPUThrottleTracker reports GPUs that start thermal throttling, with
// hysteresis and a rate limit. A GPU starts an episode when it throttles
// after at least Quiet without throttling, and the episode lasts while it
// keeps throttling within Quiet of its last throttled sample. The starts
// are reported together, at most once every MinInterval; those that come
// in between wait for the next report. One 8-GPU node hovering at its
// slowdown temperature, flipping every other 1 s sample, would otherwise
// record 240 Events a minute; it records one or two.
type GPUThrottleTracker struct {
	Quiet, MinInterval time.Duration
	// last is when each GPU (by UUID) was last seen throttled; a GPU whose
	// last is lastUpdate throttled in the previous sample.
	last       map[string]time.Time
	lastUpdate time.Time
	// pending are the starts not reported yet, by UUID.
	pending    []telemetryv1alpha1.GPUStatus
	lastReport time.Time
}

// Update returns the GPUs whose throttling episodes started since the last
// report, when a report is due at now.
func (t *GPUThrottleTracker) Update(now time.Time, gpus []telemetryv1alpha1.GPUStatus) []telemetryv1alpha1.GPUStatus {
	if t.last == nil {
		t.last = map[string]time.Time{}
	}
	for _, g := range gpus {
		if !GPUThermallyThrottled(g) {
			continue
		}
		last, ok := t.last[g.UUID]
		if throttledBefore := ok && last.Equal(t.lastUpdate); !throttledBefore && (!ok || now.Sub(last) >= t.Quiet) {
			if i := slices.IndexFunc(t.pending, func(p telemetryv1alpha1.GPUStatus) bool { return p.UUID == g.UUID }); i >= 0 {
				t.pending[i] = g
			} else {
				t.pending = append(t.pending, g)
			}
		}
		t.last[g.UUID] = now
	}
	t.lastUpdate = now
	for uuid, last := range t.last {
		if now.Sub(last) > t.Quiet {
			delete(t.last, uuid) // its episode is over; a GPU gone is forgotten
		}
	}
	if len(t.pending) == 0 || (!t.lastReport.IsZero() && now.Sub(t.lastReport) < t.MinInterval) {
		return nil
	}
	out := t.pending
	t.pending, t.lastReport = nil, now
	return out
}

// GPUThermallyThrottled reports whether a GPU's clocks are held down for heat.
func GPUThermallyThrottled(g telemetryv1alpha1.GPUStatus) bool {
	return slices.Contains(g.ThrottleReasons, telemetryv1alpha1.GPUThrottleSwThermalSlowdown) ||
		slices.Contains(g.ThrottleReasons, telemetryv1alpha1.GPUThrottleHwThermalSlowdown)
}

// GPUTemperature formats a GPU's temperature for messages.
func GPUTemperature(g telemetryv1alpha1.GPUStatus) string {
	if g.TemperatureMilliCelsius == nil {
		return "unknown temperature"
	}
	s := celsius(*g.TemperatureMilliCelsius)
	if g.SlowdownMilliCelsius != nil {
		s += fmt.Sprintf(" (slowdown at %s)", celsius(*g.SlowdownMilliCelsius))
	}
	return s
}
