// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
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
	"github.com/telesched/telesched/descheduler/plugins/thermal"
)

// deschedNode creates a Ready, schedulable Node in group (label
// telesched-desched) with fresh telemetry: hot (headroom 3°C <= margin
// 5°C) or cool (50°C of 100°C).
func deschedNode(ctx context.Context, t *testing.T, c clients, name, group string, hot bool) {
	t.Helper()
	node, err := c.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "telesched-desched": group},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = c.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		_ = c.dyn.Resource(ntResource).Delete(ctx, name, metav1.DeleteOptions{})
	})
	node.Spec.Taints = nil
	if node, err = c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	node.Status = corev1.NodeStatus{
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}},
	}
	if node, err = c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
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
			NodeName: node,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			}}},
			NodeSelector: map[string]string{"telesched-desched": group},
		},
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
	fams, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "telesched_descheduler_evictions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelsAre(m, thermal.Name, result) {
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
	if !strings.Contains(note, "EnergyAware refuses") {
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
		cycle(t, d)
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
		want     float64 // would_evict over two cycles
	}{
		{name: "within cool-down the pod is reported once", cooldown: time.Hour, want: 1},
		{name: "without cool-down it is reported each cycle", cooldown: 0, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c := t.Context(), newClients(t)
			deschedNode(ctx, t, c, "dscool-hot", "dscool", true)
			deschedNode(ctx, t, c, "dscool-cool", "dscool", false)
			deschedPod(ctx, t, c, "dscool-pod", "dscool-hot", "dscool")
			before := evictions(t, descheduler.ResultWouldEvict)
			d := startDescheduler(t, func(o *app.Options) { o.DryRun = true; o.Cooldown = tc.cooldown })
			cycle(t, d)
			cycle(t, d)
			if got := evictions(t, descheduler.ResultWouldEvict) - before; got != tc.want {
				t.Errorf("would_evict rose by %v over two cycles with --cooldown=%s, want %v", got, tc.cooldown, tc.want)
			}
		})
	}
}
