package telemetry

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

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

// Defect 4: a hint that processes an update older than a deletion must not
// bring the node back.
func TestPreFixDeletionRemembered(t *testing.T) {
	c := NewCache()
	busy := c.NewCounter(func(n *Node) bool { return n.CPUPercent > 90 })
	v4, v5 := objectAt(t, "4", 95), objectAt(t, "5", 95)
	if _, _, err := c.ObserveChange(v4, v5); err != nil {
		t.Fatal(err)
	}
	c.remove(objectAt(t, "6", 95))
	if _, _, err := c.ObserveChange(v4, v5); err != nil { // the scheduler's informer, behind
		t.Fatal(err)
	}
	if _, ok := c.Get("n"); ok || busy.Count() != 0 || c.LoadBound().CPUBP != 0 {
		t.Errorf("after the delete, a late update brought the node back: present %v, busy %d, bound %+v", ok, busy.Count(), c.LoadBound())
	}
}

// Defect 5: hints for many pending pods decode an update once.
func TestPreFixObserveChangeMemoized(t *testing.T) {
	c := NewCache()
	v4, v5 := objectAt(t, "4", 50), objectAt(t, "5", 60)
	if _, _, err := c.ObserveChange(v4, v5); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() { _, _, _ = c.ObserveChange(v4, v5) })
	if allocs > 0 {
		t.Errorf("ObserveChange of an update already seen: %.0f allocations, want 0 (decoded again)", allocs)
	}
}
