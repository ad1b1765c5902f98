// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	toolscache "k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/nodeset"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func status(cpu, mem int32, age time.Duration) *telemetryv1alpha1.NodeTelemetryStatus {
	return &telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime: metav1.NewTime(now.Add(-age)), IntervalSeconds: 5,
		CPU:    &telemetryv1alpha1.CPUStatus{LogicalCores: 16, OnlineCores: 16, UtilizationPercent: cpu},
		Memory: &telemetryv1alpha1.MemoryStatus{TotalBytes: 64 << 30, AvailableBytes: 32 << 30, UtilizationPercent: mem},
	}
}

func nodeInfo(name string, annotations map[string]string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}})
	return ni
}

func pod(cpu string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("1Gi")}},
	}}}}
}

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      *telemetryv1alpha1.NodeTelemetryStatus // nil: no telemetry
		reservedCPU int64
		annotations map[string]string
		policy      config.StaleTelemetryPolicy
		pod         *v1.Pod
		wantReason  string // "" fits
	}{
		// 60% + 2000m/16000m (12.5) = 72.5 <= 80
		{name: "fits", status: status(60, 50, 0), pod: pod("2")},
		// 60% + (2000+1200)m/16000m = 60 + 20 = 80: at the threshold, fits
		{name: "at the threshold", status: status(60, 50, 0), reservedCPU: 1200, pod: pod("2")},
		// 60% + (2000+1216)/16000 = 80.1 > 80
		{name: "reservations tip it over", status: status(60, 50, 0), reservedCPU: 1216, pod: pod("2"),
			wantReason: "node cpu 80.10 percent > threshold 80 percent (measured 60, +20.10 placed since the sample and this pod)"},
		// the annotation lowers the threshold to 70: 72.5 > 70
		{name: "node annotation override", status: status(60, 50, 0), pod: pod("2"),
			annotations: map[string]string{config.NodeAnnotationCPUThresholdPercent: "70"},
			wantReason:  "node cpu 72.50 percent > threshold 70 percent"},
		{name: "bad annotation ignored", status: status(60, 50, 0), pod: pod("2"),
			annotations: map[string]string{config.NodeAnnotationCPUThresholdPercent: "150"}},
		// memory 89% + 1Gi/64Gi (1.56) = 90.56 > 90
		{name: "memory", status: status(10, 89, 0), pod: pod("100m"), wantReason: "node memory 90.56 percent > threshold 90 percent"},
		{name: "stale, Ignore", status: status(99, 99, 10*time.Minute), pod: pod("2")},
		{name: "stale, Reject", status: status(10, 10, 10*time.Minute), policy: config.StaleTelemetryReject, pod: pod("2"),
			wantReason: "node telemetry is 10m0s old > telemetryMaxAge 1m0s"},
		{name: "missing, Reject", policy: config.StaleTelemetryReject, pod: pod("2"), wantReason: "node has no NodeTelemetry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := newCache()
			if tc.status != nil {
				observe(cache, "n", tc.status)
			}
			args := *configv1.DefaultLoadAwareArgs()
			if tc.policy != "" {
				args.StaleTelemetryPolicy = tc.policy
			}
			pl := New(args, cache)
			if tc.reservedCPU > 0 {
				pl.book.ReserveDemand("n", "other", estimate.Demand{CPUMilli: tc.reservedCPU, MemoryBytes: 0})
			}
			cs := framework.NewCycleState()
			if _, st := pl.PreFilter(context.Background(), cs, tc.pod, nil); !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st)
			}
			st := pl.Filter(context.Background(), cs, tc.pod, nodeInfo("n", tc.annotations))
			switch {
			case tc.wantReason == "" && !st.IsSuccess():
				t.Errorf("Filter = %v, want success", st)
			case tc.wantReason != "" && (st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), tc.wantReason)):
				t.Errorf("Filter = %v, want Unschedulable containing %q", st, tc.wantReason)
			}
		})
	}
}

// Pods of a DaemonSet skip the filter, once the DaemonSet they name is
// found with that UID: an owner reference alone is written by whoever
// creates the pod.
func TestDaemonSetPodsSkipTheFilter(t *testing.T) {
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	if err := indexer.Add(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "agent", UID: "ds-uid"}}); err != nil {
		t.Fatal(err)
	}
	pl := New(*configv1.DefaultLoadAwareArgs(), newCache())
	pl.daemonSets = appslisters.NewDaemonSetLister(indexer)
	for _, tc := range []struct {
		name     string
		ref      metav1.OwnerReference
		ns       string
		wantSkip bool
	}{
		{"the DaemonSet's pod", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid", Controller: ptr.To(true)}, "ops", true},
		{"another UID", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "forged", Controller: ptr.To(true)}, "ops", false},
		{"no such DaemonSet", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nope", UID: "ds-uid", Controller: ptr.To(true)}, "ops", false},
		{"another namespace", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid", Controller: ptr.To(true)}, "default", false},
		{"not the controller", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid"}, "ops", false},
	} {
		p := pod("2")
		p.Namespace, p.OwnerReferences = tc.ns, []metav1.OwnerReference{tc.ref}
		_, st := pl.PreFilter(context.Background(), framework.NewCycleState(), p, nil)
		if st.IsSkip() != tc.wantSkip {
			t.Errorf("%s: PreFilter = %v, want skip %v", tc.name, st, tc.wantSkip)
		}
	}
}

func TestReserveCountsUntilMeasured(t *testing.T) {
	cache := newCache()
	observe(cache, "n", status(60, 50, 0))
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	cs := framework.NewCycleState()
	p := pod("3")
	_, _ = pl.PreFilter(context.Background(), cs, p, nil)
	if st := pl.Reserve(context.Background(), cs, p, "n"); !st.IsSuccess() {
		t.Fatal(st)
	}
	// 60% + 3000m reserved + 3000m = 60 + 37.5 = 97.5 > 80
	if st := pl.Filter(context.Background(), cs, p, nodeInfo("n", nil)); st.IsSuccess() {
		t.Error("a second 3-CPU pod fit although the first is reserved")
	}
	pl.Unreserve(context.Background(), cs, p, "n")
	if st := pl.Filter(context.Background(), cs, p, nodeInfo("n", nil)); !st.IsSuccess() {
		t.Errorf("after Unreserve: %v", st)
	}
}

// TestPreemptionDryRun: the scheduler's preemption takes victims off a
// node in a copy of the cycle state (RemovePod) and filters the node again;
// a node that the pods placed since its sample hold over the threshold must
// admit the preemptor once enough of them are off, and the state other
// nodes' copies share must stay as it was. Nominated pods put on a node
// (AddPod) count like placed ones.
func TestPreemptionDryRun(t *testing.T) {
	cache := newCache()
	observe(cache, "n", status(60, 50, 0))
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	victim := pod("2")
	victim.Name, victim.UID = "victim", "victim"
	// 60% + 2000m reserved + 2000m = 60 + 25 = 85 > 80
	pl.book.Reserve("n", victim)
	preemptor := pod("2")
	preemptor.Name, preemptor.UID = "preemptor", "preemptor"
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(context.Background(), cs, preemptor, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	ni := nodeInfo("n", nil)
	if st := pl.Filter(context.Background(), cs, preemptor, ni); st.Code() != fwk.Unschedulable {
		t.Fatalf("Filter before preemption = %v, want Unschedulable", st)
	}
	ext := pl.PreFilterExtensions()
	if ext == nil {
		t.Fatal("PreFilterExtensions() = nil: preemption's dry run cannot take a victim off the node")
	}
	dry := cs.Clone()
	if st := ext.RemovePod(context.Background(), dry, preemptor, mustPodInfo(t, victim), ni); !st.IsSuccess() {
		t.Fatalf("RemovePod: %v", st)
	}
	// 60% + 2000m = 72.5 <= 80
	if st := pl.Filter(context.Background(), dry, preemptor, ni); !st.IsSuccess() {
		t.Errorf("Filter with the victim removed = %v, want success", st)
	}
	if st := pl.Filter(context.Background(), cs, preemptor, ni); st.Code() != fwk.Unschedulable {
		t.Errorf("Filter on the original state after the dry run = %v, want Unschedulable still", st)
	}
	if st := ext.AddPod(context.Background(), dry, preemptor, mustPodInfo(t, victim), ni); !st.IsSuccess() {
		t.Fatalf("AddPod: %v", st)
	}
	if st := pl.Filter(context.Background(), dry, preemptor, ni); st.Code() != fwk.Unschedulable {
		t.Errorf("Filter with the victim put back = %v, want Unschedulable", st)
	}
}

func mustPodInfo(t *testing.T, p *v1.Pod) fwk.PodInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(p)
	if err != nil {
		t.Fatal(err)
	}
	return pi
}

// pick names a pod Filter rejected on a node's old view when the update
// lets it in by Filter's predicate (the load fell under the threshold, or
// the node's telemetry became fresh or new), and not when it does not.
func TestPick(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new *telemetryv1alpha1.NodeTelemetryStatus
		want     bool
	}{
		{"fell under the threshold", status(95, 50, 0), status(50, 50, 0), true},
		{"still over", status(95, 50, 0), status(90, 50, 0), false},
		{"already under", status(50, 50, 0), status(40, 50, 0), false},
		{"became fresh", status(50, 50, 10*time.Minute), status(50, 50, 0), true},
		{"added, under", nil, status(50, 50, 0), true},
		{"added, over", nil, status(95, 50, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { clock.Set(now) })
			pl := New(*configv1.DefaultLoadAwareArgs(), newCache())
			if got := picks(t, pl, pod("1"), "n", tc.old, tc.new); got != tc.want {
				t.Errorf("pick names the pod: %v, want %v", got, tc.want)
			}
		})
	}
}

// PreFilter skips the filter when no node could fail it: the fleet's
// LoadBound with the pod stays within the thresholds, no node's annotation
// lowers one, and stale telemetry is not rejected.
func TestPreFilterSkip(t *testing.T) {
	cache := newCache()
	observe(cache, "a", status(60, 50, 0)) // 16 cores, 64Gi
	observe(cache, "b", status(30, 50, 0))
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	lowered := nodeset.New(pl.lowersThreshold)
	annotated := func(v string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{config.NodeAnnotationCPUThresholdPercent: v}}}
	}
	reject := NewWith(*configv1.DefaultLoadAwareArgs(), cache, pl.book)
	reject.args.StaleTelemetryPolicy = config.StaleTelemetryReject
	reject.lowered = lowered
	for _, step := range []struct {
		name     string
		do       func()
		pl       *LoadAware
		pod      *v1.Pod
		wantSkip bool
	}{
		{"nodes not watched", func() {}, pl, pod("2"), false},
		// a: 60% + 2000m/16000m + 1bp = 72.51% <= 80
		{"room on every node", func() { pl.lowered = lowered }, pl, pod("2"), true},
		// a: 60% + 4000m/16000m = 85% > 80
		{"a big pod", func() {}, pl, pod("4"), false},
		{"a node lowers its threshold", func() { lowered.Update(annotated("70")) }, pl, pod("2"), false},
		{"it raises it instead", func() { lowered.Update(annotated("90")) }, pl, pod("2"), true},
		{"an invalid annotation is ignored", func() { lowered.Update(annotated("lots")) }, pl, pod("2"), true},
		{"stale telemetry rejected", func() {}, reject, pod("2"), false},
		// a: 60% + 1000m reserved + 2000m = 78.75%, + 1bp: fits; 2000m more: over
		{"a reservation", func() { pl.book.ReserveDemand("a", "r1", estimate.Demand{CPUMilli: 1000, MemoryBytes: 0}) }, pl, pod("2"), true},
		{"another reservation", func() { pl.book.ReserveDemand("a", "r2", estimate.Demand{CPUMilli: 2000, MemoryBytes: 0}) }, pl, pod("2"), false},
		{"memory near its threshold", func() {
			pl.book.Unreserve("a", "r1")
			pl.book.Unreserve("a", "r2")
			observe(cache, "b", status(30, 89, 0))
		}, pl, pod("2"), false},
	} {
		step.do()
		_, st := step.pl.PreFilter(context.Background(), framework.NewCycleState(), step.pod, nil)
		if st.IsSkip() != step.wantSkip || (!step.wantSkip && !st.IsSuccess()) {
			t.Errorf("%s: PreFilter = %v, want skip %v (bound %+v)", step.name, st, step.wantSkip, pl.book.LoadBound())
		}
	}
}
