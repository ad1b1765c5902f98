// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// TestTaintSetAtMarginClearedAfterHold: the taint is set by the sample at
// or below the margin (5°C), stays while the node is hot or inside the
// hysteresis band (5 to 8°C), and is removed only after every sample for
// the hold (60s here) is at or above margin + hysteresis (8°C); a sample
// back inside the band starts the hold again.
func TestTaintSetAtMarginClearedAfterHold(t *testing.T) {
	type step struct {
		at         time.Duration // since the first sample
		headroom   int64         // m°C; -1: no thermal data
		throttling bool
		want       bool // tainted
		changed    bool
		reason     string
	}
	for _, tc := range []struct {
		name    string
		hold    time.Duration
		tainted bool // the Node's taint at start
		steps   []step
	}{{
		name: "set at the margin, held through a brief dip, cleared after the hold",
		hold: 60 * time.Second,
		steps: []step{
			{at: 0, headroom: 20_000, want: false, reason: ReasonWithinLimits},
			{at: 10 * time.Second, headroom: 6_000, want: false, reason: ReasonWithinLimits}, // above the 5°C margin
			{at: 20 * time.Second, headroom: 5_000, want: true, changed: true, reason: ReasonNearThermalLimit},
			{at: 30 * time.Second, headroom: 9_000, want: true, reason: ReasonCooledDown},                  // cool: the hold starts at 30s
			{at: 50 * time.Second, headroom: 7_000, want: true, reason: ReasonNearThermalLimit},            // a dip into the band: the hold starts again
			{at: 60 * time.Second, headroom: 9_000, want: true, reason: ReasonCooledDown},                  // cool again: the hold starts at 60s
			{at: 110 * time.Second, headroom: 12_000, want: true, reason: ReasonCooledDown},                // 50s < 60s
			{at: 120 * time.Second, headroom: 8_000, want: false, changed: true, reason: ReasonCooledDown}, // 60s at >= 8°C
			{at: 130 * time.Second, headroom: 7_000, want: false, reason: ReasonWithinLimits},              // in the band, never hot again
		},
	}, {
		name: "a hot sample during the hold sets it back",
		hold: 60 * time.Second,
		steps: []step{
			{at: 0, headroom: 4_000, want: true, changed: true, reason: ReasonNearThermalLimit},
			{at: 10 * time.Second, headroom: 10_000, want: true, reason: ReasonCooledDown},
			{at: 40 * time.Second, headroom: 3_000, want: true, reason: ReasonNearThermalLimit},
			{at: 50 * time.Second, headroom: 10_000, want: true, reason: ReasonCooledDown},
			{at: 100 * time.Second, headroom: 10_000, want: true, reason: ReasonCooledDown}, // 50s since 50s
			{at: 110 * time.Second, headroom: 10_000, want: false, changed: true, reason: ReasonCooledDown},
		},
	}, {
		name: "throttling CPUs set it whatever the headroom",
		hold: 60 * time.Second,
		steps: []step{
			{at: 0, headroom: 30_000, throttling: true, want: true, changed: true, reason: ReasonThermalThrottling},
			{at: 10 * time.Second, headroom: 30_000, want: true, reason: ReasonCooledDown},
		},
	}, {
		name:    "a restarted agent keeps the Node's taint through the hold",
		hold:    60 * time.Second,
		tainted: true,
		steps: []step{
			{at: 0, headroom: 20_000, want: true, reason: ReasonCooledDown},
			{at: 59 * time.Second, headroom: 20_000, want: true, reason: ReasonCooledDown},
			{at: 60 * time.Second, headroom: 20_000, want: false, changed: true, reason: ReasonCooledDown},
		},
	}, {
		name: "no thermal data counts as cool",
		hold: 60 * time.Second, tainted: true,
		steps: []step{
			{at: 0, headroom: -1, want: true, reason: ReasonCooledDown},
			{at: 60 * time.Second, headroom: -1, want: false, changed: true, reason: ReasonCooledDown},
		},
	}, {
		name: "hold 0 clears at the first cool sample",
		steps: []step{
			{at: 0, headroom: 5_000, want: true, changed: true, reason: ReasonNearThermalLimit},
			{at: 10 * time.Second, headroom: 7_000, want: true, reason: ReasonNearThermalLimit},
			{at: 20 * time.Second, headroom: 8_000, want: false, changed: true, reason: ReasonCooledDown},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultHeatConfig() // hot at 5°C, cool at 8°C
			heat := NewHeatTracker(cfg)
			if tc.tainted {
				// The heat tracker of a restarted agent starts cool too.
				heat.hot = false
			}
			taint := NewTaintTracker(cfg, tc.hold, tc.tainted)
			start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
			type result struct {
				Tainted, Changed bool
				Reason           string
			}
			var want, got []result
			for _, s := range tc.steps {
				var th *telemetryv1alpha1.ThermalStatus
				if s.headroom >= 0 {
					th = &telemetryv1alpha1.ThermalStatus{HottestSensor: "cpu", HottestMilliCelsius: 100_000 - s.headroom,
						HeadroomSensor: "cpu", HeadroomMilliCelsius: ptr.To(s.headroom), Throttling: s.throttling}
				}
				st := taint.Update(start.Add(s.at), heat.Update(th, nil))
				if st.Message == "" {
					t.Errorf("at %v: no message", s.at)
				}
				want = append(want, result{s.want, s.changed, s.reason})
				got = append(got, result{st.Tainted, st.Changed, st.Reason})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("taint per sample (-want +got):\n%s", diff)
			}
		})
	}
}
