// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// reservationNode is a 16-core node for the reservation tests, publishing
// cpuPercent; its pods are selected by its hostname.
func reservationNode(t *testing.T, c clients, name string, cpuPercent int32) *corev1.Node {
	t.Helper()
	node := schedNode(t.Context(), t, c, name)
	if _, err := c.applyStatusCreating(t.Context(), node, nodeStatus(cpuPercent, 50, 100)); err != nil {
		t.Fatal(err)
	}
	return node
}

// hostPod creates a pod of cpu on the named node (by hostname), for the
// telesched profile, and deletes it at the end of the test.
func hostPod(t *testing.T, c clients, name, node, cpu string) {
	t.Helper()
	p := testPod(name, "telesched")
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}
	if _, err := c.kube.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.kube.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
}

// sampleEvery publishes st on node every interval, sampled then, until
// the returned stop is called (or the test ends).
func sampleEvery(t *testing.T, c clients, node string, interval time.Duration, st func() telemetryv1alpha1.NodeTelemetryStatus) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			s := st()
			s.SampleTime = metav1.NewTime(time.Now())
			if _, err := c.applyStatus(t.Context(), node, s); err != nil && t.Context().Err() == nil {
				t.Errorf("publishing %s: %v", node, err)
				return
			}
			select {
			case <-done:
				return
			case <-t.Context().Done():
				return
			case <-tick.C:
			}
		}
	}()
	var once bool
	stop = func() {
		if !once {
			once = true
			close(done)
			<-stopped
		}
	}
	t.Cleanup(stop)
	return stop
}

// markRunning is the kubelet starting a pod's container now.
func markRunning(t *testing.T, c clients, name string) {
	t.Helper()
	markRunningAt(t, c, name, time.Now())
}

// markRunningAt is the kubelet starting a pod's container at at, by its
// node's clock.
func markRunningAt(t *testing.T, c clients, name string, at time.Time) {
	t.Helper()
	p, err := c.kube.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(at)
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
	if _, err := c.kube.CoreV1().Pods("default").UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitRejected waits for the pod's FailedScheduling event and returns its
// message; it fails the test at once when the pod is placed instead.
func waitRejected(t *testing.T, c clients, pod string, timeout time.Duration) string {
	t.Helper()
	var msg string
	waitFor(t, pod+" FailedScheduling event", timeout, func() bool {
		if p, err := c.kube.CoreV1().Pods("default").Get(t.Context(), pod, metav1.GetOptions{}); err == nil && p.Spec.NodeName != "" {
			t.Fatalf("%s was placed on %s", pod, p.Spec.NodeName)
		}
		var ok bool
		msg, ok = lastFailedScheduling(t, c, pod)
		return ok
	})
	return msg
}

// notScheduledFor fails the test when pod gets a node within d.
func notScheduledFor(t *testing.T, c clients, pod string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		p, err := c.kube.CoreV1().Pods("default").Get(t.Context(), pod, metav1.GetOptions{})
		if err == nil && p.Spec.NodeName != "" {
			t.Fatalf("%s was placed on %s", pod, p.Spec.NodeName)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestReservationHeldUntilPodRuns: a pod placed on a node counts toward
// its load until a sample taken a hold after the pod was seen running,
// however many samples come while it pulls its image; then the sample
// shows it, its reservation retires, and a pod it held back is placed.
//
// A 16-core node at 40 %: pod A of 6 cores (37.5 %) fits under the 80 %
// threshold; pod B of 2 cores (12.5 %) does not while A counts (90 %).
func TestReservationHeldUntilPodRuns(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	node := reservationNode(t, c, "hold-0", 40).Name
	startScheduler(t, schedulerConfig(t, ""))
	load := int32(40)
	mu := make(chan struct{}, 1)
	mu <- struct{}{}
	stop := sampleEvery(t, c, node, 5*time.Second, func() telemetryv1alpha1.NodeTelemetryStatus {
		<-mu
		defer func() { mu <- struct{}{} }()
		return nodeStatus(load, 50, 100)
	})
	defer stop()

	hostPod(t, c, "hold-a", node, "6")
	placed := time.Now()
	waitScheduled(t, c, "hold-a", 30*time.Second)
	// A pulls its image: samples keep coming at 40 % for 30 s.
	time.Sleep(30*time.Second - time.Since(placed))
	hostPod(t, c, "hold-b", node, "2")
	msg := waitRejected(t, c, "hold-b", 30*time.Second)
	t.Logf("%v after placing A, still pulling its image: %s", time.Since(placed).Round(time.Second), msg)
	if !strings.Contains(msg, "placed since the sample") {
		t.Errorf("B's rejection does not name LoadAware's reservation: %s", msg)
	}
	notScheduledFor(t, c, "hold-b", 5*time.Second)

	// A starts and uses 20 % of the node: once a sample a hold (two 5 s
	// intervals) after it shows that, A retires (60 % + 12.5 % fits).
	<-mu
	load = 60
	mu <- struct{}{}
	markRunning(t, c, "hold-a")
	running := time.Now()
	at := waitScheduled(t, c, "hold-b", 60*time.Second)
	t.Logf("B placed on %s %v after A was seen running", at, time.Since(running).Round(100*time.Millisecond))
	if d := time.Since(running); d < 10*time.Second {
		t.Errorf("B placed %v after A ran: before the 10 s hold", d)
	}
}

// TestReservationsRebuiltAfterRestart: a scheduler restarted 5 s after
// placing a pod (a crash, or a new leader) rebuilds its reservations from
// the bound pods its node's samples cannot show yet, and keeps pods off the
// node the first one was placed on as the one before it would have.
func TestReservationsRebuiltAfterRestart(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	node := reservationNode(t, c, "restart-0", 40).Name
	stop := sampleEvery(t, c, node, 5*time.Second, func() telemetryv1alpha1.NodeTelemetryStatus { return nodeStatus(40, 50, 100) })
	defer stop()
	first, _ := startScheduler(t, schedulerConfig(t, ""))
	hostPod(t, c, "restart-a", node, "6")
	waitScheduled(t, c, "restart-a", 30*time.Second)
	time.Sleep(5 * time.Second)
	_ = first.Process.Signal(os.Interrupt)
	_ = first.Wait()

	startScheduler(t, schedulerConfig(t, ""))
	hostPod(t, c, "restart-b", node, "2")
	msg := waitRejected(t, c, "restart-b", 60*time.Second)
	t.Logf("after the restart: %s", msg)
	if !strings.Contains(msg, "placed since the sample") {
		t.Errorf("B's rejection does not count A's reservation: %s", msg)
	}
	notScheduledFor(t, c, "restart-b", 5*time.Second)
}
