// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powermodel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/telesched/telesched/internal/powercurve"
)

// specpower are published SPECpower_ssj2008 results: average active power
// in watts at active idle and at 10 %, 20 % … 100 % target load, from
// https://www.spec.org/power_ssj2008/results/ (result id, system). They are
// the curves the model must learn: old machines with flat curves and a high
// idle, current ones with a low idle, a jump to 10 % and a steep top.
var specpower = []struct {
	id, system string
	watts      powercurve.Curve
}{
	{"power_ssj2008-20170829-00780", "Dell PowerEdge R740", powercurve.Curve{52.3, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457}},
	{"power_ssj2008-20170829-00781", "Dell PowerEdge R640", powercurve.Curve{55, 125, 151, 176, 202, 232, 261, 301, 357, 421, 469}},
	{"power_ssj2008-20160705-00737", "Dell PowerEdge R830", powercurve.Curve{86.4, 181, 215, 253, 287, 315, 340, 377, 421, 483, 562}},
	{"power_ssj2008-20171010-00789", "Dell PowerEdge R940", powercurve.Curve{106, 245, 292, 336, 383, 437, 502, 583, 694, 820, 915}},
	{"power_ssj2008-20080116-00034", "Fujitsu Siemens PRIMERGY RX300 S4", powercurve.Curve{166, 179, 191, 200, 212, 224, 235, 245, 252, 259, 265}},
	{"power_ssj2008-20080115-00026", "SuperMicro 6025B-TR+ (Xeon E5345)", powercurve.Curve{220, 235, 249, 261, 273, 286, 298, 309, 319, 327, 334}},
}

// published is a result's curve between its load levels, read linearly
// (the result gives nothing between them).
func published(w powercurve.Curve, u float64) float64 { return w.At(u) }

// TestFitSPECpower: once a node's samples have visited the whole
// utilization range, the fitted curve is within 5 % of the published one at
// every load level, with 2 % measurement noise on every sample.
func TestFitSPECpower(t *testing.T) {
	for i, r := range specpower {
		t.Run(r.id, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i)+1, 2))
			m, err := New(DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			for range 4000 {
				u := rng.Float64()
				m.Add(u, published(r.watts, u)*(1+0.02*rng.NormFloat64()))
			}
			f := m.Fit()
			if f.Basis != Fitted {
				t.Fatalf("basis %q after 4000 samples over the whole range, want fitted", f.Basis)
			}
			var worst float64
			for k, p := range f.Curve {
				want := r.watts[k]
				worst = math.Max(worst, math.Abs(p.Watts-want)/want)
				if e := math.Abs(p.Watts-want) / want; e > 0.05 {
					t.Errorf("%s at %d%%: fitted %.1f W, published %.1f W: error %.1f%% > 5%%", r.system, p.UtilizationPercent, p.Watts, want, 100*e)
				}
				if p.Uncertainty > 0.05*want {
					t.Errorf("%s at %d%%: uncertainty %.1f W above 5%% of %.1f W with the range visited", r.system, p.UtilizationPercent, p.Uncertainty, want)
				}
				if k > 0 && p.Watts < f.Curve[k-1].Watts {
					t.Errorf("curve falls from %d%% to %d%%: %v", f.Curve[k-1].UtilizationPercent, p.UtilizationPercent, f.Curve)
				}
			}
			t.Logf("%s: worst point %.2f%% off the published curve", r.system, 100*worst)
		})
	}
}

// TestPriorUntilSpread: a node that has only run between 15 % and 30 % is
// published on its prior's shape, joined to what it measured; the curve is
// close where it has samples and says it is unsure where it has none.
func TestPriorUntilSpread(t *testing.T) {
	r := specpower[0]
	m, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Fit(); f.Basis != None || f.Curve != nil {
		t.Fatalf("empty model without a prior: %+v, want no curve", f)
	}
	// A prior from the hardware's identity that is off: idle 40 W, full 600 W.
	m.SetPrior(ShapePrior(40, 600, "test"))
	if f := m.Fit(); f.Basis != Prior || f.Curve[10].Watts != 600 {
		t.Fatalf("empty model with a prior: %+v, want the prior itself", f)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		u := 0.15 + 0.15*rng.Float64()
		m.Add(u, published(r.watts, u))
	}
	f := m.Fit()
	if f.Basis != Prior {
		t.Fatalf("basis %q with a 15-point spread, want prior", f.Basis)
	}
	for _, k := range []int{2, 3} {
		if e := math.Abs(f.Curve[k].Watts-r.watts[k]) / r.watts[k]; e > 0.05 {
			t.Errorf("at %d%%, inside the samples: %.1f W vs %.1f W", k*10, f.Curve[k].Watts, r.watts[k])
		}
	}
	if f.Curve[10].Uncertainty <= f.Curve[3].Uncertainty || f.Curve[10].Uncertainty < 50 {
		t.Errorf("uncertainty at 100%% %.1f W (30%%: %.1f W): want it to grow away from the samples", f.Curve[10].Uncertainty, f.Curve[3].Uncertainty)
	}
	// The true full-load power lies within the stated uncertainty.
	if d := math.Abs(f.Curve[10].Watts - r.watts[10]); d > f.Curve[10].Uncertainty {
		t.Errorf("at 100%%: %.0f ± %.0f W does not cover the published %.0f W", f.Curve[10].Watts, f.Curve[10].Uncertainty, r.watts[10])
	}
}

// TestMonotone: noisy bins that fall as load rises are pooled, so the
// curve never says more load costs less power.
func TestMonotone(t *testing.T) {
	m, _ := New(DefaultConfig())
	for range 100 {
		m.Add(0.12, 150)
		m.Add(0.22, 140) // a dip: measurement noise, or a fan slowing down
		m.Add(0.52, 200)
	}
	f := m.Fit()
	for k := 1; k < Knots; k++ {
		if f.Curve[k].Watts < f.Curve[k-1].Watts {
			t.Fatalf("curve falls at %d%%: %+v", k*10, f.Curve)
		}
	}
	if w, _ := f.At(0.17); math.Abs(w-145) > 1 {
		t.Errorf("pooled 12%%/22%% bins read %.1f W at 17%%, want their mean 145 W", w)
	}
}

// TestRestore: the state round-trips, so a restarted agent's curve is the
// one it had.
func TestRestore(t *testing.T) {
	m, _ := New(DefaultConfig())
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		u := rng.Float64()
		m.Add(u, published(specpower[1].watts, u)*(1+0.01*rng.NormFloat64()))
	}
	bins, samples := m.State()
	r, _ := New(DefaultConfig())
	r.Restore(bins, samples)
	a, b := m.Fit(), r.Fit()
	if a.Basis != b.Basis || a.Samples != b.Samples {
		t.Fatalf("restored %+v, want %+v", b, a)
	}
	for k := range a.Curve {
		if math.Abs(a.Curve[k].Watts-b.Curve[k].Watts) > 1e-9 || math.Abs(a.Curve[k].Uncertainty-b.Curve[k].Uncertainty) > 1e-9 {
			t.Errorf("at %d%%: restored %+v, want %+v", k*10, b.Curve[k], a.Curve[k])
		}
	}
	// Garbage in a restored state is dropped, not trusted.
	r.Restore([]Bin{{Samples: 5, Utilization: 2, Watts: 100}, {Samples: 5, Utilization: 0.5, Watts: math.NaN()}, {Samples: 3, Utilization: 0.5, Watts: 100}}, 0)
	if bins, n := r.State(); len(bins) != 1 || n != 3 {
		t.Errorf("restore of bad bins kept %v (%d samples), want the one good bin", bins, n)
	}
	// A climb that explains more than the bin's variance is dropped, the
	// bin kept.
	r.Restore([]Bin{{Samples: 5, Utilization: 0.5, Watts: 100, Variance: 1, UtilizationVariance: 0.01, Covariance: 1}}, 0)
	if bins, _ := r.State(); len(bins) != 1 || bins[0].Covariance != 0 || bins[0].UtilizationVariance != 0 || bins[0].Variance != 1 {
		t.Errorf("restore of a bin with an impossible climb kept %+v, want the bin without its climb", bins)
	}
}

// TestIdleFollowsShapeBelowSamples: a node that never ran below 20 %
// gets its 0 % knot from the shape (the prior's, or Shape) at the slope
// its samples show, whatever watts the prior puts there, and says it is
// less sure of it than of the knots its samples reach.
func TestIdleFollowsShapeBelowSamples(t *testing.T) {
	r740, r940 := specpower[0], specpower[3]
	for _, tc := range []struct {
		name  string
		watts powercurve.Curve
		prior *PriorCurve
		// within: how far the 0 % knot may be from the published idle,
		// as a share of it; 0: only within its uncertainty.
		within float64
	}{
		// Shape is the R740's: its climb from idle is the curve's.
		{name: "R740 without a prior", watts: r740.watts, within: 0.05},
		// RAPL limits of one 230 W package: the prior's watts are half
		// the node's, its shape is right.
		{name: "R740 prior at half its watts", watts: r740.watts, prior: ShapePrior(46, 230, "test"), within: 0.05},
		{name: "R740 prior at twice its watts", watts: r740.watts, prior: ShapePrior(184, 920, "test"), within: 0.05},
		// The R940 climbs from idle less steeply than Shape at its
		// slope above: 0 % comes out low, and its uncertainty says so.
		{name: "R940 without a prior", watts: r940.watts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			m.SetPrior(tc.prior)
			rng := rand.New(rand.NewPCG(7, 8))
			for range 2000 {
				u := 0.2 + 0.6*rng.Float64()
				m.Add(u, published(tc.watts, u)*(1+0.01*rng.NormFloat64()))
			}
			f := m.Fit()
			idle, unc := f.Curve[0].Watts, f.Curve[0].Uncertainty
			t.Logf("0%%: %.1f ± %.1f W, published %.1f W", idle, unc, tc.watts[0])
			if tc.within > 0 && math.Abs(idle-tc.watts[0]) > tc.within*tc.watts[0] {
				t.Errorf("0%%: %.1f W, published %.1f W: want within %.0f%%", idle, tc.watts[0], 100*tc.within)
			}
			if math.Abs(idle-tc.watts[0]) > unc {
				t.Errorf("0%%: %.1f ± %.1f W does not cover the published %.1f W", idle, unc, tc.watts[0])
			}
			if mid := f.Curve[5].Uncertainty; unc <= mid {
				t.Errorf("uncertainty at 0%% %.1f W not above that at 50%% %.1f W, where the samples are", unc, mid)
			}
		})
	}
}

// TestNeverNegative: a steep line seen only from 30 % to 70 % would,
// continued along Shape, fall below 0 W at 0 %; the curve stops at 0 W
// and still never falls.
func TestNeverNegative(t *testing.T) {
	m, _ := New(DefaultConfig())
	for i := range 800 {
		// 130 W at 30 %, 290 W at 70 %; Shape climbs 0.291 of its span
		// to 30 % and 0.302 from 30 to 70 %: 154 W below 130 W.
		u := 0.3 + 0.4*float64(i)/800
		m.Add(u, 10+400*u)
	}
	f := m.Fit()
	w, _ := f.PowerCurve()
	if err := w.Check(0); err != nil {
		t.Errorf("curve %v: %v", w, err)
	}
	if f.IdleWatts() != 0 {
		t.Errorf("0%%: %.1f W, want the 0 W it is stopped at", f.IdleWatts())
	}
}

// TestRampKeepsTheSlope: a node ramped from 5 % to 80 % in 5-point steps
// (two samples at each level and one that straddles the step, half of
// each: it lies on the chord between them) and then held at 10 %, its
// load, learns the slope above 10 % of a curve that climbs there
// steeper than Shape (the R640's). A bin whose samples climb along the
// curve is no less precise for it: its watts vary with its utilization,
// not around it, and only what the climb leaves over is noise. Counted as
// noise, the straddling samples' spread made every bin as loose as the
// climb across it, Shape's drift prior outweighed them, and the slope
// above 10 % came out 4-16 % under the published one (the 2008 machines,
// whose curves are flattest against Shape, most). Now the current
// servers' come within 0.2 % and the 2008 machines' within 5 % (3-5 %
// under above 10 %: their curves lie farthest from Shape, whose drift
// prior still leans on their few samples a level).
func TestRampKeepsTheSlope(t *testing.T) {
	for _, r := range specpower {
		t.Run(r.id, func(t *testing.T) {
			m, err := New(DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			w := func(u float64) float64 { return published(r.watts, u) }
			prev := 0.10
			for i := 1; i <= 16; i++ {
				u := 0.05 * float64(i)
				m.Add((prev+u)/2, (w(prev)+w(u))/2)
				m.Add(u, w(u))
				m.Add(u, w(u))
				prev = u
			}
			for range 30 {
				m.Add(0.10, w(0.10))
			}
			f := m.Fit()
			if f.Basis != Fitted {
				t.Fatalf("basis %q, want fitted", f.Basis)
			}
			curve, _ := f.PowerCurve()
			for _, u0 := range []float64{0.10, 0.30, 0.50} {
				du := 0.02
				got, want := curve.At(u0+du)-curve.At(u0), w(u0+du)-w(u0)
				e := (got - want) / want
				if math.Abs(e) > 0.05 {
					t.Errorf("%.0f%% to %.0f%%: learned %+.2f W, published %+.2f W (%+.1f%%), want within 5%%", 100*u0, 100*(u0+du), got, want, 100*e)
				}
			}
		})
	}
}
