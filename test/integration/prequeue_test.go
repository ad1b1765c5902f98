// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/test/internal/metricfam"
)

// deployedFeatureGates is the shipped scheduler Deployment's
// --feature-gates argument, none or one, which the tests' schedulers run
// with.
func deployedFeatureGates(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "scheduler", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*- (--feature-gates=\S+)$`).FindSubmatch(data)
	if m == nil {
		return nil
	}
	return []string{string(m[1])}
}

// preQueueingHintsGate is the opt-in: the alpha gate on.
const preQueueingHintsGate = "--feature-gates=SchedulerPreQueueingHints=true"

// TestPreQueueingHintsBothWays runs the scheduler binary with the
// SchedulerPreQueueingHints gate as shipped (none set: off, Kubernetes'
// default for an alpha gate) and on (the documented opt-in). Either way a pod
// LoadAware rejected is placed as soon as its node's telemetry shows room,
// not at the queue's 5-minute flush; with the gate on the queue asked the
// plugins' PreQueueingHints, which narrowed the pods it looked at.
func TestPreQueueingHintsBothWays(t *testing.T) {
	needControlPlane(t)
	// No alpha gate in what ships: a production cluster's scheduler runs
	// with Kubernetes' defaults.
	if got := deployedFeatureGates(t); len(got) != 0 {
		t.Fatalf("the Deployment sets %v, want no feature gate beyond Kubernetes' defaults", got)
	}
	binDir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{true, false} {
		name := map[bool]string{true: "gate-on", false: "gate-off"}[on]
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			c := newClients(t)
			busy := "pq-" + name
			node := schedNode(ctx, t, c, busy)
			if _, err := c.applyStatusCreating(ctx, node, nodeStatus(95, 50, 100)); err != nil {
				t.Fatal(err)
			}
			kubeconfig := adminKubeconfig(t)
			gates := deployedFeatureGates(t)
			if on {
				gates = []string{preQueueingHintsGate}
			}
			url := startMetricsScheduler(t, binDir, kubeconfig, gates...)
			p := testPod("pq-"+name, "telesched")
			p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": busy}
			if _, err := c.kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.kube.CoreV1().Pods("default").Delete(t.Context(), p.Name, metav1.DeleteOptions{}) })
			t.Logf("FailedScheduling: %s", waitFailedScheduling(t, c, p.Name, 60*time.Second))
			// Updates that free nothing, then one that frees room.
			for _, cpu := range []int32{96, 97} {
				if _, err := c.applyStatus(ctx, busy, nodeStatus(cpu, 50, 100)); err != nil {
					t.Fatal(err)
				}
			}
			notScheduledFor(t, c, p.Name, 3*time.Second)
			freed := time.Now()
			if _, err := c.applyStatus(ctx, busy, nodeStatus(40, 50, 100)); err != nil {
				t.Fatal(err)
			}
			waitScheduled(t, c, p.Name, 60*time.Second)
			t.Logf("placed %v after its node's load fell", time.Since(freed).Round(10*time.Millisecond))
			fams := scrape(t, url)
			narrowed := metricfam.CounterSum(fams, "scheduler_pre_queueing_hint_evaluations_total", map[string]string{"plugin": "LoadAware", "result": "narrowed"})
			t.Logf("scheduler_pre_queueing_hint_evaluations_total{plugin=LoadAware,result=narrowed} = %v", narrowed)
			switch {
			case on && narrowed < 3:
				t.Errorf("with the gate on, LoadAware's PreQueueingHint narrowed %v NodeTelemetry events, want at least the 3 updates", narrowed)
			case !on && narrowed != 0:
				t.Errorf("with the gate off, a PreQueueingHint ran %v times", narrowed)
			}
			// The updates that freed nothing: with the gate on, the queue
			// never asked LoadAware's QueueingHint about the pod.
			skips := metricfam.HistogramCount(fams, "scheduler_queueing_hint_execution_duration_seconds", map[string]string{"plugin": "LoadAware", "hint": "QueueSkip"})
			t.Logf("LoadAware QueueingHint calls answering QueueSkip: %d", skips)
			if on && skips != 0 {
				t.Errorf("with the gate on, LoadAware's QueueingHint was asked %d times and skipped: the PreQueueingHint should have named no pod", skips)
			}
		})
	}
}
