// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func readings(start time.Time, step time.Duration, values ...float64) []reading {
	out := make([]reading, len(values))
	for i, v := range values {
		out[i] = reading{At: start.Add(time.Duration(i) * step), Value: v}
	}
	return out
}

func TestSecondsAtOrPastCountsEachReadingUntilTheNext(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name   string
		rs     []reading
		end    time.Time
		want   float64
		wantGT float64 // secondsOver
	}{
		{name: "never", rs: readings(t0, time.Second, 80, 81, 82), end: t0.Add(3 * time.Second), want: 0, wantGT: 0},
		{name: "at the limit counts for at-or-past, not for over", rs: readings(t0, time.Second, 85, 85, 84), end: t0.Add(3 * time.Second), want: 2, wantGT: 0},
		{name: "the last reading holds until end", rs: readings(t0, time.Second, 80, 90), end: t0.Add(5 * time.Second), want: 4, wantGT: 4},
		{name: "uneven steps", rs: []reading{{t0, 90}, {t0.Add(500 * time.Millisecond), 80}, {t0.Add(2 * time.Second), 86}}, end: t0.Add(3 * time.Second), want: 1.5, wantGT: 1.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, secondsAtOrPast(tc.rs, 85, tc.end)); diff != "" {
				t.Errorf("secondsAtOrPast (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantGT, secondsOver(tc.rs, 85, tc.end)); diff != "" {
				t.Errorf("secondsOver (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackUnderIsFromTheFirstCrossingToTheLastReturn(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type got struct {
		Seconds       float64
		Reached, Back bool
	}
	for _, tc := range []struct {
		name string
		rs   []reading
		want got
	}{
		{name: "never reached", rs: readings(t0, time.Second, 80, 81), want: got{}},
		{name: "reached, never back", rs: readings(t0, time.Second, 80, 86, 87), want: got{Reached: true}},
		{name: "back once", rs: readings(t0, time.Second, 80, 86, 87, 84, 83), want: got{Seconds: 2, Reached: true, Back: true}},
		{name: "back, hot again, back for good", rs: readings(t0, time.Second, 86, 84, 86, 84), want: got{Seconds: 3, Reached: true, Back: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g got
			g.Seconds, g.Reached, g.Back = backUnder(tc.rs, 85)
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("backUnder (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCountEvictions(t *testing.T) {
	ev := func(event, pod, lineage, from, dest string) eviction {
		return eviction{Event: event, Pod: pod, Lineage: lineage, From: from, Destination: dest, Stage: stageFault}
	}
	for _, tc := range []struct {
		name string
		evs  []eviction
		next map[string]string
		want EvictionCounts
		from []string // the target's nodes; "hot" when unset
	}{
		{
			name: "replicas on the checked node",
			evs:  []eviction{ev("e1", "r-0", "r-0", "hot", "a"), ev("e2", "r-1", "r-1", "hot", "b")},
			next: map[string]string{"r-0": "a", "r-1": "b"},
			want: EvictionCounts{Evicted: 2, AsChecked: 2, FromTarget: 2},
		},
		{
			name: "a replica elsewhere still has a destination",
			evs:  []eviction{ev("e1", "r-0", "r-0", "hot", "a")},
			next: map[string]string{"r-0": "b"},
			want: EvictionCounts{Evicted: 1, FromTarget: 1},
		},
		{
			name: "no destination: none named, or the replica never bound",
			evs:  []eviction{ev("e1", "r-0", "r-0", "hot", ""), ev("e2", "r-1", "r-1", "hot", "a")},
			next: map[string]string{"r-0": "a"},
			want: EvictionCounts{Evicted: 2, NoDestination: 2, FromTarget: 2},
		},
		{
			name: "a workload moved twice: its replica evicted too",
			evs:  []eviction{ev("e1", "r-0", "r-0", "hot", "a"), ev("e2", "r-0-1", "r-0", "a", "b")},
			next: map[string]string{"r-0": "a", "r-0-1": "b"},
			want: EvictionCounts{Evicted: 2, WorkloadTwice: 1, AsChecked: 2, FromTarget: 1},
		},
		{
			name: "one pod evicted twice (two Events)",
			evs:  []eviction{ev("e1", "r-0", "r-0", "hot", "a"), ev("e2", "r-0", "r-0", "hot", "a")},
			next: map[string]string{"r-0": "a"},
			want: EvictionCounts{Evicted: 1, Twice: 1, WorkloadTwice: 1, AsChecked: 1, FromTarget: 1},
		},
		{
			name: "one Event seen twice counts once",
			evs:  []eviction{ev("e1", "r-0", "r-0", "hot", "a"), ev("e1", "r-0", "r-0", "hot", "a")},
			next: map[string]string{"r-0": "a"},
			want: EvictionCounts{Evicted: 1, AsChecked: 1, FromTarget: 1},
		},
		{
			name: "from any of the target's nodes (a rack's)",
			evs:  []eviction{ev("e1", "r-0", "r-0", "hot", "a"), ev("e2", "r-1", "r-1", "a", "b"), ev("e3", "r-2", "r-2", "elsewhere", "b")},
			next: map[string]string{"r-0": "a", "r-1": "b", "r-2": "b"},
			want: EvictionCounts{Evicted: 3, AsChecked: 3, FromTarget: 2},
			from: []string{"hot", "a"},
		},
		{
			name: "another stage's evictions do not count",
			evs:  []eviction{ev("e1", "r-0", "r-0", "hot", "a"), {Event: "e2", Pod: "r-1", Lineage: "r-1", From: "hot", Stage: stageRack}},
			next: map[string]string{"r-0": "a"},
			want: EvictionCounts{Evicted: 1, AsChecked: 1, FromTarget: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := tc.from
			if from == nil {
				from = []string{"hot"}
			}
			if diff := cmp.Diff(tc.want, countEvictions(tc.evs, tc.next, stageFault, from...)); diff != "" {
				t.Errorf("countEvictions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDestinationOfReadsTheDeschedulersEvent(t *testing.T) {
	for msg, want := range map[string]string{
		"TeleschedThermal: cpu-heater at 86.0°C; evicted from cpu-heater, destination cpu-legacy (checked)": "cpu-legacy",
		"TeleschedThermal: not evicted: no destination: cpu-legacy: too hot":                                "",
	} {
		if diff := cmp.Diff(want, destinationOf(msg)); diff != "" {
			t.Errorf("destinationOf(%q) (-want +got):\n%s", msg, diff)
		}
	}
}

func TestReplicaOfFollowsTheLineage(t *testing.T) {
	lineage := map[string]string{"r-0": "r-0", "r-0-1": "r-0", "r-0-2": "r-0", "r-1": "r-1"}
	for pod, want := range map[string]string{"r-0": "r-0-1", "r-0-1": "r-0-2", "r-0-2": "", "r-1": "", "unknown": ""} {
		if diff := cmp.Diff(want, replicaOf(lineage, pod)); diff != "" {
			t.Errorf("replicaOf(%q) (-want +got):\n%s", pod, diff)
		}
	}
}

func TestBeyondOracle(t *testing.T) {
	for _, tc := range []struct{ fromHot, min, want int }{{2, 2, 0}, {3, 2, 1}, {1, 2, 0}, {4, 2, 2}, {3, -1, 3}} {
		if got := beyondOracle(tc.fromHot, tc.min); got != tc.want {
			t.Errorf("beyondOracle(%d, %d) = %d, want %d", tc.fromHot, tc.min, got, tc.want)
		}
	}
}

func TestAfterVerdictFailsOnlyThePassWithTheDescheduler(t *testing.T) {
	bad := AfterResult{HotNode: "h", OracleMin: 2, Reached: true, Evictions: EvictionCounts{Evicted: 5, FromTarget: 4, NoDestination: 1, Twice: 1}, RackEvictions: EvictionCounts{Evicted: 1, NoDestination: 1}}
	if err := (&Result{After: []AfterResult{bad}}).afterVerdict(); err != nil {
		t.Errorf("without the descheduler: %v, want no error", err)
	}
	bad.Descheduler = true
	err := (&Result{After: []AfterResult{bad}}).afterVerdict()
	want := "after placement: 2 pods evicted with no destination\nafter placement: 1 pods evicted twice\nafter placement: 4 evictions from h, 2 past the oracle's minimum 2\nafter placement: h not back under 0.0°C within the fault (1m0s)"
	if err == nil || err.Error() != want {
		t.Errorf("afterVerdict = %v, want %q", err, want)
	}
	good := AfterResult{Descheduler: true, HotNode: "h", OracleMin: 2, Reached: true, BackUnder: true, BackUnderSeconds: 40, BoundSeconds: 48, Evictions: EvictionCounts{Evicted: 3, FromTarget: 3, AsChecked: 3, WorkloadTwice: 1}}
	if err := (&Result{After: []AfterResult{good}}).afterVerdict(); err != nil {
		t.Errorf("within 1 of the oracle, back under within the bound: %v", err)
	}
	good.BackUnderSeconds = 50
	err = (&Result{After: []AfterResult{good}}).afterVerdict()
	if want := "after placement: h back under 0.0°C after 50.0s, past the bound 48.0s"; err == nil || err.Error() != want {
		t.Errorf("afterVerdict = %v, want %q", err, want)
	}
	good.BackUnderSeconds = 40

	// The rack stage is judged the same way, against its own oracle,
	// limit and bound.
	rack := good
	rack.Rack, rack.RackLimitWatts, rack.RackOracleMin, rack.RackReached, rack.RackBackUnder, rack.RackBackUnderSeconds, rack.RackBoundSeconds = "rack-gpu", 4500, 2, true, true, 30, 41
	rack.RackEvictions = EvictionCounts{Evicted: 3, FromTarget: 3, AsChecked: 3}
	if err := (&Result{After: []AfterResult{rack}}).afterVerdict(); err != nil {
		t.Errorf("rack within 1 of its oracle, back under within its bound: %v", err)
	}
	rack.RackEvictions = EvictionCounts{Evicted: 4, FromTarget: 4, AsChecked: 3, NoDestination: 1}
	rack.RackBackUnder = false
	err = (&Result{After: []AfterResult{rack}}).afterVerdict()
	if want := "after placement: 1 pods evicted with no destination\nafter placement: 4 evictions from rack-gpu's nodes, 2 past the oracle's minimum 2\nafter placement: rack-gpu not back under its limit 4500W within the rise (1m0s)"; err == nil || err.Error() != want {
		t.Errorf("afterVerdict = %v, want %q", err, want)
	}
	rack.RackEvictions, rack.RackBackUnder, rack.RackBackUnderSeconds = EvictionCounts{Evicted: 2, FromTarget: 2}, true, 45
	err = (&Result{After: []AfterResult{rack}}).afterVerdict()
	if want := "after placement: rack-gpu back under its limit 4500W after 45.0s, past the bound 41.0s"; err == nil || err.Error() != want {
		t.Errorf("afterVerdict = %v, want %q", err, want)
	}
}

func TestAfterBound(t *testing.T) {
	for _, tc := range []struct {
		oracleMin int
		want      time.Duration
	}{{2, 48 * time.Second}, {1, 33 * time.Second}, {0, 33 * time.Second}, {-1, 33 * time.Second}} {
		if got := afterBound(tc.oracleMin, 10*time.Second, 5*time.Second, 6*time.Second); got != tc.want {
			t.Errorf("afterBound(%d) = %v, want %v", tc.oracleMin, got, tc.want)
		}
	}
}

// TestRackBound: one sustained window per deschedulerPerNode pods the
// oracle needs (all on one node at worst), after the agents publish the
// rise and the descheduler's next cycle sees it; then 3 τ.
func TestRackBound(t *testing.T) {
	for _, tc := range []struct {
		oracleMin int
		want      time.Duration
	}{
		{2, 3*time.Second + 15*time.Second + 5*time.Second + 18*time.Second},
		{3, 3*time.Second + 30*time.Second + 5*time.Second + 18*time.Second},
		{0, 41 * time.Second}, {-1, 41 * time.Second},
	} {
		if got := rackBound(tc.oracleMin, time.Second, 10*time.Second, 5*time.Second, 6*time.Second); got != tc.want {
			t.Errorf("rackBound(%d) = %v, want %v", tc.oracleMin, got, tc.want)
		}
	}
}
