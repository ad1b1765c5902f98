// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// filter runs PreFilter then Filter, as the framework does; a PreFilter
// that does not succeed is the answer.
func filter(pl *TopologyFit, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	ctx := context.Background()
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() {
		return st
	}
	return pl.Filter(ctx, cs, pod, ni)
}

func unschedulable(msg string) *fwk.Status { return fwk.NewStatus(fwk.Unschedulable, msg) }

func TestFilter(t *testing.T) {
	t.Parallel()
	gpu4 := makePod("p", 4, "16", "64Gi")
	gpu4NUMA := makePod("p", 4, "16", "64Gi", numaPolicy, singleNUMA)
	cpuNUMA := makePod("p", 0, "16", "64Gi", numaPolicy, singleNUMA)
	holding := func(gpus ...int64) []*v1.Pod {
		var pods []*v1.Pod
		for _, g := range gpus {
			pods = append(pods, onNode(makePod("running", g, "1", "1Gi"), "n1"))
		}
		return pods
	}
	cpuPods := func(cpus ...string) []*v1.Pod {
		var pods []*v1.Pod
		for _, c := range cpus {
			pods = append(pods, onNode(makePod("running", 0, c, ""), "n1"))
		}
		return pods
	}
	for _, tc := range []struct {
		name   string
		tel    *telemetry.Node // nil: no NodeTelemetry
		policy config.StaleTelemetryPolicy
		pods   []*v1.Pod // on the node
		pod    *v1.Pod
		want   *fwk.Status
	}{
		{name: "GPU pod fits", tel: telNode("n1", 2, h100s(8, 4)), pod: gpu4},
		{
			name: "unhealthy GPUs do not count",
			tel:  telNode("n1", 2, withUnhealthy(h100s(8, 4), 0, 1, 2, 3, 4)),
			pod:  gpu4,
			// 8 - 5 unhealthy = 3 < 4
			want: unschedulable("node has 3 healthy unallocated GPUs, pod needs 4 (3 of 8 GPUs healthy and matching, 0 requested by pods on the node)"),
		},
		{
			name: "GPUs held by pods on the node do not count",
			tel:  telNode("n1", 2, h100s(8, 4)),
			pods: holding(3, 2),
			pod:  gpu4,
			// 8 - (3+2) = 3 < 4
			want: unschedulable("node has 3 healthy unallocated GPUs, pod needs 4 (8 of 8 GPUs healthy and matching, 5 requested by pods on the node)"),
		},
		{
			name: "more held than healthy",
			tel:  telNode("n1", 2, withUnhealthy(h100s(8, 4), 0, 1, 2, 3, 4, 5)),
			pods: holding(4),
			pod:  makePod("p", 1, "", ""),
			// 2 healthy - 4 held: none
			want: unschedulable("node has 0 healthy unallocated GPUs, pod needs 1 (2 of 8 GPUs healthy and matching, 4 requested by pods on the node)"),
		},
		{name: "model matches without case", tel: telNode("n1", 2, h100s(8, 4)), pod: makePod("p", 4, "", "", gpuModel, "h100")},
		{
			name: "model does not match",
			tel:  telNode("n1", 2, h100s(8, 4)),
			pod:  makePod("p", 1, "", "", gpuModel, "A100"),
			want: unschedulable(`node has 0 healthy unallocated GPUs matching model "A100", pod needs 1 (0 of 8 GPUs healthy and matching, 0 requested by pods on the node)`),
		},
		{name: "min memory met", tel: telNode("n1", 2, h100s(8, 4)), pod: makePod("p", 8, "", "", gpuMinMem, "40Gi")},
		{
			name: "min memory not met",
			tel:  telNode("n1", 2, h100s(8, 4)),
			pod:  makePod("p", 1, "", "", gpuMinMem, "96Gi"),
			// 79.6Gi < 96Gi
			want: unschedulable("node has 0 healthy unallocated GPUs with >= 96Gi, pod needs 1 (0 of 8 GPUs healthy and matching, 0 requested by pods on the node)"),
		},
		{
			name: "model and memory on a mixed node",
			tel:  telNode("n1", 2, mixedGPUs()),
			pods: holding(1),
			pod:  makePod("p", 4, "", "", gpuModel, "H100", gpuMinMem, "40Gi"),
			// 4 H100 match, 4 A100 do not; 4 - 1 held = 3 < 4
			want: unschedulable(`node has 3 healthy unallocated GPUs matching model "H100" with >= 40Gi, pod needs 4 (4 of 8 GPUs healthy and matching, 1 requested by pods on the node)`),
		},
		{
			name: "memory constraint excludes the smaller model",
			tel:  telNode("n1", 2, mixedGPUs()),
			pod:  makePod("p", 5, "", "", gpuModel, "nvidia", gpuMinMem, "41Gi"),
			// A100 40Gi < 41Gi: 4 H100 match
			want: unschedulable(`node has 4 healthy unallocated GPUs matching model "nvidia" with >= 41Gi, pod needs 5 (4 of 8 GPUs healthy and matching, 0 requested by pods on the node)`),
		},
		{name: "single-numa-node GPU pod fits on NUMA node 0", tel: telNode("n1", 2, h100s(8, 4)), pod: gpu4NUMA},
		{
			name: "single-numa-node GPU pod: GPUs split 3+3",
			tel:  telNode("n1", 2, h100s(6, 3)),
			pod:  gpu4NUMA,
			// 6 GPUs >= 4, but 3 per NUMA node; CPUs 64-16 = 48
			want: unschedulable("no NUMA node has 16 free CPUs, 64Gi free memory and 4 free GPUs: node 0 has 48 CPUs, 383.0Gi, 3 GPUs; node 1 has 48 CPUs, 383.0Gi, 3 GPUs"),
		},
		{
			name: "held GPUs fill the lowest NUMA node first",
			tel:  telNode("n1", 2, h100s(8, 4)),
			pods: holding(1),
			pod:  gpu4NUMA,
			// node 0: 4 - 1 = 3; node 1: 4
		},
		{
			name: "held GPUs leave no NUMA node with 4",
			tel:  telNode("n1", 2, withUnhealthy(h100s(8, 4), 7)),
			pods: holding(1),
			pod:  gpu4NUMA,
			// 7 healthy - 1 = 6 >= 4; node 0: 4 - 1 = 3; node 1: 3 healthy
			want: unschedulable("no NUMA node has 16 free CPUs, 64Gi free memory and 4 free GPUs: node 0 has 48 CPUs, 383.0Gi, 3 GPUs; node 1 has 48 CPUs, 383.0Gi, 3 GPUs"),
		},
		{
			name: "held GPUs fill GPUs of unknown NUMA node first",
			tel:  telNode("n1", 2, append(h100s(4, 4), gpu{numa: -1, healthy: true, model: h100, memory: h100Memory}, gpu{numa: -1, healthy: true, model: h100, memory: h100Memory})),
			pods: holding(2),
			pod:  gpu4NUMA,
			// 2 held on the 2 unknown; node 0 keeps 4
		},
		{
			name: "unknown NUMA node on a single-NUMA machine is that node",
			tel:  telNode("n1", 1, []gpu{{-1, true, h100, h100Memory}, {-1, true, h100, h100Memory}, {-1, true, h100, h100Memory}, {-1, true, h100, h100Memory}}),
			pod:  gpu4NUMA,
		},
		{
			name: "unknown NUMA node on a two-NUMA machine is no node",
			tel:  telNode("n1", 2, []gpu{{-1, true, h100, h100Memory}, {-1, true, h100, h100Memory}, {-1, true, h100, h100Memory}, {-1, true, h100, h100Memory}}),
			pod:  makePod("p", 4, "", "", numaPolicy, singleNUMA),
			want: unschedulable("no NUMA node has 0 free CPUs, 0 free memory and 4 free GPUs: node 0 has 48 CPUs, 383.0Gi, 0 GPUs; node 1 has 48 CPUs, 383.0Gi, 0 GPUs"),
		},
		{
			name: "GPU constraints in the NUMA message",
			tel:  telNode("n1", 2, h100s(6, 3)),
			pod:  makePod("p", 4, "16", "64Gi", numaPolicy, singleNUMA, gpuModel, "H100"),
			want: unschedulable("no NUMA node has 16 free CPUs, 64Gi free memory and 4 free matching GPUs: node 0 has 48 CPUs, 383.0Gi, 3 GPUs; node 1 has 48 CPUs, 383.0Gi, 3 GPUs"),
		},
		{
			name: "CPU pod: exclusive CPUs taken on both NUMA nodes",
			tel:  telNode("n1", 2, nil, exclusive(56, 60)),
			pod:  cpuNUMA,
			// 64 - 56 = 8, 64 - 60 = 4 < 16
			want: unschedulable("no NUMA node has 16 free CPUs and 64Gi free memory: node 0 has 8 CPUs, 383.0Gi; node 1 has 4 CPUs, 383.0Gi"),
		},
		{
			name: "CPU pod: memory short where the CPUs are",
			tel:  telNode("n1", 2, nil, exclusive(16, 60), memFree(32*gi, 300*gi)),
			pod:  cpuNUMA,
			// node 0: 48 CPUs but 32Gi < 64Gi; node 1: 4 CPUs < 16
			want: unschedulable("no NUMA node has 16 free CPUs and 64Gi free memory: node 0 has 48 CPUs, 32Gi; node 1 has 4 CPUs, 300Gi"),
		},
		{name: "CPU pod fits on NUMA node 1", tel: telNode("n1", 2, nil, exclusive(60, 16)), pod: cpuNUMA},
		{
			name: "CPU pod: free CPUs estimated from pod requests",
			tel:  telNode("n1", 2, nil, exclusive(-1, -1)),
			pods: cpuPods("99", "500m"),
			pod:  cpuNUMA,
			// 64 - 99.5/2 = 64 - 49.75 = 14.25 < 16
			want: unschedulable("no NUMA node has 16 free CPUs and 64Gi free memory: node 0 has 14.25 CPUs, 383.0Gi; node 1 has 14.25 CPUs, 383.0Gi (free CPUs estimated from the CPU requests of the node's pods, spread evenly over its NUMA nodes)"),
		},
		{
			name: "CPU pod: estimated free CPUs suffice",
			tel:  telNode("n1", 2, nil, exclusive(-1, -1)),
			pods: cpuPods("80"),
			pod:  cpuNUMA,
			// 64 - 80/2 = 24 >= 16
		},
		{name: "stale, Ignore", tel: telNode("n1", 2, nil, sampledAgo(2*time.Minute)), policy: config.StaleTelemetryIgnore, pod: gpu4NUMA},
		{
			name: "stale, Reject", tel: telNode("n1", 2, nil, sampledAgo(2*time.Minute)), policy: config.StaleTelemetryReject, pod: gpu4NUMA,
			want: unschedulable("node telemetry is 2m0s old > telemetryMaxAge 1m0s (no new sample seen by the scheduler since, and no Ready agent pod seen on the node; staleTelemetryPolicy Reject)"),
		},
		{name: "just fresh, Reject", tel: telNode("n1", 2, h100s(8, 4), sampledAgo(time.Minute)), policy: config.StaleTelemetryReject, pod: gpu4NUMA},
		{name: "missing, Ignore", policy: config.StaleTelemetryIgnore, pod: gpu4},
		{
			name: "missing, Reject", policy: config.StaleTelemetryReject, pod: cpuNUMA,
			want: unschedulable("node has no NodeTelemetry (staleTelemetryPolicy Reject)"),
		},
		{name: "no GPU data, Ignore", tel: telNode("n1", 2, h100s(8, 4), noGPUSource), policy: config.StaleTelemetryIgnore, pod: gpu4},
		{
			name: "no GPU data, Reject", tel: telNode("n1", 2, h100s(8, 4), noGPUSource), policy: config.StaleTelemetryReject, pod: gpu4,
			want: unschedulable("node telemetry has no GPU data (staleTelemetryPolicy Reject)"),
		},
		{
			name: "CPU node for a GPU pod, Reject", tel: telNode("n1", 2, nil), policy: config.StaleTelemetryReject, pod: gpu4,
			want: unschedulable("node telemetry has no GPU data (staleTelemetryPolicy Reject)"),
		},
		{
			name:   "no GPU data, Ignore: the NUMA check still applies",
			tel:    telNode("n1", 2, h100s(8, 4), noGPUSource, exclusive(60, 60)),
			policy: config.StaleTelemetryIgnore,
			pod:    gpu4NUMA,
			want:   unschedulable("no NUMA node has 16 free CPUs and 64Gi free memory: node 0 has 4 CPUs, 383.0Gi; node 1 has 4 CPUs, 383.0Gi"),
		},
		{name: "no NUMA data, Ignore", tel: telNode("n1", 2, nil, noNUMA), policy: config.StaleTelemetryIgnore, pod: cpuNUMA},
		{
			name: "no NUMA data, Reject", tel: telNode("n1", 2, nil, noNUMA), policy: config.StaleTelemetryReject, pod: cpuNUMA,
			want: unschedulable("node telemetry has no NUMA data (staleTelemetryPolicy Reject)"),
		},
		{
			name: "malformed min memory",
			tel:  telNode("n1", 2, h100s(8, 4)),
			pod:  makePod("p", 1, "", "", gpuMinMem, "lots"),
			want: fwk.NewStatus(fwk.UnschedulableAndUnresolvable, `pod annotation telesched.io/gpu-min-memory="lots" is not a quantity such as "40Gi": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			policy := tc.policy
			if policy == "" {
				policy = config.StaleTelemetryReject
			}
			var pl *TopologyFit
			if tc.tel != nil {
				pl = newPlugin(policy, tc.tel)
			} else {
				pl = newPlugin(policy)
			}
			got := filter(pl, tc.pod, nodeInfo("n1", 8, tc.pods...))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Filter (-want +got):\n%s\nmessage: %s", diff, got.Message())
			}
		})
	}
}

// mixedGPUs is 4 H100 (80GB) on NUMA node 0 and 4 A100 (40GB) on node 1.
func mixedGPUs() []gpu {
	gs := h100s(8, 4)
	for i := 4; i < 8; i++ {
		gs[i].model, gs[i].memory = a100, a100Memory
	}
	return gs
}

// A 4-GPU single-numa-node pod fits only the node that has 4 healthy GPUs
// on one NUMA node.
func TestFilterSingleNUMANodeGPUs(t *testing.T) {
	t.Parallel()
	pl := newPlugin(config.StaleTelemetryReject,
		telNode("aligned", 2, append(h100s(4, 4), gpu{1, true, h100, h100Memory}, gpu{1, true, h100, h100Memory})), // 4 + 2
		telNode("split", 2, h100s(6, 3)),                                                   // 3 + 3
		telNode("unhealthy", 2, withUnhealthy(h100s(8, 4), 0, 4)),                          // 3 + 3 healthy
		telNode("unaligned-numa", 2, append(h100s(3, 3), gpu{-1, true, h100, h100Memory})), // 3 + 1 unknown
		telNode("cpu", 2, nil),
	)
	pod := makePod("p", 4, "8", "32Gi", numaPolicy, singleNUMA)
	var fits []string
	for _, name := range []string{"aligned", "split", "unhealthy", "unaligned-numa", "cpu"} {
		if st := filter(pl, pod, nodeInfo(name, 8)); st.IsSuccess() {
			fits = append(fits, name)
		} else if st.Code() != fwk.Unschedulable {
			t.Errorf("%s: %v, want Unschedulable", name, st)
		}
	}
	if diff := cmp.Diff([]string{"aligned"}, fits); diff != "" {
		t.Errorf("nodes that fit (-want +got):\n%s", diff)
	}
}
