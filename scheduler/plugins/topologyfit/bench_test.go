// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// BenchmarkFilterScore measures the plugin's hot path: PreFilter once, then
// per pod PreScore, Filter and Score on every node and NormalizeScore, as
// one scheduling cycle over 100, 1000 and 5000 nodes. Every node passes the
// filter (rejections format a message; the scheduler scores only nodes
// that pass). It reports ns/node and allocs/node; the goal is <= 1µs and 0.
//
//	go test -run '^$' -bench BenchmarkFilterScore -benchmem ./scheduler/plugins/topologyfit/
func BenchmarkFilterScore(b *testing.B) {
	for _, pc := range []struct {
		name string
		pod  *v1.Pod
		// gpuEvery: every gpuEvery-th node has 8 GPUs, the others none.
		gpuEvery int
		// mig: the GPUs are in MIG mode, 7 1g.10gb devices each, under
		// the mixed strategy; the running pods hold one device each.
		mig bool
	}{
		{
			name:     "gpu4-single-numa-node",
			pod:      makePod("p", 4, "16", "64Gi", numaPolicy, singleNUMA, gpuModel, "h100", gpuMinMem, "40Gi"),
			gpuEvery: 1,
		},
		{
			name:     "mig1g",
			pod:      resourcePod("p", mig1g, 1),
			gpuEvery: 1,
			mig:      true,
		},
		{
			name:     "cpu-single-numa-node",
			pod:      makePod("p", 0, "16", "64Gi", numaPolicy, singleNUMA),
			gpuEvery: 2,
		},
	} {
		for _, nodes := range []int{100, 1000, 5000} {
			b.Run(fmt.Sprintf("%s/nodes=%d", pc.name, nodes), func(b *testing.B) {
				benchmarkFilterScore(b, pc.pod, nodes, pc.gpuEvery, pc.mig)
			})
		}
	}
}

func benchmarkFilterScore(b *testing.B, pod *v1.Pod, nodes, gpuEvery int, mig bool) {
	ctx := context.Background()
	tels := make([]*telemetry.Node, nodes)
	infos := make([]fwk.NodeInfo, nodes)
	for i := range nodes {
		name := fmt.Sprintf("node-%05d", i)
		var pods []*v1.Pod
		var gpus []gpu
		var allocGPUs int64
		if i%gpuEvery == 0 {
			gpus, allocGPUs = h100s(8, 4), 8
			// 0 to 3 GPUs held: a 4-GPU pod still fits NUMA node 1.
			for j := range i % 4 {
				pods = append(pods, onNode(makePod(fmt.Sprintf("running-%d", j), 1, "2", "8Gi"), name))
			}
		}
		if mig {
			for j := range pods {
				pods[j] = onNode(resourcePod(fmt.Sprintf("running-%d", j), mig1g, 1), name)
			}
			tels[i] = telNode(name, 2, gpus, allMIG)
			infos[i] = nodeInfoAlloc(name, map[v1.ResourceName]int64{mig1g: 56}, pods...)
			continue
		}
		tels[i] = telNode(name, 2, gpus)
		infos[i] = nodeInfo(name, allocGPUs, pods...)
	}
	pl := newPlugin(config.StaleTelemetryReject, tels...)
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, cs, pod, infos); !st.IsSuccess() {
		b.Fatalf("PreFilter: %v", st)
	}
	plugintest.BenchFilterScore(b, pl, cs, pod, infos, true)
}
