// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// BenchmarkFilterScore measures Filter+Score per node over 100, 1000 and
// 5000 nodes with fresh telemetry and a reservation each, every node
// passing the filter.
//
//	go test -run '^$' -bench BenchmarkFilterScore -benchmem ./scheduler/plugins/loadaware/
func BenchmarkFilterScore(b *testing.B) {
	plugintest.BenchmarkCPUPod(b, func(cache *telemetry.Cache, nodes []fwk.NodeInfo) plugintest.Plugin {
		pl := New(*configv1.DefaultLoadAwareArgs(), cache)
		for _, ni := range nodes {
			pl.book.ReserveDemand(ni.Node().Name, "reserved", estimate.Demand{CPUMilli: 500, MemoryBytes: 1 << 30}) // one pod placed since each sample
		}
		return pl
	})
}

// BenchmarkPickHeavier measures pick on the common NodeTelemetry update
// of a busy fleet, the node within its thresholds before and after and its
// load a little higher: the update lowers no estimate, so pick names no pod
// without looking at any (rejected.OnTelemetry calls it once per stored
// update while any pod is recorded; one is here).
//
//	go test -run '^$' -bench BenchmarkPickHeavier -benchmem ./scheduler/plugins/loadaware/
func BenchmarkPickHeavier(b *testing.B) {
	cache := newCache()
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	p := pod("2")
	pl.rejected.AddOn(p, "n", pl.scaledRequests(p))
	prev, cur := plugintest.Change(b, cache, clock, "n", status(40, 50, 0), status(41, 50, 0))
	b.ReportAllocs()
	for b.Loop() {
		if got := pl.pick(prev, cur); len(got) != 0 {
			b.Fatal(got)
		}
	}
}

// BenchmarkPodDeleteHint measures what one deletion of a reserved pod
// costs the QueueingHint: the scheduler asks it about every pending pod
// LoadAware rejected (1000 here, as test/bench/scheduler's backlog), one
// after another, with the same deleted pod. "elsewhere": Filter rejected
// the pending pods on another node, and their nodeSelector excludes the
// pod's node (the benchmark's backlog selects the busy nodes); "busy":
// Filter rejected them on the pod's node, and they do not fit there before
// or after.
//
//	go test -run '^$' -bench BenchmarkPodDeleteHint -benchmem ./scheduler/plugins/loadaware/
func BenchmarkPodDeleteHint(b *testing.B) {
	for _, tc := range []struct {
		name       string
		cpu        int32
		selector   map[string]string
		rejectedOn string
	}{
		{name: "elsewhere", cpu: 40, selector: map[string]string{"pool": "busy"}, rejectedOn: "busy"},
		{name: "busy", cpu: 90, rejectedOn: "n"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cache := newCache()
			observe(cache, "n", status(tc.cpu, 50, 0))
			observe(cache, "busy", status(95, 50, 0))
			pl := New(*configv1.DefaultLoadAwareArgs(), cache)
			indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
			if err := indexer.Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "normal"}}}); err != nil {
				b.Fatal(err)
			}
			pl.nodes = corelisters.NewNodeLister(indexer)
			pending := make([]*v1.Pod, 1000)
			for i := range pending {
				p := pod("100m")
				p.Name, p.UID, p.Spec.NodeSelector = fmt.Sprintf("b-%05d", i), types.UID(fmt.Sprintf("b-%05d", i)), tc.selector
				pending[i] = p
				cs := framework.NewCycleState()
				if _, st := pl.PreFilter(context.Background(), cs, p, nil); !st.IsSuccess() && !st.IsSkip() {
					b.Fatal(st)
				}
				ni := framework.NewNodeInfo()
				ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: tc.rejectedOn}})
				if st := pl.Filter(context.Background(), cs, p, ni); st.IsSuccess() {
					b.Fatalf("a pending pod fit %s", tc.rejectedOn)
				}
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				gone := pod("100m")
				i++
				gone.Name, gone.UID, gone.Spec.NodeName = fmt.Sprintf("gone-%d", i), types.UID(fmt.Sprintf("gone-%d", i)), "n"
				pl.book.ReserveDemand("n", gone.UID, estimate.Demand{CPUMilli: 100, MemoryBytes: 128 << 20})
				for _, p := range pending {
					if h, _ := pl.podDeleteHint(klog.Background(), p, gone, nil); h != fwk.QueueSkip {
						b.Fatal(h)
					}
				}
			}
		})
	}
}

// BenchmarkPick measures pick on a NodeTelemetry update that lowers an
// idle node's load, with 1000 pending pods that Filter rejected on 100 busy
// nodes (test/bench/scheduler's backlog): the common update of a fleet
// with a backlog. The last pod's cycle is still on (rejected.Index.Begin),
// so pick judges it, though Filter rejected it on a busy node only.
//
//	go test -run '^$' -bench 'BenchmarkPick$' -benchmem ./scheduler/plugins/loadaware/
func BenchmarkPick(b *testing.B) {
	cache := newCache()
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	if err := indexer.Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "idle", Labels: map[string]string{"pool": "normal"}}}); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		name := fmt.Sprintf("busy-%d", i)
		if err := indexer.Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "busy"}}}); err != nil {
			b.Fatal(err)
		}
		observe(cache, name, status(95, 50, 0))
	}
	pl.nodes = corelisters.NewNodeLister(indexer)
	for i := range 1000 {
		p := pod("100m")
		p.Name, p.UID, p.Spec.NodeSelector = fmt.Sprintf("b-%05d", i), types.UID(fmt.Sprintf("b-%05d", i)), map[string]string{"pool": "busy"}
		cs := framework.NewCycleState()
		if _, st := pl.PreFilter(context.Background(), cs, p, nil); !st.IsSuccess() && !st.IsSkip() {
			b.Fatal(st)
		}
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("busy-%d", i%100)}})
		if st := pl.Filter(context.Background(), cs, p, ni); st.IsSuccess() {
			b.Fatal("a pod fit a busy node")
		}
	}
	prev, cur := plugintest.Change(b, cache, clock, "idle", status(45, 50, 0), status(40, 50, 0))
	b.ReportAllocs()
	for b.Loop() {
		// Their nodeSelector excludes the idle node: none is named.
		if got := pl.pick(prev, cur); len(got) != 0 {
			b.Fatal(got)
		}
	}
}
