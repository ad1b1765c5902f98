// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/telesched/telesched/descheduler"
)

// TestSoakEventParsing reads the Events telesched-descheduler writes
// (descheduler.Gate.Evict around each plugin's reason) as the soak does.
func TestSoakEventParsing(t *testing.T) {
	sample := time.Date(2026, 12, 7, 4, 54, 5, 250e6, time.UTC)
	w := &watcher{}
	w.soak.events = map[string]bool{}
	w.soak.binds = []soakBind{{Pod: "web-1", Lineage: "web-1", Node: "n1", UID: "u1"}, {Pod: "web-2", Lineage: "web-2", Node: "n2", UID: "u2"}}
	w.soak.stage = soakStageFan
	ev := func(name string, uid types.UID, msg string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name}, Reason: "TeleschedEvicted", Message: msg,
			InvolvedObject: corev1.ObjectReference{Name: "pod-" + name, UID: uid}, EventTime: metav1.NewMicroTime(sample.Add(3 * time.Second))}
	}
	w.onSoakEvent(ev("a", "u1", "TeleschedThermal: node n1 at or past limit - margin for 10s: 97°C (sample taken "+
		sample.Format(descheduler.SampleTimeLayout)+", seen 1s ago); evicted from n1, destination n3 (checked)"))
	w.onSoakEvent(ev("b", "u2", "TeleschedPowerBudget: PowerBudget rack-a over for 10s: measured 1734W > limit 1569W (budget 1569W - reserve 0W) (samples taken since "+
		sample.Format(descheduler.SampleTimeLayout)+"); pod frees ~12W; evicted from n2, destination n4 (checked)"))
	w.onSoakEvent(ev("b", "u2", "the same Event again"))
	if len(w.soak.evictions) != 2 {
		t.Fatalf("%d evictions, want 2 (one per Event)", len(w.soak.evictions))
	}
	for i, want := range []SoakEviction{
		{Stage: soakStageFan, Plugin: "TeleschedThermal", Pod: "pod-a", From: "n1", Destination: "n3"},
		{Stage: soakStageFan, Plugin: "TeleschedPowerBudget", Pod: "pod-b", From: "n2", Destination: "n4", Budget: "rack-a"},
	} {
		got := w.soak.evictions[i]
		if got.Stage != want.Stage || got.Plugin != want.Plugin || got.Pod != want.Pod || got.From != want.From || got.Destination != want.Destination || got.Budget != want.Budget {
			t.Errorf("eviction %d: %+v, want %+v", i, got, want)
		}
		if !got.sample.Equal(sample) {
			t.Errorf("eviction %d: sample %v, want %v", i, got.sample, sample)
		}
	}
}

// TestJudgeSoak counts a made-up soak's evictions against its goals.
func TestJudgeSoak(t *testing.T) {
	start := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	s := &sandbox{opts: Options{DeschedulerInterval: 5 * time.Second, ThermalSustain: 10 * time.Second, BudgetSustain: 10 * time.Second},
		watch: &watcher{}, soakBudgets: map[string][]string{"soak-dying": {"g1", "g2"}, "soak-rack": {"c1", "c2"}, "soak-row": {"c1", "c2", "g1"}}}
	r := &SoakResult{SensorNode: "c3", NestedRack: "soak-rack", NestedRow: "soak-row", NestedOracle: 1}
	l := &s.watch.soak
	l.binds = []soakBind{
		{Pod: "web-0", Lineage: "web-0", Node: "heater", UID: "a0", At: at(0)},
		{Pod: "web-0-1", Lineage: "web-0", Node: "c1", UID: "a1", At: at(22)},  // replaced 2 s after
		{Pod: "web-1", Lineage: "web-1", Node: "heater", UID: "b0", At: at(0)}, // never replaced
		{Pod: "web-2", Lineage: "web-2", Node: "heater", UID: "c0", At: at(0)},
		{Pod: "web-2-1", Lineage: "web-2", Node: "c3", UID: "c1", At: at(45)}, // replaced after 5 s
		{Pod: "web-3", Lineage: "web-3", Node: "c3", UID: "d0", At: at(0)},
		{Pod: "web-3-1", Lineage: "web-3", Node: "c1", UID: "d1", At: at(101)},
		{Pod: "web-4", Lineage: "web-4", Node: "c1", UID: "e0", At: at(0)},
		// Bound before the Event of web-4's eviction, after it was seen
		// gone.
		{Pod: "web-4-1", Lineage: "web-4", Node: "heater", UID: "e1", At: at(300.2)},
		{Pod: "db-0", Lineage: "db-0", Node: "heater", UID: "f0", At: at(0)},
		{Pod: "db-0", Lineage: "db-0", Node: "heater", UID: "f1", At: at(302)},
	}
	l.deleted = map[types.UID]time.Time{"e0": at(300.1)}
	ev := func(stage, plugin, pod, uid, from, budget string, sec, sampleSec float64) SoakEviction {
		lineage := ""
		for _, b := range l.binds {
			if string(b.UID) == uid {
				lineage = b.Lineage
			}
		}
		return SoakEviction{Stage: stage, Plugin: plugin, Pod: pod, uid: types.UID(uid), lineage: lineage, From: from, Budget: budget, at: at(sec), sample: at(sampleSec)}
	}
	l.evictions = []SoakEviction{
		ev(soakStageFan, "TeleschedThermal", "web-0", "a0", "heater", "", 20, 19),
		// Within a sustain of b leading at 25 s; on a sample older than
		// the eviction from the heater at 20 s.
		ev(soakStageFan, "TeleschedThermal", "web-1", "b0", "heater", "", 30, 18.5),
		ev(soakStageFan, "TeleschedThermal", "web-2", "c0", "heater", "", 40, 39.5),
		// web-0's replacement, evicted from c1 where it was moved, in the
		// same stage.
		ev(soakStageFan, "TeleschedThermal", "web-0-1", "a1", "c1", "", 50, 49),
		// The sensor node: one while held, one after the holds.
		ev(soakStageSensor, "TeleschedThermal", "web-3", "d0", "c3", "", 100, 99),
		ev(soakStageSensor, "TeleschedThermal", "web-2-1", "c1", "c3", "", 140, 139),
		// The rack twice, the row once; the second rack eviction on a
		// sample of the same second as the first (published to the
		// second): not old.
		ev(soakStageNested, "TeleschedPowerBudget", "web-4", "e0", "c1", "soak-rack", 300.4, 290),
		ev(soakStageNested, "TeleschedPowerBudget", "web-3-1", "d1", "c1", "soak-rack", 310.2, 300),
		ev(soakStageNested, "TeleschedPowerBudget", "db-0", "f0", "heater", "soak-row", 300.5, 299),
	}
	s.judgeSoak(r, start, "heater", at(95), at(200), at(25), time.Minute)
	for _, c := range []struct {
		name      string
		got, want int
	}{
		// No replacement for web-1, web-0-1, web-2-1 and web-3-1.
		{"Unplaced", r.Unplaced, 4},
		// web-0-1 in the fan stage; web-2-1 and web-3-1 in later ones.
		{"EvictedAgain", r.EvictedAgain, 1},
		{"EvictedAgainLater", r.EvictedAgainLater, 2},
		{"OnOldSample", r.OnOldSample, 1},
		{"Protected", r.Protected, 1},
		{"EarlyAfterFailover", r.EarlyAfterFailover, 1},
		{"WhileSensorsHeld", r.WhileSensorsHeld, 1},
		{"AfterSensorHolds", r.AfterSensorHolds, 1},
		{"NestedRackEvicted", r.NestedRackEvicted, 2},
		{"NestedRowEvicted", r.NestedRowEvicted, 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if err := r.soakVerdict(); err == nil {
		t.Error("soakVerdict passed a soak that missed its goals")
	}
}

// TestKlogTime reads a klog line's time, across a new year.
func TestKlogTime(t *testing.T) {
	line := `I1207 05:10:04.301142    2924 leader.go:99] "Leading: descheduling cycles start"`
	now := time.Date(2026, 12, 7, 5, 11, 0, 0, time.Local)
	got, ok := klogTime(line, now)
	if want := time.Date(2026, 12, 7, 5, 10, 4, 301142000, time.Local); !ok || !got.Equal(want) {
		t.Errorf("klogTime = %v, %v; want %v", got, ok, want)
	}
	dec31 := `I1231 23:59:59.500000    2924 leader.go:99] "Leading: descheduling cycles start"`
	got, ok = klogTime(dec31, time.Date(2027, 1, 1, 0, 0, 1, 0, time.Local))
	if want := time.Date(2026, 12, 31, 23, 59, 59, 5e8, time.Local); !ok || !got.Equal(want) {
		t.Errorf("klogTime across the new year = %v, %v; want %v", got, ok, want)
	}
	if _, ok := klogTime("not a klog line", now); ok {
		t.Error("klogTime read a time from a line without a klog header")
	}
}
