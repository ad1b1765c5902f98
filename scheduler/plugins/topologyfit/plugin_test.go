// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/fixtures"
)

// now is the tests' clock; samples are taken at it unless a case ages them.
var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

const (
	gpuResource = "nvidia.com/gpu"
	h100        = "NVIDIA H100 80GB HBM3"
	a100        = "NVIDIA A100-SXM4-40GB"
	h100Memory  = 85_520_809_984 // 79.6Gi
	a100Memory  = 42_949_672_960 // 40Gi
	gi          = int64(1) << 30
)

// gpu describes one GPU of a test node.
type gpu struct {
	numa    int32 // -1: not reported
	healthy bool
	model   string
	memory  int64
}

// h100s returns n healthy H100s, perNUMA to a NUMA node from node 0 up.
func h100s(n, perNUMA int) []gpu {
	gs := make([]gpu, n)
	for i := range gs {
		gs[i] = gpu{numa: int32(i / perNUMA), healthy: true, model: h100, memory: h100Memory}
	}
	return gs
}

// withUnhealthy marks GPUs unhealthy by index.
func withUnhealthy(gs []gpu, idx ...int) []gpu {
	for _, i := range idx {
		gs[i].healthy = false
	}
	return gs
}

// telStatus builds a node's telemetry status from the worst-case fixture:
// numa NUMA nodes of 64 CPUs (16 allocated exclusively, 383.0Gi free),
// sampled at now, with the given GPUs (none: a CPU node whose GPU source is
// unavailable). mods edit it.
func telStatus(numa int, gpus []gpu, mods ...func(*telemetryv1alpha1.NodeTelemetryStatus)) *telemetryv1alpha1.NodeTelemetryStatus {
	st := fixtures.FullStatus(now, numa, len(gpus))
	for i, g := range gpus {
		st.GPUs[i].Health.Healthy = g.healthy
		st.GPUs[i].Model = g.model
		st.GPUs[i].MemoryTotalBytes = g.memory
		st.GPUs[i].NUMANode = nil
		if g.numa >= 0 {
			st.GPUs[i].NUMANode = ptr.To(g.numa)
		}
		// The layout fields are the cases' own (mig, linked, ...).
		st.GPUs[i].MIGEnabled, st.GPUs[i].MIG, st.GPUs[i].Allocated, st.GPUs[i].PCIeRoot, st.GPUs[i].NVLink = nil, nil, nil, "", nil
	}
	for _, mod := range mods {
		mod(&st)
	}
	return &st
}

// telNode is the cache's view of telStatus.
func telNode(name string, numa int, gpus []gpu, mods ...func(*telemetryv1alpha1.NodeTelemetryStatus)) *telemetry.Node {
	return telemetry.FromStatus(name, telStatus(numa, gpus, mods...))
}

// exclusive sets each NUMA node's exclusively allocated CPUs; -1 leaves it
// unpublished.
func exclusive(alloc ...int32) func(*telemetryv1alpha1.NodeTelemetryStatus) {
	return func(st *telemetryv1alpha1.NodeTelemetryStatus) {
		for i, a := range alloc {
			st.NUMA[i].AllocatedExclusiveCPUs = nil
			if a >= 0 {
				st.NUMA[i].AllocatedExclusiveCPUs = ptr.To(a)
			}
		}
	}
}

// memFree sets each NUMA node's free memory.
func memFree(bytes ...int64) func(*telemetryv1alpha1.NodeTelemetryStatus) {
	return func(st *telemetryv1alpha1.NodeTelemetryStatus) {
		for i, b := range bytes {
			st.NUMA[i].MemoryFreeBytes = b
		}
	}
}

// sampledAgo ages the sample.
func sampledAgo(d time.Duration) func(*telemetryv1alpha1.NodeTelemetryStatus) {
	return func(st *telemetryv1alpha1.NodeTelemetryStatus) { st.SampleTime = metav1.NewTime(now.Add(-d)) }
}

// noGPUSource drops the GPU section, as when the agent cannot read NVML.
func noGPUSource(st *telemetryv1alpha1.NodeTelemetryStatus) {
	st.GPUs = nil
	for i := range st.Sources {
		if st.Sources[i].Name == telemetryv1alpha1.SourceGPU {
			st.Sources[i] = telemetryv1alpha1.SourceStatus{Name: telemetryv1alpha1.SourceGPU, State: telemetryv1alpha1.SourceFailed, Reason: "NVMLError"}
		}
	}
}

// noNUMA drops the NUMA section.
func noNUMA(st *telemetryv1alpha1.NodeTelemetryStatus) { st.NUMA = nil }

func newPlugin(policy config.StaleTelemetryPolicy, nodes ...*telemetry.Node) *TopologyFit {
	return newPluginOn(plugintest.NewClock(now), policy, nodes...)
}

// newPluginOn returns the plugin on a cache on clk holding nodes, each
// observed at its sampleTime (an agent in step with the scheduler).
func newPluginOn(clk *plugintest.Clock, policy config.StaleTelemetryPolicy, nodes ...*telemetry.Node) *TopologyFit {
	args := *configv1.DefaultTopologyFitArgs()
	args.StaleTelemetryPolicy = policy
	c := plugintest.NewCache(clk)
	for _, n := range nodes {
		if !n.SampleTime.IsZero() {
			clk.Set(n.SampleTime)
		}
		// A copy: the cache stamps the view it stores, and parallel
		// subtests share their table's views.
		view := *n
		c.Set(&view)
		clk.Set(now)
	}
	return New(args, c)
}

// makePod returns a pod requesting gpus (requests and limits, as after API
// defaulting), cpu and memory ("" for none), with annotations as key,
// value pairs.
func makePod(name string, gpus int64, cpu, memory string, annotations ...string) *v1.Pod {
	req, lim := v1.ResourceList{}, v1.ResourceList{}
	if cpu != "" {
		req[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		req[v1.ResourceMemory] = resource.MustParse(memory)
	}
	if gpus > 0 {
		req[gpuResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
		lim[gpuResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "main", Resources: v1.ResourceRequirements{Requests: req, Limits: lim},
		}}},
	}
	if len(annotations) > 0 {
		p.Annotations = map[string]string{}
		for i := 0; i+1 < len(annotations); i += 2 {
			p.Annotations[annotations[i]] = annotations[i+1]
		}
	}
	return p
}

// onNode places a pod on a node, as the pods a NodeInfo holds.
func onNode(p *v1.Pod, node string) *v1.Pod {
	p.Spec.NodeName = node
	return p
}

// nodeInfo returns a NodeInfo for the node with the pods on it and allocGPUs
// of the GPU resource allocatable.
func nodeInfo(name string, allocGPUs int64, pods ...*v1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	alloc := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("128"),
		v1.ResourceMemory: resource.MustParse("2Ti"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	if allocGPUs > 0 {
		alloc[gpuResource] = *resource.NewQuantity(allocGPUs, resource.DecimalSI)
	}
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}})
	return ni
}

const (
	numaPolicy = config.PodAnnotationNUMAPolicy
	singleNUMA = config.NUMAPolicySingleNUMANode
	gpuModel   = config.PodAnnotationGPUModel
	gpuMinMem  = config.PodAnnotationGPUMinMemory
)

// gpuReq is the pod's request of n of the GPU resource.
func gpuReq(n int64) []unitRequest { return []unitRequest{{resource: gpuResource, count: n}} }

func TestPreFilter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		want      *podState
		wantCode  fwk.Code
		wantInMsg string
	}{
		{name: "no GPU, no NUMA policy: skip", pod: makePod("p", 0, "1", "1Gi"), wantCode: fwk.Skip},
		{name: "other NUMA policy: skip", pod: makePod("p", 0, "1", "1Gi", numaPolicy, "best-effort"), wantCode: fwk.Skip},
		{name: "GPU constraints ignored without GPUs", pod: makePod("p", 0, "1", "1Gi", gpuMinMem, "lots"), wantCode: fwk.Skip},
		{
			name: "single-numa-node CPU pod",
			pod:  makePod("p", 0, "16", "64Gi", numaPolicy, singleNUMA),
			want: &podState{cpuMilli: 16_000, memoryBytes: 64 * gi, singleNUMA: true},
		},
		{
			name: "GPU pod with constraints",
			pod:  makePod("p", 4, "8", "", gpuModel, " H100 ", gpuMinMem, "40Gi"),
			want: &podState{gpus: 4, reqs: gpuReq(4), cpuMilli: 8000, model: "h100", minGPUMemory: 40 * gi, gpuConstraints: ` matching model "H100" with >= 40Gi`},
		},
		{
			name: "GPU limits only (not defaulted)",
			pod: func() *v1.Pod {
				p := makePod("p", 2, "", "")
				delete(p.Spec.Containers[0].Resources.Requests, gpuResource)
				return p
			}(),
			want: &podState{gpus: 2, reqs: gpuReq(2)},
		},
		{
			name: "init container GPUs count by max",
			pod: func() *v1.Pod {
				p := makePod("p", 2, "", "")
				p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: makePod("i", 3, "", "").Spec.Containers[0].Resources}}
				return p
			}(),
			// max(init 3, main 2) = 3
			want: &podState{gpus: 3, reqs: gpuReq(3)},
		},
		{
			name:      "malformed min memory",
			pod:       makePod("p", 1, "", "", gpuMinMem, "40GB"),
			wantCode:  fwk.UnschedulableAndUnresolvable,
			wantInMsg: `pod annotation telesched.io/gpu-min-memory="40GB" is not a quantity such as "40Gi"`,
		},
		{
			name:      "negative min memory",
			pod:       makePod("p", 1, "", "", gpuMinMem, "-1Gi"),
			wantCode:  fwk.UnschedulableAndUnresolvable,
			wantInMsg: `pod annotation telesched.io/gpu-min-memory="-1Gi" must not be negative`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pl := newPlugin(config.StaleTelemetryIgnore)
			cs := framework.NewCycleState()
			_, st := pl.PreFilter(context.Background(), cs, tc.pod, nil)
			if diff := cmp.Diff(tc.wantCode, st.Code()); diff != "" {
				t.Fatalf("PreFilter code (-want +got):\n%s\n%v", diff, st)
			}
			if !strings.Contains(st.Message(), tc.wantInMsg) {
				t.Errorf("PreFilter message %q does not contain %q", st.Message(), tc.wantInMsg)
			}
			var got *podState
			if d, err := cs.Read(stateKey); err == nil {
				got = d.(*podState)
			}
			want := tc.want
			if want != nil {
				w := *want
				w.now = pl.cache.Now() // the cycle's time, read once in PreFilter
				want = &w
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(podState{}, unitRequest{})); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewFactory(t *testing.T) {
	t.Parallel()
	factory := NewFactory(newCache(), nil, nil)
	if _, err := factory(context.Background(), &config.LoadAwareArgs{}, nil); err == nil || !strings.Contains(err.Error(), "want args of type TopologyFitArgs") {
		t.Errorf("wrong args type: err = %v", err)
	}
	args := configv1.DefaultTopologyFitArgs()
	args.NonGPUPodPenaltyPercent = 150
	if _, err := factory(context.Background(), args, nil); err == nil || !strings.Contains(err.Error(), "pluginConfig[TopologyFit].args.nonGPUPodPenaltyPercent") {
		t.Errorf("invalid args: err = %v", err)
	}
}

func TestStateCloneIsReceiver(t *testing.T) {
	t.Parallel()
	s := &podState{gpus: 1}
	if s.Clone() != fwk.StateData(s) {
		t.Error("Clone must return the receiver: the state is immutable")
	}
}
