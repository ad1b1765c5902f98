// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package heat is telesched's one definition of "too hot". The agent's
// Overheating condition, its heat Events and metrics, EnergyAware's filter
// and thermal score, and the sandbox's report all judge a node with it, and
// the alert rules in deploy/monitoring state it in PromQL.
//
// Every temperature sensor counts. A sensor's effective limit is its
// critical limit, else its max limit, else a limit its vendor publishes for
// the part (the agent's table), else the absolute limit (90°C unless
// configured). The node's headroom is the smallest distance from a sensor's
// temperature up to its effective limit, and a node is too hot when that
// headroom is at or below the margin (5°C unless configured), or when its
// CPUs were thermally throttled during the last interval.
//
// A sensor alarm is not heat: some alarms are sticky until reboot (coretemp's
// tempN_crit_alarm, Documentation/hwmon/coretemp.rst), so alarms are
// published and counted but never make a node too hot on their own.
package heat

import (
	"fmt"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// Defaults shared by the agent (--absolute-limit-celsius,
// --overheat-headroom-celsius) and EnergyAware (absoluteLimitCelsius,
// thermalMarginCelsius).
const (
	DefaultAbsoluteLimitMilliCelsius int64 = 90_000
	DefaultMarginMilliCelsius        int64 = 5_000
)

// Headroom is a node's effective thermal headroom.
type Headroom struct {
	// Known is false when the node has no temperature sensor.
	Known bool
	// MilliCelsius is the smallest distance from a sensor up to its
	// effective limit; negative past the limit.
	MilliCelsius int64
	// Sensor, its temperature and its effective limit.
	Sensor     string
	TempMilli  int64
	LimitMilli int64
	// Absolute is true when the limit is the absolute limit (the sensor
	// has no limit of its own).
	Absolute bool
}

// Of returns the effective headroom from the two figures the NodeTelemetry
// API carries: the smallest headroom over sensors with a limit
// (headroomMilliCelsius, its sensor and that sensor's temperature) and the
// hottest sensor without one (hottestUnlimited*), held against absolute.
func Of(limited *int64, limitedSensor string, limitedTemp int64, unlimited *int64, unlimitedSensor string, absoluteMilli int64) Headroom {
	var l, u int64
	if limited != nil {
		l = *limited
	}
	if unlimited != nil {
		u = *unlimited
	}
	h, absolute, ok := Effective(limited != nil, l, unlimited != nil, u, absoluteMilli)
	switch {
	case !ok:
		return Headroom{}
	case absolute:
		return Headroom{Known: true, MilliCelsius: h, Sensor: unlimitedSensor, TempMilli: u, LimitMilli: absoluteMilli, Absolute: true}
	}
	return Headroom{Known: true, MilliCelsius: h, Sensor: limitedSensor, TempMilli: limitedTemp, LimitMilli: limitedTemp + l}
}

// Effective is the arithmetic of Of on plain numbers, for hot paths: the
// smaller of the limited headroom and absoluteMilli minus the hottest
// unlimited temperature; absolute is true when the latter is the smaller.
// ok is false when the node has neither.
func Effective(hasLimited bool, limitedHeadroom int64, hasUnlimited bool, unlimitedTemp int64, absoluteMilli int64) (headroom int64, absolute, ok bool) {
	switch {
	case hasUnlimited && (!hasLimited || absoluteMilli-unlimitedTemp < limitedHeadroom):
		return absoluteMilli - unlimitedTemp, true, true
	case hasLimited:
		return limitedHeadroom, false, true
	}
	return 0, false, false
}

// OfStatus is Of for a published thermal status; Known is false for nil.
func OfStatus(th *telemetryv1alpha1.ThermalStatus, absoluteMilli int64) Headroom {
	if th == nil {
		return Headroom{}
	}
	var limitedTemp int64
	if th.HeadroomMilliCelsius != nil {
		limitedTemp = SensorTemp(th, th.HeadroomSensor)
	}
	return Of(th.HeadroomMilliCelsius, th.HeadroomSensor, limitedTemp, th.HottestUnlimitedMilliCelsius, th.HottestUnlimitedSensor, absoluteMilli)
}

// SensorTemp is a listed sensor's temperature; the hottest temperature
// when the sensor is not listed (the agent always lists the sensor with the
// smallest headroom, so this is a fallback for hand-written objects).
func SensorTemp(th *telemetryv1alpha1.ThermalStatus, name string) int64 {
	for _, s := range th.Sensors {
		if s.Name == name {
			return s.MilliCelsius
		}
	}
	return th.HottestMilliCelsius
}

// TooHot reports whether a headroom is at or below the margin.
func (h Headroom) TooHot(marginMilli int64) bool {
	return h.Known && h.MilliCelsius <= marginMilli
}

// String is the headroom and where it comes from, e.g. "headroom -5.0°C:
// k10temp/Tctl at 95.0°C, absolute limit 90.0°C as it reports none".
func (h Headroom) String() string {
	if !h.Known {
		return "no temperature sensor"
	}
	return "headroom " + Celsius(h.MilliCelsius) + ": " + h.Where()
}

// Where names the sensor the headroom belongs to, its temperature and its
// limit.
func (h Headroom) Where() string {
	if h.Absolute {
		return fmt.Sprintf("%s at %s, absolute limit %s as it reports none", h.Sensor, Celsius(h.TempMilli), Celsius(h.LimitMilli))
	}
	return fmt.Sprintf("%s at %s, limit %s", h.Sensor, Celsius(h.TempMilli), Celsius(h.LimitMilli))
}

// Celsius formats millidegrees as "71.5°C".
func Celsius(milli int64) string {
	return fmt.Sprintf("%.1f°C", float64(milli)/1000)
}

// Verdict is the one "too hot for a pod" rule that EnergyAware's filter,
// its hints and the sandbox's report apply: CPUs thermally throttled in
// the last interval (when throttling counts), or an effective headroom at
// or below the margin. Reason is "" when the node is not too hot, and
// carries the numbers when it is.
func Verdict(throttling, rejectThrottling bool, h Headroom, marginMilli int64) (tooHot bool, reason string) {
	switch {
	case rejectThrottling && throttling:
		return true, "node's CPUs are thermally throttling"
	case h.TooHot(marginMilli):
		return true, fmt.Sprintf("node thermal headroom %s <= margin %s (%s)", Celsius(h.MilliCelsius), Celsius(marginMilli), h.Where())
	}
	return false, ""
}
