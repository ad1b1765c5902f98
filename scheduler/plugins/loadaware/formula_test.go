// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import "testing"

func TestScores(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  int64
		want int64
	}{
		{"spread 0%", spreadScore(0), 100},
		{"spread 37.5%", spreadScore(3750), 63},            // 100 - 37
		{"spread 120%", spreadScore(12_000), 0},            // clamped
		{"pack 0%, target 70", packScore(0, 70), 70},       // (100-70)*0/70 + 70
		{"pack 35%, target 70", packScore(3500, 70), 85},   // 30*35/70 + 70 = 85
		{"pack 70%, target 70", packScore(7000, 70), 100},  // at the target
		{"pack 85%, target 70", packScore(8500, 70), 35},   // 70*(100-85)/(100-70) = 35
		{"pack 100%, target 70", packScore(10_000, 70), 0}, // 70*0/30
		{"pack target 100, at 100%", packScore(10_000, 100), 100},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

func TestMayExceed(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		boundBP, add, minCapacity int64
		threshold                 int32
		want                      bool
	}{
		// 60% + 2000m/16000m (12.5%) + 1bp = 7251 <= 8000
		{"room", 6000, 2000, 16_000, 80, false},
		// 60% + 3200m/16000m (20%) + 1bp = 8001 > 8000: a node could land at
		// exactly 80% (fits) but rounding could put it 1bp over, so filter
		{"at the threshold", 6000, 3200, 16_000, 80, true},
		{"over", 7900, 2000, 16_000, 80, true},
		// no capacity reported: the pod adds nothing; 7999 + 1 = 8000
		{"no capacity", 7999, 2000, 0, 80, false},
		{"the bound alone over", 8000, 0, 16_000, 80, true},
	} {
		if got := mayExceed(tc.boundBP, tc.add, tc.minCapacity, tc.threshold); got != tc.want {
			t.Errorf("%s: mayExceed = %v, want %v", tc.name, got, tc.want)
		}
	}
}
