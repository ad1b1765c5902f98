// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"math"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// sampleTaken is the node's agent publishing, now, a sample it took at
// (interval 5 s).
func (f *bookFixture) sampleTaken(node string, at time.Time) {
	f.cache.Set(&telemetry.Node{Name: node, SampleTime: at, Interval: 5 * time.Second, HasCPU: true, CPUPercent: 40, LogicalCores: 16})
}

// withReady is p with its Ready condition set to status, as the kubelet
// writes it when a readiness probe flaps.
func withReady(p *v1.Pod, status v1.ConditionStatus) *v1.Pod {
	q := p.DeepCopy()
	q.Status.Conditions = append(q.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: status})
	return q
}

// restarted is p after its container restarted.
func restarted(p *v1.Pod, at time.Time) *v1.Pod {
	q := p.DeepCopy()
	cs := &q.Status.ContainerStatuses[0]
	cs.RestartCount++
	cs.State.Running.StartedAt = metav1.NewTime(at)
	return q
}

// A pod a sample retired is counted once, by the node's measurement:
// readiness flaps, a container restart and a label patch (each an
// Update of the pod) do not reserve it again, and the node's calibration,
// exact for pods that draw what the curve says, stays where the pods'
// start put it.
func TestRetiredPodNotReservedAgainByUpdates(t *testing.T) {
	f := newBookFixture()
	cores64 := func(n *telemetry.Node) { n.LogicalCores = 64 }
	f.curved("n", 40, 420, cores64) // 64 cores, 100 W idle to 900 W: 12.5 W a core
	var pods []*v1.Pod
	for _, uid := range []string{"a", "b", "c"} {
		p := boundPod(uid, "n", "4", v1.PodRunning, f.t, f.t)
		f.book.podSeen(p, false)
		pods = append(pods, p)
	}
	// 12 CPUs of 64 = 18.75 points: 40 -> 58.75 %, and 12 x 12.5 W =
	// 150 W more, measured exactly (at 58 %, the nearest whole percent
	// below: 144 W).
	f.t = f.t.Add(10 * time.Second)
	f.curved("n", 58, 420+144, cores64)
	if got := f.book.Get("n").CPUMilli; got != 0 {
		t.Fatalf("the sample 10 s after the pods ran: %dm reserved, want 0", got)
	}
	ratio, n := f.book.Calibration("n")
	for _, p := range pods {
		flap := withReady(p, v1.ConditionFalse)
		f.book.podUpdated(p, flap)
		f.book.podUpdated(flap, withReady(p, v1.ConditionTrue))
		r := restarted(p, f.t)
		f.book.podUpdated(p, r)
		labelled := r.DeepCopy()
		labelled.Labels = map[string]string{"team": "x"}
		f.book.podUpdated(r, labelled)
	}
	f.t = f.t.Add(4*time.Minute + 50*time.Second)
	if got := f.book.Get("n").CPUMilli; got != 0 {
		t.Errorf("after a readiness flap, a restart and a label patch of each pod and 4m50s without a new sample: %dm reserved on a node whose sample already shows them, want 0", got)
	}
	f.curved("n", 58, 564, cores64)
	if r2, n2 := f.book.Calibration("n"); n2 != n || math.Abs(r2-ratio) > 1e-9 {
		t.Errorf("calibration ratio %.3f over %d after the updates and a sample, want %.3f over %d (nothing new started)", r2, n2, ratio, n)
	}
}

// A pod that never starts counts from its binding for its max age (10 min by default),
// however often its status changes (an image pull failing and backing
// off), and once it does start, it counts from its start until a sample
// shows it.
func TestPendingPodCountsFromItsBinding(t *testing.T) {
	f := newBookFixture()
	f.sample("n")
	pod := boundPod("a", "n", "6", v1.PodPending, f.t, time.Time{})
	f.book.podSeen(pod, false)
	prev := pod
	for i := range 30 {
		f.t = f.t.Add(time.Minute)
		cur := prev.DeepCopy()
		reason := []string{"ErrImagePull", "ImagePullBackOff"}[i%2]
		cur.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}}}
		f.book.podUpdated(prev, cur)
		f.book.Expire()
		prev = cur
		// bound at 0: counted up to the max age (10 min), not after
		want := int64(6000)
		if time.Duration(i+1)*time.Minute > f.book.MaxAge() {
			want = 0
		}
		if got := f.book.Get("n").CPUMilli; got != want {
			t.Fatalf("%d min after binding, pod never started (%s): %dm reserved, want %dm", i+1, reason, got, want)
		}
	}
	running := boundPod("a", "n", "6", v1.PodRunning, t0, f.t)
	f.book.podUpdated(prev, running)
	if got := f.book.Get("n").CPUMilli; got != 6000 {
		t.Errorf("the pod started 30 min after binding: %dm reserved, want 6000m until a sample shows it", got)
	}
	f.t = f.t.Add(10 * time.Second)
	f.sample("n")
	if got := f.book.Get("n").CPUMilli; got != 0 {
		t.Errorf("a sample 10 s after it started: %dm reserved, want 0", got)
	}
}

// A sample taken before a pod ran, by its agent's clock, does not retire
// the pod however late it arrives; the next one, taken an interval after
// the pod's containers started (the kubelet's clock: the same node's),
// does.
func TestLateSampleDoesNotRetirePodItCannotShow(t *testing.T) {
	f := newBookFixture()
	f.sample("n")
	started := t0.Add(2 * time.Second)
	f.t = t0.Add(3 * time.Second)
	f.book.podSeen(boundPod("a", "n", "4", v1.PodRunning, t0, started), false)
	// Taken at 1 s, before the pod ran; its write was slow: seen at 20 s,
	// past the hold (10 s) since the pod was seen running.
	f.t = t0.Add(20 * time.Second)
	f.sampleTaken("n", t0.Add(time.Second))
	if got := f.book.Get("n").CPUMilli; got != 4000 {
		t.Errorf("a sample taken 1 s before the pod started, seen 17 s after it ran: %dm reserved, want 4000m", got)
	}
	// Taken at 7 s: 5 s, one interval, after the start.
	f.t = t0.Add(21 * time.Second)
	f.sampleTaken("n", started.Add(5*time.Second))
	if got := f.book.Get("n").CPUMilli; got != 0 {
		t.Errorf("a sample taken an interval after the pod started: %dm reserved, want 0", got)
	}
}

// The sample that retired reservations is known as such whichever copy of
// its view a hint is handed: the cache restamps the view when the node's
// agent pod turns Ready, and the retirement must not be lost with it.
func TestRetirementSurvivesViewCopies(t *testing.T) {
	f := newBookFixture()
	f.sample("n")
	f.book.podSeen(boundPod("a", "n", "4", v1.PodRunning, f.t, f.t), false)
	f.t = f.t.Add(10 * time.Second)
	f.sample("n")
	view, _ := f.cache.Get("n")
	if !f.book.Retired(view) || f.book.Before("n", view).CPUMilli != 4000 {
		t.Fatalf("right after the sample: Retired=%v Before=%dm, want true 4000m", f.book.Retired(view), f.book.Before("n", view).CPUMilli)
	}
	f.cache.SetAgentPod("n", "agent", true, false)
	copied, _ := f.cache.Get("n")
	if got, before := f.book.Retired(copied), f.book.Before("n", copied).CPUMilli; !got || before != 4000 {
		t.Errorf("after the agent pod turned Ready, same sample: Retired=%v Before=%dm, want true 4000m", got, before)
	}
}

// Every plugin counts a pod's demand with the book's counter; settings the
// plugins give it must agree, and the first disagreement names both.
func TestBookSharedSettings(t *testing.T) {
	f := newBookFixture()
	if err := f.book.ShareGPUResource("profile a's EnergyAware", "amd.com/gpu"); err != nil {
		t.Fatal(err)
	}
	if err := f.book.ShareGPUResource("profile b's TopologyFit", "amd.com/gpu"); err != nil {
		t.Errorf("the same GPU resource again: %v", err)
	}
	err := f.book.ShareGPUResource("profile b's PowerBudget", "nvidia.com/gpu")
	want := "GPU resource name: profile a's EnergyAware sets amd.com/gpu, profile b's PowerBudget sets nvidia.com/gpu: every profile must count a pod's demand alike, since one reservation book counts it for all of them"
	if err == nil || err.Error() != want {
		t.Errorf("a second GPU resource: %v, want %q", err, want)
	}
	if err := f.book.ShareDefaultRequests("profile a's LoadAware", 250, 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := f.book.ShareDefaultRequests("profile b's LoadAware", 100, 1<<30); err == nil {
		t.Error("a second default CPU request was accepted")
	}
	f.sample("n")
	p := boundPod("g", "n", "1", v1.PodPending, f.t, time.Time{})
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"amd.com/gpu": resource.MustParse("2")}
	p.Spec.InitContainers = []v1.Container{{Name: "init"}} // no requests: 250m by the shared default
	f.book.Reserve("n", p)
	// CPU: max(1000m, 250m init) = 1000m; GPUs by their limit: 2
	if got := f.book.Get("n"); got.GPUs != 2 || got.CPUMilli != 1000 {
		t.Errorf("reserved %+v, want 2 GPUs (amd.com/gpu, by limit) and 1000m", got)
	}
	q := boundPod("h", "n", "1", v1.PodPending, f.t, time.Time{})
	q.Spec.Containers = append(q.Spec.Containers, v1.Container{Name: "sidecar"})
	// 1000m + 250m for the sidecar without requests
	if got := f.book.Demand(q).CPUMilli; got != 1250 {
		t.Errorf("a pod with a container without requests: %dm, want 1250m", got)
	}
}

// A pod whose load was measured already ending (deleted) between the
// sample before another pod started and the sample that shows it: the jump
// is the new pod's less the ended one's, so it calibrates nothing.
func TestEndedMeasuredPodConfoundsCalibration(t *testing.T) {
	f := newBookFixture()
	cores64 := func(n *telemetry.Node) { n.LogicalCores = 64 }
	f.curved("n", 40, 420, cores64)
	a := boundPod("a", "n", "8", v1.PodRunning, f.t, f.t)
	f.book.podSeen(a, false)
	f.t = f.t.Add(10 * time.Second)
	f.curved("n", 52, 520, cores64) // a measured: 8 x 12.5 W = 100 W
	ratio, n := f.book.Calibration("n")
	f.t = f.t.Add(time.Second)
	f.book.podSeen(boundPod("b", "n", "8", v1.PodRunning, f.t, f.t), false)
	f.t = f.t.Add(time.Second)
	f.book.End("n", a.UID) // deleted: its 100 W leave as b's arrive
	f.t = f.t.Add(10 * time.Second)
	f.curved("n", 52, 520, cores64)
	if got := f.book.Get("n").CPUMilli; got != 0 {
		t.Fatalf("b not retired: %dm reserved", got)
	}
	if r2, n2 := f.book.Calibration("n"); n2 != n || r2 != ratio {
		t.Errorf("calibration ratio %.3f over %d after a measured pod ended across b's start, want %.3f over %d (confounded)", r2, n2, ratio, n)
	}
}

// A scheduler that starts reserves a pod running too recently for its
// node's sample to show it by the hold, but that sample may show part of
// it: the jump from it is not the pod's, and calibrates nothing.
func TestRebuiltRunningPodCalibratesNothing(t *testing.T) {
	f := newBookFixture()
	cores64 := func(n *telemetry.Node) { n.LogicalCores = 64 }
	started := f.t
	f.t = started.Add(8 * time.Second)
	f.curved("n", 52, 520, cores64) // taken 8 s after the start: shows it
	f.book.podSeen(boundPod("a", "n", "8", v1.PodRunning, started, started), true)
	if got := f.book.Get("n").CPUMilli; got != 8000 {
		t.Fatalf("rebuilt: %dm reserved, want 8000m", got)
	}
	f.t = started.Add(20 * time.Second)
	f.curved("n", 52, 520, cores64)
	if got := f.book.Get("n").CPUMilli; got != 0 {
		t.Fatalf("not retired: %dm reserved", got)
	}
	if r, n := f.book.Calibration("n"); n != 0 {
		t.Errorf("calibration ratio %.3f over %d from a rebuilt pod's 0 W jump, want none", r, n)
	}
}

// A container the kubelet restarted counts from its first start: a
// scheduler that starts right after the restart does not reserve a pod
// its node's samples have shown for a minute.
func TestRestartedContainerCountsFromItsFirstStart(t *testing.T) {
	f := newBookFixture()
	first := f.t
	f.t = first.Add(time.Minute)
	f.sample("n")
	p := boundPod("a", "n", "2", v1.PodRunning, first, first.Add(58*time.Second))
	p.Status.ContainerStatuses[0].RestartCount = 1
	p.Status.ContainerStatuses[0].LastTerminationState = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		StartedAt: metav1.NewTime(first), FinishedAt: metav1.NewTime(first.Add(57 * time.Second))}}
	f.book.podSeen(p, true)
	if got := f.book.Get("n").CPUMilli; got != 0 {
		t.Errorf("rebuilt 2 s after a container restart, a minute after the pod first started: %dm reserved, want 0", got)
	}
}

// A node's reserved metrics exist from its first sample, whatever the
// book heard of it before (a pod of it ending in the first list).
func TestReservedMetricsFromTheFirstSample(t *testing.T) {
	RegisterMetrics()
	f := newBookFixture()
	f.book.End("n-ended-first", "a")
	f.sample("n-ended-first")
	fams, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range fams {
		if fam.GetName() != "telesched_scheduler_reserved_cpu_cores" {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "node" && l.GetValue() == "n-ended-first" {
					return
				}
			}
		}
	}
	t.Error("no telesched_scheduler_reserved_cpu_cores series for a node whose pod ended before its first sample")
}

// The energy ranking reads a node's curve at its sample's load plus the
// reserved pods that sample cannot show (Slot.UnseenCPUMilli), where the
// limits count a pod until its hold is over. With 1 s samples the hold is
// its 10 s floor; a sample taken two intervals after a pod started shows
// it, and counting it as well put the node 4 CPUs further up its curve:
// ranked at 40 % + 25 % instead of 40 %, as if it held a pod it measures
// already.
func TestRankingCountsPodsTheSampleCannotShow(t *testing.T) {
	f := newBookFixture()
	second := func(n *telemetry.Node) { n.Interval = time.Second }
	// A convex curve, so a node further up it ranks dearer.
	convex := func(n *telemetry.Node) {
		second(n)
		for k := range n.Models.Watts {
			n.Models.Watts[k] = 100 + 4*float64(k*k)
		}
	}
	f.curved("n", 40, 300, convex)
	started := t0
	f.book.podSeen(boundPod("a", "n", "4", v1.PodRunning, t0, started), false)
	pod := Demand{CPUMilli: 1000}
	rank := func(s Slot) float64 {
		e, ok := s.RankJoules(s.View, pod, WorkService, 1, 16_000)
		if !ok {
			t.Fatal("no ranking")
		}
		return e.Joules
	}
	for _, tc := range []struct {
		name   string
		taken  time.Duration // after the pod started
		unseen int64
	}{
		{name: "taken an interval after the start", taken: time.Second, unseen: 4000},
		{name: "taken two intervals after the start", taken: 2 * time.Second, unseen: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.t = started.Add(tc.taken).Add(100 * time.Millisecond)
			f.curved("n", 40, 300, convex, func(n *telemetry.Node) { n.SampleTime = started.Add(tc.taken) })
			s := f.book.Slot("n")
			if s.Reserved.CPUMilli != 4000 {
				t.Fatalf("reserved %dm within the 10 s hold, want 4000m", s.Reserved.CPUMilli)
			}
			if s.UnseenCPUMilli != tc.unseen {
				t.Errorf("unseen %dm, want %dm", s.UnseenCPUMilli, tc.unseen)
			}
			if got, want := rank(s), rank(s.With(Demand{CPUMilli: tc.unseen})); got != want {
				t.Errorf("ranked %.3f, want %.3f: the sample's load plus %dm", got, want, tc.unseen)
			}
		})
	}
	// The limits still count the pod.
	if got := f.book.Get("n").CPUMilli; got != 4000 {
		t.Errorf("reserved %dm for the limits, want 4000m until the hold is over", got)
	}
	// A view without a sampling interval cannot tell what it shows.
	f.curved("n", 40, 300, convex, func(n *telemetry.Node) {
		n.SampleTime, n.Interval = started.Add(5*time.Second), 0
	})
	if got := f.book.Slot("n").UnseenCPUMilli; got != 4000 {
		t.Errorf("no interval: unseen %dm, want 4000m", got)
	}
}
