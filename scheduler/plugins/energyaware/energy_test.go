// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// The published SPECpower_ssj2008 curves of two generations (watts at
// 0 %, 10 % … 100 %): a 2012 Dell R620 (2 x Xeon E5-2670, result
// power_ssj2008-20120306-00434) and a 2017 Dell R740 (2 x Xeon Platinum
// 8180, power_ssj2008-20170829-00780), whose logical CPUs do 0.756 and 1
// times the reference's work (agent/speed's table.yaml).
var (
	r620Curve = []int32{54, 78, 88, 100, 115, 126, 143, 165, 196, 226, 243}
	r740Curve = []int32{52, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457}
)

// speedNode is a node of cores CPUs at percent along curve, with gpus
// GPUs of model (each drawing idle watts idle and busy watts busy: half
// of them busy, so the node's GPU power model is fitted) and the speeds
// published for them; cpuMilli 0 publishes no speed section at all.
func speedNode(cores, percent int32, curve []int32, cpuMilli int32, src telemetryv1alpha1.SpeedSource, gpus int, model string, idle, busy, gpuMilli int32) *telemetryv1alpha1.NodeTelemetryStatus {
	st := status(50)
	st.CPU = &telemetryv1alpha1.CPUStatus{LogicalCores: cores, OnlineCores: cores, UtilizationPercent: percent}
	st.Power = &telemetryv1alpha1.PowerStatus{Watts: curve[percent/10], Sources: []telemetryv1alpha1.PowerSource{"rapl", "nvml"},
		Model: &telemetryv1alpha1.PowerModel{Ready: true, Basis: telemetryv1alpha1.PowerModelFitted,
			IdleWatts: ptr.To(curve[0]), FullLoadWatts: ptr.To(curve[10]), CurveWatts: curve, CurveUncertaintyWatts: make([]int32, 11)}}
	for i := range gpus {
		util, watts := int32(0), idle
		if i%2 == 1 {
			util, watts = 100, busy
		}
		st.GPUs = append(st.GPUs, telemetryv1alpha1.GPUStatus{Index: int32(i), UUID: fmt.Sprintf("GPU-%d", i), Model: model,
			Health: telemetryv1alpha1.GPUHealth{Healthy: true}, TemperatureMilliCelsius: ptr.To[int64](40_000), SlowdownMilliCelsius: ptr.To[int64](90_000),
			UtilizationPercent: ptr.To(util), PowerWatts: ptr.To(watts)})
		st.Power.Watts += watts
	}
	if cpuMilli > 0 {
		st.Speed = &telemetryv1alpha1.SpeedStatus{CPUCoreMilli: cpuMilli, CPUSource: src}
		if gpus > 0 {
			st.Speed.GPUs = []telemetryv1alpha1.GPUSpeed{{Model: model, Milli: gpuMilli, Source: src}}
		}
	}
	return st
}

// bestOf scores pod on the named nodes (each with cpus allocatable, and
// gpus of the GPU resource) and returns the best and the scores.
func bestOf(t *testing.T, cache *telemetry.Cache, pod *v1.Pod, nodes map[string][2]int64) (string, fwk.NodeScoreList) {
	t.Helper()
	pl := New(*configv1.DefaultEnergyAwareArgs(), cache)
	cs := framework.NewCycleState()
	_, _ = pl.PreFilter(context.Background(), cs, pod, nil)
	var scores fwk.NodeScoreList
	for _, name := range []string{"a", "b"} {
		res := nodes[name]
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: *resource.NewQuantity(res[0], resource.DecimalSI), "nvidia.com/gpu": *resource.NewQuantity(res[1], resource.DecimalSI)}}})
		s, st := pl.Score(context.Background(), cs, pod, ni)
		if !st.IsSuccess() {
			t.Fatal(st)
		}
		scores = append(scores, fwk.NodeScore{Name: name, Score: s})
	}
	if st := pl.NormalizeScore(context.Background(), cs, pod, scores); !st.IsSuccess() {
		t.Fatal(st)
	}
	return bestScore(scores).Name, scores
}

// trainingPod is a Job's pod of 16 CPUs and 4 GPUs: a fixed amount of
// work.
func trainingPod() *v1.Pod {
	p := gpuPod("4")
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("16"), "nvidia.com/gpu": resource.MustParse("4")}
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: req, Limits: req}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "j"}}
	return p
}

// Must show (1): a 4-GPU training pod between a node with 4 free A100s
// and one with 4 free H100s, speeds published. An A100 adds 340 W busy
// (400 W busy less 60 W idle, NVML's readings), an H100 630 W (700 less
// 70); an H100 SXM does 2.06 times an A100 80GB's training work (MLPerf
// Training v3.0, the shipped table). Per unit of the job's work the H100
// node spends (4 x 630 + its host's CPU watts) / 2.06 against the A100
// node's 4 x 340 + the same: it does the job for fewer joules and must
// win. Ranked by the watts it adds now (before status.speed), the A100
// node won:
//
//	energy_test.go:120: the training pod went to a (A100) with scores [{a 100} {b 30}], want b (H100): fewer joules for its work
func TestTrainingPodGoesWhereItsWorkCostsFewerJoules(t *testing.T) {
	cache := newCache()
	observe(cache, "a", speedNode(64, 20, r740Curve, 1000, telemetryv1alpha1.SpeedSourceTable, 8, "NVIDIA A100-SXM4-80GB", 60, 400, 1000))
	observe(cache, "b", speedNode(64, 20, r740Curve, 1000, telemetryv1alpha1.SpeedSourceTable, 8, "NVIDIA H100 80GB HBM3", 70, 700, 2060))
	best, scores := bestOf(t, cache, trainingPod(), map[string][2]int64{"a": {64, 4}, "b": {64, 4}})
	if best != "b" {
		t.Errorf("the training pod went to %s (A100) with scores %v, want b (H100): fewer joules for its work", best, scores)
	}
	// The same pod without published speeds is judged at the reference's
	// pace on both: the A100 node adds fewer watts and so fewer joules.
	cache = newCache()
	observe(cache, "a", speedNode(64, 20, r740Curve, 0, "", 8, "NVIDIA A100-SXM4-80GB", 60, 400, 0))
	observe(cache, "b", speedNode(64, 20, r740Curve, 0, "", 8, "NVIDIA H100 80GB HBM3", 70, 700, 0))
	if best, scores := bestOf(t, cache, trainingPod(), map[string][2]int64{"a": {64, 4}, "b": {64, 4}}); best != "a" {
		t.Errorf("without speeds the training pod went to %s with scores %v, want a", best, scores)
	}
}

// Must show (3): a long-running CPU pod between a slow old node and a
// fast new one, each with its tested system's logical CPUs: the R620's
// 32 at 20 %, the R740's 112 at 90 %, where its curve is steep. Four busy
// CPUs add less to the old node now (15.8 W, its share of the climb
// amortized over pods like it, against 17.5 W), but its logical CPUs do
// 0.756 of the reference's work, so the same work keeps 4/0.756 = 5.3 of
// them busy: 21.6 W, and the new node spends fewer joules for the pod's
// work and must win. Ranked by the watts of its 4 CPUs (before
// status.speed), the old node won:
//
//	energy_test.go:161: the service pod went to a with scores [{a 100} {b 30}]; joules per unit of work: a (R620, 0.756x) 21.6, b (R740) 17.5; want b
func TestServicePodGoesWhereItsWorkCostsFewerJoules(t *testing.T) {
	cache := newCache()
	observe(cache, "a", speedNode(32, 20, r620Curve, 756, telemetryv1alpha1.SpeedSourceTable, 0, "", 0, 0, 0))
	observe(cache, "b", speedNode(112, 90, r740Curve, 1000, telemetryv1alpha1.SpeedSourceTable, 0, "", 0, 0, 0))
	pod := cpuPod("4")
	var joules [2]estimate.Energy
	for i, name := range []string{"a", "b"} {
		n, _ := cache.Get(name)
		e, ok := (*estimate.Book)(nil).RankJoules(n, estimate.Demand{CPUMilli: 4000}, estimate.Demand{}, estimate.WorkService, 8, 1<<40)
		if !ok {
			t.Fatalf("%s: no joules", name)
		}
		joules[i] = e
	}
	want := "a"
	if joules[1].Joules < joules[0].Joules {
		want = "b"
	}
	best, scores := bestOf(t, cache, pod, map[string][2]int64{"a": {32, 0}, "b": {112, 0}})
	if best != want {
		t.Errorf("the service pod went to %s with scores %v; joules per unit of work: a (R620, 0.756x) %.1f, b (R740) %.1f; want %s",
			best, scores, joules[0].Joules, joules[1].Joules, want)
	}
	// The figures the test rests on: the old node's 4 CPUs' watts are
	// the lower, its joules for the same work the higher.
	wa, _ := estimate.AmortizedCPUWatts(mustGet(t, cache, "a"), estimate.Demand{CPUMilli: 4000}, estimate.Demand{}, 8, 1<<40)
	wb, _ := estimate.AmortizedCPUWatts(mustGet(t, cache, "b"), estimate.Demand{CPUMilli: 4000}, estimate.Demand{}, 8, 1<<40)
	t.Logf("watts of 4 CPUs: a (R620) %.1f, b (R740) %.1f; joules per unit of work: a %.1f, b %.1f", wa, wb, joules[0].Joules, joules[1].Joules)
	if !(wa < wb && joules[0].Joules > joules[1].Joules) {
		t.Errorf("watts of 4 CPUs: a %.1f, b %.1f; joules per unit of work: a %.1f, b %.1f: want a cheaper in watts and dearer in joules",
			wa, wb, joules[0].Joules, joules[1].Joules)
	}
}

// Must show (4): a node of unknown speed is judged as the reference and
// says so. (Before status.speed there was no speed to judge or to say:
// this test did not compile, for want of estimate.PodSpeed.) A node whose agent publishes the reference (its CPU in no
// table) and one whose agent publishes no speed section at all read as
// 1x, unknown; a pod's joules there are its watts.
func TestUnknownSpeedIsTheReference(t *testing.T) {
	cache := newCache()
	observe(cache, "a", speedNode(64, 20, r740Curve, 1000, telemetryv1alpha1.SpeedSourceReference, 0, "", 0, 0, 0))
	observe(cache, "b", speedNode(64, 20, r740Curve, 0, "", 0, "", 0, 0, 0))
	for _, name := range []string{"a", "b"} {
		n := mustGet(t, cache, name)
		d := estimate.Demand{CPUMilli: 2000}
		k, known := estimate.PodSpeed(n, d)
		if k != 1 || known || n.CPUSpeedSource != telemetryv1alpha1.SpeedSourceReference {
			t.Errorf("%s: speed %v known %v (source %q), want 1, unknown, reference", name, k, known, n.CPUSpeedSource)
		}
		e, _ := (*estimate.Book)(nil).RankJoules(n, d, estimate.Demand{}, estimate.WorkService, 1, 1<<40)
		w, _ := estimate.AmortizedCPUWatts(n, d, estimate.Demand{}, 1, 1<<40)
		if e.Joules != w || e.SpeedKnown {
			t.Errorf("%s: %.2f J per unit of work (known %v), want its %.2f W, unknown", name, e.Joules, e.SpeedKnown, w)
		}
	}
}

func mustGet(t *testing.T, c *telemetry.Cache, name string) *telemetry.Node {
	t.Helper()
	n, ok := c.Get(name)
	if !ok {
		t.Fatalf("no telemetry for %s", name)
	}
	return n
}
