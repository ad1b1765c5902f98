// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package rejected

import (
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// activations records the pods the framework was asked to activate.
type activations struct {
	mu   sync.Mutex
	pods []string
	got  chan struct{}
}

func (a *activations) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range pods {
		a.pods = append(a.pods, key)
	}
	a.got <- struct{}{}
}

// wait returns the pods activated by the next call, or nil after a while.
func (a *activations) wait() []string {
	select {
	case <-a.got:
	case <-time.After(5 * time.Second):
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.pods
	a.pods = nil
	return out
}

// A reservation given back without a sample saying so (its pod deleted,
// or the reservation expired) requeues the rejected pods that fit the node
// now, and only those.
func TestRequeueOnRelease(t *testing.T) {
	clock := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	cache := telemetry.NewCacheWithClock(now)
	book := estimate.NewBook(cache, estimate.DefaultOptions())
	cache.Set(&telemetry.Node{Name: "n", SampleTime: now(), Interval: 5 * time.Second, HasCPU: true, CPUPercent: 0, LogicalCores: 8})

	small := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "small", UID: "s"}}
	big := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big", UID: "b"}}
	client := fake.NewClientset(small, big, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	factory := informers.NewSharedInformerFactory(client, 0)
	ix := New[estimate.Demand]()
	act := &activations{got: make(chan struct{}, 8)}
	// Fits: the node's 8 CPUs less what is reserved there.
	ix.Requeue(t.Context(), "Test", book, factory, act, func(node string) func(estimate.Demand) bool {
		free := 8000 - book.Get(node).CPUMilli
		return func(d estimate.Demand) bool { return d.CPUMilli <= free }
	})
	factory.Start(t.Context().Done())
	factory.WaitForCacheSync(t.Context().Done())

	book.ReserveDemand("n", "held", estimate.Demand{CPUMilli: 6000})
	book.ReserveDemand("n", "old", estimate.Demand{CPUMilli: 1000})
	// 6000m + 1000m reserved of 8000m: 2 CPUs do not fit, 5 do not.
	ix.Add(small, estimate.Demand{CPUMilli: 2000})
	ix.Add(big, estimate.Demand{CPUMilli: 5000})

	mu.Lock()
	clock = clock.Add(time.Minute)
	mu.Unlock()
	book.End("n", "held") // deleted: 1000m reserved, 7000m free
	if got := act.wait(); len(got) != 2 {
		t.Errorf("after the held pod's deletion: activated %v, want ns/small and ns/big", got)
	}

	book.ReserveDemand("n", "held2", estimate.Demand{CPUMilli: 6000})
	mu.Lock()
	clock = clock.Add(book.MaxAge()) // "old" expires: 6000m reserved, 2000m free
	mu.Unlock()
	book.Expire()
	if got := act.wait(); len(got) != 1 || got[0] != "ns/small" {
		t.Errorf("after the old reservation expired: activated %v, want [ns/small]", got)
	}
}
