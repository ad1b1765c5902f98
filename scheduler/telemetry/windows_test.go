// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

func TestFromStatusReadsWindows(t *testing.T) {
	full := func() *telemetryv1alpha1.WindowsStatus {
		return &telemetryv1alpha1.WindowsStatus{DurationSeconds: 300, Samples: 290,
			CPUPercent:           &telemetryv1alpha1.UsageWindow{P50: 40, P90: 70, Max: 95},
			MemoryPercent:        &telemetryv1alpha1.UsageWindow{P50: 50, P90: 55, Max: 60},
			ThermalMarginCelsius: &telemetryv1alpha1.MarginWindow{Min: 3, P10: 8, P50: 20},
			Watts:                &telemetryv1alpha1.UsageWindow{P50: 300, P90: 420, Max: 510}}
	}
	for _, tc := range []struct {
		name    string
		windows func() *telemetryv1alpha1.WindowsStatus
		want    *Windows
	}{
		{name: "absent", windows: func() *telemetryv1alpha1.WindowsStatus { return nil }, want: nil},
		{name: "every series", windows: full, want: &Windows{Duration: 5 * time.Minute, Samples: 290,
			CPU:           Percentiles{P50: 40, P90: 70, Max: 95, Known: true},
			Memory:        Percentiles{P50: 50, P90: 55, Max: 60, Known: true},
			Watts:         Percentiles{P50: 300, P90: 420, Max: 510, Known: true},
			MarginCelsius: Margin{Min: 3, P10: 8, P50: 20, Known: true}}},
		{name: "only cpu", windows: func() *telemetryv1alpha1.WindowsStatus {
			w := full()
			w.MemoryPercent, w.ThermalMarginCelsius, w.Watts = nil, nil, nil
			return w
		}, want: &Windows{Duration: 5 * time.Minute, Samples: 290, CPU: Percentiles{P50: 40, P90: 70, Max: 95, Known: true}}},
		{name: "percentiles out of order and a percentage past 100 are unknown", windows: func() *telemetryv1alpha1.WindowsStatus {
			w := full()
			w.CPUPercent.P90 = 99                                            // p90 99 > max 95
			w.MemoryPercent.Max = 150                                        // not a percentage
			w.ThermalMarginCelsius.Min = 9                                   // min 9 > p10 8
			w.Watts = &telemetryv1alpha1.UsageWindow{P50: 1, P90: 2, Max: 3} // plausible
			return w
		}, want: &Windows{Duration: 5 * time.Minute, Samples: 290, Watts: Percentiles{P50: 1, P90: 2, Max: 3, Known: true}}},
		{name: "nothing plausible", windows: func() *telemetryv1alpha1.WindowsStatus {
			w := full()
			w.CPUPercent.P50 = 80 // p50 80 > p90 70
			w.MemoryPercent, w.ThermalMarginCelsius, w.Watts = nil, nil, nil
			return w
		}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := FromStatus("n", &telemetryv1alpha1.NodeTelemetryStatus{Windows: tc.windows()})
			if diff := cmp.Diff(tc.want, n.Windows); diff != "" {
				t.Errorf("Windows (-want +got):\n%s", diff)
			}
		})
	}
}
