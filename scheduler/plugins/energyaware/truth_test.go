// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
)

// Defect 6: EnergyAware counts GPUs by the configured resource, as
// TopologyFit does.
func TestGPUResourceName(t *testing.T) {
	cache := newCache()
	observe(cache, "n", status(50, 60, 89)) // one GPU cool, one 1°C from slowdown
	args := *configv1.DefaultEnergyAwareArgs()
	args.GPUResourceName = "amd.com/gpu"
	pl := New(args, cache)
	p := gpuPod("")
	p.Spec.Containers[0].Resources.Requests["amd.com/gpu"] = resource.MustParse("2")
	p.Spec.Containers[0].Resources.Limits = p.Spec.Containers[0].Resources.Requests
	cs := framework.NewCycleState()
	_, _ = pl.PreFilter(context.Background(), cs, p, nil)
	if st := pl.Filter(context.Background(), cs, p, nodeInfoOf("n")); st.IsSuccess() {
		t.Error("a pod needing 2 amd.com/gpu fit a node with one cool GPU")
	}
}

func nodeInfoOf(name string) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{})
	ni.Node().Name = name
	return ni
}

// A node last seen too hot stays too hot while its telemetry is stale,
// whatever the stale policy: an agent hung in a driver call stops
// publishing, and its silence is no sign that the node cooled. A fresh
// cool sample lets pods in again.
func TestStaleHotNodeStaysHot(t *testing.T) {
	t.Cleanup(func() { clock.Set(now) })
	for _, policy := range []config.StaleTelemetryPolicy{config.StaleTelemetryIgnore, config.StaleTelemetryReject} {
		t.Run(string(policy), func(t *testing.T) {
			clock.Set(now)
			cache := newCache()
			observe(cache, "n", status(98)) // 98°C of a 100°C limit: 2°C <= 5°C margin
			args := *configv1.DefaultEnergyAwareArgs()
			args.StaleTelemetryPolicy = policy
			pl := New(args, cache)
			filter := func() *fwk.Status {
				cs := framework.NewCycleState()
				p := cpuPod("1")
				_, _ = pl.PreFilter(context.Background(), cs, p, nil)
				return pl.Filter(context.Background(), cs, p, nodeInfoOf("n"))
			}
			clock.Set(now.Add(args.TelemetryMaxAge + time.Second)) // 61 s of silence
			st := filter()
			if st.IsSuccess() {
				t.Fatal("a node last seen at 98°C passed once its telemetry went stale")
			}
			if !strings.Contains(st.Message(), "node thermal headroom 2.0°C <= margin 5.0°C") || !strings.Contains(st.Message(), "as last seen 1m1s ago") {
				t.Errorf("rejection %q does not say the node was last seen too hot, and when", st.Message())
			}
			cool := status(60)
			cool.SampleTime = metav1.NewTime(clock.Now())
			observe(cache, "n", cool)
			if st := filter(); !st.IsSuccess() {
				t.Errorf("after a fresh cool sample: %v", st)
			}
		})
	}
}
