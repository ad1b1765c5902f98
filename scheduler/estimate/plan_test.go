// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestPlansCountUntilClearedAndReleaseNothing: a descheduler's planned
// move counts at its destination beside the pod's own reservation on its
// node, survives the destination's samples, and goes with ClearPlans
// without releasing pods the node kept out (no OnRelease) or disturbing
// its calibration.
func TestPlansCountUntilClearedAndReleaseNothing(t *testing.T) {
	f := newBookFixture()
	f.sample("src")
	f.sample("dst")
	pod := boundPod("a", "src", "3", v1.PodRunning, t0, t0)
	f.book.podSeen(pod, false)
	released := 0
	f.book.OnRelease(func(string) { released++ })

	f.book.Plan("dst", pod.UID, f.book.Demand(pod))
	f.book.Plan("dst", pod.UID, f.book.Demand(pod)) // twice: once
	for range 4 {
		f.t = f.t.Add(5 * time.Second)
		f.sample("dst")
	}
	if got, src := f.book.Get("dst").CPUMilli, f.book.Get("src").CPUMilli; got != 3000 || src != 3000 || f.book.Plans() != 1 {
		t.Fatalf("planned: dst %dm, src %dm, %d plans; want 3000m, 3000m (the pod's own), 1", got, src, f.book.Plans())
	}
	f.book.ClearPlans()
	if got := f.book.Get("dst").CPUMilli; got != 0 || f.book.Plans() != 0 || released != 0 {
		t.Errorf("cleared: dst %dm, %d plans, %d releases; want 0, 0, 0", got, f.book.Plans(), released)
	}
	if e := f.book.lookup("dst"); e != nil && !e.disturbed.IsZero() {
		t.Errorf("cleared: dst's calibration disturbed at %v; want untouched", e.disturbed)
	}
	f.book.Plan("dst", pod.UID, f.book.Demand(pod))
	f.book.Unplan("dst", pod.UID)
	if got := f.book.Get("dst").CPUMilli; got != 0 || f.book.Plans() != 0 {
		t.Errorf("unplanned: dst %dm, %d plans; want 0, 0", got, f.book.Plans())
	}
}
