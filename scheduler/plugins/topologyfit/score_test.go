// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/nodeset"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// scoreNode is one node of a scoring case.
type scoreNode struct {
	name      string
	tel       *telemetry.Node // nil: no NodeTelemetry
	allocGPUs int64
	held      []int64 // GPUs requested by each pod on the node
	heldCPU   string  // CPU requested by each of those pods; "" is 1
}

// scoreAll runs PreFilter, PreScore, Score on every node and NormalizeScore,
// as the framework does (Filter is left out: scores of nodes it would reject
// are still defined).
func scoreAll(t *testing.T, pl *TopologyFit, pod *v1.Pod, nodes []scoreNode) (map[string]int64, *fwk.Status) {
	t.Helper()
	ctx := context.Background()
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() && !st.IsSkip() {
		t.Fatalf("PreFilter: %v", st)
	}
	infos := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		var pods []*v1.Pod
		cpu := n.heldCPU
		if cpu == "" {
			cpu = "1"
		}
		for _, g := range n.held {
			pods = append(pods, onNode(makePod("running", g, cpu, "1Gi"), n.name))
		}
		infos[i] = nodeInfo(n.name, n.allocGPUs, pods...)
	}
	if st := pl.PreScore(ctx, cs, pod, infos); !st.IsSuccess() {
		return nil, st
	}
	list := make(fwk.NodeScoreList, len(infos))
	for i, ni := range infos {
		s, st := pl.Score(ctx, cs, pod, ni)
		if !st.IsSuccess() {
			t.Fatalf("Score %s: %v", ni.Node().Name, st)
		}
		list[i] = fwk.NodeScore{Name: ni.Node().Name, Score: s}
	}
	if st := pl.ScoreExtensions().NormalizeScore(ctx, cs, pod, list); !st.IsSuccess() {
		t.Fatalf("NormalizeScore: %v", st)
	}
	got := map[string]int64{}
	for _, s := range list {
		got[s.Name] = s.Score
	}
	return got, nil
}

// scorePlugin is a plugin whose cache holds the nodes' telemetry, with the
// given penalty for pods that request no GPU, where they take more than
// reserve millicores per free GPU.
func scorePlugin(penalty int32, reserve int64, nodes []scoreNode) *TopologyFit {
	var tels []*telemetry.Node
	for _, n := range nodes {
		if n.tel != nil {
			tels = append(tels, n.tel)
		}
	}
	pl := newPlugin(config.StaleTelemetryIgnore, tels...)
	pl.args.NonGPUPodPenaltyPercent = penalty
	pl.args.GPUCPUReserveMilli = reserve
	return pl
}

func TestScore(t *testing.T) {
	t.Parallel()
	gpuNode8 := telNode("gpu", 2, h100s(8, 4))
	for _, tc := range []struct {
		name    string
		penalty int32
		reserve int64 // GPUCPUReserveMilli
		pod     *v1.Pod
		nodes   []scoreNode
		want    map[string]int64
	}{
		{
			name: "1-GPU pod: best fit, NUMA alignment first",
			pod:  makePod("p", 1, "1", "1Gi"),
			nodes: []scoreNode{
				{name: "empty8", tel: telNode("empty8", 2, h100s(8, 4)), allocGPUs: 8},
				{name: "half", tel: telNode("half", 2, h100s(8, 4)), allocGPUs: 8, held: []int64{4}},
				{name: "last-one", tel: telNode("last-one", 2, h100s(8, 4)), allocGPUs: 8, held: []int64{4, 3}},
				{name: "unaligned", tel: telNode("unaligned", 2, []gpu{{-1, true, h100, h100Memory}, {-1, true, h100, h100Memory}}), allocGPUs: 2},
				{name: "stale", tel: telNode("stale", 2, h100s(8, 4), sampledAgo(time.Hour)), allocGPUs: 8},
				{name: "no-telemetry", allocGPUs: 8},
			},
			want: map[string]int64{
				"empty8":       56,  // pack 100*1/8 = 12; aligned: 51 + 12*49/100 = 56
				"half":         63,  // pack 100*1/4 = 25; node 1 has 4 free: 51 + 25*49/100 = 63
				"last-one":     100, // pack 100*1/1; node 1 keeps 1 free: 51 + 49
				"unaligned":    25,  // pack 100*1/2 = 50; no NUMA node: 50*50/100
				"stale":        25,  // lowest other
				"no-telemetry": 25,  // lowest other
			},
		},
		{
			name: "4-GPU single-numa-node pod",
			pod:  makePod("p", 4, "16", "64Gi", numaPolicy, singleNUMA),
			nodes: []scoreNode{
				{name: "aligned8", tel: telNode("aligned8", 2, h100s(8, 4)), allocGPUs: 8},
				{name: "aligned4", tel: telNode("aligned4", 1, h100s(4, 4)), allocGPUs: 4},
				{name: "no-numa-data", tel: telNode("no-numa-data", 2, h100s(8, 4), noNUMA), allocGPUs: 8},
			},
			want: map[string]int64{
				// 4 GPUs, no links or roots published: band 0b001 [12, 24]
				// when aligned, 0b000 [0, 11] when not (gpuPodScoreTogether).
				"aligned8":     18, // pack 100*4/8 = 50: 12 + 50*12/100 = 18
				"aligned4":     24, // pack 100*4/4: 12 + 12
				"no-numa-data": 5,  // pack 50, unaligned: 0 + 50*11/100 = 5
			},
		},
		{
			// A reserve above the 128 CPUs a GPU: any CPU pod takes it
			// while the node has a free GPU.
			name:    "CPU pod: penalty 50 on GPU nodes, every CPU reserved",
			penalty: 50,
			reserve: 1_000_000,
			pod:     makePod("p", 0, "1", "1Gi"),
			nodes: []scoreNode{
				{name: "cpu", tel: telNode("cpu", 2, nil)},
				{name: "gpu", tel: gpuNode8, allocGPUs: 8},
				{name: "gpu-allocatable-only", allocGPUs: 8},
				{name: "gpu-telemetry-only", tel: telNode("gpu-telemetry-only", 2, h100s(8, 4))},
				{name: "gpu-stale", tel: telNode("gpu-stale", 2, h100s(8, 4), sampledAgo(time.Hour))},
				{name: "cpu-no-telemetry"},
			},
			want: map[string]int64{
				"cpu":                  100,
				"gpu":                  50, // 100 * (100-50) / 100
				"gpu-allocatable-only": 50,
				"gpu-telemetry-only":   50,
				"gpu-stale":            50, // hardware does not age
				"cpu-no-telemetry":     100,
			},
		},
		{
			name:    "single-numa-node CPU pod: penalty 20",
			penalty: 20,
			reserve: 1_000_000,
			pod:     makePod("p", 0, "16", "64Gi", numaPolicy, singleNUMA),
			nodes: []scoreNode{
				{name: "cpu", tel: telNode("cpu", 2, nil)},
				{name: "gpu", tel: gpuNode8, allocGPUs: 8},
			},
			want: map[string]int64{
				"cpu": 100,
				"gpu": 80, // 100 * (100-20) / 100
			},
		},
		{
			// Nodes of 128 CPUs; telemetry: 2 NUMA nodes of 64 CPUs, 4
			// H100s each, 16 CPUs each allocated exclusively unless
			// unpublished.
			name:    "CPU pod: penalized only where it takes the CPUs kept for free GPUs",
			penalty: 50,
			reserve: 4000,
			pod:     makePod("p", 0, "8", "1Gi"),
			nodes: []scoreNode{
				{name: "cpu", tel: telNode("cpu", 2, nil)},
				// 8 free GPUs keep 32 CPUs: 128 - 0 - 8 = 120 left.
				{name: "gpu-idle", tel: telNode("gpu-idle", 2, h100s(8, 4)), allocGPUs: 8},
				// 128 - 90 - 8 = 30 left < 32.
				{name: "gpu-host-busy", tel: telNode("gpu-host-busy", 2, h100s(8, 4)), allocGPUs: 8, held: []int64{0}, heldCPU: "90"},
				// Same, read from allocatable alone.
				{name: "gpu-host-busy-no-telemetry", allocGPUs: 8, held: []int64{0}, heldCPU: "90"},
				// All 8 GPUs allocated: nothing kept; 128 - 120 - 8 = 0.
				{name: "gpu-all-allocated", tel: telNode("gpu-all-allocated", 2, h100s(8, 4)), allocGPUs: 8, held: []int64{8}, heldCPU: "120"},
				// 4 GPUs held (NUMA node 0's): 128 - 100 - 8 = 20 left
				// on the node >= 16, but NUMA node 1, with 4 free
				// GPUs, has 64 - 108/2 = 10 CPUs < 16.
				{name: "gpu-numa-short", tel: telNode("gpu-numa-short", 2, h100s(8, 4), exclusive(-1, -1)), allocGPUs: 8, held: []int64{4}, heldCPU: "100"},
				// No pod holds a GPU; 128 - 80 - 8 = 40 left >= 32 on the
				// node, but once the 4 GPUs of one NUMA node have their
				// 16 CPUs, the other has 64 - (88 + 16)/2 = 12 < 16.
				{name: "gpu-numa-last-pod-short", tel: telNode("gpu-numa-last-pod-short", 2, h100s(8, 4), exclusive(-1, -1)), allocGPUs: 8, held: []int64{0}, heldCPU: "80"},
				// The same with exclusive allocations published (16 per
				// NUMA node): the pod runs in the shared pool, so only
				// the node's sum counts.
				{name: "gpu-numa-exclusive", tel: telNode("gpu-numa-exclusive", 2, h100s(8, 4)), allocGPUs: 8, held: []int64{4}, heldCPU: "100"},
			},
			want: map[string]int64{
				"cpu":                        100,
				"gpu-idle":                   100,
				"gpu-host-busy":              50,
				"gpu-host-busy-no-telemetry": 50,
				"gpu-all-allocated":          100,
				"gpu-numa-short":             50,
				"gpu-numa-last-pod-short":    50,
				"gpu-numa-exclusive":         100,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pl := scorePlugin(tc.penalty, tc.reserve, tc.nodes)
			got, st := scoreAll(t, pl, tc.pod, tc.nodes)
			if !st.IsSuccess() {
				t.Fatalf("PreScore: %v", st)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

// A CPU pod's score is the GPU-node penalty alone: PreScore skips Score
// when every candidate would get the same score.
func TestPreScoreSkipsUniformCPUPodScores(t *testing.T) {
	t.Parallel()
	cpuPod := makePod("p", 0, "1", "1Gi")
	gpuTel := func(name string) *telemetry.Node { return telNode(name, 2, h100s(8, 4)) }
	for _, tc := range []struct {
		name     string
		penalty  int32
		pod      *v1.Pod
		nodes    []scoreNode
		wantSkip bool
	}{
		{"no penalty", 0, cpuPod, []scoreNode{{name: "gpu", allocGPUs: 8}, {name: "cpu"}}, true},
		{"no reserve", -1, cpuPod, []scoreNode{{name: "gpu", allocGPUs: 8, held: []int64{0}, heldCPU: "127"}, {name: "cpu"}}, true},
		{"no GPU node", 50, cpuPod, []scoreNode{{name: "a", tel: telNode("a", 2, nil)}, {name: "b"}}, true},
		{"all GPU nodes by allocatable", 50, cpuPod, []scoreNode{{name: "a", allocGPUs: 8}, {name: "b", allocGPUs: 4}}, true},
		{"all GPU nodes, one by telemetry only", 50, cpuPod, []scoreNode{{name: "a", allocGPUs: 8}, {name: "b", tel: gpuTel("b")}}, true},
		{"one candidate", 50, cpuPod, []scoreNode{{name: "gpu", allocGPUs: 8}}, true},
		{"mixed by allocatable", 50, cpuPod, []scoreNode{{name: "cpu"}, {name: "gpu", allocGPUs: 8}}, false},
		{"mixed by telemetry only", 50, cpuPod, []scoreNode{{name: "cpu", tel: telNode("cpu", 2, nil)}, {name: "gpu", tel: gpuTel("gpu")}}, false},
		{"GPU pod on uniform nodes", 50, makePod("p", 1, "1", "1Gi"), []scoreNode{{name: "a", tel: gpuTel("a"), allocGPUs: 8}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			penalty, reserve := tc.penalty, int64(configv1.DefaultGPUCPUReserveMilli)
			if penalty < 0 { // "no reserve"
				penalty, reserve = 50, 0
			}
			pl := scorePlugin(penalty, reserve, tc.nodes)
			_, st := scoreAll(t, pl, tc.pod, tc.nodes)
			if st.IsSkip() != tc.wantSkip || (!tc.wantSkip && !st.IsSuccess()) {
				t.Errorf("PreScore = %v, want skip %v", st, tc.wantSkip)
			}
		})
	}
}

// Filter and Score read the cache and the NodeInfo without allocating
// (not parallel: allocation counts are process-wide).
func TestFilterScoreDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	pl := newPlugin(config.StaleTelemetryReject, telNode("n1", 2, h100s(8, 4)))
	ni := nodeInfo("n1", 8, onNode(makePod("running", 1, "1", "1Gi"), "n1"))
	candidates := []fwk.NodeInfo{ni, nodeInfo("cpu", 0)} // mixed: a CPU pod is scored
	for _, pod := range []*v1.Pod{
		makePod("p", 4, "16", "64Gi", numaPolicy, singleNUMA, gpuModel, "h100", gpuMinMem, "40Gi"),
		makePod("p", 0, "16", "64Gi", numaPolicy, singleNUMA),
	} {
		cs := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() {
			t.Fatalf("PreFilter: %v", st)
		}
		if st := pl.PreScore(ctx, cs, pod, candidates); !st.IsSuccess() {
			t.Fatalf("PreScore: %v", st)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if st := pl.Filter(ctx, cs, pod, ni); !st.IsSuccess() {
				t.Fatalf("Filter: %v", st)
			}
			if _, st := pl.Score(ctx, cs, pod, ni); !st.IsSuccess() {
				t.Fatalf("Score: %v", st)
			}
		})
		if allocs != 0 {
			t.Errorf("%d GPUs: %v allocations per Filter+Score, want 0", pod.Spec.Containers[0].Resources.Requests.Name(gpuResource, "").Value(), allocs)
		}
	}
}

// With the Node set watched, PreScore decides from it that no node is a
// GPU node, without looking at the candidates: here a candidate's
// allocatable lists GPUs the set has not seen yet, and Score is skipped all
// the same; once the set holds a GPU node, the candidates are looked at.
func TestPreScoreUsesTheGPUNodeSet(t *testing.T) {
	t.Parallel()
	pl := newPlugin(config.StaleTelemetryIgnore)
	pl.gpuAllocatable = nodeset.New(func(n *v1.Node) bool { return n.Status.Allocatable.Name(gpuResource, "").Sign() > 0 })
	nodes := []scoreNode{{name: "cpu"}, {name: "gpu", allocGPUs: 8}}
	if _, st := scoreAll(t, pl, makePod("p", 0, "1", "1Gi"), nodes); !st.IsSkip() {
		t.Errorf("PreScore with no GPU node in the set = %v, want Skip", st)
	}
	pl.gpuAllocatable.Update(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{gpuResource: resource.MustParse("8")}}})
	if _, st := scoreAll(t, pl, makePod("p", 0, "1", "1Gi"), nodes); !st.IsSuccess() {
		t.Errorf("PreScore with a GPU node in the set = %v, want success", st)
	}
}

// The CPUs a GPU node keeps for its free GPUs must also fit under
// LoadAware's CPU threshold, as the book records it, with the node's
// measured load and the pods placed since its sample: the GPU pods to come
// must pass LoadAware's filter too.
func TestGPUReserveUnderLoadAwareThreshold(t *testing.T) {
	t.Parallel()
	// 128 CPUs (2 NUMA nodes of 64, exclusive allocations published),
	// 8 free H100s, measured 45 % busy: 57.6 CPUs.
	gpuTel, cpuTel := telNode("gpu", 2, h100s(8, 4)), telNode("cpu", 2, nil)
	base := newPlugin(config.StaleTelemetryIgnore, gpuTel, cpuTel)
	book := estimate.NewBook(base.cache, estimate.DefaultOptions())
	pl := NewWith(base.args, base.cache, book) // 4 CPUs kept a free GPU: 32
	pod := makePod("p", 0, "8", "1Gi")
	nodes := []scoreNode{{name: "cpu", tel: cpuTel}, {name: "gpu", tel: gpuTel, allocGPUs: 8}}
	for _, step := range []struct {
		name string
		do   func()
		want int64
	}{
		{"no LoadAware: 128 - 8 requested >= 32", func() {}, 100},
		// 102.4 - (57.6 + 8) = 36.8 >= 32
		{"LoadAware at 80%", func() { book.LimitCPU(80) }, 100},
		// 102.4 - (57.6 + 6 + 8) = 30.8 < 32
		{"6 CPUs placed since the sample", func() { book.ReserveDemand("gpu", "placed", estimate.Demand{CPUMilli: 6000}) }, 50},
		{"placed pod gone", func() { book.End("gpu", "placed") }, 100},
		// 89.6 - 65.6 = 24 < 32
		{"another profile's LoadAware at 70%", func() { book.LimitCPU(70) }, 50},
		{"a third at 90% does not raise it", func() { book.LimitCPU(90) }, 50},
	} {
		step.do()
		got, st := scoreAll(t, pl, pod, nodes)
		if !st.IsSuccess() {
			t.Fatalf("%s: PreScore: %v", step.name, st)
		}
		if got["gpu"] != step.want || got["cpu"] != 100 {
			t.Errorf("%s: scores %v, want gpu %d, cpu 100", step.name, got, step.want)
		}
	}
}

// A GPU node keeps CPUs only for the free GPUs its PowerBudgets can still
// power (powerbudget.Snapshot.PowerableGPUs, tested there), filling its
// NUMA nodes from the lowest.
func TestGPUReserveOnlyForPowerableGPUs(t *testing.T) {
	t.Parallel()
	// 128 CPUs, 2 NUMA nodes of 64, exclusive CPUs not published; 8
	// H100s, 4 a NUMA node; 80 CPUs requested, and the pod's 8.
	tel := telNode("gpu", 2, h100s(8, 4), exclusive(-1, -1))
	pod := makePod("p", 0, "8", "1Gi")
	nodes := []scoreNode{{name: "cpu", tel: telNode("cpu", 2, nil)}, {name: "gpu", tel: tel, allocGPUs: 8, held: []int64{0}, heldCPU: "80"}}
	for _, tc := range []struct {
		name      string
		powerable int64 // -1: in no budget
		want      int64
	}{
		// 8 GPUs keep 32: 128 - 88 = 40 left on the node, but NUMA node
		// 1 has 64 - (88 + 16)/2 = 12 < 16 once node 0's GPU pods took
		// theirs.
		{"in no budget", -1, 50},
		{"all 8 powerable", 8, 50},
		// 4, on NUMA node 0: 16 kept there, 64 - 88/2 = 20 free.
		{"4 powerable", 4, 100},
		{"none powerable", 0, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pl := scorePlugin(50, 4000, nodes)
			var asked []string
			pl.powerable = func(node string, free func(string, *telemetry.Node) int64) (int64, bool) {
				asked = append(asked, fmt.Sprintf("%s:%d", node, free(node, tel)))
				return tc.powerable, tc.powerable >= 0
			}
			got, st := scoreAll(t, pl, pod, nodes)
			if !st.IsSuccess() {
				t.Fatalf("PreScore: %v", st)
			}
			if got["gpu"] != tc.want {
				t.Errorf("gpu scored %d, want %d", got["gpu"], tc.want)
			}
			// Without the scheduler's snapshot, a node's free GPUs are
			// its telemetry's healthy ones.
			if len(asked) != 1 || asked[0] != "gpu:8" {
				t.Errorf("asked for %v, want gpu:8 once", asked)
			}
		})
	}
}
