// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package plugintest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Clock is the scheduler's clock in a test: it stands still until Set.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// NewCache returns a cache on clk.
func NewCache(clk *Clock) *telemetry.Cache {
	return telemetry.NewCacheWithClock(clk.Now)
}

// Observe stores st's view in c as the cache sees a sample from an agent
// in step with the scheduler: at its sampleTime.
func Observe(c *telemetry.Cache, clk *Clock, name string, st *telemetryv1alpha1.NodeTelemetryStatus) {
	saved := clk.Now()
	clk.Set(st.SampleTime.Time)
	c.Set(telemetry.FromStatus(name, st))
	clk.Set(saved)
}

// Change stores an update of node name's NodeTelemetry from old (nil: an
// add) to cur in c, as the cache's informer stores it: the old object
// (resource version 1) when its sample came, at its sampleTime, the new
// one (resource version 2) written now. It returns the views a plugin's
// pick is handed for the change (rejected.OnTelemetry): the stored view of
// old, nil for an add, and of cur.
func Change(t testing.TB, c *telemetry.Cache, clk *Clock, name string, old, cur *telemetryv1alpha1.NodeTelemetryStatus) (prevView, curView *telemetry.Node) {
	t.Helper()
	store := func(u *unstructured.Unstructured) *telemetry.Node {
		n, err := telemetry.Decode(u)
		if err != nil {
			t.Fatal(err)
		}
		return c.Set(n)
	}
	if old != nil {
		saved := clk.Now()
		clk.Set(old.SampleTime.Time)
		prevView = store(Object(t, name, 1, old, old.SampleTime.Time))
		clk.Set(saved)
	}
	return prevView, store(Object(t, name, 2, cur, clk.Now()))
}

// WrittenByAgent is the managed fields of an object whose status the
// node's agent wrote at written, as the API server records it.
func WrittenByAgent(written time.Time) []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{
		Manager: telemetry.AgentFieldManager, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status",
		APIVersion: telemetryv1alpha1.SchemeGroupVersion.String(), Time: new(metav1.NewTime(written)),
	}}
}

// Object is node name's NodeTelemetry with st at resource version rv, its
// status written by its agent at written (the managed fields the cache
// reads a first view's time from).
func Object(t testing.TB, name string, rv int, st *telemetryv1alpha1.NodeTelemetryStatus, written time.Time) *unstructured.Unstructured {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&telemetryv1alpha1.NodeTelemetry{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: fmt.Sprint(rv), ManagedFields: WrittenByAgent(written)}, Status: *st,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}
