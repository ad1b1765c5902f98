// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// TestTelemetryActivatesRejectedPods runs the scheduler binary with the
// SchedulerPreQueueingHints gate as shipped (none set: off, Kubernetes'
// default for an alpha gate) and on (the opt-in). Either way a pod
// LoadAware rejected is placed as soon as its node's telemetry shows room,
// not at the queue's 5-minute flush: LoadAware activates it itself
// (telesched_scheduler_pods_activated_total), and the queue runs no
// queueing hint, pre or not, for a NodeTelemetry write: no plugin
// registers the event, so no write walks the pending pods.
func TestTelemetryActivatesRejectedPods(t *testing.T) {
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
			if n := metricfam.CounterSum(scrape(t, url), "telesched_scheduler_pods_activated_total", map[string]string{"plugin": "LoadAware", "cause": "telemetry"}); n != 0 {
				t.Errorf("after updates that free nothing, LoadAware activated %v pods, want 0", n)
			}
			freed := time.Now()
			if _, err := c.applyStatus(ctx, busy, nodeStatus(40, 50, 100)); err != nil {
				t.Fatal(err)
			}
			waitScheduled(t, c, p.Name, 60*time.Second)
			t.Logf("placed %v after its node's load fell", time.Since(freed).Round(10*time.Millisecond))
			fams := scrape(t, url)
			activated := metricfam.CounterSum(fams, "telesched_scheduler_pods_activated_total", map[string]string{"plugin": "LoadAware", "cause": "telemetry"})
			t.Logf("telesched_scheduler_pods_activated_total{plugin=LoadAware,cause=telemetry} = %v", activated)
			if activated < 1 {
				t.Errorf("LoadAware activated %v pods on its node's telemetry, want the pod (1)", activated)
			}
			// No NodeTelemetry event reaches the queue: no hint ran for one.
			// (LoadAware's hint for Pod deletions may run: other tests'
			// pods go away meanwhile.)
			narrowed := metricfam.CounterSum(fams, "scheduler_pre_queueing_hint_evaluations_total", map[string]string{"plugin": "LoadAware"})
			var hints uint64
			for _, m := range metricfam.Matching(fams, "scheduler_queueing_hint_execution_duration_seconds", nil) {
				for _, l := range m.GetLabel() {
					if l.GetName() == "event" && strings.Contains(l.GetValue(), "nodetelemetries") {
						hints += m.GetHistogram().GetSampleCount()
					}
				}
			}
			t.Logf("LoadAware PreQueueingHint evaluations: %v; QueueingHint calls on NodeTelemetry events, any plugin: %d", narrowed, hints)
			if narrowed != 0 || hints != 0 {
				t.Errorf("the queue ran hints on NodeTelemetry writes (%v LoadAware pre, %d), want none: no plugin registers the event", narrowed, hints)
			}
		})
	}
}
