package status

import (
	"fmt"
	"slices"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// Defaults for HeatConfig.
const (
	DefaultHotHeadroomMilliCelsius  = 5_000
	DefaultCoolHeadroomMilliCelsius = 8_000
)

// HeatConfig sets when a node counts as overheating. The gap between the
// two headrooms is the hysteresis that keeps the state, the Overheating
// condition and the Events from flapping around one threshold.
type HeatConfig struct {
	// HotHeadroomMilliCelsius: the node becomes hot when its thermal
	// headroom falls to this or below.
	HotHeadroomMilliCelsius int64
	// CoolHeadroomMilliCelsius: a hot node cools when its headroom is back
	// at this or above and nothing throttles. It must not be below
	// HotHeadroomMilliCelsius.
	CoolHeadroomMilliCelsius int64
}

// Validate reports a HeatConfig that cannot work.
func (c HeatConfig) Validate() error {
	if c.HotHeadroomMilliCelsius < 0 {
		return fmt.Errorf("hot headroom %dm°C must not be negative", c.HotHeadroomMilliCelsius)
	}
	if c.CoolHeadroomMilliCelsius < c.HotHeadroomMilliCelsius {
		return fmt.Errorf("cool headroom %dm°C must be at least the hot headroom %dm°C", c.CoolHeadroomMilliCelsius, c.HotHeadroomMilliCelsius)
	}
	return nil
}

// HeatState is the node's heat after one sample.
type HeatState struct {
	// Known is false when the node has neither sensors with limits nor CPU
	// throttle counters.
	Known bool
	Hot   bool
	// Changed is true when Hot flipped with this sample.
	Changed bool
	Reason  string
	Message string
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
	cpuThrottling := cpu != nil && cpu.ThermalThrottle != nil && cpu.ThermalThrottle.Throttling
	throttling := cpuThrottling || (th != nil && th.Throttling)
	haveHeadroom := th != nil && th.HeadroomMilliCelsius != nil
	if !haveHeadroom && !throttling && (cpu == nil || cpu.ThermalThrottle == nil) {
		st := HeatState{Known: false, Hot: false, Changed: h.hot, Reason: ReasonNoThermalData,
			Message: "no temperature sensor with a limit and no CPU throttle counters on this node"}
		h.hot = false
		return st
	}
	was := h.hot
	switch {
	case throttling:
		h.hot = true
	case haveHeadroom && *th.HeadroomMilliCelsius <= h.cfg.HotHeadroomMilliCelsius:
		h.hot = true
	case !haveHeadroom || *th.HeadroomMilliCelsius >= h.cfg.CoolHeadroomMilliCelsius:
		h.hot = false
	}
	st := HeatState{Known: true, Hot: h.hot, Changed: h.hot != was}
	switch {
	case throttling:
		st.Reason = ReasonThermalThrottling
		st.Message = "the node is thermally throttling"
		if th != nil {
			st.Message += "; " + describeHottest(th)
		}
	case h.hot:
		st.Reason = ReasonNearThermalLimit
		st.Message = fmt.Sprintf("%s; hot at %s headroom or less", describeHottest(th), celsius(h.cfg.HotHeadroomMilliCelsius))
	case haveHeadroom:
		st.Reason = ReasonWithinLimits
		st.Message = describeHottest(th)
	default:
		st.Reason = ReasonWithinLimits
		st.Message = "no CPU thermal throttling; no sensor reports a limit"
	}
	return st
}

func describeHottest(th *telemetryv1alpha1.ThermalStatus) string {
	msg := fmt.Sprintf("hottest sensor %s at %s", th.HottestSensor, celsius(th.HottestMilliCelsius))
	if th.HeadroomMilliCelsius != nil {
		msg += fmt.Sprintf(", smallest headroom to a limit %s", celsius(*th.HeadroomMilliCelsius))
	}
	return msg
}

func celsius(milli int64) string {
	return fmt.Sprintf("%.1f°C", float64(milli)/1000)
}

// GPUThrottleTracker reports GPUs that start thermal throttling.
type GPUThrottleTracker struct {
	throttling map[string]bool // by UUID
}

// Update returns the GPUs that are thermally throttled now and were not in
// the previous sample.
func (t *GPUThrottleTracker) Update(gpus []telemetryv1alpha1.GPUStatus) []telemetryv1alpha1.GPUStatus {
	now := make(map[string]bool, len(gpus))
	var started []telemetryv1alpha1.GPUStatus
	for _, g := range gpus {
		if !GPUThermallyThrottled(g) {
			continue
		}
		now[g.UUID] = true
		if !t.throttling[g.UUID] {
			started = append(started, g)
		}
	}
	t.throttling = now
	return started
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
