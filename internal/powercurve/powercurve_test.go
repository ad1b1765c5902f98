// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powercurve

import (
	"math"
	"strings"
	"testing"
)

// r740 is the Dell PowerEdge R740's SPECpower_ssj2008 curve
// (power_ssj2008-20170829-00780), watts at 0 %, 10 % … 100 %.
var r740 = Curve{52.3, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457}

func TestAtAndSlope(t *testing.T) {
	for _, tc := range []struct {
		name         string
		u            float64
		watts, slope float64
	}{
		{"idle", 0, 52.3, (129 - 52.3) * 10},
		{"between 20 and 30 %", 0.25, (147 + 170) / 2.0, (170 - 147) * 10},
		{"at a knot, right segment", 0.5, 224, (255 - 224) * 10},
		{"full load, last segment", 1, 457, (457 - 408) * 10},
		{"below 0 clamps", -0.2, 52.3, (129 - 52.3) * 10},
		{"above 1 clamps", 1.3, 457, (457 - 408) * 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r740.At(tc.u); math.Abs(got-tc.watts) > 1e-9 {
				t.Errorf("At(%v) = %v, want %v", tc.u, got, tc.watts)
			}
			if got := r740.Slope(tc.u); math.Abs(got-tc.slope) > 1e-9 {
				t.Errorf("Slope(%v) = %v, want %v", tc.u, got, tc.slope)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	falling := r740
	falling[4] = 100
	negative := r740
	negative[0] = -1
	nan := r740
	nan[3] = math.NaN()
	for _, tc := range []struct {
		name    string
		c       Curve
		max     float64
		wantErr string
	}{
		{"SPECpower curve", r740, 0, ""},
		{"within envelope", r740, 500, ""},
		{"flat", Curve{}, 0, ""},
		{"falling", falling, 0, "watts fall from 170 at 30% to 100 at 40%"},
		{"negative", negative, 0, "watts at 0% is negative"},
		{"NaN", nan, 0, "watts at 30% is NaN"},
		{"over envelope", r740, 400, "watts at 90% (408) exceed the node's envelope of 400 W"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Check(tc.max)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Check: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Check: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestConvexFrom: the R740 climbs 77 W to its first knee at 10 %, then
// steepens every step to 90 %, and its last step (49 W) is gentler than
// the one before (64 W): convex from 10 % only up to 90 %, so from
// nowhere below 90 %; a straight line is convex from anywhere.
func TestConvexFrom(t *testing.T) {
	var line Curve
	for k := range line {
		line[k] = 100 + 20*float64(k)
	}
	for _, tc := range []struct {
		name string
		c    Curve
		u    float64
		want bool
	}{
		{"R740 from idle", r740, 0, false},
		{"R740 past its knee", r740, 0.15, false},
		{"R740 in its last segment", r740, 0.95, true},
		{"R740 at 100 %", r740, 1, true},
		{"a line from idle", line, 0, true},
		{"a line past 100 %", line, 1.3, true},
	} {
		if got := tc.c.ConvexFrom(tc.u); got != tc.want {
			t.Errorf("%s: ConvexFrom(%v) = %v, want %v", tc.name, tc.u, got, tc.want)
		}
	}
	steep := r740
	steep[10] = 480 // 72 W, steeper than 64
	if !steep.ConvexFrom(0.15) || steep.ConvexFrom(0.05) {
		t.Errorf("R740 with a steeper top: ConvexFrom(0.15) = %v, (0.05) = %v; want true, false", steep.ConvexFrom(0.15), steep.ConvexFrom(0.05))
	}
}
