// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package rejected

import (
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/testutil"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// A NodeTelemetry change the cache stores activates the pods the plugin's
// pick names for it, judged against the view before it, and no other: a
// change that lets none in activates nothing, and a bound pod is left
// alone.
func TestOnTelemetryActivatesWhatPickNames(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	cache := telemetry.NewCacheWithClock(func() time.Time { return at })
	small := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "small", UID: "s"}}
	big := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big", UID: "b"}}
	bound := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bound", UID: "x"}, Spec: v1.PodSpec{NodeName: "elsewhere"}}
	client := fake.NewClientset(small, big, bound)
	factory := informers.NewSharedInformerFactory(client, 0)
	ix := New[int]()
	act := &activations{got: make(chan struct{}, 8)}
	// The plugin's predicate: a pod needing n percent fits a node under
	// 100 - n percent busy, and is let in when it did not fit prev.
	set := func(busy int32) {
		cache.Set(&telemetry.Node{Name: "n", SampleTime: at, Interval: 5 * time.Second, HasCPU: true, CPUPercent: busy, LogicalCores: 8})
	}
	before, _ := testutil.GetCounterMetricValue(activated.WithLabelValues("Test", causeTelemetry)) // the counter is the process's
	set(95)                                                                                        // handed to the watcher as an add when it registers
	ix.AddOn(small, "n", 10)
	ix.AddOn(big, "n", 60)
	ix.AddOn(bound, "n", 1) // fits at 95 %, but bound since: not activated
	fits := func(n *telemetry.Node, need int) bool { return int(n.CPUPercent)+need <= 100 }
	var mu sync.Mutex
	var judged [][2]int32
	ix.OnTelemetry(t.Context(), "Test", cache, factory, act, func(prev, cur *telemetry.Node) []types.NamespacedName {
		p := int32(-1)
		if prev != nil {
			p = prev.CPUPercent
		}
		mu.Lock()
		judged = append(judged, [2]int32{p, cur.CPUPercent})
		mu.Unlock()
		return ix.Select(nil, func(need int) bool { return fits(cur, need) && (prev == nil || !fits(prev, need)) })
	})
	factory.Start(t.Context().Done())
	factory.WaitForCacheSync(t.Context().Done())

	set(97) // busier: lets no one in
	set(85) // 10 fits now, not before
	got := act.wait()
	if !slices.Equal(got, []string{"ns/small"}) {
		t.Errorf("85 %% busy after 97: activated %v, want [ns/small]", got)
	}
	set(30) // 60 fits now; 10 fitted before, so it is not named again
	if got := act.wait(); !slices.Equal(got, []string{"ns/big"}) {
		t.Errorf("30 %% busy after 85: activated %v, want [ns/big]", got)
	}
	if n, err := testutil.GetCounterMetricValue(activated.WithLabelValues("Test", causeTelemetry)); err != nil || n-before != 2 {
		t.Errorf("telesched_scheduler_pods_activated_total{plugin=Test,cause=telemetry} rose by %v (%v), want 2", n-before, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := [][2]int32{{-1, 95}, {95, 97}, {97, 85}, {85, 30}}; !slices.Equal(judged, want) {
		t.Errorf("changes judged (prev, cur): %v, want %v, each on its own", judged, want)
	}
}

// The pod in its scheduling cycle is named on any node, before Filter has
// recorded it anywhere, until Reserve placed it (End) or the next pod's
// cycle begins; a pod Filter recorded meanwhile stays.
func TestSelectNamesThePodInItsCycle(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "idle"}}
	all := func(int) bool { return true }
	sel := func(ix *Index[int]) []string {
		var out []string
		for _, nn := range ix.Select(node, all) {
			out = append(out, nn.Name)
		}
		slices.Sort(out)
		return out
	}
	ix := New[int]()
	if n := ix.Len(); n != 0 {
		t.Fatalf("empty index: Len %d", n)
	}
	a, b := pending("a", "1"), pending("b", "1")
	ix.Begin(a, 1)
	if got := sel(ix); !slices.Equal(got, []string{"a"}) || ix.Len() != 1 {
		t.Errorf("a in its cycle: %v (Len %d), want [a] (1)", got, ix.Len())
	}
	ix.AddOn(a, "busy", 1) // Filter rejected it on another node
	if got := sel(ix); !slices.Equal(got, []string{"a"}) || ix.Len() != 1 {
		t.Errorf("a in its cycle and recorded on busy: %v (Len %d), want [a] once (1)", got, ix.Len())
	}
	ix.Begin(b, 1)
	if got := sel(ix); !slices.Equal(got, []string{"b"}) {
		t.Errorf("b's cycle begun, a recorded on busy only: on idle %v, want [b]", got)
	}
	ix.End(b)
	if got := sel(ix); got != nil || ix.Len() != 1 {
		t.Errorf("b placed: on idle %v (Len %d), want none (1)", got, ix.Len())
	}
	ix.Begin(b, 1)
	ix.Forget("ns", "b")
	if got := sel(ix); got != nil {
		t.Errorf("b deleted in its cycle: %v, want none", got)
	}
	picky := pending("picky", "1")
	picky.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	ix.Begin(picky, 1)
	if got := sel(ix); got != nil {
		t.Errorf("a pod whose selector excludes the node, in its cycle: %v, want none", got)
	}
}
