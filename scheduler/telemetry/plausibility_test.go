// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// plausibleStatus is a 16-core node drawing watts, with a curve from 100 W
// idle to 900 W at full load.
func plausibleStatus(watts int32, curve []int32) *telemetryv1alpha1.NodeTelemetryStatus {
	return &telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime: metavNow(), IntervalSeconds: 5,
		CPU: &telemetryv1alpha1.CPUStatus{LogicalCores: 16, OnlineCores: 16, UtilizationPercent: 40},
		Power: &telemetryv1alpha1.PowerStatus{Watts: watts, Sources: []telemetryv1alpha1.PowerSource{"rapl"}, Model: &telemetryv1alpha1.PowerModel{
			Ready: true, Basis: telemetryv1alpha1.PowerModelFitted, IdleWatts: ptr.To(curve[0]), FullLoadWatts: ptr.To(curve[10]),
			CurveWatts: curve, CurveUncertaintyWatts: make([]int32, CurveKnots)}},
	}
}

var straight = []int32{100, 180, 260, 340, 420, 500, 580, 660, 740, 820, 900}

func TestVet(t *testing.T) {
	RegisterMetrics()
	for _, tc := range []struct {
		name      string
		st        *telemetryv1alpha1.NodeTelemetryStatus
		wantCurve bool
		wantPower bool
		rejected  string // substring; "" for none
		what      string // the counter's label
	}{
		{"plausible", plausibleStatus(500, straight), true, true, "", ""},
		// envelope: 900 W at full load x 1.5 = 1350 W
		{"at the envelope", plausibleStatus(1350, straight), true, true, "", ""},
		{"beyond the envelope", plausibleStatus(1351, straight), true, false, "watts: 1351 W (GPUs 0 W) beyond the node's envelope of 1350 W", "watts"},
		{"a megawatt", plausibleStatus(1_000_000, straight), true, false, "beyond the node's envelope of 1350 W", "watts"},
		{"falling curve", plausibleStatus(500, []int32{100, 180, 260, 340, 420, 500, 0, 0, 0, 0, 0}), false, true,
			"power curve: watts fall from 500 at 50% to 0 at 60%", "power_curve"},
		// without a curve the envelope is the largest node's, 15000 W
		{"oversized curve", plausibleStatus(500, []int32{100, 180, 260, 340, 420, 500, 580, 660, 740, 820, 20000}), false, true,
			"power curve: watts at 100% (20000) exceed the node's envelope of 15000 W", "power_curve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCacheWithClock(func() time.Time { return now })
			before := counter(t, tc.what)
			n := c.Set(FromStatus("n", tc.st))
			hasCurve := n.Models != nil && n.Models.CurveBasis != BasisNone
			if hasCurve != tc.wantCurve || n.HasPower != tc.wantPower {
				t.Errorf("curve %v, power %v; want %v, %v", hasCurve, n.HasPower, tc.wantCurve, tc.wantPower)
			}
			if (tc.rejected == "") != (n.Rejected == "") || !strings.Contains(n.Rejected, tc.rejected) {
				t.Errorf("Rejected = %q, want %q", n.Rejected, tc.rejected)
			}
			if tc.what != "" {
				if got := counter(t, tc.what) - before; got != 1 {
					t.Errorf("telesched_scheduler_telemetry_rejected_total{what=%q} rose by %v, want 1", tc.what, got)
				}
			}
		})
	}
}

func counter(t *testing.T, what string) float64 {
	t.Helper()
	if what == "" {
		return 0
	}
	v, err := testutil.GetCounterMetricValue(rejected.WithLabelValues(what))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A sample without watts, or with watts refused, carries the node's last
// plausible watts and when they were seen; PowerAt uses them for the hold.
func TestLastWattsCarried(t *testing.T) {
	at := now
	c := NewCacheWithClock(func() time.Time { return at })
	c.Set(FromStatus("n", plausibleStatus(500, straight)))
	at = now.Add(5 * time.Second)
	st := plausibleStatus(0, straight)
	st.SampleTime = metavAt(at)
	st.Power = nil
	n := c.Set(FromStatus("n", st))
	if n.HasPower || !n.HasLastWatts || n.LastWatts != 500 || !n.LastWattsObserved.Equal(now) {
		t.Fatalf("without power: HasPower %v, last %v %d W at %v; want the 500 W seen at %v", n.HasPower, n.HasLastWatts, n.LastWatts, n.LastWattsObserved, now)
	}
	for _, tc := range []struct {
		at       time.Duration
		ok, held bool
	}{{5 * time.Second, true, true}, {DefaultPowerHold, true, true}, {DefaultPowerHold + time.Second, false, false}} {
		if w, held, ok := n.PowerAt(now.Add(tc.at), 10*time.Minute, DefaultPowerHold); ok != tc.ok || held != tc.held || (ok && w != 500) {
			t.Errorf("PowerAt(+%v) = %d W, held %v, ok %v; want 500, %v, %v", tc.at, w, held, ok, tc.held, tc.ok)
		}
	}
	at = now.Add(10 * time.Second)
	st = plausibleStatus(1_000_000, straight)
	st.SampleTime = metavAt(at)
	if n := c.Set(FromStatus("n", st)); n.LastWatts != 500 || !n.LastWattsObserved.Equal(now) {
		t.Errorf("after a refused reading: last %d W at %v, want the 500 W seen at %v", n.LastWatts, n.LastWattsObserved, now)
	}
}

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func metavNow() metav1.Time           { return metav1.NewTime(now) }
func metavAt(t time.Time) metav1.Time { return metav1.NewTime(t) }
