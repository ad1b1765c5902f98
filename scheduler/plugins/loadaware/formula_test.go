package loadaware

import "testing"

func TestEstimateBP(t *testing.T) {
	for _, tc := range []struct {
		name            string
		measured        int32
		added, capacity int64
		want            int64
	}{
		{"measured only", 40, 0, 8000, 4000},
		// 40% + 2000m of 8000m = 40% + 25% = 65%
		{"pods since sample", 40, 2000, 8000, 6500},
		// 100m of 64000m = 0.15625% -> 15 bp: not rounded away
		{"small pod on a big node", 10, 100, 64000, 1015},
		{"no capacity", 40, 2000, 0, 4000},
	} {
		if got := estimateBP(tc.measured, tc.added, tc.capacity); got != tc.want {
			t.Errorf("%s: estimateBP = %d, want %d", tc.name, got, tc.want)
		}
	}
}

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
