// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package window_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/window"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

const absolute = 90_000

// status is a sample with cpu% = memory% = v, watts = 10v and a sensor
// with a limit at headroom v°C; a negative v leaves the thermal and power
// sources out.
func status(v int32) *telemetryv1alpha1.NodeTelemetryStatus {
	st := &telemetryv1alpha1.NodeTelemetryStatus{
		CPU:    &telemetryv1alpha1.CPUStatus{UtilizationPercent: v},
		Memory: &telemetryv1alpha1.MemoryStatus{UtilizationPercent: v},
	}
	if v >= 0 {
		st.Thermal = &telemetryv1alpha1.ThermalStatus{HottestSensor: "coretemp/Package id 0", HottestMilliCelsius: 100_000 - int64(v)*1000,
			HeadroomSensor: "coretemp/Package id 0", HeadroomMilliCelsius: ptr.To(int64(v) * 1000)}
		st.Power = &telemetryv1alpha1.PowerStatus{Watts: 10 * v, Sources: []telemetryv1alpha1.PowerSource{telemetryv1alpha1.PowerSourceRAPL}}
	}
	return st
}

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		name     string
		duration time.Duration
		values   []int32 // one a second, the last at t0
		want     *telemetryv1alpha1.WindowsStatus
	}{
		{
			// 1..100 shuffled: nearest rank p50 = 50th value = 50, p90 = 90,
			// p10 = 10, max 100, min 1.
			name:     "percentiles of 1..100",
			duration: 100 * time.Second,
			values:   shuffled(100),
			want: &telemetryv1alpha1.WindowsStatus{DurationSeconds: 100, Samples: 100,
				CPUPercent:           &telemetryv1alpha1.UsageWindow{P50: 50, P90: 90, Max: 100},
				MemoryPercent:        &telemetryv1alpha1.UsageWindow{P50: 50, P90: 90, Max: 100},
				ThermalMarginCelsius: &telemetryv1alpha1.MarginWindow{Min: 1, P10: 10, P50: 50},
				Watts:                &telemetryv1alpha1.UsageWindow{P50: 500, P90: 900, Max: 1000}},
		},
		{
			// 10 samples: a spike of one sample to 95 leaves p90 (9th of 10)
			// at 20; max shows it.
			name:     "a short spike moves max, not p90",
			duration: 10 * time.Second,
			values:   []int32{20, 20, 20, 20, 95, 20, 20, 20, 20, 20},
			want: &telemetryv1alpha1.WindowsStatus{DurationSeconds: 10, Samples: 10,
				CPUPercent:           &telemetryv1alpha1.UsageWindow{P50: 20, P90: 20, Max: 95},
				MemoryPercent:        &telemetryv1alpha1.UsageWindow{P50: 20, P90: 20, Max: 95},
				ThermalMarginCelsius: &telemetryv1alpha1.MarginWindow{Min: 20, P10: 20, P50: 20},
				Watts:                &telemetryv1alpha1.UsageWindow{P50: 200, P90: 200, Max: 950}},
		},
		{
			// Ring of 4: 20 samples in, only the last 4 (17..20) remain.
			name:     "the ring keeps only its capacity",
			duration: 4 * time.Second,
			values:   seq(1, 20),
			want: &telemetryv1alpha1.WindowsStatus{DurationSeconds: 4, Samples: 4,
				CPUPercent:           &telemetryv1alpha1.UsageWindow{P50: 18, P90: 20, Max: 20},
				MemoryPercent:        &telemetryv1alpha1.UsageWindow{P50: 18, P90: 20, Max: 20},
				ThermalMarginCelsius: &telemetryv1alpha1.MarginWindow{Min: 17, P10: 17, P50: 18},
				Watts:                &telemetryv1alpha1.UsageWindow{P50: 180, P90: 200, Max: 200}},
		},
		{
			// Ring of 10 needs 5 samples of a series; 4 is too few.
			name:     "too few samples: absent",
			duration: 10 * time.Second,
			values:   []int32{1, 2, 3, 4},
			want:     nil,
		},
		{
			// 10 samples, thermal and power in only the first 4: too few,
			// absent rather than zero; cpu and memory in all 10.
			name:     "a series whose source is missing is absent",
			duration: 10 * time.Second,
			values:   []int32{5, 5, 5, 5, -1, -1, -1, -1, -1, -1},
			want: &telemetryv1alpha1.WindowsStatus{DurationSeconds: 10, Samples: 10,
				CPUPercent:    &telemetryv1alpha1.UsageWindow{P50: -1, P90: 5, Max: 5},
				MemoryPercent: &telemetryv1alpha1.UsageWindow{P50: -1, P90: 5, Max: 5}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := window.New(tc.duration, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			now := t0.Add(-time.Duration(len(tc.values)) * time.Second)
			for _, v := range tc.values {
				now = now.Add(time.Second)
				w.Add(now, status(v), absolute)
			}
			if diff := cmp.Diff(tc.want, w.Summary(now)); diff != "" {
				t.Errorf("Summary (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSummaryDropsOldSamples: samples older than the window do not count,
// though the ring still holds them (the agent paused, or samples failed).
func TestSummaryDropsOldSamples(t *testing.T) {
	w, err := window.New(10*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		w.Add(t0.Add(time.Duration(i)*time.Second), status(90), absolute)
	}
	// 5 samples at 10, 15s after the last 90: the 90s are out of the window.
	for i := range 5 {
		w.Add(t0.Add(time.Duration(24+i)*time.Second), status(10), absolute)
	}
	got := w.Summary(t0.Add(28 * time.Second))
	want := &telemetryv1alpha1.UsageWindow{P50: 10, P90: 10, Max: 10}
	if got == nil {
		t.Fatal("Summary is nil, want the 5 recent samples summarized")
	}
	if diff := cmp.Diff(int32(5), got.Samples); diff != "" {
		t.Errorf("Samples (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, got.CPUPercent); diff != "" {
		t.Errorf("CPUPercent (-want +got):\n%s", diff)
	}
}

// TestCapacityBounded: the ring is duration/interval samples, whatever is
// added.
func TestCapacityBounded(t *testing.T) {
	w, err := window.New(5*time.Minute, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10_000 {
		w.Add(t0.Add(time.Duration(i)*time.Second), status(int32(i%100)), absolute)
	}
	if diff := cmp.Diff(300, w.Capacity()); diff != "" {
		t.Errorf("Capacity (-want +got):\n%s", diff)
	}
	if got := w.Summary(t0.Add(9999 * time.Second)); got == nil || got.Samples != 300 {
		t.Errorf("Summary holds %v samples, want 300", got)
	}
}

func TestThermalMarginRoundsDown(t *testing.T) {
	// Headroom -0.5°C and 3.7°C: whole degrees rounded down, -1 and 3.
	w, err := window.New(2*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, milli := range []int64{-500, 3_700} {
		st := status(0)
		st.Thermal.HeadroomMilliCelsius = ptr.To(milli)
		w.Add(t0.Add(time.Duration(i)*time.Second), st, absolute)
	}
	want := &telemetryv1alpha1.MarginWindow{Min: -1, P10: -1, P50: -1}
	if diff := cmp.Diff(want, w.Summary(t0.Add(time.Second)).ThermalMarginCelsius); diff != "" {
		t.Errorf("ThermalMarginCelsius (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		duration time.Duration
		interval time.Duration
		want     string
	}{
		{name: "default", duration: window.DefaultDuration, interval: time.Second},
		{name: "two samples", duration: 2 * time.Second, interval: time.Second},
		{name: "one sample", duration: 1500 * time.Millisecond, interval: time.Second, want: "must hold at least two samples"},
		{name: "too many samples", duration: 2 * time.Hour, interval: time.Second, want: "more than 3600"},
		{name: "too long", duration: 25 * time.Hour, interval: time.Hour, want: "at most 24h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := window.Validate(tc.duration, tc.interval)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Validate(%v, %v) = %q, want an error containing %q", tc.duration, tc.interval, got, tc.want)
			}
		})
	}
}

func seq(from, to int32) []int32 {
	var v []int32
	for i := from; i <= to; i++ {
		v = append(v, i)
	}
	return v
}

// shuffled is 1..n in a fixed scrambled order (37 is prime to 100).
func shuffled(n int32) []int32 {
	v := make([]int32, n)
	for i := range n {
		v[i] = (i*37)%n + 1
	}
	return v
}
