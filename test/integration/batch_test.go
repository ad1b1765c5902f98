// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/test/internal/metricfam"
)

// TestTeleschedProfileBatches: every telesched plugin signs pods, so
// kube-scheduler's opportunistic batching (KEP-5598, on by default) runs
// in the telesched profile. Each node here takes one 2-CPU pod by
// LoadAware (60 % measured + 2 of 16 CPUs = 72.5 %; a second one: 85 % >
// 80 %), the regime batching is for: a batch hints the next node for the
// next pod of the same signature, and kube-scheduler runs Filter again on
// it. No node may get a second pod, which LoadAware's Filter refuses.
func TestTeleschedProfileBatches(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)
	binDir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	const nodes, pods = 8, 8
	for i := range nodes {
		node := schedNode(ctx, t, c, fmt.Sprintf("batch-%d", i))
		if _, err := c.applyStatusCreating(ctx, node, nodeStatus(60, 50, 100)); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := adminKubeconfig(t)
	url := startMetricsScheduler(t, binDir, kubeconfig)
	var names []string
	for i := range pods {
		p := testPod(fmt.Sprintf("batch-%d", i), "telesched")
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		if _, err := c.kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
		t.Cleanup(func() { _ = c.kube.CoreV1().Pods("default").Delete(t.Context(), p.Name, metav1.DeleteOptions{}) })
	}
	perNode := map[string][]string{}
	for _, name := range names {
		node := waitScheduled(t, c, name, 60*time.Second)
		perNode[node] = append(perNode[node], name)
	}
	for node, on := range perNode {
		if len(on) > 1 {
			t.Errorf("%s got %v: LoadAware's Filter refuses a second 2-CPU pod there (60%% + 4 of 16 CPUs = 85%% > 80%%)", node, on)
		}
	}
	fams := scrape(t, url)
	used := metricfam.CounterSum(fams, "scheduler_batch_attempts_total", map[string]string{"profile": "telesched", "result": "hint_used"})
	notUsed := metricfam.CounterSum(fams, "scheduler_batch_attempts_total", map[string]string{"profile": "telesched", "result": "hint_not_used"})
	none := metricfam.CounterSum(fams, "scheduler_batch_attempts_total", map[string]string{"profile": "telesched", "result": "no_hint"})
	t.Logf("scheduler_batch_attempts_total{profile=telesched}: hint_used %v, hint_not_used %v, no_hint %v; pods per node %v", used, notUsed, none, perNode)
	flushed := map[string]float64{}
	for _, m := range metricfam.Matching(fams, "scheduler_batch_cache_flushed_total", map[string]string{"profile": "telesched"}) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" {
				flushed[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	t.Logf("scheduler_batch_cache_flushed_total{profile=telesched} by reason: %v", flushed)
	if used == 0 {
		t.Errorf("the telesched profile never used a batch hint for %d alike pods (hint_not_used %v, no_hint %v): a plugin does not sign, or batching is off", pods, notUsed, none)
	}

	// A rack near its budget: 4 nodes at 475 W draw 1900 W of 2200 W, and
	// 300 W left is under fullScoreHeadroomPercent (50 %) of the limit, so
	// one placement changes the other members' scores. PowerBudget does
	// not sign its pods: none is batched, and at 50 W a core the budget
	// takes six 1-CPU pods of the eight.
	rack(t, c, "batch-rack", 4, rackNode(47, 475), 2200)
	time.Sleep(2 * time.Second) // the scheduler's informers see the budget
	for i := range 8 {
		rackPod(t, c, fmt.Sprintf("batch-rack-%d", i), "batch-rack", "1")
	}
	waitFor(t, "six rack pods placed and two refused", 60*time.Second, func() bool {
		placed, refused := 0, 0
		for i := range 8 {
			name := fmt.Sprintf("batch-rack-%d", i)
			if p, err := c.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err == nil && p.Spec.NodeName != "" {
				placed++
			} else if _, ok := lastFailedScheduling(t, c, name); ok {
				refused++
			}
		}
		if placed > 6 {
			t.Fatalf("%d pods placed on a rack whose budget takes 6", placed)
		}
		return placed == 6 && refused == 2
	})
	after := scrape(t, url)
	if d := metricfam.CounterSum(after, "scheduler_batch_attempts_total", map[string]string{"profile": "telesched", "result": "hint_used"}) - used; d != 0 {
		t.Errorf("%v pods of a rack near its budget were batched, want none", d)
	}
	notBatchable := metricfam.CounterSum(after, "scheduler_batch_cache_flushed_total", map[string]string{"profile": "telesched", "reason": "pod_not_batchable"})
	t.Logf("rack near its budget: 6 of 8 pods placed, none batched (pod_not_batchable %v)", notBatchable)
	if notBatchable == 0 {
		t.Error("no pod of the rack near its budget was counted unbatchable")
	}
}
