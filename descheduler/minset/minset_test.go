// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package minset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestChooseTakesTheFewestThatMeetNeed(t *testing.T) {
	cands := []Candidate{
		{Key: "a", Frees: 10},
		{Key: "b", Frees: 40},
		{Key: "c", Frees: 25},
		{Key: "d", Frees: 25, Priority: -1},
	}
	for _, tc := range []struct {
		name   string
		cands  []Candidate
		need   float64
		want   []string
		wantOK bool
	}{
		{name: "nothing needed", cands: cands, need: 0, want: nil, wantOK: true},
		// 40 >= 30: one pod, the largest.
		{name: "one pod suffices", cands: cands, need: 30, want: []string{"b"}, wantOK: true},
		// 40 + 25 = 65 >= 60; the lower priority of the two 25s goes.
		{name: "two pods, lower priority first on a tie", cands: cands, need: 60, want: []string{"b", "d"}, wantOK: true},
		// 40 + 25 + 25 = 90 >= 90 exactly.
		{name: "need met exactly", cands: cands, need: 90, want: []string{"b", "d", "c"}, wantOK: true},
		// 40 + 25 + 25 + 10 = 100 < 120: all, not enough.
		{name: "all fall short", cands: cands, need: 120, want: []string{"b", "d", "c", "a"}, wantOK: false},
		{name: "no candidates", cands: nil, need: 5, want: nil, wantOK: false},
		// A pod that frees nothing is never taken.
		{name: "zero frees is no help", cands: []Candidate{{Key: "x", Frees: 5}, {Key: "y", Frees: 0}}, need: 10, want: []string{"x"}, wantOK: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Choose(tc.cands, tc.need)
			var keys []string
			for _, c := range got {
				keys = append(keys, c.Key)
			}
			if diff := cmp.Diff(tc.want, keys); diff != "" {
				t.Errorf("Choose(need %v) (-want +got):\n%s", tc.need, diff)
			}
			if ok != tc.wantOK {
				t.Errorf("Choose(need %v) ok = %v, want %v", tc.need, ok, tc.wantOK)
			}
		})
	}
}

func TestChooseWhereSkipsPodsWithoutADestination(t *testing.T) {
	cands := []Candidate{{Key: "big", Frees: 50}, {Key: "mid", Frees: 30}, {Key: "small", Frees: 20}}
	noDest := map[string]bool{"big": true}
	var asked []string
	// big has no destination: 30 + 20 = 50 >= 45 from the others.
	got, ok := ChooseWhere(cands, 45, func(c Candidate) bool {
		asked = append(asked, c.Key)
		return !noDest[c.Key]
	})
	var keys []string
	for _, c := range got {
		keys = append(keys, c.Key)
	}
	if diff := cmp.Diff([]string{"mid", "small"}, keys); diff != "" {
		t.Errorf("chosen (-want +got):\n%s", diff)
	}
	if !ok {
		t.Errorf("ok = false, want true")
	}
	if diff := cmp.Diff([]string{"big", "mid", "small"}, asked); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}
}
