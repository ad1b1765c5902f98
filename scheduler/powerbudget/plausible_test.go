// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powerbudget

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// One node's telemetry must not change its rack-mates' answers: a rack
// of four 16-core nodes at 475 W (1900 W of a 2000 W budget) where n1
// publishes what breaks physics.

func plausibleRack(t *testing.T) *fixture {
	t.Helper()
	f := newFixture()
	f.budget(t, "rack-a", "rack", "a", 2000, nil, nil)
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		f.node(n, "rack", "a")
		f.observe(n, 47, 475, true)
	}
	return f
}

func rackA(t *testing.T, f *fixture) Domain {
	t.Helper()
	s := f.d.Snapshot(f.t, maxAge)
	if len(s.Domains) != 1 {
		t.Fatalf("%d domains, want 1", len(s.Domains))
	}
	return s.Domains[0]
}

// placeRunning books a pod of cpu on node, placed and running now.
func placeRunning(f *fixture, node string, uid types.UID, cpu int64) {
	f.reserve(node, uid, cpu, 0, f.t)
}

// A curve that falls past 50 % would price a 16-core pod on n1 at about
// -476 W (its curve at 47 % minus at 100 %), and that negative reservation
// would make room in the rack for its mates' pods.
func TestFallingCurveIgnored(t *testing.T) {
	f := plausibleRack(t)
	f.t = f.t.Add(5 * time.Second)
	st := status(f.t, 5, 47, 475, true)
	st.Power.Model.CurveWatts = []int32{100, 180, 260, 340, 420, 500, 0, 0, 0, 0, 0}
	f.cache.Set(telemetry.FromStatus("n1", st))
	placeRunning(f, "n1", "p", 16000)
	d := rackA(t, f)
	// n1 has no plausible curve: it counts its measured 475 W, its pod
	// nothing (no unmeteredNodeWatts: it takes no pods itself).
	if d.ReservedWatts != 0 || d.MeasuredWatts != 1900 || d.HeadroomWatts() != 100 {
		t.Errorf("rack-a measured %.0f W, reserved %.0f W, headroom %.0f W; want 1900, 0, 100", d.MeasuredWatts, d.ReservedWatts, d.HeadroomWatts())
	}
	if n1 := f.d.Snapshot(f.t, maxAge).Node("n1"); n1.Metered {
		t.Errorf("n1 with a falling curve is metered: %+v", *n1)
	}
}

// A sample without a power section keeps n1's last measured watts in the
// rack, as fresh for the power hold (a budget's unmeteredNodeWatts do not
// replace them), and as its last known watts after it.
func TestSampleWithoutPowerKeepsLastWatts(t *testing.T) {
	f := plausibleRack(t)
	for _, after := range []time.Duration{5 * time.Second, telemetry.DefaultPowerHold + 5*time.Second} {
		f.t = t0.Add(after)
		st := status(f.t, 5, 47, 0, true)
		st.Power = nil
		f.cache.Set(telemetry.FromStatus("n1", st))
		for _, n := range []string{"n2", "n3", "n4"} {
			f.observe(n, 47, 475, true)
		}
		d := rackA(t, f)
		if d.MeasuredWatts != 1900 {
			t.Errorf("%v on, n1 without power: rack-a measured %.0f W, want 1900 (n1's last 475 W)", after, d.MeasuredWatts)
		}
		n1 := f.d.Snapshot(f.t, maxAge).Node("n1")
		if held := after < telemetry.DefaultPowerHold; n1 == nil || n1.Held != held || n1.FreshPower != held {
			t.Errorf("%v on: n1 %+v, want its last watts held (as fresh) %v", after, n1, held)
		}
	}
}

// A 1 MW reading from n1 is refused: the rack counts n1's last plausible
// watts, and its mates keep their 100 W of room.
func TestMegawattReadingLeavesRackMates(t *testing.T) {
	f := plausibleRack(t)
	f.t = f.t.Add(5 * time.Second)
	f.observe("n1", 47, 1_000_000, true)
	d := rackA(t, f)
	if d.MeasuredWatts != 1900 || d.HeadroomWatts() != 100 {
		t.Errorf("after n1's 1 MW reading: rack-a measured %.0f W, headroom %.0f W; want 1900 and 100", d.MeasuredWatts, d.HeadroomWatts())
	}
	if v, _ := f.cache.Get("n1"); v.HasPower || v.Rejected == "" {
		t.Errorf("n1's view kept a 1 MW reading: HasPower %v, Rejected %q", v.HasPower, v.Rejected)
	}
}

// A 12 kW reading from n1 without a power curve is refused: a 16-core
// node's envelope is 600 W + 16 x 20 W = 920 W, and the rack counts n1's
// last plausible 475 W.
func TestCurvelessReadingBoundByItsCores(t *testing.T) {
	f := plausibleRack(t)
	f.t = f.t.Add(5 * time.Second)
	f.observe("n1", 47, 12000, false)
	d := rackA(t, f)
	if d.MeasuredWatts != 1900 || d.HeadroomWatts() != 100 {
		t.Errorf("after n1's 12000 W reading without a curve: rack-a measured %.0f W, headroom %.0f W; want 1900 and 100", d.MeasuredWatts, d.HeadroomWatts())
	}
}

// A 0 W reading from n1 at 47 % CPU, its own curve idling at 100 W, is
// refused: the rack counts n1's last plausible 475 W, and its mates keep
// 100 W of room, not the 575 W the reading would hand them.
func TestReadingBelowIdleLeavesRackMates(t *testing.T) {
	f := plausibleRack(t)
	f.t = f.t.Add(5 * time.Second)
	f.observe("n1", 47, 0, true)
	d := rackA(t, f)
	if d.MeasuredWatts != 1900 || d.HeadroomWatts() != 100 {
		t.Errorf("after n1's 0 W reading: rack-a measured %.0f W, headroom %.0f W; want 1900 and 100", d.MeasuredWatts, d.HeadroomWatts())
	}
	if v, _ := f.cache.Get("n1"); v.HasPower || v.Rejected == "" {
		t.Errorf("n1's view kept a 0 W reading: HasPower %v, Rejected %q", v.HasPower, v.Rejected)
	}
}
