// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"fmt"
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

// curveless is a node of cores logical CPUs (none: no CPU section) and
// gpus GPUs, drawing watts, without a power model.
func curveless(watts, cores int32, gpus int) *telemetryv1alpha1.NodeTelemetryStatus {
	st := &telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime: metavNow(), IntervalSeconds: 5,
		Power: &telemetryv1alpha1.PowerStatus{Watts: watts, Sources: []telemetryv1alpha1.PowerSource{"acpi"}},
	}
	if cores > 0 {
		st.CPU = &telemetryv1alpha1.CPUStatus{LogicalCores: cores, OnlineCores: cores, UtilizationPercent: 40}
	}
	for i := range gpus {
		st.GPUs = append(st.GPUs, telemetryv1alpha1.GPUStatus{Index: int32(i), UUID: fmt.Sprintf("GPU-%d", i)})
	}
	return st
}

// uncertain is plausibleStatus with the curve's uncertainty at idle.
func uncertain(watts, idleUncertainty int32) *telemetryv1alpha1.NodeTelemetryStatus {
	st := plausibleStatus(watts, straight)
	st.Power.Model.CurveUncertaintyWatts[0] = idleUncertainty
	return st
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
		// without a curve, 16 cores and no GPUs: 600 W base + 16 x 20 W = 920 W
		{"curveless at its cores' ceiling", curveless(920, 16, 0), false, true, "", ""},
		{"curveless beyond its cores' ceiling", curveless(12000, 16, 0), false, false,
			"watts: 12000 W (GPUs 0 W) beyond the node's envelope of 920 W", "watts"},
		// 2 GPUs without a GPU model: 920 W + 2 x 1200 W = 3320 W
		{"curveless with GPUs, within", curveless(3320, 16, 2), false, true, "", ""},
		{"curveless with GPUs, beyond", curveless(3321, 16, 2), false, false, "beyond the node's envelope of 3320 W", "watts"},
		// no CPU count and no GPUs: the largest node's 15000 W
		{"curveless without cores", curveless(12000, 0, 0), false, true, "", ""},
		// idle floor: 50 % of (100 W idle - 3 x 0 W) = 50 W, GPUs aside
		{"at the idle floor", plausibleStatus(50, straight), true, true, "", ""},
		{"below the idle floor", plausibleStatus(0, straight), true, false,
			"watts: 0 W (GPUs 0 W) below the node's idle floor of 50 W", "watts_below_idle"},
		// 50 % of (100 W - 3 x 10 W) = 35 W
		{"below the idle floor, widened by the curve's uncertainty", uncertain(34, 10), true, false, "idle floor of 35 W", "watts_below_idle"},
		{"within the idle floor widened by the curve's uncertainty", uncertain(35, 10), true, true, "", ""},
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
	if n.HasPower || !n.HasLastWatts || n.LastWatts != 500 || !n.LastWattsObserved.Equal(now) || n.LastPowerSources != PowerRAPL {
		t.Fatalf("without power: HasPower %v, last %v %d W from %q at %v; want the 500 W from rapl seen at %v", n.HasPower, n.HasLastWatts, n.LastWatts, n.LastPowerSources, n.LastWattsObserved, now)
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

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Limits)
		want string // substring of the error; "" for none
	}{
		{"defaults", func(*Limits) {}, ""},
		{"per-core above the largest node", func(l *Limits) { l.WattsPerCore = 15001 }, "--telemetry-max-watts-per-core must be within 1 and --telemetry-max-node-watts (15000), got 15001"},
		{"no watts per core", func(l *Limits) { l.WattsPerCore = 0 }, "--telemetry-max-watts-per-core"},
		{"negative base", func(l *Limits) { l.BaseWatts = -1 }, "--telemetry-max-node-base-watts"},
		{"per-GPU above a lowered largest node", func(l *Limits) { l.MaxNodeWatts, l.WattsPerGPU = 1000, 1200 }, "--telemetry-max-watts-per-gpu must be within 1 and --telemetry-max-node-watts (1000), got 1200"},
		{"idle floor past 100", func(l *Limits) { l.IdleFloorPercent = 101 }, "--telemetry-idle-floor-percent must be within 0-100, got 101"},
		{"idle floor off", func(l *Limits) { l.IdleFloorPercent = 0 }, ""},
		{"largest node too small", func(l *Limits) { l.MaxNodeWatts = 99 }, "--telemetry-max-node-watts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := DefaultLimits()
			tc.edit(&l)
			err := l.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// With the idle floor off, a reading below the node's idle stands.
func TestIdleFloorOff(t *testing.T) {
	c := NewCacheWithClock(func() time.Time { return now })
	l := DefaultLimits()
	l.IdleFloorPercent = 0
	if err := c.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	if n := c.Set(FromStatus("n", plausibleStatus(0, straight))); !n.HasPower || n.Rejected != "" {
		t.Errorf("0 W with the idle floor off: HasPower %v, Rejected %q; want true, none", n.HasPower, n.Rejected)
	}
}

// The view carries where its watts came from, also when they were refused.
func TestPowerSourcesCarried(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sources []telemetryv1alpha1.PowerSource
		watts   int32
		want    string
	}{
		{"rapl", []telemetryv1alpha1.PowerSource{"rapl"}, 500, "rapl"},
		{"a meter and GPUs", []telemetryv1alpha1.PowerSource{"nvml", "acpi"}, 500, "acpi+nvml"},
		{"refused", []telemetryv1alpha1.PowerSource{"hwmon"}, 1_000_000, "hwmon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := plausibleStatus(tc.watts, straight)
			st.Power.Sources = tc.sources
			n := NewCacheWithClock(func() time.Time { return now }).Set(FromStatus("n", st))
			if got := n.PowerSources.String(); got != tc.want {
				t.Errorf("PowerSources = %q, want %q", got, tc.want)
			}
			if got := n.LastPowerSources.String(); n.HasPower && got != tc.want {
				t.Errorf("LastPowerSources = %q, want %q", got, tc.want)
			}
		})
	}
}
