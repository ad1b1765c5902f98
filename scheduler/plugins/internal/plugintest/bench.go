// Package plugintest holds what the plugins' tests share.
package plugintest

import (
	"context"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// FilterScorer is a plugin's hot path.
type FilterScorer interface {
	Filter(context.Context, fwk.CycleState, *v1.Pod, fwk.NodeInfo) *fwk.Status
	Score(context.Context, fwk.CycleState, *v1.Pod, fwk.NodeInfo) (int64, *fwk.Status)
}

// BenchFilterScore runs Filter then Score on every node per iteration, as a
// scheduling cycle does after PreFilter and PreScore (already run into cs),
// and reports ns/node and allocs/node. Every node must pass the filter: the
// scheduler scores only nodes that pass.
func BenchFilterScore(b *testing.B, pl FilterScorer, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) {
	b.Helper()
	ctx := context.Background()
	var sum int64
	var before, after runtime.MemStats
	b.ReportAllocs()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		for _, ni := range nodes {
			if st := pl.Filter(ctx, cs, pod, ni); !st.IsSuccess() {
				b.Fatalf("Filter %s: %v", ni.Node().Name, st)
			}
			s, _ := pl.Score(ctx, cs, pod, ni)
			sum += s
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	perNode := float64(b.N) * float64(len(nodes))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/perNode, "ns/node")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/perNode, "allocs/node")
	if sum == 0 {
		b.Fatal("no node scored above 0")
	}
}
