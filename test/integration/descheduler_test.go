// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/descheduler/app"
	budgetplugin "github.com/telesched/telesched/descheduler/plugins/powerbudget"
	"github.com/telesched/telesched/descheduler/plugins/thermal"
)

// deschedNode creates a Ready, schedulable Node in group (label
// telesched-desched) with fresh telemetry: hot (headroom 3°C <= margin
// 5°C) or cool (50°C of 100°C).
func deschedNode(ctx context.Context, t *testing.T, c clients, name, group string, hot bool) {
	t.Helper()
	node := readyNode(ctx, t, c, name, map[string]string{"kubernetes.io/hostname": name, "telesched-desched": group})
	st := nodeStatus(10, 50, 100)
	if hot {
		st = nodeStatus(10, 97, 100)
	}
	if _, err := c.applyStatusCreating(ctx, node, st); err != nil {
		t.Fatal(err)
	}
}

// deschedPod creates a Running, Ready pod on node, which only the nodes of
// group may take, labelled app=name. Its owner is a ConfigMap: upstream's
// DefaultEvictor leaves pods without an owner alone, and an owner that
// exists keeps the garbage collector off the pod, while no controller
// recreates it.
func deschedPod(ctx context.Context, t *testing.T, c clients, name, node, group string) {
	t.Helper()
	deschedPodWith(ctx, t, c, name, node, group, nil)
}

// deschedPodWith is deschedPod with the pod changed by mutate (nil: none)
// before it is created.
func deschedPodWith(ctx context.Context, t *testing.T, c clients, name, node, group string, mutate func(*corev1.Pod)) {
	t.Helper()
	owner, err := c.kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-owner", Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.CoreV1().ConfigMaps("default").Delete(context.Background(), owner.Name, metav1.DeleteOptions{})
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}},
		Spec: corev1.PodSpec{
			// A pod of telesched's profile: the descheduler's default
			// policy chooses no other scheduler's pods.
			SchedulerName: "telesched",
			NodeName:      node,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			}}},
			NodeSelector: map[string]string{"telesched-desched": group},
		},
	}
	if mutate != nil {
		mutate(pod)
	}
	p, err := c.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := c.kube.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startDescheduler builds a descheduler with opts (sustain 0: act at the
// first cycle) and waits until its pod informer sees wantPods pods.
func startDescheduler(t *testing.T, mutate func(*app.Options)) *app.Descheduler {
	t.Helper()
	opts := app.DefaultOptions()
	opts.ThermalSustain = 0
	mutate(&opts)
	d, err := app.New(t.Context(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func cycle(t *testing.T, d *app.Descheduler) {
	t.Helper()
	if err := d.Cycle(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// evictions is telesched_descheduler_evictions_total{plugin=TeleschedThermal, result}.
func evictions(t *testing.T, result string) float64 {
	t.Helper()
	return pluginEvictions(t, thermal.Name, result)
}

// pluginEvictions is telesched_descheduler_evictions_total{plugin, result}.
func pluginEvictions(t *testing.T, plugin, result string) float64 {
	t.Helper()
	fams, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "telesched_descheduler_evictions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelsAre(m, plugin, result) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labelsAre(m *dto.Metric, plugin, result string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	return got["plugin"] == plugin && got["result"] == result
}

// podEvent waits for an Event of reason on pod and returns its note.
func podEvent(t *testing.T, c clients, pod, reason string) string {
	t.Helper()
	var note string
	waitFor(t, reason+" event on "+pod, 20*time.Second, func() bool {
		evs, err := c.kube.EventsV1().Events("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == pod && e.Reason == reason {
				note = e.Note
				return true
			}
		}
		return false
	})
	return note
}

// evicted reports whether pod is gone or being deleted.
func evicted(t *testing.T, c clients, pod string) bool {
	t.Helper()
	p, err := c.kube.CoreV1().Pods("default").Get(t.Context(), pod, metav1.GetOptions{})
	return err != nil || p.DeletionTimestamp != nil
}

func TestDeschedulerDryRunOnlyReports(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dsdry-hot", "dsdry", true)
	deschedNode(ctx, t, c, "dsdry-cool", "dsdry", false)
	deschedPod(ctx, t, c, "dsdry-pod", "dsdry-hot", "dsdry")
	before := evictions(t, descheduler.ResultWouldEvict)
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = true })
	cycle(t, d)
	note := podEvent(t, c, "dsdry-pod", descheduler.ReasonWouldEvict)
	if !strings.Contains(note, "destination dsdry-cool (checked)") {
		t.Errorf("dry-run Event %q names no checked destination dsdry-cool", note)
	}
	if evicted(t, c, "dsdry-pod") {
		t.Errorf("dry-run evicted dsdry-pod")
	}
	if got := evictions(t, descheduler.ResultWouldEvict) - before; got != 1 {
		t.Errorf("would_evict rose by %v, want 1", got)
	}
}

func TestDeschedulerEvictsHotNodesPodToCheckedDestination(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dsevict-hot", "dsevict", true)
	deschedNode(ctx, t, c, "dsevict-cool", "dsevict", false)
	deschedPod(ctx, t, c, "dsevict-pod", "dsevict-hot", "dsevict")
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = false })
	cycle(t, d)
	note := podEvent(t, c, "dsevict-pod", descheduler.ReasonEvicted)
	for _, want := range []string{"destination dsevict-cool (checked)", "node dsevict-hot at or past limit - margin", "headroom 3.0°C <= margin 5.0°C"} {
		if !strings.Contains(note, want) {
			t.Errorf("Event %q lacks %q", note, want)
		}
	}
	if !evicted(t, c, "dsevict-pod") {
		t.Errorf("dsevict-pod was not evicted")
	}
}

func TestDeschedulerEvictsNothingWithoutDestination(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dsnodest-hot", "dsnodest", true)
	deschedNode(ctx, t, c, "dsnodest-hot2", "dsnodest", true) // hot too: EnergyAware refuses it
	deschedPod(ctx, t, c, "dsnodest-pod", "dsnodest-hot", "dsnodest")
	before := evictions(t, descheduler.ResultNoDestination)
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = false })
	cycle(t, d)
	note := podEvent(t, c, "dsnodest-pod", descheduler.ReasonNoDestination)
	if !strings.Contains(note, "EnergyAware: node thermal headroom 3.0°C <= margin 5.0°C") {
		t.Errorf("no-destination Event %q does not say EnergyAware refused the other node", note)
	}
	if evicted(t, c, "dsnodest-pod") {
		t.Errorf("dsnodest-pod was evicted with no destination")
	}
	if got := evictions(t, descheduler.ResultNoDestination) - before; got < 1 {
		t.Errorf("no_destination rose by %v, want >= 1", got)
	}
}

func TestDeschedulerDoesNotRetryEvictionRefusedByPDB(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dspdb-hot", "dspdb", true)
	deschedNode(ctx, t, c, "dspdb-cool", "dspdb", false)
	deschedPod(ctx, t, c, "dspdb-pod", "dspdb-hot", "dspdb")
	// No disruption controller runs here: the PDB's status allows none,
	// so the Eviction API answers 429.
	if _, err := c.kube.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "dspdb", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "dspdb-pod"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.PolicyV1().PodDisruptionBudgets("default").Delete(context.Background(), "dspdb", metav1.DeleteOptions{})
	})
	results := []string{descheduler.ResultRefusedPDB, descheduler.ResultError, descheduler.ResultEvicted, descheduler.ResultRateLimited, descheduler.ResultNoDestination}
	before := map[string]float64{}
	for _, r := range results {
		before[r] = evictions(t, r)
	}
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = false })
	for i := range 3 {
		// The 429 is an answer, not a reason to wait: a cycle that
		// retried it (client-go does, up to 10 times, by Retry-After)
		// would stall every other node's descheduling.
		start := time.Now()
		cycle(t, d)
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("cycle %d took %s with a PDB refusing, want <= 5s", i, took.Round(time.Second))
		}
		if i == 0 {
			podEvent(t, c, "dspdb-pod", descheduler.ReasonEvictionRefused)
		}
	}
	got := map[string]float64{}
	for _, r := range results {
		if v := evictions(t, r) - before[r]; v != 0 {
			got[r] = v
		}
	}
	// One attempt, refused; none after it within the cool-down.
	if diff := cmp.Diff(map[string]float64{descheduler.ResultRefusedPDB: 1}, got); diff != "" {
		t.Errorf("evictions over 3 cycles by result (-want +got):\n%s", diff)
	}
	if evicted(t, c, "dspdb-pod") {
		t.Errorf("dspdb-pod was evicted despite its PDB")
	}
}

func TestDeschedulerHoldsThePerCycleLimit(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dsrate-hot1", "dsrate", true)
	deschedNode(ctx, t, c, "dsrate-hot2", "dsrate", true)
	deschedNode(ctx, t, c, "dsrate-cool", "dsrate", false)
	deschedPod(ctx, t, c, "dsrate-pod1", "dsrate-hot1", "dsrate")
	deschedPod(ctx, t, c, "dsrate-pod2", "dsrate-hot2", "dsrate")
	before := evictions(t, descheduler.ResultWouldEvict)
	limited := evictions(t, descheduler.ResultRateLimited)
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = true; o.MaxEvictionsPerCycle = 1 })
	cycle(t, d)
	if got := evictions(t, descheduler.ResultWouldEvict) - before; got != 1 {
		t.Errorf("would_evict rose by %v with --max-evictions-per-cycle=1 and two hot nodes, want 1", got)
	}
	if got := evictions(t, descheduler.ResultRateLimited) - limited; got != 1 {
		t.Errorf("rate_limited rose by %v, want 1", got)
	}
}

func TestDeschedulerHoldsTheCooldown(t *testing.T) {
	needControlPlane(t)
	for _, tc := range []struct {
		name     string
		cooldown time.Duration
		want     float64 // would_evict over three cycles, a fresh hot sample before the third
	}{
		{name: "within cool-down the pod is reported once", cooldown: time.Hour, want: 1},
		{name: "without cool-down it is reported again on a fresh sample", cooldown: 0, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c := t.Context(), newClients(t)
			deschedNode(ctx, t, c, "dscool-hot", "dscool", true)
			deschedNode(ctx, t, c, "dscool-cool", "dscool", false)
			deschedPod(ctx, t, c, "dscool-pod", "dscool-hot", "dscool")
			before := evictions(t, descheduler.ResultWouldEvict)
			d := startDescheduler(t, func(o *app.Options) { o.DryRun = true; o.Cooldown = tc.cooldown })
			cycle(t, d)
			// The node's sample is the one taken before the pod was
			// reported: no evidence of what its leaving did.
			cycle(t, d)
			if got := evictions(t, descheduler.ResultWouldEvict) - before; got != 1 {
				t.Errorf("would_evict rose by %v over two cycles on one sample with --cooldown=%s, want 1", got, tc.cooldown)
			}
			// A sample taken after it, still hot.
			time.Sleep(1100 * time.Millisecond)
			if _, err := c.applyStatus(ctx, "dscool-hot", nodeStatus(10, 97, 100)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // the descheduler's cache sees it
			cycle(t, d)
			if got := evictions(t, descheduler.ResultWouldEvict) - before; got != tc.want {
				t.Errorf("would_evict rose by %v over three cycles, a fresh hot sample before the third, with --cooldown=%s, want %v", got, tc.cooldown, tc.want)
			}
		})
	}
}

// TestDeschedulerBinaryServesMetrics runs bin/telesched-descheduler in its
// default dry-run on a hot node with a pod: the pod stays, its Event says
// it would go, and /metrics counts it.
func TestDeschedulerBinaryServesMetrics(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	fams := runDeschedulerBinary(t, c, "dsbin")
	note := podEvent(t, c, "dsbin-pod", descheduler.ReasonWouldEvict)
	if !strings.Contains(note, "destination dsbin-cool (checked)") {
		t.Errorf("Event %q names no checked destination dsbin-cool", note)
	}
	for _, name := range []string{"telesched_descheduler_cycle_duration_seconds", "telesched_descheduler_hot_nodes"} {
		if fams[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if evicted(t, c, "dsbin-pod") {
		t.Errorf("the default dry-run evicted dsbin-pod")
	}
}

// runDeschedulerBinary runs bin/telesched-descheduler with its defaults
// (dry-run) against the test API server, with group-pod on the hot node
// group-hot and a destination group-cool, and returns its /metrics once
// it has reported the pod (telesched_descheduler_evictions_total).
func runDeschedulerBinary(t *testing.T, c clients, group string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx := t.Context()
	binDir, kubeconfig := binDirAndKubeconfig(t)
	deschedNode(ctx, t, c, group+"-hot", group, true)
	deschedNode(ctx, t, c, group+"-cool", group, false)
	deschedPod(ctx, t, c, group+"-pod", group+"-hot", group)
	addr := freeAddress(t)
	out := startProcess(t, filepath.Join(binDir, "telesched-descheduler"),
		"--kubeconfig="+kubeconfig, "--metrics-bind-address="+addr, "--interval=1s", "--thermal-sustain=0s")
	var fams map[string]*dto.MetricFamily
	// The eviction counter has a series once a pod was reported, the
	// cycle histogram once a cycle ended.
	waitReady(t, "telesched_descheduler_evictions_total and a cycle's duration on /metrics", out, 30*time.Second, func() bool {
		var err error
		fams, err = tryScrape(http.DefaultClient, "http://"+addr+"/metrics")
		return err == nil && fams["telesched_descheduler_evictions_total"] != nil && fams["telesched_descheduler_cycle_duration_seconds"] != nil
	})
	return fams
}

// TestDeschedulerBringsAnOverBudgetRackUnder: a rack of two nodes drawing
// 500 W each (16 cores, 100 W idle to 900 W: 50 W a core) under a 960 W
// budget is 40 W over; its three pods of 500m free 25 W each, so two go
// (50 W >= 40 W; one, 25 W, is not enough), each to the node outside the
// rack.
func TestDeschedulerBringsAnOverBudgetRackUnder(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dsbudget-0", "dsbudget", false)
	deschedNode(ctx, t, c, "dsbudget-1", "dsbudget", false)
	deschedNode(ctx, t, c, "dsbudget-out", "dsbudget", false)
	deschedPod(ctx, t, c, "dsbudget-a", "dsbudget-0", "dsbudget")
	deschedPod(ctx, t, c, "dsbudget-b", "dsbudget-0", "dsbudget")
	deschedPod(ctx, t, c, "dsbudget-c", "dsbudget-1", "dsbudget")
	budgetRack(ctx, t, c, "dsbudget", 960, "dsbudget-0", "dsbudget-1")
	before := pluginEvictions(t, budgetplugin.Name, descheduler.ResultWouldEvict)
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = true; o.BudgetSustain = 0 })
	cycle(t, d)
	if got := pluginEvictions(t, budgetplugin.Name, descheduler.ResultWouldEvict) - before; got != 2 {
		t.Errorf("would_evict rose by %v, want 2 (the fewest 25 W pods over 40 W)", got)
	}
	var notes []string
	waitFor(t, "two TeleschedWouldEvict events", 20*time.Second, func() bool {
		evs, err := c.kube.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		notes = nil
		for _, e := range evs.Items {
			if strings.HasPrefix(e.Regarding.Name, "dsbudget-") && e.Reason == descheduler.ReasonWouldEvict {
				notes = append(notes, e.Note)
			}
		}
		return len(notes) >= 2
	})
	for _, n := range notes {
		t.Logf("event: %s", n)
		if !strings.Contains(n, "destination dsbudget-out (checked)") || !strings.Contains(n, "PowerBudget dsbudget over") {
			t.Errorf("Event %q: want the budget and destination dsbudget-out", n)
		}
	}
}

// TestDeschedulerHoldsThePerNodeLimit: a rack of one node 40 W over its
// budget needs two of the node's 25 W pods gone; with
// --max-evictions-per-node-per-cycle=1 one is evicted (here reported, in
// dry-run) and the other is held back by the limit, until a later cycle.
func TestDeschedulerHoldsThePerNodeLimit(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dspernode-0", "dspernode", false)
	deschedNode(ctx, t, c, "dspernode-out", "dspernode", false)
	for _, p := range []string{"dspernode-a", "dspernode-b", "dspernode-c"} {
		deschedPod(ctx, t, c, p, "dspernode-0", "dspernode")
	}
	budgetRack(ctx, t, c, "dspernode", 460, "dspernode-0")
	before := pluginEvictions(t, budgetplugin.Name, descheduler.ResultWouldEvict)
	limited := pluginEvictions(t, budgetplugin.Name, descheduler.ResultRateLimited)
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = true; o.BudgetSustain = 0; o.MaxEvictionsPerNode = 1 })
	cycle(t, d)
	if got := pluginEvictions(t, budgetplugin.Name, descheduler.ResultWouldEvict) - before; got != 1 {
		t.Errorf("would_evict rose by %v with --max-evictions-per-node-per-cycle=1 and two pods to move off one node, want 1", got)
	}
	if got := pluginEvictions(t, budgetplugin.Name, descheduler.ResultRateLimited) - limited; got != 1 {
		t.Errorf("rate_limited rose by %v, want 1", got)
	}
}

// budgetRack labels nodes as rack name, publishes a 500 W sample for each
// (after their pods were bound, so the pods are in its watts) and makes
// the PowerBudget name of budgetWatts over them.
func budgetRack(ctx context.Context, t *testing.T, c clients, name string, budgetWatts int64, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		node, err := c.kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Labels["example.com/rack"] = name
		if _, err := c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.applyStatus(ctx, n, rackNode(50, 500)); err != nil {
			t.Fatal(err)
		}
	}
	rackBudget(ctx, t, c, name, budgetWatts)
}
