// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/scheduler/registry"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/fixtures"
)

// simulatorPodsPerNode bound pods of 1 CPU run on each 64-CPU node of the
// benchmark; simulatorMoves of them are moved per cycle.
const (
	simulatorPodsPerNode = 10
	simulatorMoves       = 10
)

// BenchmarkSimulatorCycle is what a descheduling cycle costs the
// simulator that checks destinations: for simulatorMoves pods, the
// shipped telesched profile's PreFilter, Filter on every other node and
// Score on the feasible ones (Destination; the first takes the snapshot
// of every node and bound pod), each move planned so the next sees it.
// Nodes carry fresh, cool telemetry (test/fixtures: 2 NUMA nodes, 8 GPUs).
// ns/destination is one pod's check (the snapshot included); the cycle's
// ns/op is the whole. The idle sub-benchmark is a cycle with nothing to
// move, as most are.
func BenchmarkSimulatorCycle(b *testing.B) {
	// The plugins' informers log at start; the figures are the output.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	defer klog.LogToStderr(true)
	for _, nodes := range []int{100, 500, 1000} {
		b.Run(fmt.Sprintf("%dNodes", nodes), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sim, candidates := newBenchSimulator(ctx, b, nodes)
			// A cycle with nothing to move.
			b.Run("idle", func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					if err := sim.BeginCycle(); err != nil {
						b.Fatal(err)
					}
					sim.EndCycle()
				}
			})
			b.Run(fmt.Sprintf("%dMoves", len(candidates)), func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					if err := sim.BeginCycle(); err != nil {
						b.Fatal(err)
					}
					for _, p := range candidates {
						dest, why := sim.Destination(ctx, p, func(string) string { return "" })
						if dest == "" {
							b.Fatalf("no destination for %s: %s", p.Name, why)
						}
						if err := sim.Plan(ctx, p, dest); err != nil {
							b.Fatal(err)
						}
					}
					sim.EndCycle()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(candidates)), "ns/destination")
			})
		})
	}
}

// newBenchSimulator builds the shipped configuration's telesched profile
// over a fake API of nodes nodes, each with simulatorPodsPerNode bound
// pods, and returns the pods to move: the first pod of each of the first
// simulatorMoves nodes.
func newBenchSimulator(ctx context.Context, b testing.TB, nodes int) (*Simulator, []*v1.Pod) {
	b.Helper()
	profile, err := LoadSchedulerProfile("", "telesched")
	if err != nil {
		b.Fatal(err)
	}
	shared := registry.NewShared(nil)
	now := time.Now()
	var objs []runtime.Object
	var candidates []*v1.Pod
	for i := range nodes {
		name := fmt.Sprintf("node-%05d", i)
		st := fixtures.FullStatus(now, 2, 8)
		st.CPU.UtilizationPercent = int32(10 + i%50)
		st.Thermal.Throttling, st.CPU.ThermalThrottle.Throttling = false, false
		shared.Cache.Set(telemetry.FromStatus(name, &st))
		alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("256Gi"), v1.ResourcePods: resource.MustParse("110")}
		objs = append(objs, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
			Status: v1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}})
		for j := range simulatorPodsPerNode {
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pod-%d", name, j), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d-%d", i, j))},
				Spec: v1.PodSpec{NodeName: name, SchedulerName: "telesched", Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("2Gi")}}}}},
				Status: v1.PodStatus{Phase: v1.PodRunning}}
			objs = append(objs, p)
			if j == 0 && i < simulatorMoves {
				candidates = append(candidates, p)
			}
		}
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	// telesched's plugins list and watch NodeTelemetry and PowerBudgets
	// through cfg: none here (the cache holds the nodes' telemetry).
	api := httptest.NewServer(http.HandlerFunc(emptyAPI))
	b.Cleanup(api.Close)
	cfg := &rest.Config{Host: api.URL}
	sim, err := NewSimulator(ctx, SimulatorConfig{Profile: profile, Client: client, Config: cfg, Factory: factory,
		Recorder: events.NewFakeRecorder(100), Shared: shared})
	if err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			b.Fatalf("%v not synced", typ)
		}
	}
	return sim, candidates
}

// emptyAPI answers every list with no items and holds every watch open
// (a watch-list one after its end-of-initial-events bookmark).
func emptyAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("watch") == "true" {
		w.WriteHeader(http.StatusOK)
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			// A watch-list stream: no objects, then the bookmark that ends
			// the initial events.
			_, _ = w.Write([]byte(`{"type":"BOOKMARK","object":{"apiVersion":"v1","kind":"Bookmark","metadata":{"resourceVersion":"1","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n"))
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":"1"},"items":[]}`))
}

// TestSimulatorSnapshotsOnlyWhenAsked checks that a cycle takes its
// snapshot at its first destination, shares it for the rest of the cycle
// (the second pod sees the first one's move), and that a cycle asking for
// none takes none.
func TestSimulatorSnapshotsOnlyWhenAsked(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sim, pods := newBenchSimulator(ctx, t, 3)
	if err := sim.BeginCycle(); err != nil {
		t.Fatal(err)
	}
	if sim.snap != nil {
		t.Fatal("BeginCycle took a snapshot; the cycle has asked for no destination")
	}
	sim.EndCycle()
	if err := sim.BeginCycle(); err != nil {
		t.Fatal(err)
	}
	dest, why := sim.Destination(ctx, pods[0], nil)
	if dest == "" {
		t.Fatalf("no destination: %s", why)
	}
	snap := sim.snap
	if snap == nil {
		t.Fatal("no snapshot after the cycle's first destination")
	}
	if err := sim.Plan(ctx, pods[0], dest); err != nil {
		t.Fatal(err)
	}
	if _, why := sim.Destination(ctx, pods[1], nil); sim.snap != snap {
		t.Fatalf("the cycle's second destination took another snapshot (%s)", why)
	}
	ni, err := snap.Get(dest)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ni.GetPods(), func(p fwk.PodInfo) bool { return p.GetPod().Name == pods[0].Name }) {
		t.Errorf("the snapshot does not hold %s at %s, where it was planned", pods[0].Name, dest)
	}
	sim.EndCycle()
	if sim.snap != nil || sim.Planned() != 0 {
		t.Error("EndCycle kept the cycle's snapshot or plans")
	}
}
