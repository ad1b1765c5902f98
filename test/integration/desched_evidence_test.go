// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/descheduler/app"
	budgetplugin "github.com/telesched/telesched/descheduler/plugins/powerbudget"
)

// The descheduler acts only on fresh evidence, and sheds a shared excess
// once.

// shortMaxAgeConfig is the shipped scheduler configuration with every
// plugin's telemetryMaxAge at maxAge, as a file.
func shortMaxAgeConfig(t *testing.T, maxAge string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir, "scheduler", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), "telemetryMaxAge: 60s", "telemetryMaxAge: "+maxAge)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// labelBudget creates the PowerBudget name of budgetWatts over the nodes
// labelled key=name.
func labelBudget(ctx context.Context, t *testing.T, c clients, key, name string, budgetWatts int64, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		node, err := c.kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Labels[key] = name
		if _, err := c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "PowerBudget",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"matchLabels": map[string]any{key: name}},
			"budgetWatts":  budgetWatts,
		},
	}}
	if _, err := c.dyn.Resource(pbResource).Create(ctx, pb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.dyn.Resource(pbResource).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	})
}

// TestDeschedulerShedsNestedBudgetsOnce: a rack of one node inside a row
// of two, both 40 W over because of that node (500 W under a 460 W rack;
// 1000 W under a 960 W row). Two 25 W pods bring the rack under, and with
// it the row: two pods go, not four.
func TestDeschedulerShedsNestedBudgetsOnce(t *testing.T) {
	if got := nestedBudgetsWouldEvict(t, "dsnest", 960); got != 2 {
		t.Errorf("would_evict rose by %v, want 2: the rack's two pods bring the row under too", got)
	}
}

// nestedBudgetsWouldEvict sets up a rack of one node (prefix-0, three
// pods, 500 W against 460 W) inside a row of rowWatts with prefix-1 (two
// pods, 500 W), and prefix-out with room, runs one dry-run cycle and
// returns how many pods TeleschedPowerBudget would evict.
func nestedBudgetsWouldEvict(t *testing.T, prefix string, rowWatts int64) float64 {
	t.Helper()
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	for _, n := range []string{prefix + "-0", prefix + "-1", prefix + "-out"} {
		deschedNode(ctx, t, c, n, prefix, false)
	}
	for _, p := range []string{"a", "b", "c"} {
		deschedPod(ctx, t, c, prefix+"-"+p, prefix+"-0", prefix)
	}
	for _, p := range []string{"d", "e"} {
		deschedPod(ctx, t, c, prefix+"-"+p, prefix+"-1", prefix)
	}
	budgetRack(ctx, t, c, prefix+"-rack", 460, prefix+"-0")
	if _, err := c.applyStatus(ctx, prefix+"-1", rackNode(50, 500)); err != nil {
		t.Fatal(err)
	}
	labelBudget(ctx, t, c, "example.com/"+prefix+"-row", prefix+"-row", rowWatts, prefix+"-0", prefix+"-1")
	before := pluginEvictions(t, budgetplugin.Name, descheduler.ResultWouldEvict)
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = true; o.BudgetSustain = 0 })
	cycle(t, d)
	return pluginEvictions(t, budgetplugin.Name, descheduler.ResultWouldEvict) - before
}

// TestDeschedulerJudgesAnOuterBudgetAgainAfterItsRackShed: the rack of
// TestDeschedulerShedsNestedBudgetsOnce inside a row over by 60 W more
// than the rack. The rack sheds its two pods; the row, whose samples of
// the rack's node were taken before they left, sheds nothing more this
// cycle: it is judged again on samples taken after, for a whole window.
func TestDeschedulerJudgesAnOuterBudgetAgainAfterItsRackShed(t *testing.T) {
	if got := nestedBudgetsWouldEvict(t, "dsouter", 900); got != 2 {
		t.Errorf("would_evict rose by %v, want 2: the rack's two pods, and none for the row until samples taken after they left", got)
	}
}

// TestDeschedulerEvictsOnlyOnMeteredWatts: a rack of two nodes under a
// 960 W budget, one of them an agent that died at 600 W (its watts a
// minute stale by PowerBudget's telemetryMaxAge, here 2s), the other
// drawing 500 W, fresh. The scheduler counts the dead node's last watts
// and keeps pods out; the descheduler sees 500 W a meter showed, under
// the budget, and evicts nothing from the healthy node.
func TestDeschedulerEvictsOnlyOnMeteredWatts(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	for _, n := range []string{"dsdead-dead", "dsdead-live", "dsdead-out"} {
		deschedNode(ctx, t, c, n, "dsdead", false)
	}
	for _, p := range []string{"dsdead-a", "dsdead-b"} {
		deschedPod(ctx, t, c, p, "dsdead-live", "dsdead")
	}
	budgetRack(ctx, t, c, "dsdead", 960, "dsdead-live")
	if _, err := c.applyStatus(ctx, "dsdead-dead", rackNode(70, 600)); err != nil {
		t.Fatal(err)
	}
	node, err := c.kube.CoreV1().Nodes().Get(ctx, "dsdead-dead", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels["example.com/rack"] = "dsdead"
	if _, err := c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	config := shortMaxAgeConfig(t, "2s")
	before := pluginEvictions(t, budgetplugin.Name, descheduler.ResultWouldEvict)
	d := startDescheduler(t, func(o *app.Options) {
		o.DryRun, o.BudgetSustain, o.SchedulerConfig, o.PowerHold = true, 0, config, 0
	})
	time.Sleep(3 * time.Second) // the dead node's watts go stale
	for _, n := range []string{"dsdead-live", "dsdead-out"} {
		if _, err := c.applyStatus(ctx, n, rackNode(50, 500)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	cycle(t, d)
	if got := pluginEvictions(t, budgetplugin.Name, descheduler.ResultWouldEvict) - before; got != 0 {
		t.Errorf("would_evict rose by %v, want 0: the rack is over only by a dead agent's last watts", got)
	}
}

// TestDeschedulerMovesOnePodWhenTheNeedCannotBeMet: a rack 100 W over
// whose node has two 25 W pods: moving both cannot bring it under, so
// one goes, and the rack is judged again on samples taken after it left.
func TestDeschedulerMovesOnePodWhenTheNeedCannotBeMet(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dsunmet-0", "dsunmet", false)
	deschedNode(ctx, t, c, "dsunmet-out", "dsunmet", false)
	for _, p := range []string{"dsunmet-a", "dsunmet-b"} {
		deschedPod(ctx, t, c, p, "dsunmet-0", "dsunmet")
	}
	budgetRack(ctx, t, c, "dsunmet", 400, "dsunmet-0")
	before := pluginEvictions(t, budgetplugin.Name, descheduler.ResultWouldEvict)
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = true; o.BudgetSustain = 0 })
	cycle(t, d)
	if got := pluginEvictions(t, budgetplugin.Name, descheduler.ResultWouldEvict) - before; got != 1 {
		t.Errorf("would_evict rose by %v, want 1: 50 W cannot meet a 100 W need", got)
	}
}

// TestDeschedulerRestartsAWindowAfterAGap: a node hot, then silent past
// EnergyAware's telemetryMaxAge (here 2s), then hot again: its window
// starts at the sample after the gap, so with a 3s sustain nothing goes.
func TestDeschedulerRestartsAWindowAfterAGap(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dsgap-hot", "dsgap", true)
	deschedNode(ctx, t, c, "dsgap-cool", "dsgap", false)
	deschedPod(ctx, t, c, "dsgap-pod", "dsgap-hot", "dsgap")
	config := shortMaxAgeConfig(t, "2s")
	before := evictions(t, descheduler.ResultWouldEvict)
	d := startDescheduler(t, func(o *app.Options) { o.DryRun, o.ThermalSustain, o.SchedulerConfig = true, 3*time.Second, config })
	cycle(t, d) // hot: the window starts
	time.Sleep(4 * time.Second)
	cycle(t, d) // stale: no evidence
	for n, hot := range map[string]bool{"dsgap-hot": true, "dsgap-cool": false} {
		st := nodeStatus(10, 50, 100)
		if hot {
			st = nodeStatus(10, 97, 100)
		}
		if _, err := c.applyStatus(ctx, n, st); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	cycle(t, d)
	if got := evictions(t, descheduler.ResultWouldEvict) - before; got != 0 {
		t.Errorf("would_evict rose by %v, want 0: hot for 0.5s since the gap, sustain 3s", got)
	}
}

// TestDeschedulerNewLeaderStartsAfresh: a replica that watched a node hot
// as a standby starts its window when it leads, and leaves alone a pod
// its predecessor reported within the cool-down (read from the Events).
func TestDeschedulerNewLeaderStartsAfresh(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dsleader-hot", "dsleader", true)
	deschedNode(ctx, t, c, "dsleader-cool", "dsleader", false)
	deschedPod(ctx, t, c, "dsleader-pod", "dsleader-hot", "dsleader")

	// The standby watches the node hot for 3s, then leads.
	before := evictions(t, descheduler.ResultWouldEvict)
	standby := startDescheduler(t, func(o *app.Options) { o.DryRun, o.ThermalSustain = true, 2*time.Second })
	time.Sleep(3 * time.Second)
	standby.Lead(ctx)
	cycle(t, standby)
	if got := evictions(t, descheduler.ResultWouldEvict) - before; got != 0 {
		t.Errorf("would_evict rose by %v at the new leader's first cycle, want 0: its window starts when it leads", got)
	}

	// The old leader reports the pod; a new one comes after it.
	old := startDescheduler(t, func(o *app.Options) { o.DryRun = true })
	cycle(t, old)
	podEvent(t, c, "dsleader-pod", descheduler.ReasonWouldEvict)
	next := startDescheduler(t, func(o *app.Options) { o.DryRun = true })
	next.Lead(ctx)
	time.Sleep(1100 * time.Millisecond)
	if _, err := c.applyStatus(ctx, "dsleader-hot", nodeStatus(10, 97, 100)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	mid := evictions(t, descheduler.ResultWouldEvict)
	cycle(t, next)
	if got := evictions(t, descheduler.ResultWouldEvict) - mid; got != 0 {
		t.Errorf("would_evict rose by %v under the next leader, want 0: the pod is in the cool-down its predecessor's Event records", got)
	}
}
