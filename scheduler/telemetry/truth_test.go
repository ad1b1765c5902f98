// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/telesched/telesched/agent/publisher"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

func objectAt(t *testing.T, rv string, cpu int32) *unstructured.Unstructured {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&telemetryv1alpha1.NodeTelemetry{
		ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv},
		Status: telemetryv1alpha1.NodeTelemetryStatus{SampleTime: metav1.NewTime(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)), IntervalSeconds: 5,
			CPU: &telemetryv1alpha1.CPUStatus{LogicalCores: 16, OnlineCores: 16, UtilizationPercent: cpu}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// firstView stores u in c as the cache's informer does and returns the
// view stored.
func firstView(t *testing.T, c *Cache, u *unstructured.Unstructured) *Node {
	t.Helper()
	c.upsert(klog.Background(), u)
	n, ok := c.Get(u.GetName())
	if !ok {
		t.Fatal("not stored")
	}
	return n
}

// Defect 4: an update older than a deletion, delivered late, must not
// bring the node back.
func TestDeletionRemembered(t *testing.T) {
	c := NewCache()
	busy := c.NewCounter(func(n *Node) bool { return n.CPUPercent > 90 })
	c.upsert(klog.Background(), objectAt(t, "5", 95))
	if _, ok := c.Get("n"); !ok || busy.Count() != 1 {
		t.Fatalf("after an add: present %v, busy %d", ok, busy.Count())
	}
	c.remove(objectAt(t, "6", 95))
	c.upsert(klog.Background(), objectAt(t, "5", 95)) // late
	if _, ok := c.Get("n"); ok || busy.Count() != 0 {
		t.Errorf("after the delete, a late update brought the node back: present %v, busy %d", ok, busy.Count())
	}
	c.upsert(klog.Background(), objectAt(t, "7", 95)) // created again
	if _, ok := c.Get("n"); !ok {
		t.Error("an object created after the deletion was not stored")
	}
}

// A deleted node written again (a new object, a newer resource version)
// comes back.
func TestRecreatedAfterDeletion(t *testing.T) {
	c := NewCache()
	c.Set(&Node{Name: "n", resourceVersion: 5})
	c.remove(objectAt(t, "6", 10))
	if c.Set(&Node{Name: "n", resourceVersion: 6}) != nil {
		t.Error("the deleted version was stored")
	}
	if c.Set(&Node{Name: "n", resourceVersion: 7}) == nil || c.Len() != 1 {
		t.Errorf("the object created again was not stored (Len %d)", c.Len())
	}
}

// Freshness is the scheduler's: a view is observed when the cache first
// sees its sample, whatever the agent's clock says; the same sample
// written again keeps its first observation.
func TestObservedOnTheSchedulersClock(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	clock := t0
	c := NewCacheWithClock(func() time.Time { return clock })
	for _, step := range []struct {
		name       string
		advance    time.Duration
		sampleTime time.Time
		wantSince  time.Duration // Observed, from t0
		wantSkewed bool
	}{
		{"agent in step", 0, t0.Add(-2 * time.Second), 0, false},
		{"70 s behind", 5 * time.Second, t0.Add(-65 * time.Second), 5 * time.Second, true},
		{"the same sample again", 10 * time.Second, t0.Add(-65 * time.Second), 5 * time.Second, true},
		{"15 s ahead", 20 * time.Second, t0.Add(50 * time.Second), 35 * time.Second, false},
		{"an hour ahead", 25 * time.Second, t0.Add(time.Hour), 60 * time.Second, true},
	} {
		clock = clock.Add(step.advance)
		n := c.Set(&Node{Name: "n", SampleTime: step.sampleTime})
		if got := n.Observed.Sub(t0); got != step.wantSince || n.Skewed != step.wantSkewed {
			t.Errorf("%s: observed t0+%v skewed %v (offset %v); want t0+%v skewed %v", step.name, got, n.Skewed, n.ClockOffset, step.wantSince, step.wantSkewed)
		}
		if got := c.Skewed(); got != map[bool]int{true: 1}[step.wantSkewed] {
			t.Errorf("%s: Skewed() = %d", step.name, got)
		}
	}
	// An hour-ahead sample does not keep the node fresh once its agent stops.
	n, _ := c.Get("n")
	if !n.Fresh(clock.Add(time.Minute), time.Minute) || n.Fresh(clock.Add(time.Minute+time.Second), time.Minute) {
		t.Error("freshness: a sample seen exactly maxAge ago is fresh, a second more is stale")
	}
}

// The first view of a node after the scheduler starts counts as observed
// when the API server last wrote the object, if earlier: an agent that
// stopped an hour before the scheduler started is stale at once.
func TestFirstViewObservedAtItsWrite(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	c := NewCacheWithClock(func() time.Time { return t0 })
	u := objectAt(t, "4", 10)
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "telesched-agent", Operation: metav1.ManagedFieldsOperationApply, Time: new(metav1.NewTime(t0.Add(-2 * time.Hour)))},
		{Manager: "telesched-agent", Operation: metav1.ManagedFieldsOperationApply, Subresource: "status", Time: new(metav1.NewTime(t0.Add(-time.Hour)))},
	})
	trimManagedFields(u) // as the cache's informer does
	if mf := u.GetManagedFields(); len(mf) != 1 || mf[0].FieldsV1 != nil {
		t.Fatalf("trimmed managed fields = %+v", mf)
	}
	cur := firstView(t, c, u)
	if got := t0.Sub(cur.Observed); got != time.Hour || cur.Fresh(t0, time.Minute) {
		t.Errorf("first view observed %v before now, want 1h (the status write)", got)
	}
}

// TestFirstViewObservedAtTheAgentsWrite: after the scheduler starts, a
// node's first view counts as observed at its agent's last write of the
// status (field manager telesched-agent, status subresource), never at a
// later write of anyone else: a label, the scheduler's own calibration, the
// agent's metadata. With no write of the agent's at all, the view is stale
// until the agent's next sample.
func TestFirstViewObservedAtTheAgentsWrite(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return new(metav1.NewTime(t0.Add(d))) }
	agentStatus := func(d time.Duration) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: "telesched-agent", Operation: metav1.ManagedFieldsOperationApply, Subresource: "status", Time: at(d)}
	}
	for _, tc := range []struct {
		name         string
		managed      []metav1.ManagedFieldsEntry
		wantObserved time.Time // zero: never observed, stale
	}{
		{"the agent's write 2h ago, a label 10s ago", []metav1.ManagedFieldsEntry{
			agentStatus(-2 * time.Hour),
			{Manager: "kubectl-label", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(-10 * time.Second)},
		}, t0.Add(-2 * time.Hour)},
		{"the scheduler's calibration 5s ago", []metav1.ManagedFieldsEntry{
			agentStatus(-time.Hour),
			{Manager: "telesched-scheduler", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: at(-5 * time.Second)},
		}, t0.Add(-time.Hour)},
		{"the agent's owner reference 10s ago", []metav1.ManagedFieldsEntry{
			{Manager: "telesched-agent", Operation: metav1.ManagedFieldsOperationApply, Time: at(-10 * time.Second)},
			agentStatus(-time.Hour),
		}, t0.Add(-time.Hour)},
		{"another writer's status 10s ago, none of the agent's", []metav1.ManagedFieldsEntry{
			{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: at(-10 * time.Second)},
		}, time.Time{}},
		{"the agent's write 30s ago", []metav1.ManagedFieldsEntry{agentStatus(-30 * time.Second)}, t0.Add(-30 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCacheWithClock(func() time.Time { return t0 })
			u := objectAt(t, "4", 10)
			u.SetManagedFields(tc.managed)
			trimManagedFields(u) // as the cache's informer does
			if mf := u.GetManagedFields(); !tc.wantObserved.IsZero() && (len(mf) != 1 || !mf[0].Time.Time.Equal(tc.wantObserved) || mf[0].FieldsV1 != nil) {
				t.Errorf("trimmed managed fields = %+v, want the agent's status write alone", mf)
			}
			cur := firstView(t, c, u)
			if !cur.Observed.Equal(tc.wantObserved) {
				t.Errorf("first view observed at %v (%v before now), want %v", cur.Observed, t0.Sub(cur.Observed), tc.wantObserved)
			}
			wantFresh := !tc.wantObserved.IsZero() && t0.Sub(tc.wantObserved) <= time.Minute
			if got := cur.Fresh(t0, time.Minute); got != wantFresh {
				t.Errorf("fresh(1m) = %v, want %v", got, wantFresh)
			}
		})
	}
}

// The cache knows the agent's writes by the field manager its publisher
// writes with.
func TestAgentFieldManagerIsThePublishers(t *testing.T) {
	if AgentFieldManager != publisher.DefaultFieldManager {
		t.Errorf("AgentFieldManager %q, the agent's publisher writes as %q", AgentFieldManager, publisher.DefaultFieldManager)
	}
}
