// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// skewedNodes are agents whose clocks are off the scheduler's by the offset.
var skewedNodes = []struct {
	name   string
	offset time.Duration
}{
	{"skew-sync", 0},
	{"skew-behind", -70 * time.Second},
	{"skew-ahead", 15 * time.Second},
	{"skew-future", time.Hour},
}

// TestSchedulerSkewedAgents: four nodes whose agents' clocks are in step,
// 70 s behind, 15 s ahead and an hour ahead of the scheduler's. Freshness
// and reservations run on the scheduler's clock, so all four behave as the
// synchronized one:
//
//   - each is fresh while samples arrive (under staleTelemetryPolicy Reject
//     a node the scheduler thought stale would take nothing);
//   - a burst of three 4-CPU pods onto a node at 10% of 16 CPUs places two
//     (10 + 25 + 25 = 60%; the third would make 85% > 80%), and a sample
//     written a second later does not retire the two reservations however
//     far ahead the agent's clock is;
//   - the sample written 10 s after the reservations (the hold) retires
//     them, and the third pod, rejected only by them, is scheduled within a
//     second of that write: by LoadAware's QueueingHint, with no flush;
//   - once samples stop, each node is stale after telemetryMaxAge, the one
//     an hour ahead too, and the rejection says whose clock is off.
func TestSchedulerSkewedAgents(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)
	const maxAge = 15 * time.Second
	write := func(name string, offset time.Duration, create bool) time.Time {
		t.Helper()
		st := nodeStatus(10, 50, 100)
		st.SampleTime = metav1.NewTime(time.Now().Add(offset))
		var err error
		if create {
			node, gerr := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			_, err = c.applyStatusCreating(ctx, node, st)
		} else {
			_, err = c.applyStatus(ctx, name, st)
		}
		if err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	for _, n := range skewedNodes {
		schedNode(ctx, t, c, n.name)
		write(n.name, n.offset, true)
	}
	cfg := strings.ReplaceAll(schedulerConfig(t, ""), "staleTelemetryPolicy: Ignore", "staleTelemetryPolicy: Reject")
	cfg = strings.ReplaceAll(cfg, "telemetryMaxAge: 60s", fmt.Sprintf("telemetryMaxAge: %s", maxAge))
	startScheduler(t, cfg)
	for _, n := range skewedNodes {
		write(n.name, n.offset, false) // a sample since the scheduler started
	}

	pod := func(name, node string) {
		t.Helper()
		p := testPod(name, "telesched")
		p.Spec.NodeSelector["kubernetes.io/hostname"] = node
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		if _, err := c.kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = c.kube.CoreV1().Pods("default").Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
	}
	bound := func(name string) bool {
		p, err := c.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != ""
	}

	// The burst: two placed, the third held back by their reservations.
	for _, n := range skewedNodes {
		for i := range 3 {
			pod(fmt.Sprintf("%s-%d", n.name, i), n.name)
		}
	}
	// Pods of one priority are taken in creation order, to the second:
	// which two of the three go first is not fixed.
	held := map[string]string{}
	for _, n := range skewedNodes {
		waitFor(t, "two of "+n.name+"'s three pods to be scheduled", 30*time.Second, func() bool {
			var pending []string
			for i := range 3 {
				if name := fmt.Sprintf("%s-%d", n.name, i); !bound(name) {
					pending = append(pending, name)
				}
			}
			if len(pending) == 1 {
				held[n.name] = pending[0]
			}
			return len(pending) == 1
		})
	}
	// The kubelets start the two placed pods: their hold (10 s on the
	// scheduler's clock) runs from when the scheduler sees them running.
	// A node's kubelet and agent read one clock, the node's: the
	// containers' startedAt is off by the agent's offset too.
	for _, n := range skewedNodes {
		for i := range 3 {
			if name := fmt.Sprintf("%s-%d", n.name, i); name != held[n.name] {
				markRunningAt(t, c, name, time.Now().Add(n.offset))
			}
		}
	}
	reserved := time.Now() // the pods were seen running before this
	for _, n := range skewedNodes {
		msg := waitFailedScheduling(t, c, held[n.name], 30*time.Second)
		if !strings.Contains(msg, "node cpu 85 percent > threshold 80 percent") {
			t.Errorf("%s rejected for another reason: %s", held[n.name], msg)
		}
	}
	// A sample a second later: the reservations hold (the hold is 10 s on
	// the scheduler's clock from the pods running), whatever the agent's
	// sampleTime says.
	for _, n := range skewedNodes {
		write(n.name, n.offset, false)
	}
	time.Sleep(2 * time.Second)
	for _, n := range skewedNodes {
		if bound(held[n.name]) {
			t.Errorf("%s: a sample 1 s after the burst retired its reservations (agent offset %v)", n.name, n.offset)
		}
	}

	// The sample after the hold retires them; the third pod follows.
	time.Sleep(time.Until(reserved.Add(10*time.Second + 500*time.Millisecond)))
	written := map[string]time.Time{}
	for _, n := range skewedNodes {
		written[n.name] = write(n.name, n.offset, false)
	}
	for _, n := range skewedNodes {
		waitScheduled(t, c, held[n.name], 10*time.Second)
		after := time.Since(written[n.name])
		t.Logf("%s (agent %v): the pod held back by reservations was scheduled within %v of the sample that retired them", n.name, n.offset, after.Round(10*time.Millisecond))
		if after > time.Second+100*time.Millisecond { // 100 ms: this test's polling
			t.Errorf("%s: scheduled %v after the reservations' retirement, want within 1 s", n.name, after)
		}
	}

	// Samples stop: every node goes stale after maxAge of the scheduler's
	// clock, the one whose agent is an hour ahead too.
	last := time.Now()
	time.Sleep(time.Until(last.Add(maxAge + 2*time.Second)))
	for _, n := range skewedNodes {
		pod(n.name+"-late", n.name)
	}
	for _, n := range skewedNodes {
		msg := waitFailedScheduling(t, c, n.name+"-late", 30*time.Second)
		t.Logf("%s: %s", n.name, msg)
		if !strings.Contains(msg, "old > telemetryMaxAge 15s") {
			t.Errorf("%s (agent %v): not rejected as stale %v after its last sample: %s", n.name, n.offset, maxAge, msg)
		}
		switch {
		case n.offset == time.Hour && !strings.Contains(msg, "ahead of the scheduler's"):
			t.Errorf("%s: the rejection does not say its agent's clock is ahead: %s", n.name, msg)
		case n.offset == -70*time.Second && !strings.Contains(msg, "behind the scheduler's"):
			t.Errorf("%s: the rejection does not say its agent's clock is behind: %s", n.name, msg)
		}
	}
}
