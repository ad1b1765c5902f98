// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
)

// The PreQueueingHint names every pod the QueueingHint would queue for a
// NodeTelemetry update, none for an update that makes no estimate lower,
// and only pods Filter rejected. With the SchedulerPreQueueingHints gate on,
// the queue asks the QueueingHint about the named pods only, so a pod left
// out would wait for the 5-minute flush.
func TestPreHintNamesWhatTheHintQueues(t *testing.T) {
	sizes := []string{"100m", "500m", "1", "2", "4", "8"}
	type update struct {
		name     string
		old, new *telemetryv1alpha1.NodeTelemetryStatus
		wantNone bool
	}
	updates := []update{
		{"load rose", status(85, 50, 0), status(95, 50, 0), true},
		{"unchanged", status(90, 50, 0), status(90, 50, 0), true},
		{"memory rose, cpu unchanged", status(90, 50, 0), status(90, 60, 0), true},
		{"fell a little", status(90, 50, 0), status(85, 50, 0), false},
		// Every pod that fits at 40 % fitted at 50 % already.
		{"fell, the pods fitted already", status(50, 50, 0), status(40, 50, 0), true},
		{"fell under the threshold", status(95, 50, 0), status(50, 50, 0), false},
		{"fell to idle", status(99, 50, 0), status(1, 50, 0), false},
		{"became fresh", status(50, 50, 10*time.Minute), status(50, 50, 0), false},
		{"added", nil, status(60, 50, 0), false},
	}
	for _, u := range updates {
		t.Run(u.name, func(t *testing.T) {
			t.Cleanup(func() { clock.Set(now) })
			cache := newCache()
			pl := New(*configv1.DefaultLoadAwareArgs(), cache)
			// Every pod is rejected on a full node first, as the queue's
			// backlog was.
			observe(cache, "full", status(100, 100, 0))
			var pods []types.NamespacedName
			for i, size := range sizes {
				p := pod(size)
				p.Name, p.UID = fmt.Sprintf("p%d", i), types.UID(fmt.Sprint(i))
				if st := filterOK(t, pl, p, "full"); st.IsSuccess() {
					t.Fatalf("%s fit a full node", size)
				}
				pods = append(pods, types.NamespacedName{Name: p.Name})
			}
			notRejected := pod("100m")
			notRejected.Name, notRejected.UID = "never-rejected", "never"
			oldObj, newObj := plugintest.HintObjects(t, cache, clock, "n", u.old, u.new)
			got, err := pl.preHint(klog.Background(), oldObj, newObj)
			if err != nil || got.AllPods {
				t.Fatalf("preHint = %+v, %v; want a list", got, err)
			}
			if u.wantNone && len(got.Pods) > 0 {
				t.Errorf("preHint named %v for an update that lowers no estimate", got.Pods)
			}
			if slices.Contains(got.Pods, types.NamespacedName{Name: notRejected.Name}) {
				t.Errorf("preHint named a pod Filter never rejected")
			}
			for i, size := range sizes {
				p := pod(size)
				p.Name, p.UID = pods[i].Name, types.UID(fmt.Sprint(i))
				h, err := pl.hint(klog.Background(), p, oldObj, newObj)
				if err != nil {
					t.Fatal(err)
				}
				if named := slices.Contains(got.Pods, pods[i]); h == fwk.Queue && !named {
					t.Errorf("the hint queues the %s pod, but preHint left it out (named %v)", size, got.Pods)
				}
			}
			t.Logf("named %d of %d rejected pods: %v", len(got.Pods), len(sizes), got.Pods)
		})
	}
}

// An update on a node where Filter rejected no pending pod names none,
// however much its load fell: the pods were kept out elsewhere, or there by
// another filter, whose own events requeue them. On the node Filter
// rejected them on, the same update names them.
func TestPreHintOnlyOnNodesFilterRejectedOn(t *testing.T) {
	tests := []struct {
		name      string
		node      string
		wantNamed int
	}{
		{name: "the node Filter rejected them on", node: "busy", wantNamed: 2},
		{name: "a node Filter rejected none on", node: "idle", wantNamed: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { clock.Set(now) })
			cache := newCache()
			pl := New(*configv1.DefaultLoadAwareArgs(), cache)
			indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
			for _, name := range []string{"busy", "idle"} {
				if err := indexer.Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
					t.Fatal(err)
				}
			}
			pl.nodes = corelisters.NewNodeLister(indexer)
			observe(cache, "busy", status(95, 50, 0))
			for i := range 2 {
				p := pod("1")
				p.Name, p.UID = fmt.Sprintf("p%d", i), types.UID(fmt.Sprint(i))
				if st := filterOK(t, pl, p, "busy"); st.IsSuccess() {
					t.Fatal("a 1-CPU pod fit a node at 95%")
				}
			}
			// 95% -> 50%: 50 + 1000/16000 = 56.25 <= 80, and 95 > 80 before
			oldObj, newObj := plugintest.HintObjects(t, cache, clock, tc.node, status(95, 50, 0), status(50, 50, 0))
			got, err := pl.preHint(klog.Background(), oldObj, newObj)
			if err != nil || got.AllPods {
				t.Fatalf("preHint = %+v, %v; want a list", got, err)
			}
			if len(got.Pods) != tc.wantNamed {
				t.Errorf("load fell on %s: preHint named %v, want %d pods", tc.node, got.Pods, tc.wantNamed)
			}
		})
	}
}
