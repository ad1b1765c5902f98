// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	"testing"

	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

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

// BenchmarkHint measures one QueueingHint call as the scheduler makes it for
// each pending pod on each NodeTelemetry update: the update already in the
// cache (memoized), the node within its thresholds before and after.
//
//	go test -run '^$' -bench BenchmarkHint -benchmem ./scheduler/plugins/loadaware/
func BenchmarkHint(b *testing.B) {
	cache := newCache()
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	oldObj, newObj := plugintest.HintObjects(b, cache, clock, "n", status(40, 50, 0), status(41, 50, 0))
	if _, _, err := cache.ObserveChange(oldObj, newObj); err != nil {
		b.Fatal(err)
	}
	p := pod("2")
	b.ReportAllocs()
	for b.Loop() {
		if h, _ := pl.hint(klog.Background(), p, oldObj, newObj); h != fwk.QueueSkip {
			b.Fatal(h)
		}
	}
}
