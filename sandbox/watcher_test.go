// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"strings"
	"testing"
)

// TestJudgeBound: a demo pod's binding is judged against the newest sample
// of its node written before the binding (by resourceVersion), not against
// whatever sample the watcher happened to hold when the binding reached
// it, and it waits for that until a later sample has arrived.
func TestJudgeBound(t *testing.T) {
	const hotWhy, coolWhy = "cpu 52%, 100°C (limit 100°C)", "cpu 52%, 86°C (limit 100°C)"
	for _, tc := range []struct {
		name     string
		samples  []sample // of node n, oldest first
		podRV    int64
		final    bool
		wantHot  bool
		wantWhy  string
		wantWait bool // still unjudged
	}{
		{
			// The scheduler saw the cool sample (rv 8) and bound at rv 10;
			// the watcher got the binding while it still held rv 5.
			name:    "bound on a cool sample the watcher saw late",
			samples: []sample{{rv: 5, hot: true, why: hotWhy}, {rv: 8, why: coolWhy}, {rv: 12, why: coolWhy}},
			podRV:   10, wantWhy: coolWhy,
		},
		{
			name:    "bound while the node was hot",
			samples: []sample{{rv: 5, hot: true, why: hotWhy}, {rv: 12, why: coolWhy}},
			podRV:   10, wantHot: true, wantWhy: hotWhy,
		},
		{
			// No sample after the binding yet: the one that allowed it may
			// still be on its way.
			name:    "waits for a later sample",
			samples: []sample{{rv: 5, hot: true, why: hotWhy}},
			podRV:   10, wantWait: true, wantWhy: "as bound",
		},
		{
			name:    "at the summary the newest seen counts",
			samples: []sample{{rv: 5, hot: true, why: hotWhy}},
			podRV:   10, final: true, wantHot: true, wantWhy: hotWhy,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &Result{Placements: []Placement{{Pod: "p", Node: "n", Why: "as bound"}}}
			w := &watcher{res: res}
			v := &view{bound: map[string]*Placement{}, samples: map[string][]sample{"n": tc.samples},
				unjudged: []boundPod{{key: "demo/p", node: "n", rv: tc.podRV, placement: 0}}}
			w.judgeBound(v, tc.final)
			if got := len(v.unjudged) == 1; got != tc.wantWait {
				t.Errorf("unjudged = %v, want waiting %v", v.unjudged, tc.wantWait)
			}
			if got := len(res.Heat.HotPlacements) == 1; got != tc.wantHot {
				t.Errorf("HotPlacements = %q, want hot %v", res.Heat.HotPlacements, tc.wantHot)
			}
			if tc.wantHot && !strings.Contains(res.Heat.HotPlacements[0], tc.wantWhy) {
				t.Errorf("HotPlacements = %q, want it to say %q", res.Heat.HotPlacements, tc.wantWhy)
			}
			if got := res.Placements[0].Why; got != tc.wantWhy {
				t.Errorf("Why = %q, want %q", got, tc.wantWhy)
			}
		})
	}
}
