// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powermodel

import (
	"math"
	"testing"
)

func TestFit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		samples     func(add func(u, w float64))
		wantReady   bool
		wantSamples int
		wantSpread  int
		wantIdle    float64
		wantFull    float64
		// idleWithin and fullWithin are how far the ends may be (0:
		// half a watt).
		idleWithin, fullWithin float64
		wantR2Above            float64
	}{
		{
			name: "exact Shape, many idle samples",
			samples: func(add func(u, w float64)) {
				// 1000 samples at 2% and one each at 40% and 80% on
				// the R740's curve, which is Shape: the idle samples
				// must not dominate, and the ends follow Shape.
				for i := 0; i < 1000; i++ {
					add(0.02, 52.3+(129-52.3)*0.2) // 67.64
				}
				add(0.40, 195)
				add(0.80, 344)
			},
			wantReady: true, wantSamples: 1002, wantSpread: 78, // 80% - 2%
			wantIdle: 52.3, wantFull: 457, wantR2Above: 0.999,
		},
		{
			name: "exact line, many idle samples",
			samples: func(add func(u, w float64)) {
				// The same on watts = 100 + 200u, a line, which no
				// current server draws: the samples are met, and beyond
				// them the curve follows Shape at their slope.
				for i := 0; i < 1000; i++ {
					add(0.02, 104) // 100 + 200*0.02
				}
				add(0.40, 180) // 100 + 200*0.40
				add(0.80, 260) // 100 + 200*0.80
			},
			wantReady: true, wantSamples: 1002, wantSpread: 78, // 80% - 2%
			// 0% lies a fifth of the first segment below the 2% samples;
			// Shape climbs from idle to 10% by 0.19 of its span (about
			// 240 W here: 46 W a segment, 9 W a fifth) where the line
			// climbs 20 W (4 W a fifth): 95 W, within 6 W of 100.
			wantIdle: 100, idleWithin: 6,
			// 100% lies two segments beyond the 80% samples; Shape
			// climbs 0.28 of its span there (about 60 W), the line 40
			// W: 320 W, within 25 W of 300.
			wantFull: 300, fullWithin: 25,
			wantR2Above: 0.999,
		},
		{
			name: "too few samples",
			samples: func(add func(u, w float64)) {
				for i := 0; i < 59; i++ {
					add(float64(i%2)*0.9, 100+180*float64(i%2))
				}
			},
			wantReady: false, wantSamples: 59, wantSpread: 90,
		},
		{
			name: "spread too narrow",
			samples: func(add func(u, w float64)) {
				for i := 0; i < 500; i++ {
					add(0.10+0.0004*float64(i), 120) // 10% .. 29.96%
				}
			},
			// bins 10-15% .. 25-30% hold evenly spread samples: means 12.5% and
			// 27.5%, spread 15 < 30.
			wantReady: false, wantSamples: 500, wantSpread: 15,
		},
		{
			name: "invalid samples ignored",
			samples: func(add func(u, w float64)) {
				add(math.NaN(), 100)
				add(0.5, math.Inf(1))
				add(1.5, 100)
				add(0.5, -1)
			},
			wantReady: false, wantSamples: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			tc.samples(m.Add)
			f := m.Fit()
			if f.Ready() != tc.wantReady || f.Samples != tc.wantSamples || f.SpreadPercent != tc.wantSpread {
				t.Fatalf("Fit = %+v, want ready=%v samples=%d spread=%d", f, tc.wantReady, tc.wantSamples, tc.wantSpread)
			}
			if !tc.wantReady {
				if f.Curve != nil {
					t.Errorf("a model that is not ready carries a curve: %+v", f)
				}
				return
			}
			within := func(v float64) float64 { return max(v, 0.5) }
			if f.Basis != Fitted || math.Abs(f.IdleWatts()-tc.wantIdle) > within(tc.idleWithin) || math.Abs(f.FullLoadWatts()-tc.wantFull) > within(tc.fullWithin) || f.R2 < tc.wantR2Above {
				t.Errorf("Fit = %+v, want idle %.1f ± %.1f full %.0f ± %.1f R2 > %.3f", f, tc.wantIdle, within(tc.idleWithin), tc.wantFull, within(tc.fullWithin), tc.wantR2Above)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []Config{
		{BinWidthPercent: 0, MinSamples: 60, MinSpreadPercent: 30, BinMemory: 100},
		{BinWidthPercent: 5, MinSamples: 1, MinSpreadPercent: 30, BinMemory: 100},
		{BinWidthPercent: 5, MinSamples: 60, MinSpreadPercent: 101, BinMemory: 100},
		{BinWidthPercent: 5, MinSamples: 60, MinSpreadPercent: 30, BinMemory: 0},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted an invalid config", cfg)
		}
	}
}
