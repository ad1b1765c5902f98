// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"time"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// Windows is a node's window summary (status.windows): percentiles of the
// samples its agent took over its --window.
type Windows struct {
	Duration time.Duration
	Samples  int32
	// CPU and Memory are utilization in percent, Watts the node's power;
	// each Known only when published and plausible.
	CPU, Memory, Watts Percentiles
	// MarginCelsius is the thermal margin in whole °C.
	MarginCelsius Margin
}

// Percentiles summarize a series whose high tail matters.
type Percentiles struct {
	P50, P90, Max int32
	Known         bool
}

// Margin summarizes a series whose low tail matters.
type Margin struct {
	Min, P10, P50 int32
	Known         bool
}

// windowsFrom reads status.windows; nil when absent or when no series in it
// is plausible. A series whose percentiles are out of order (p50 > p90 >
// max, or min > p10 > p50), or a percentage past 100, breaks arithmetic
// and is left unknown: the consumer falls back to the instant value.
func windowsFrom(st *telemetryv1alpha1.NodeTelemetryStatus) *Windows {
	w := st.Windows
	if w == nil {
		return nil
	}
	out := &Windows{
		Duration: time.Duration(w.DurationSeconds) * time.Second,
		Samples:  w.Samples,
		CPU:      percentiles(w.CPUPercent, 100),
		Memory:   percentiles(w.MemoryPercent, 100),
		Watts:    percentiles(w.Watts, 1_000_000),
	}
	if m := w.ThermalMarginCelsius; m != nil && m.Min <= m.P10 && m.P10 <= m.P50 {
		out.MarginCelsius = Margin{Min: m.Min, P10: m.P10, P50: m.P50, Known: true}
	}
	if !out.CPU.Known && !out.Memory.Known && !out.Watts.Known && !out.MarginCelsius.Known {
		return nil
	}
	return out
}

func percentiles(u *telemetryv1alpha1.UsageWindow, limit int32) Percentiles {
	if u == nil || u.P50 < 0 || u.P50 > u.P90 || u.P90 > u.Max || u.Max > limit {
		return Percentiles{}
	}
	return Percentiles{P50: u.P50, P90: u.P90, Max: u.Max, Known: true}
}
