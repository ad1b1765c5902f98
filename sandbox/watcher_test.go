// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"strings"
	"testing"
	"time"
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

// TestSampledAfter: the heat phase of a fleet without a fault waits until
// every running training job's node has published a sample at least the
// reservation hold after the job's binding; an ended job, another phase's
// pod and an older sample do not count.
func TestSampledAfter(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	after := 11 * time.Second
	placements := []Placement{
		{Pod: "train-0", Phase: phaseGPU, Node: "a", At: t0},
		{Pod: "train-1", Phase: phaseGPU, Node: "b", At: t0.Add(2 * time.Second)},
		{Pod: "web-0", Phase: phaseWeb, Node: "c", At: t0.Add(30 * time.Second)},
	}
	seen := func(d time.Duration) []sample { return []sample{{seen: t0.Add(-time.Second)}, {seen: t0.Add(d)}} }
	for _, tc := range []struct {
		name    string
		samples map[string][]sample
		ended   bool // train-1 done
		want    bool
	}{
		{name: "both nodes sampled after the hold", samples: map[string][]sample{"a": seen(11 * time.Second), "b": seen(13 * time.Second)}, want: true},
		{name: "b's newest sample is inside train-1's hold", samples: map[string][]sample{"a": seen(20 * time.Second), "b": seen(12 * time.Second)}},
		{name: "b has no sample", samples: map[string][]sample{"a": seen(20 * time.Second)}},
		{name: "train-1 ended: b does not count", samples: map[string][]sample{"a": seen(20 * time.Second)}, ended: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := append([]Placement(nil), placements...)
			if tc.ended {
				ps[1].Ended = t0.Add(5 * time.Second)
			}
			if got := sampledAfter(&view{samples: tc.samples}, ps, phaseGPU, after); got != tc.want {
				t.Errorf("sampledAfter = %v, want %v", got, tc.want)
			}
		})
	}
}
