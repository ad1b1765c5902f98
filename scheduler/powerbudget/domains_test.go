// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powerbudget

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

const maxAge = time.Minute

// curve is 100 W idle to 900 W at full load, a straight line: on 16 cores
// each 1000m adds 800/16 = 50 W.
var curve = []int32{100, 180, 260, 340, 420, 500, 580, 660, 740, 820, 900}

// fixture is a test's telemetry cache, on a clock at t that stands still
// until moved, and the domains over it.
type fixture struct {
	t     time.Time
	cache *telemetry.Cache
	d     *Domains
}

func (f *fixture) now() time.Time { return f.t }

// reserve books a pod of cpu and gpus on node, placed and seen running at
// at (the clock is set there for the book, and back).
func (f *fixture) reserve(node string, uid types.UID, cpu, gpus int64, at time.Time) {
	now := f.t
	f.t = at
	f.d.book.ReserveDemand(node, uid, estimate.Demand{CPUMilli: cpu, GPUs: gpus})
	f.d.book.Running(node, uid)
	f.t = now
}

// place is the scheduler placing pod on node now, its kubelet starting it
// at once.
func (f *fixture) place(node string, pod *corev1.Pod) {
	f.d.book.Reserve(node, pod)
	f.d.book.Running(node, pod.UID)
}

func newFixture() *fixture {
	f := &fixture{t: t0}
	f.cache = telemetry.NewCacheWithClock(f.now)
	f.d = NewDomains(f.cache, estimate.NewBook(f.cache, estimate.DefaultOptions()), nil)
	return f
}

// status is a 16-core node's sample taken at sample, cpu percent busy,
// drawing watts; with the curve above when curved, else without a model.
func status(sample time.Time, interval, cpu, watts int32, curved bool) *v1alpha1.NodeTelemetryStatus {
	st := &v1alpha1.NodeTelemetryStatus{
		SampleTime: metav1.NewTime(sample), IntervalSeconds: interval,
		CPU:   &v1alpha1.CPUStatus{LogicalCores: 16, OnlineCores: 16, UtilizationPercent: cpu},
		Power: &v1alpha1.PowerStatus{Watts: watts},
	}
	if curved {
		st.Power.Model = &v1alpha1.PowerModel{Ready: true, Basis: v1alpha1.PowerModelFitted,
			CurveWatts: curve, CurveUncertaintyWatts: make([]int32, telemetry.CurveKnots)}
	}
	return st
}

// observe stores a sample, taken now, of node name.
func (f *fixture) observe(name string, cpu, watts int32, curved bool) *telemetry.Node {
	return f.cache.Set(telemetry.FromStatus(name, status(f.t, 5, cpu, watts, curved)))
}

func (f *fixture) node(name string, kv ...string) {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	f.d.setNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}})
}

func (f *fixture) budget(t *testing.T, name, key, value string, watts int64, reserve, unmetered *int64) {
	t.Helper()
	if err := f.d.SetBudget(&v1alpha1.PowerBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}, Spec: v1alpha1.PowerBudgetSpec{
		NodeSelector: v1alpha1.NodeSelector{MatchLabels: map[string]v1alpha1.LabelValue{key: v1alpha1.LabelValue(value)}},
		BudgetWatts:  watts, ReserveWatts: reserve, UnmeteredNodeWatts: unmetered,
	}}); err != nil {
		t.Fatal(err)
	}
}

// nums are the numbers of a Domain a test checks.
type nums struct {
	nodes, noPower, noEstimate int32
	measured, reserved         float64
}

func named(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name}}}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func checkDomains(t *testing.T, s *Snapshot, want map[string]nums) {
	t.Helper()
	if len(s.Domains) != len(want) {
		t.Errorf("%d domains, want %d", len(s.Domains), len(want))
	}
	for i := range s.Domains {
		d := &s.Domains[i]
		got, w := nums{d.Nodes, d.NodesWithoutPower, d.NodesWithoutEstimate, d.MeasuredWatts, d.ReservedWatts}, want[d.Name]
		if got.nodes != w.nodes || got.noPower != w.noPower || got.noEstimate != w.noEstimate || !near(got.measured, w.measured) || !near(got.reserved, w.reserved) {
			t.Errorf("%s: %+v, want %+v", s.Domains[i].Name, got, w)
		}
	}
}

// TestSnapshot: measured and reserved watts of three overlapping budgets,
// fresh and stale, with and without unmeteredNodeWatts.
func TestSnapshot(t *testing.T) {
	f := newFixture()
	f.budget(t, "rack-a", "rack", "a", 2000, nil, nil)
	f.budget(t, "rack-b", "rack", "b", 1000, nil, ptr.To[int64](300))
	f.budget(t, "row-1", "row", "1", 5000, ptr.To[int64](500), nil)
	f.node("n1", "rack", "a", "row", "1")
	f.node("n2", "rack", "a", "row", "1")
	f.node("n3", "rack", "b", "row", "1")
	f.node("n4", "rack", "b") // no telemetry
	f.node("n5", "rack", "c") // in no budget
	f.observe("n1", 50, 500, true)
	f.observe("n2", 20, 400, true)
	f.observe("n3", 30, 350, false)
	f.observe("n5", 10, 200, true)
	// n1 at 50 %: 2000m takes it to 62.5 %, 500 W -> 600 W on the curve.
	f.reserve("n1", "p1", 2000, 0, t0)
	f.reserve("n3", "p3", 1000, 0, t0) // no curve: no watts
	f.reserve("n5", "p5", 4000, 0, t0) // no budget

	s := f.d.Snapshot(t0, maxAge)
	checkDomains(t, s, map[string]nums{
		"rack-a": {nodes: 2, measured: 500 + 400, reserved: 100},
		// n3 fresh without a curve: max(300 unmetered, 350 measured); n4
		// without telemetry: 300.
		"rack-b": {nodes: 2, noPower: 1, noEstimate: 1, measured: 350 + 300},
		// n3 without unmeteredNodeWatts counts its 350 W.
		"row-1": {nodes: 3, noEstimate: 1, measured: 500 + 400 + 350, reserved: 100},
	})
	if got := s.Domains[2].HeadroomWatts(); !near(got, 5000-500-1250-100) {
		t.Errorf("row-1 headroom %v, want 3150", got)
	}
	if n1 := s.Node("n1"); n1 == nil || !n1.Metered || !n1.FreshPower || n1.Reserved.CPUMilli != 2000 || len(n1.Domains) != 2 || n1.Domains[0] != 0 || n1.Domains[1] != 2 {
		t.Errorf("n1 = %+v, want metered, fresh, 2000m reserved, in domains [0 2]", n1)
	}
	if n3 := s.Node("n3"); n3 == nil || n3.Metered || !n3.FreshPower || n3.Reserved.CPUMilli != 1000 {
		t.Errorf("n3 = %+v, want fresh, not metered, 1000m reserved", n3)
	}
	if n4 := s.Node("n4"); n4 == nil || n4.View != nil || n4.FreshPower {
		t.Errorf("n4 = %+v, want no view", n4)
	}
	if s.Node("n5") != nil || s.Empty() {
		t.Errorf("n5 in a domain, or snapshot empty")
	}
	if got := f.d.BudgetsOf(map[string]string{"rack": "a", "row": "1"}); strings.Join(got, ",") != "rack-a,row-1" {
		t.Errorf("BudgetsOf = %v", got)
	}

	// A minute and a second on, every sample is stale: last watts without
	// unmeteredNodeWatts, 300 W each with it; no reserved watts.
	f.t = t0.Add(maxAge + time.Second)
	s = f.d.Snapshot(f.t, maxAge)
	checkDomains(t, s, map[string]nums{
		"rack-a": {nodes: 2, noPower: 2, measured: 900},
		"rack-b": {nodes: 2, noPower: 2, measured: 300 + 300},
		"row-1":  {nodes: 3, noPower: 3, measured: 1250},
	})
	if n1 := s.Node("n1"); n1.FreshPower || n1.Metered || n1.Reserved.CPUMilli != 2000 {
		t.Errorf("stale n1 = %+v, want not fresh, 2000m still reserved", n1)
	}
}

// TestMembership: labels move a node between budgets; budgets and nodes
// come and go.
func TestMembership(t *testing.T) {
	f := newFixture()
	f.budget(t, "rack-a", "rack", "a", 2000, nil, nil)
	f.budget(t, "rack-b", "rack", "b", 1000, nil, ptr.To[int64](300))
	f.node("n1", "rack", "a")
	f.node("n2", "rack", "a")
	f.observe("n1", 50, 500, true)
	f.observe("n2", 20, 400, true)
	f.reserve("n2", "p", 1000, 0, t0) // 20 % -> 26.25 %: 50 W
	checkDomains(t, f.d.Snapshot(t0, maxAge), map[string]nums{
		"rack-a": {nodes: 2, measured: 900, reserved: 50},
		"rack-b": {},
	})

	f.node("n2", "rack", "b")
	s := f.d.Snapshot(t0, maxAge)
	checkDomains(t, s, map[string]nums{
		"rack-a": {nodes: 1, measured: 500},
		"rack-b": {nodes: 1, measured: 400, reserved: 50},
	})
	f.node("n2", "rack", "b") // unchanged labels change nothing
	if f.d.Snapshot(t0, maxAge) != s {
		t.Error("same labels again built a new snapshot")
	}

	if err := f.d.SetBudget(&v1alpha1.PowerBudget{ObjectMeta: metav1.ObjectMeta{Name: "rack-a"}, Spec: v1alpha1.PowerBudgetSpec{BudgetWatts: 1}}); err == nil {
		t.Error("SetBudget took an empty selector")
	}
	f.budget(t, "rack-a", "rack", "a", 3000, nil, nil)
	f.d.deleteBudget(named("rack-b"))
	s = f.d.Snapshot(t0, maxAge)
	checkDomains(t, s, map[string]nums{"rack-a": {nodes: 1, measured: 500}})
	if s.Domains[0].BudgetWatts != 3000 || s.Node("n2") != nil {
		t.Errorf("rack-a budget %d, n2 %+v; want 3000 and n2 in no budget", s.Domains[0].BudgetWatts, s.Node("n2"))
	}

	f.d.deleteNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	f.budget(t, "rack-a", "rack", "a", 2500, nil, nil) // n1 must not come back
	checkDomains(t, f.d.Snapshot(t0, maxAge), map[string]nums{"rack-a": {}})
	f.d.deleteBudget(toolscache.DeletedFinalStateUnknown{Key: "rack-a", Obj: named("rack-a")})
	if s := f.d.Snapshot(t0, maxAge); !s.Empty() || f.d.Len() != 0 {
		t.Errorf("%d domains after deleting every budget", len(s.Domains))
	}
}

// TestRetirement: a sample the cache saw max(2 intervals, 10 s) after a
// pod was placed measures it; an earlier one does not.
func TestRetirement(t *testing.T) {
	for _, tc := range []struct {
		name              string
		interval          int32
		after             time.Duration
		resample, retired bool // resample: the same sample written again
	}{
		{"5s interval, 9s later", 5, 9 * time.Second, false, false},
		{"5s interval, 10s later", 5, 10 * time.Second, false, true},
		{"10s interval, 19s later", 10, 19 * time.Second, false, false},
		{"10s interval, 20s later", 10, 20 * time.Second, false, true},
		{"1s interval holds 10s", 1, 9 * time.Second, false, false},
		{"1s interval, 10s later", 1, 10 * time.Second, false, true},
		{"same sample written again", 5, time.Minute, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			f.budget(t, "rack-a", "rack", "a", 2000, nil, nil)
			f.node("n1", "rack", "a")
			v0 := f.cache.Set(telemetry.FromStatus("n1", status(t0, tc.interval, 50, 500, true)))
			f.reserve("n1", "p", 2000, 0, t0)
			f.t = t0.Add(tc.after)
			sample := f.t
			if tc.resample {
				sample = t0
			}
			v1 := f.cache.Set(telemetry.FromStatus("n1", status(sample, tc.interval, 50, 500, true)))
			if got := f.d.Retired(v1); got != tc.retired {
				t.Errorf("Retired(new view) = %v, want %v", got, tc.retired)
			}
			if f.d.Retired(v0) || f.d.Retired(nil) {
				t.Error("the first view, or nil, retired pods")
			}
			// 2000m at 50 % is 100 W until retired.
			want := map[bool]nums{false: {nodes: 1, measured: 500, reserved: 100}, true: {nodes: 1, measured: 500}}[tc.retired]
			checkDomains(t, f.d.Snapshot(f.t, 2*time.Minute), map[string]nums{"rack-a": want})
		})
	}
}

// TestReserve: Reserve keeps a pod's first time, Unreserve forgets it, and
// a reservation no sample retires lasts 10 minutes.
func TestReserve(t *testing.T) {
	f := newFixture()
	f.budget(t, "rack-a", "rack", "a", 2000, nil, nil)
	f.node("n1", "rack", "a")
	f.node("n4", "rack", "a") // no telemetry
	f.observe("n1", 50, 500, true)
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), "nvidia.com/gpu": resource.MustParse("1")}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: req}}}}}
	f.place("n1", pod)
	f.place("n4", pod)
	n1 := f.d.Snapshot(t0, maxAge).Node("n1")
	if n1.Reserved.CPUMilli != 2000 || n1.Reserved.GPUs != 1 {
		t.Fatalf("n1 reserved %dm %d GPUs, want 2000m 1", n1.Reserved.CPUMilli, n1.Reserved.GPUs)
	}
	f.t = t0.Add(5 * time.Second)
	f.place("n1", pod) // placed at t0 still
	f.t = t0.Add(10 * time.Second)
	f.observe("n1", 62, 600, true) // 10 s after t0: retires it
	if got := f.d.Snapshot(f.t, maxAge).Node("n1").Reserved.CPUMilli; got != 0 {
		t.Errorf("after a sample 10s after the first Reserve, n1 reserved %dm, want 0", got)
	}

	f.reserve("n1", "q", 1000, 0, f.t)
	f.d.book.Unreserve("n1", "q")
	if got := f.d.Snapshot(f.t, maxAge).Node("n1").Reserved.CPUMilli; got != 0 {
		t.Errorf("after Unreserve, n1 reserved %dm, want 0", got)
	}

	// n4 has no sample to retire it: it counts until t0 + 10m. In time
	// order, as the scheduler's clock runs (an expired reservation is
	// forgotten when a snapshot finds it).
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{{10 * time.Minute, 2000}, {10*time.Minute + time.Second, 0}} {
		f.t = t0.Add(tc.at)
		if got := f.d.Snapshot(f.t, maxAge).Node("n4").Reserved.CPUMilli; got != tc.want {
			t.Errorf("n4 at t0+%v: %dm reserved, want %dm", tc.at, got, tc.want)
		}
	}
}

// TestSnapshotReuse: the same snapshot while nothing it reads changed.
func TestSnapshotReuse(t *testing.T) {
	f := newFixture()
	f.budget(t, "rack-a", "rack", "a", 2000, nil, nil)
	f.node("n1", "rack", "a")
	f.observe("n1", 50, 500, true)
	f.observe("n5", 50, 500, true) // in no budget
	s := f.d.Snapshot(t0, maxAge)
	same := func(what string, want bool, now time.Time) {
		t.Helper()
		got := f.d.Snapshot(now, maxAge)
		if (got == s) != want {
			t.Errorf("%s: same snapshot %v, want %v", what, got == s, want)
		}
		s = got
	}
	same("again", true, t0)
	same("30s on, fresh", true, t0.Add(30*time.Second))
	f.reserve("n5", "p", 1000, 0, t0)
	same("reserved on a node in no budget", true, t0)
	f.observe("n5", 60, 600, true)
	same("sample of a node in no budget", true, t0)
	f.d.book.Unreserve("n1", "nobody")
	same("unreserved a pod never reserved", true, t0)
	f.reserve("n1", "p", 1000, 0, t0)
	same("reserved on a member", false, t0)
	f.observe("n1", 50, 510, true)
	same("member's new sample, within MaxSampleLag", true, t0.Add(MaxSampleLag-time.Millisecond))
	same("member's new sample, MaxSampleLag on", false, t0.Add(MaxSampleLag))
	if got := s.Node("n1").View.Watts; got != 510 {
		t.Errorf("n1 at %d W in the rebuilt snapshot, want its new sample's 510 W", got)
	}
	f.observe("n1", 50, 520, true)
	if latest := f.d.SnapshotLatest(t0.Add(MaxSampleLag), maxAge); latest == s || latest.Node("n1").View.Watts != 520 {
		t.Error("SnapshotLatest did not take the member's newest sample")
	}
	s = f.d.Snapshot(t0.Add(MaxSampleLag), maxAge)
	if f.d.Snapshot(t0, 2*maxAge) == s {
		t.Error("another maxAge reused the snapshot")
	}
	s = f.d.Snapshot(t0, maxAge)
	same("61s on, stale", false, t0.Add(maxAge+time.Second))
	if s.Node("n1").FreshPower {
		t.Error("n1 fresh 61s after its sample")
	}
}

// TestStatusOf: the numbers, rounded as a status shows them, and the
// conditions.
func TestStatusOf(t *testing.T) {
	at := t0.Add(1500 * time.Millisecond) // written as t0 + 1s
	for _, tc := range []struct {
		name    string
		dom     Domain
		want    string // measured reserved headroom Ready OverBudget
		message string // in either condition
	}{
		// 1500.4 rounds to 1500, 100.2 up to 101: 2000 - 200 - 1601 = 199.
		{"within", Domain{BudgetWatts: 2000, ReserveWatts: 200, Nodes: 4, MeasuredWatts: 1500.4, ReservedWatts: 100.2},
			"1500 101 199 True/Measured False/WithinBudget", "measured 1500W of budgetWatts 2000W; headroom for pods 199W = budget 2000W - reserve 200W - measured 1500W - reserved 101W"},
		{"at the limit", Domain{BudgetWatts: 2000, Nodes: 4, MeasuredWatts: 1900, ReservedWatts: 100},
			"1900 100 0 True/Measured False/WithinBudget", "every one of the 4 nodes has fresh power telemetry and a power curve"},
		// Reserved watts take the headroom below 0, but the feed is not over.
		{"reserved past the limit", Domain{BudgetWatts: 2000, Nodes: 4, MeasuredWatts: 1950, ReservedWatts: 100},
			"1950 100 -50 True/Measured False/WithinBudget", "measured 1950W of budgetWatts 2000W; headroom for pods -50W"},
		{"over", Domain{BudgetWatts: 2000, Nodes: 4, MeasuredWatts: 2050},
			"2050 0 -50 True/Measured True/OverBudget", "measured 2050W of budgetWatts 2000W; headroom for pods -50W = budget 2000W - reserve 0W - measured 2050W - reserved 0W"},
		{"without power, unmetered set", Domain{BudgetWatts: 2000, Nodes: 4, NodesWithoutPower: 1, HasUnmetered: true, UnmeteredNodeWatts: 300, MeasuredWatts: 1000},
			"1000 0 1000 False/NodesWithoutPower False/WithinBudget",
			"1 of 4 nodes have no fresh power telemetry and 0 no power curve to estimate a pod's watts; they count 300W each (unmeteredNodeWatts)"},
		{"without a curve, unmetered unset", Domain{BudgetWatts: 2000, Nodes: 4, NodesWithoutEstimate: 2, MeasuredWatts: 1000},
			"1000 0 1000 False/NodesWithoutPower False/WithinBudget",
			"0 of 4 nodes have no fresh power telemetry and 2 no power curve to estimate a pod's watts; they count their last measured watts and take no pods (unmeteredNodeWatts is unset)"},
		{"no nodes", Domain{BudgetWatts: 2000}, "0 0 2000 False/NoNodes False/WithinBudget", "the nodeSelector picks no node"},
	} {
		tc.dom.Generation = 3 // the budget's spec generation
		st := StatusOf(&tc.dom, at)
		r, o := meta.FindStatusCondition(st.Conditions, ConditionReady), meta.FindStatusCondition(st.Conditions, ConditionOverBudget)
		if r == nil || o == nil {
			t.Fatalf("%s: conditions %+v", tc.name, st.Conditions)
		}
		got := fmt.Sprintf("%d %d %d %s/%s %s/%s", *st.MeasuredWatts, *st.ReservedWatts, *st.HeadroomWatts, r.Status, r.Reason, o.Status, o.Reason)
		if got != tc.want || !strings.Contains(r.Message+"\n"+o.Message, tc.message) {
			t.Errorf("%s: %s, messages %q %q; want %s, %q", tc.name, got, r.Message, o.Message, tc.want, tc.message)
		}
		second := t0.Add(time.Second)
		if st.ObservedGeneration != 3 || !st.UpdateTime.Time.Equal(second) || st.Nodes != tc.dom.Nodes || st.NodesWithoutPower != tc.dom.NodesWithoutPower ||
			r.ObservedGeneration != 3 || o.ObservedGeneration != 3 || !r.LastTransitionTime.Time.Equal(second) || !o.LastTransitionTime.Time.Equal(second) {
			t.Errorf("%s: status %+v: want generation 3, the domain's node counts, written and transitioned at t0+1s", tc.name, st)
		}
	}
}

// TestStatusOfTransitions: a condition whose status holds keeps its last
// transition time; one that flips takes now.
func TestStatusOfTransitions(t *testing.T) {
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonMeasured, Message: "old", ObservedGeneration: 1,
		LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}
	within := metav1.Condition{Type: ConditionOverBudget, Status: metav1.ConditionFalse, Reason: ReasonWithinBudget, ObservedGeneration: 1,
		LastTransitionTime: metav1.NewTime(t0.Add(-2 * time.Hour))}
	dom := Domain{Generation: 2, BudgetWatts: 2000, Nodes: 2, MeasuredWatts: 1000,
		Status: v1alpha1.PowerBudgetStatus{Conditions: []metav1.Condition{ready, within}}}
	st := StatusOf(&dom, t0)
	r, o := meta.FindStatusCondition(st.Conditions, ConditionReady), meta.FindStatusCondition(st.Conditions, ConditionOverBudget)
	if len(st.Conditions) != 3 || !r.LastTransitionTime.Equal(&ready.LastTransitionTime) || !o.LastTransitionTime.Equal(&within.LastTransitionTime) {
		t.Errorf("conditions %+v: want Ready since t0-1h, OverBudget since t0-2h and PowerSourcesComparable", st.Conditions)
	}
	if r.Message == "old" || r.ObservedGeneration != 2 {
		t.Errorf("Ready kept its old message or generation: %+v", r)
	}
	dom.MeasuredWatts = 2001 // 1 W over budgetWatts
	st = StatusOf(&dom, t0)
	if o := meta.FindStatusCondition(st.Conditions, ConditionOverBudget); o.Status != metav1.ConditionTrue || !o.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("OverBudget = %+v, want True since t0", o)
	}
	if r := meta.FindStatusCondition(st.Conditions, ConditionReady); !r.LastTransitionTime.Equal(&ready.LastTransitionTime) {
		t.Errorf("Ready = %+v, want since t0-1h", r)
	}
}

// TestDue: a status is written on a heartbeat, a new generation, node
// counts or conditions, or watts moved by the deadband (1 % of 2000 W:
// 20 W, and at least 1 W).
func TestDue(t *testing.T) {
	base := Domain{Generation: 1, BudgetWatts: 2000, Nodes: 4, MeasuredWatts: 1000}
	last := writtenStatus{status: StatusOf(&base, t0), at: t0}
	for _, tc := range []struct {
		name  string
		edit  func(d *Domain)
		after time.Duration
		band  int32 // deadband percent
		want  bool
	}{
		{"unchanged", func(*Domain) {}, 59 * time.Second, 1, false},
		{"heartbeat", func(*Domain) {}, time.Minute, 1, true},
		{"measured 19W", func(d *Domain) { d.MeasuredWatts = 1019 }, 0, 1, false},
		{"measured 20W", func(d *Domain) { d.MeasuredWatts = 980 }, 0, 1, true},
		{"reserved 19W", func(d *Domain) { d.ReservedWatts = 18.5 }, 0, 1, false}, // shown as 19
		{"reserved 20W", func(d *Domain) { d.ReservedWatts = 19.5 }, 0, 1, true},
		{"no deadband, 1W", func(d *Domain) { d.MeasuredWatts = 1001 }, 0, 0, true},
		{"no deadband, under 1W", func(d *Domain) { d.MeasuredWatts = 1000.4 }, 0, 0, false},
		{"a node more", func(d *Domain) { d.Nodes = 5 }, 0, 1, true},
		{"a node without power", func(d *Domain) { d.NodesWithoutPower = 1 }, 0, 1, true},
		// Ready turns False; no count the status shows changes.
		{"a node without a curve", func(d *Domain) { d.NodesWithoutEstimate = 1 }, 0, 1, true},
		{"new generation", func(d *Domain) { d.Generation = 2 }, 0, 1, true},
		// 1000 W measured of 990 W: OverBudget turns True, the watts stay.
		{"over, watts unchanged", func(d *Domain) { d.BudgetWatts = 990 }, 0, 1, true},
	} {
		cur := base
		tc.edit(&cur)
		now := t0.Add(tc.after)
		w := &statusWriter{opts: StatusOptions{Interval: 10 * time.Second, Heartbeat: time.Minute, DeadbandPercent: tc.band}}
		if got := w.due(&cur, last, StatusOf(&cur, now), now); got != tc.want {
			t.Errorf("%s: due = %v, want %v", tc.name, got, tc.want)
		}
	}
	never := last
	never.status.MeasuredWatts = nil // no status written yet
	w := &statusWriter{opts: StatusOptions{Interval: 10 * time.Second, Heartbeat: time.Minute, DeadbandPercent: 1}}
	if !w.due(&base, never, StatusOf(&base, t0), t0) {
		t.Error("due = false for a budget without measuredWatts")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(o *StatusOptions)
		want string // in the error; "" valid
	}{
		{"defaults", func(*StatusOptions) {}, ""},
		{"heartbeat equals interval", func(o *StatusOptions) { o.Heartbeat = o.Interval }, ""},
		{"deadband 50", func(o *StatusOptions) { o.DeadbandPercent = 50 }, ""},
		{"zero interval", func(o *StatusOptions) { o.Interval = 0 }, "--power-budget-status-interval must be greater than 0, got 0s"},
		{"heartbeat below interval", func(o *StatusOptions) { o.Heartbeat = 5 * time.Second },
			"--power-budget-status-heartbeat (5s) must be at least --power-budget-status-interval (10s)"},
		{"negative deadband", func(o *StatusOptions) { o.DeadbandPercent = -1 }, "must be between 0 and 50, got -1"},
		{"deadband 51", func(o *StatusOptions) { o.DeadbandPercent = 51 }, "must be between 0 and 50, got 51"},
		{"no lease name", func(o *StatusOptions) { o.LeaseName = "" }, "--power-budget-lease-namespace and --power-budget-lease-name must not be empty"},
		{"no lease namespace", func(o *StatusOptions) { o.LeaseNamespace = "" }, "must not be empty"},
	} {
		o := DefaultStatusOptions()
		tc.edit(&o)
		if err := o.Validate(); (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestDeriveMatchesBuild: a snapshot derived from the last full one, with
// the nodes whose reservations changed (placed, unreserved, retired by a
// sample) taken anew, reads as a snapshot built from every member at the
// same moment would.
func TestDeriveMatchesBuild(t *testing.T) {
	f := newFixture()
	f.budget(t, "rack-a", "rack", "a", 5000, nil, nil)
	f.budget(t, "row-1", "row", "1", 9000, ptr.To[int64](500), ptr.To[int64](300))
	for i, n := range []string{"n1", "n2", "n3", "n4"} {
		f.node(n, "rack", "a", "row", "1")
		f.observe(n, int32(20+10*i), int32(400+50*i), n != "n4") // n4 without a curve
	}
	f.node("n5", "row", "1") // no telemetry
	s0 := f.d.Snapshot(t0, maxAge)
	step := func(what string, change func()) {
		t.Helper()
		change()
		got := f.d.Snapshot(f.t, maxAge)
		if got.overrides == nil {
			t.Fatalf("%s: snapshot built anew, not derived", what)
		}
		f.d.mu.Lock()
		want := f.d.build(f.t, maxAge, f.d.version.Load())
		f.d.mu.Unlock()
		for i := range want.Domains {
			g, w := got.Domains[i], want.Domains[i]
			if math.Abs(g.MeasuredWatts-w.MeasuredWatts) > 1e-9 || math.Abs(g.ReservedWatts-w.ReservedWatts) > 1e-9 ||
				g.NodesWithoutPower != w.NodesWithoutPower || g.NodesWithoutEstimate != w.NodesWithoutEstimate {
				t.Errorf("%s: %s derived %+v, built %+v", what, w.Name, g, w)
			}
		}
		for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
			if g, w := got.Node(n), want.Node(n); g.Reserved.CPUMilli != w.Reserved.CPUMilli || g.View != w.View || g.Metered != w.Metered {
				t.Errorf("%s: %s derived %+v, built %+v", what, n, *g, *w)
			}
		}
	}
	step("a pod placed on n1", func() { f.reserve("n1", "p1", 2000, 0, f.t) })
	step("two on n2, one on n4", func() {
		f.reserve("n2", "p2", 1000, 0, f.t)
		f.reserve("n2", "p3", 500, 0, f.t)
		f.reserve("n4", "p4", 1000, 0, f.t)
	})
	step("p2 unreserved", func() { f.d.book.Unreserve("n2", "p2") })
	f.t = t0.Add(500 * time.Millisecond)
	step("n5 reserved, no telemetry", func() { f.reserve("n5", "p5", 1000, 0, f.t) })
	// n1's sample 12 s after p1 retires it, with its new watts: derived
	// (the node was touched), and counted within MaxSampleLag of base.
	f.t = t0.Add(900 * time.Millisecond)
	step("n1's sample retires p1", func() {
		f.d.book.Unreserve("n1", "p1")
		f.reserve("n1", "p1", 2000, 0, t0.Add(-12*time.Second))
		f.observe("n1", 35, 520, true)
	})
	if s := f.d.Snapshot(f.t, maxAge); s == s0 || s.Node("n1").Reserved.CPUMilli != 0 {
		t.Errorf("n1 after the retiring sample: %+v", *s.Node("n1"))
	}
}

// TestPowerableGPUs: a rack's headroom goes to its members' free GPUs
// cheapest first; a node gets what its tightest budget leaves it.
func TestPowerableGPUs(t *testing.T) {
	f := newFixture()
	f.budget(t, "rack-gpu", "rack", "gpu", 4500, nil, nil)
	f.budget(t, "row-1", "row", "1", 100000, nil, nil)
	f.node("a100", "rack", "gpu", "row", "1")
	f.node("h100", "rack", "gpu", "row", "1")
	f.node("alone")
	gpuNode := func(name string, idle, busy float64) {
		n := telemetry.FromStatus(name, status(f.t, 5, 10, 700, true))
		n.GPUs = make([]telemetry.GPU, 8)
		n.Models.GPUBasis, n.Models.GPUIdleWatts, n.Models.GPUBusyWatts = telemetry.BasisFitted, idle, busy
		f.cache.Set(n)
	}
	gpuNode("a100", 50, 400)  // 350 W a busy GPU
	gpuNode("h100", 100, 750) // 650 W
	gpuNode("alone", 100, 750)
	free := map[string]int64{"a100": 8, "h100": 8, "alone": 8}
	freeOf := func(m string, _ *telemetry.Node) int64 { return free[m] }
	powerable := func(node string) (int64, bool) {
		return f.d.Snapshot(f.t, maxAge).PowerableGPUs(node, freeOf)
	}
	// rack-gpu: 4500 - 1400 measured = 3100 W: the A100s take 8 x 350 =
	// 2800, the 300 W left power no H100. row-1 would power them all.
	for _, tc := range []struct {
		node string
		want int64
	}{{"a100", 8}, {"h100", 0}} {
		if got, ok := powerable(tc.node); !ok || got != tc.want {
			t.Errorf("%s: %d powerable (ok %v), want %d", tc.node, got, ok, tc.want)
		}
	}
	if _, ok := powerable("alone"); ok {
		t.Errorf("a node in no budget is limited")
	}
	// Four A100s allocated: 4 x 350 = 1400, 1700 W left power two H100s.
	free["a100"] = 4
	if got, _ := powerable("h100"); got != 2 {
		t.Errorf("h100 with 4 A100s free: %d powerable, want 2", got)
	}

	// With their speeds published (MLPerf: an H100 SXM does 2.06 times an
	// A100 80GB's work) an H100 costs 650 / 2.06 = 316 W per unit of work
	// against an A100's 350: the H100s come first, as EnergyAware fills
	// them. 3100 W: four H100s (2600 W), the 500 W left one A100.
	free["a100"] = 8
	for name, speed := range map[string]float64{"a100": 1, "h100": 2.06} {
		n := telemetry.FromStatus(name, status(f.t, 5, 10, 700, true))
		n.GPUs = make([]telemetry.GPU, 8)
		for i := range n.GPUs {
			n.GPUs[i].Speed, n.GPUs[i].SpeedSource = speed, "table"
		}
		idle, busy := 50.0, 400.0
		if name == "h100" {
			idle, busy = 100, 750
		}
		n.Models.GPUBasis, n.Models.GPUIdleWatts, n.Models.GPUBusyWatts = telemetry.BasisFitted, idle, busy
		f.cache.Set(n)
	}
	for _, tc := range []struct {
		node string
		want int64
	}{{"h100", 4}, {"a100", 1}} {
		// Every sample the cache holds: the views just set.
		if got, ok := f.d.SnapshotLatest(f.t, maxAge).PowerableGPUs(tc.node, freeOf); !ok || got != tc.want {
			t.Errorf("with speeds, %s: %d powerable (ok %v), want %d: cheapest per unit of work first", tc.node, got, ok, tc.want)
		}
	}
}

// TestBudgetStatusUpdate: a PowerBudget update that changes only its status
// (the status writer's, every budget every heartbeat) leaves the members
// and the snapshot as they were; one that changes the spec recomputes that
// budget's members.
func TestBudgetStatusUpdate(t *testing.T) {
	f := newFixture()
	f.budget(t, "rack-a", "rack", "a", 2000, nil, nil)
	f.budget(t, "rack-b", "rack", "b", 1000, nil, nil)
	f.node("n1", "rack", "a", "row", "1")
	f.node("n2", "rack", "b", "row", "1")
	f.observe("n1", 50, 500, true)
	f.observe("n2", 20, 400, true)
	s := f.d.Snapshot(t0, maxAge)

	pb := &v1alpha1.PowerBudget{ObjectMeta: metav1.ObjectMeta{Name: "rack-a", Generation: 1}, Spec: v1alpha1.PowerBudgetSpec{
		NodeSelector: v1alpha1.NodeSelector{MatchLabels: map[string]v1alpha1.LabelValue{"rack": "a"}}, BudgetWatts: 2000,
	}, Status: v1alpha1.PowerBudgetStatus{MeasuredWatts: ptr.To[int64](500)}}
	if err := f.d.SetBudget(pb); err != nil {
		t.Fatal(err)
	}
	if f.d.Snapshot(t0, maxAge) != s {
		t.Error("a status-only update built a new snapshot")
	}

	// The spec changes (generation 2): rack-a now picks row 1, both nodes.
	pb = pb.DeepCopy()
	pb.Generation = 2
	pb.Spec.NodeSelector.MatchLabels = map[string]v1alpha1.LabelValue{"row": "1"}
	if err := f.d.SetBudget(pb); err != nil {
		t.Fatal(err)
	}
	checkDomains(t, f.d.Snapshot(t0, maxAge), map[string]nums{
		"rack-a": {nodes: 2, measured: 900},
		"rack-b": {nodes: 1, measured: 400},
	})
	if got := f.d.members["n2"]; !slices.Equal(got, []string{"rack-a", "rack-b"}) {
		t.Errorf("n2's budgets %v, want [rack-a rack-b] (sorted)", got)
	}
	f.d.deleteBudget(named("rack-a"))
	if got := f.d.members["n1"]; got != nil {
		t.Errorf("n1's budgets after rack-a's deletion: %v, want none", got)
	}
}

// BenchmarkBudgetStatusUpdate: what the status writer's update of one
// PowerBudget costs the scheduler's informer handler, at 5000 nodes in
// 125 racks of 40 (make bench-scheduler NODES=5000's fleet).
func BenchmarkBudgetStatusUpdate(b *testing.B) {
	f := newFixture()
	const nodes, rack = 5000, 40
	var budgets []*v1alpha1.PowerBudget
	for r := range nodes / rack {
		name := fmt.Sprintf("rack-%04d", r)
		pb := &v1alpha1.PowerBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}, Spec: v1alpha1.PowerBudgetSpec{
			NodeSelector: v1alpha1.NodeSelector{MatchLabels: map[string]v1alpha1.LabelValue{"rack": v1alpha1.LabelValue(name)}}, BudgetWatts: 40000,
		}}
		if err := f.d.SetBudget(pb); err != nil {
			b.Fatal(err)
		}
		budgets = append(budgets, pb)
	}
	for i := range nodes {
		f.node(fmt.Sprintf("node-%05d", i), "rack", fmt.Sprintf("rack-%04d", i/rack))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		pb := budgets[i%len(budgets)]
		pb.Status.MeasuredWatts = ptr.To(int64(i))
		if err := f.d.SetBudget(pb); err != nil {
			b.Fatal(err)
		}
	}
}
