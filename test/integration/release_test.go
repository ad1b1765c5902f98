// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// TestReleasedReservationRequeues: a pod PowerBudget refused for the
// watts reserved for a placed pod is placed as soon as that reservation
// goes, with no NodeTelemetry event saying so: when the placed pod is
// deleted, and when a reservation reaches --reservation-max-age with its
// pod never started. Without that, it waits for kube-scheduler's flush of
// unschedulable pods (5 minutes).
//
// 4 nodes at 475 W on a 2000 W budget: 100 W of room, 50 W a core. A pod
// of 2 cores takes it all; a pod of 1 core then waits until it is deleted,
// and takes half. Another pod of 1 core takes the other half, and the next
// waits until the reservations expire.
func TestReleasedReservationRequeues(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	nodes := rack(t, c, "rack-rel", 4, rackNode(47, 475), 2000)
	for _, n := range nodes {
		// The same load, sampled anew: fresh telemetry that frees nothing.
		sampleEvery(t, c, n, 5*time.Second, func() telemetryv1alpha1.NodeTelemetryStatus { return rackNode(47, 475) })
	}
	const maxAge = 20 * time.Second
	_, log := startScheduler(t, schedulerConfig(t, ""), "--reservation-max-age="+maxAge.String())

	for _, step := range []struct {
		name string
		// holder is the CPU of the pod placed first: it takes the room
		// left, 100 W, then 50 W beside the first waiter.
		holder string
		free   func(holder string)
		// within is how long the waiting pod may take after the release.
		within time.Duration
	}{
		{"deleted", "2", func(holder string) {
			zero := int64(0)
			if err := c.kube.CoreV1().Pods("default").Delete(t.Context(), holder, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
		}, 15 * time.Second},
		// Never started (no kubelet here): its reservation expires
		// maxAge after its binding.
		{"expired", "1", func(string) {}, maxAge + 15*time.Second},
	} {
		holder, waiter := "holder-"+step.name, "waiter-"+step.name
		rackPod(t, c, holder, "rack-rel", step.holder)
		waitScheduled(t, c, holder, 30*time.Second)
		bound := time.Now()
		rackPod(t, c, waiter, "rack-rel", "1")
		msg := waitRejected(t, c, waiter, 30*time.Second)
		if !strings.Contains(msg, "reserved 100W") {
			t.Fatalf("%s refused for %q, want 100 W reserved", waiter, msg)
		}
		freed := time.Now()
		step.free(holder)
		node := waitScheduled(t, c, waiter, step.within)
		t.Logf("%s: %s placed on %s %v after the release began, %v after the holder's binding", step.name, waiter, node,
			time.Since(freed).Round(100*time.Millisecond), time.Since(bound).Round(100*time.Millisecond))
	}
	if !strings.Contains(log.String(), "reservations released on a node; requeueing the pods that fit it now") {
		t.Errorf("the scheduler's log lacks the requeue of released reservations")
	}
}
