// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package plugintest holds what the plugins' tests share.
package plugintest

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/fixtures"
)

// Plugin is a plugin's hot path: Filter and Score, with PreScore and
// ScoreExtensions when it implements them.
type Plugin interface {
	fwk.PreFilterPlugin
	Filter(context.Context, fwk.CycleState, *v1.Pod, fwk.NodeInfo) *fwk.Status
	fwk.ScorePlugin
}

// BenchFilterScore runs what one scheduling cycle runs of the plugin after
// PreFilter (already run into cs), per iteration: PreScore over the nodes,
// Filter (unless PreFilter skipped it: filter false) then Score on every
// node, and NormalizeScore. It reports ns/node and allocs/node, the whole
// per-pod cost divided by the nodes. Every node must pass the filter (the
// scheduler scores only nodes that pass) and PreScore must not skip.
func BenchFilterScore(b *testing.B, pl Plugin, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo, filter bool) {
	b.Helper()
	ctx := context.Background()
	preScore, _ := pl.(fwk.PreScorePlugin)
	scores := make(fwk.NodeScoreList, len(nodes))
	for i, ni := range nodes {
		scores[i].Name = ni.Node().Name
	}
	var sum int64
	var before, after runtime.MemStats
	b.ReportAllocs()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		if preScore != nil {
			if st := preScore.PreScore(ctx, cs, pod, nodes); !st.IsSuccess() {
				b.Fatalf("PreScore: %v", st)
			}
		}
		for i, ni := range nodes {
			if filter {
				if st := pl.Filter(ctx, cs, pod, ni); !st.IsSuccess() {
					b.Fatalf("Filter %s: %v", ni.Node().Name, st)
				}
			}
			scores[i].Score, _ = pl.Score(ctx, cs, pod, ni)
		}
		if ext := pl.ScoreExtensions(); ext != nil {
			if st := ext.NormalizeScore(ctx, cs, pod, scores); !st.IsSuccess() {
				b.Fatalf("NormalizeScore: %v", st)
			}
		}
		for _, s := range scores {
			sum += s.Score
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

// BenchmarkCPUPod measures Filter+Score per node over 100, 1000 and 5000
// nodes of FreshNodes for CPUPod, with the plugin build returns for a cache
// (whose clock stands still) and the nodes (see BenchFilterScore). Filter
// is left out when PreFilter skips it.
func BenchmarkCPUPod(b *testing.B, build func(*telemetry.Cache, []fwk.NodeInfo) Plugin) {
	now := time.Now()
	for _, nodes := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			cache := telemetry.NewCacheWithClock(func() time.Time { return now })
			infos := FreshNodes(cache, nodes, now)
			pl := build(cache, infos)
			pod := CPUPod()
			cs := framework.NewCycleState()
			_, st := pl.PreFilter(context.Background(), cs, pod, infos)
			if !st.IsSuccess() && !st.IsSkip() {
				b.Fatalf("PreFilter: %v", st)
			}
			BenchFilterScore(b, pl, cs, pod, infos, !st.IsSkip())
		})
	}
}

// FreshNodes fills cache with n nodes of fresh, cool, worst-case telemetry
// (test/fixtures: 2 NUMA nodes, 8 GPUs; CPU 10-59%) and returns their
// NodeInfos.
func FreshNodes(cache *telemetry.Cache, n int, now time.Time) []fwk.NodeInfo {
	infos := make([]fwk.NodeInfo, n)
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		st := fixtures.FullStatus(now, 2, 8)
		st.CPU.UtilizationPercent = int32(10 + i%50)
		st.Thermal.Throttling, st.CPU.ThermalThrottle.Throttling = false, false
		cache.Set(telemetry.FromStatus(name, &st))
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		infos[i] = ni
	}
	return infos
}

// CPUPod is a pod requesting 2 CPUs and 4Gi.
func CPUPod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}},
	}}}}
}
