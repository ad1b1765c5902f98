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
	got, ok := ChooseWhere(cands, 45, nil, func(c Candidate) bool {
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

// TestChooseWhereRefitsTheGroupOfEachChoice: on one node, two pods of
// 100 W alone free only 150 W together (the curve flattens as the node
// empties); need 180 takes the 100 W pod of another node second, where
// adding the marginals alone would have stopped at two pods of one node
// freeing less than promised.
func TestChooseWhereRefitsTheGroupOfEachChoice(t *testing.T) {
	cands := []Candidate{
		{Key: "a1", Group: "a", Frees: 100}, {Key: "a2", Group: "a", Frees: 100},
		{Key: "b1", Group: "b", Frees: 90},
	}
	refit := func(c Candidate, gone []Candidate) float64 {
		return c.Frees - 50*float64(len(gone)) // each pod gone before it on its node: 50 W less
	}
	var refits int
	got, ok := ChooseWhere(cands, 180, func(c Candidate, gone []Candidate) float64 {
		refits++
		if c.Group != gone[0].Group {
			t.Errorf("refit %s with %v gone: another group's pods", c.Key, gone)
		}
		return refit(c, gone)
	}, func(Candidate) bool { return true })
	type choice struct {
		Key   string
		Frees float64
	}
	var choices []choice
	for _, c := range got {
		choices = append(choices, choice{c.Key, c.Frees})
	}
	if diff := cmp.Diff([]choice{{"a1", 100}, {"b1", 90}}, choices); diff != "" {
		t.Errorf("chosen (-want +got):\n%s", diff)
	}
	if !ok {
		t.Error("ok = false: 100 + 90 >= 180")
	}
	if refits != 1 {
		t.Errorf("%d refits, want 1 (a2, after a1 was chosen)", refits)
	}
	// Without refitting, a1 and a2 "free" 200 >= 180: two pods that free
	// 150 W.
	got, _ = ChooseWhere(cands, 180, nil, func(Candidate) bool { return true })
	if len(got) != 2 || got[1].Key != "a2" {
		t.Errorf("without refit: %v, want a1 and a2 (what the refit is for)", got)
	}
}
