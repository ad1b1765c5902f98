// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/telesched/telesched/scheduler/telemetry"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// bookFixture is a book over a cache on a clock at t that stands still
// until moved.
type bookFixture struct {
	t     time.Time
	cache *telemetry.Cache
	book  *Book
}

func newBookFixture() *bookFixture {
	f := &bookFixture{t: t0}
	f.cache = telemetry.NewCacheWithClock(func() time.Time { return f.t })
	f.book = NewBook(f.cache, DefaultOptions())
	return f
}

// sample is the node's agent publishing a sample now (interval 5 s).
func (f *bookFixture) sample(node string) {
	f.cache.Set(&telemetry.Node{Name: node, SampleTime: f.t, Interval: 5 * time.Second, HasCPU: true, CPUPercent: 40, LogicalCores: 16})
}

// boundPod is a pod of cpu bound to node, in phase; scheduled and (when
// running) started at the given times.
func boundPod(uid, node, cpu string, phase v1.PodPhase, scheduled, started time.Time) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: v1.PodStatus{Phase: phase, Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(scheduled)}}},
	}
	if phase == v1.PodRunning {
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}
	}
	return p
}

// A pod counts from its binding until a sample a hold (two 5 s intervals,
// at least 10 s) after it was seen running: 30 s of samples while it
// pulls its image retire nothing.
func TestReservationHeldUntilPodRunsAndSampled(t *testing.T) {
	f := newBookFixture()
	f.sample("n")
	pod := boundPod("a", "n", "6", v1.PodPending, t0, time.Time{})
	f.book.podSeen(pod, false) // bound by whichever scheduler: counted
	for range 6 {
		f.t = f.t.Add(5 * time.Second)
		f.sample("n")
	}
	if got := f.book.Get("n").CPUMilli; got != 6000 {
		t.Fatalf("30 s after binding, still pulling: %dm reserved, want 6000m", got)
	}
	f.book.podSeen(boundPod("a", "n", "6", v1.PodRunning, t0, f.t), false)
	running := f.t
	for _, tc := range []struct {
		after time.Duration
		want  int64
	}{{5 * time.Second, 6000}, {9 * time.Second, 6000}, {10 * time.Second, 0}} {
		f.t = running.Add(tc.after)
		f.sample("n")
		if got := f.book.Get("n").CPUMilli; got != tc.want {
			t.Errorf("a sample %v after it ran: %dm reserved, want %dm", tc.after, got, tc.want)
		}
	}
}

// A scheduler that starts (a restart, a new leader) rebuilds the book from
// the informer's first list: pods bound and not yet running, and pods
// running too recently for their node's sample to show them; not pods the
// sample shows already, nor finished ones.
func TestBookRebuiltFromFirstList(t *testing.T) {
	f := newBookFixture()
	f.t = t0.Add(time.Hour)
	f.sample("n") // the node's sample, seen now
	now := f.t
	for _, p := range []*v1.Pod{
		boundPod("placed-5s-ago", "n", "1", v1.PodPending, now.Add(-5*time.Second), time.Time{}),
		boundPod("running-3s", "n", "2", v1.PodRunning, now.Add(-8*time.Second), now.Add(-3*time.Second)),
		boundPod("running-1h", "n", "4", v1.PodRunning, t0, t0.Add(time.Second)),
		boundPod("finished", "n", "8", v1.PodSucceeded, now.Add(-5*time.Second), time.Time{}),
	} {
		f.book.podSeen(p, true)
	}
	// 1 + 2 CPUs
	if got := f.book.Get("n").CPUMilli; got != 3000 {
		t.Errorf("rebuilt: %dm reserved, want 3000m (the pending pod and the one running for 3 s)", got)
	}
	// The pod running since 3 s before is shown by a sample 7 s on (10 s
	// after it started); the pending one is not.
	f.t = now.Add(7 * time.Second)
	f.sample("n")
	if got := f.book.Get("n").CPUMilli; got != 1000 {
		t.Errorf("a sample 10 s after the second pod started: %dm reserved, want 1000m", got)
	}
}

// A pod deleted or finished stops counting, and a late event about it
// does not bring it back; a failed binding (Unreserve) does not stop the
// pod from being placed again.
func TestBookEndsPods(t *testing.T) {
	f := newBookFixture()
	f.sample("n")
	pod := boundPod("a", "n", "2", v1.PodPending, t0, time.Time{})
	f.book.podSeen(pod, false)
	f.book.End("n", pod.UID)
	f.book.podSeen(pod, false) // a late update
	if got := f.book.Get("n").CPUMilli; got != 0 {
		t.Errorf("after the pod's deletion and a late update: %dm reserved, want 0", got)
	}
	f.book.Reserve("n", boundPod("b", "n", "1", v1.PodPending, t0, time.Time{}))
	f.book.Unreserve("n", "b")
	f.book.Reserve("n", boundPod("b", "n", "1", v1.PodPending, t0, time.Time{}))
	if got := f.book.Get("n").CPUMilli; got != 1000 {
		t.Errorf("a pod placed again after a failed binding: %dm reserved, want 1000m", got)
	}
	f.book.podSeen(boundPod("b", "n", "1", v1.PodFailed, t0, time.Time{}), false)
	if got := f.book.Get("n").CPUMilli; got != 0 {
		t.Errorf("after the pod failed: %dm reserved, want 0", got)
	}
}

// A book's listeners hear of every change of a node's reservations, and
// of nothing else.
func TestBookOnChange(t *testing.T) {
	f := newBookFixture()
	var heard []string
	f.book.OnChange(func(node string) { heard = append(heard, node) })
	f.sample("n")
	f.book.ReserveDemand("n", "a", Demand{CPUMilli: 1000})
	f.t = f.t.Add(5 * time.Second)
	f.sample("n") // retires nothing: a not seen running
	f.book.Running("n", "a")
	f.t = f.t.Add(10 * time.Second)
	f.sample("n") // retires a
	if len(heard) != 2 || heard[0] != "n" || heard[1] != "n" {
		t.Errorf("listener heard %v, want [n n] (the reservation, its retirement)", heard)
	}
}

// A sample that shows the running pods' load (their CPU above the sample
// before they ran, by ShownFraction of their requests) retires them before
// the hold: counting them on would count them twice.
func TestReservationShownByJump(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cpu     int32 // the sample 5 s after the pod ran, on 16 cores at 40 % before
		want    int64
		comment string
	}{
		// 4 CPUs of 16 = 25 points; 0.8 x 25 = 20: 60 % or more shows it
		{"shown", 62, 0, "62 - 40 = 22 >= 20"},
		{"not yet", 55, 4000, "55 - 40 = 15 < 20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newBookFixture()
			f.sample("n")
			f.book.podSeen(boundPod("a", "n", "4", v1.PodRunning, f.t, f.t), false)
			f.t = f.t.Add(5 * time.Second)
			f.cache.Set(&telemetry.Node{Name: "n", SampleTime: f.t, Interval: 5 * time.Second, HasCPU: true, CPUPercent: tc.cpu, LogicalCores: 16})
			if got := f.book.Get("n").CPUMilli; got != tc.want {
				t.Errorf("%dm reserved, want %dm (%s)", got, tc.want, tc.comment)
			}
		})
	}
}
