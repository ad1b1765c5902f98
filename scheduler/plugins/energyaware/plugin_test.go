// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// unlimited adds a sensor without a limit at celsius to st.
func unlimited(st *telemetryv1alpha1.NodeTelemetryStatus, name string, celsius int64) *telemetryv1alpha1.NodeTelemetryStatus {
	st.Thermal.HottestUnlimitedSensor, st.Thermal.HottestUnlimitedMilliCelsius = name, ptr.To(celsius*1000)
	if celsius*1000 > st.Thermal.HottestMilliCelsius {
		st.Thermal.HottestSensor, st.Thermal.HottestMilliCelsius, st.Thermal.LimitMilliCelsius = name, celsius*1000, nil
	}
	return st
}

// alarm raises an alarm on st's hottest sensor, as coretemp's sticky
// crit_alarm would be after an excursion.
func alarm(st *telemetryv1alpha1.NodeTelemetryStatus) *telemetryv1alpha1.NodeTelemetryStatus {
	st.Thermal.Alarms = 1
	st.Thermal.Sensors = []telemetryv1alpha1.ThermalSensor{{Name: st.Thermal.HottestSensor, MilliCelsius: st.Thermal.HottestMilliCelsius, LimitMilliCelsius: st.Thermal.LimitMilliCelsius, Alarm: true}}
	return st
}

// status is fresh telemetry with the hottest sensor at hottest°C of a
// 100°C critical limit and GPUs at the given temperatures (slowdown 90°C).
func status(hottest int64, gpuTemps ...int64) *telemetryv1alpha1.NodeTelemetryStatus {
	st := &telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime: metav1.NewTime(now), IntervalSeconds: 5,
		CPU: &telemetryv1alpha1.CPUStatus{LogicalCores: 16, OnlineCores: 16, UtilizationPercent: 20},
		Thermal: &telemetryv1alpha1.ThermalStatus{HottestSensor: "cpu", HottestMilliCelsius: hottest * 1000,
			LimitMilliCelsius: ptr.To[int64](100_000), HeadroomMilliCelsius: ptr.To((100 - hottest) * 1000), HeadroomSensor: "cpu"},
		Sources: []telemetryv1alpha1.SourceStatus{{Name: telemetryv1alpha1.SourceGPU, State: telemetryv1alpha1.SourceAvailable}},
	}
	for i, temp := range gpuTemps {
		st.GPUs = append(st.GPUs, telemetryv1alpha1.GPUStatus{Index: int32(i), UUID: string(rune('a' + i)), Health: telemetryv1alpha1.GPUHealth{Healthy: true},
			TemperatureMilliCelsius: ptr.To(temp * 1000), SlowdownMilliCelsius: ptr.To[int64](90_000)})
	}
	return st
}

func gpuPod(gpus string) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	if gpus != "" {
		req["nvidia.com/gpu"] = resource.MustParse(gpus)
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: req},
	}}}}
}

// modelled gives st a straight-line power model (100 W idle, 420 W at full
// load over its 16 CPUs), a measured node power of watts, and a thermal
// model of its "cpu" sensor: 30°C + 0.2°C/W, limit 100°C.
func modelled(st *telemetryv1alpha1.NodeTelemetryStatus, watts int32) *telemetryv1alpha1.NodeTelemetryStatus {
	st.Power = &telemetryv1alpha1.PowerStatus{Watts: watts, Sources: []telemetryv1alpha1.PowerSource{"rapl"}, Model: &telemetryv1alpha1.PowerModel{
		Ready: true, IdleWatts: ptr.To[int32](100), FullLoadWatts: ptr.To[int32](420)}}
	st.Thermal.Model = &telemetryv1alpha1.ThermalModel{Sensor: "cpu", LimitMilliCelsius: 100_000, AmbientMilliCelsius: 30_000,
		MilliCelsiusPerWatt: 200, TimeConstantSeconds: 60, Samples: 120}
	return st
}

func cpuPod(cpus string) *v1.Pod {
	p := gpuPod("")
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpus)}
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: req}
	return p
}

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     *telemetryv1alpha1.NodeTelemetryStatus
		pod        *v1.Pod
		wantReason string
	}{
		{"cool node", status(60), gpuPod(""), ""},
		// headroom 4°C <= 5°C margin
		{"hot node", status(96), gpuPod(""), "node thermal headroom 4.0°C <= margin 5.0°C (cpu at 96.0°C, limit 100.0°C)"},
		// Defect 2: k10temp at 95°C without a limit beside a cool sensor
		// with one: 90 - 95 = -5°C.
		{"hot sensor without a limit", unlimited(status(40), "k10temp/Tctl", 95), gpuPod(""),
			"node thermal headroom -5.0°C <= margin 5.0°C (k10temp/Tctl at 95.0°C, absolute limit 90.0°C as it reports none)"},
		{"cool sensor without a limit", unlimited(status(40), "k10temp/Tctl", 60), gpuPod(""), ""},
		// Defect 1: a raised alarm is not heat.
		{"sticky alarm on a cool node", alarm(status(45)), gpuPod(""), ""},
		// GPUs at 60, 88, 70: 88 >= 90-3 is too hot; 2 cool GPUs for a 2-GPU pod
		{"enough cool GPUs", status(60, 60, 88, 70), gpuPod("2"), ""},
		{"too few cool GPUs", status(60, 60, 88, 70), gpuPod("3"), "node has 2 healthy GPUs more than 3°C below slowdown, pod needs 3"},
		{"CPU pod ignores GPU heat", status(60, 89, 89), gpuPod(""), ""},
		// Cool now (60°C), but an 8-CPU pod adds (420-100) W x 8/16 = 160 W:
		// 30 + 0.2 x (170 + 160) = 96°C >= 100 - 5.
		{"predicted too hot", modelled(status(60), 170), cpuPod("8"),
			"predicted steady temperature of cpu with the pod 96.0°C >= limit 100.0°C - margin 5.0°C: 30.0°C + 0.200°C/W x 330W (now 170W, +0W reserved, +160W this pod)"},
		// 30 + 0.2 x (164 + 160) = 94.8°C
		{"predicted just below", modelled(status(60), 164), cpuPod("8"), ""},
		// A 1-CPU pod adds 20 W: 30 + 0.2 x 190 = 68°C.
		{"small pod fits the same node", modelled(status(60), 170), cpuPod("1"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := newCache()
			observe(cache, "n", tc.status)
			pl := New(*configv1.DefaultEnergyAwareArgs(), cache)
			cs := framework.NewCycleState()
			_, _ = pl.PreFilter(context.Background(), cs, tc.pod, nil)
			ni := framework.NewNodeInfo()
			ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
			st := pl.Filter(context.Background(), cs, tc.pod, ni)
			switch {
			case tc.wantReason == "" && !st.IsSuccess():
				t.Errorf("Filter = %v, want success", st)
			case tc.wantReason != "" && (st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), tc.wantReason)):
				t.Errorf("Filter = %v, want Unschedulable containing %q", st, tc.wantReason)
			}
		})
	}
}

func TestHint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		old, new *telemetryv1alpha1.NodeTelemetryStatus
		want     fwk.QueueingHint
	}{
		{"cooled below the margin", gpuPod(""), status(97), status(80), fwk.Queue},
		{"still too hot", gpuPod(""), status(98), status(96), fwk.QueueSkip},
		{"cool node warmed a little", gpuPod(""), status(60), status(65), fwk.QueueSkip},
		{"a GPU cooled", gpuPod("1"), status(60, 89, 89), status(60, 89, 70), fwk.Queue},
		{"GPUs unchanged", gpuPod("1"), status(60, 89, 70), status(60, 89, 71), fwk.QueueSkip},
		// Filter's predicate: a node without GPUs never takes a GPU pod.
		{"cooled, but no GPU for a GPU pod", gpuPod("1"), status(97), status(80), fwk.QueueSkip},
		{"one GPU cooled, the pod needs two", gpuPod("2"), status(60, 89, 89), status(60, 89, 70), fwk.QueueSkip},
		{"added, cool", gpuPod(""), nil, status(60), fwk.Queue},
		// The prediction with the pod falls below limit - margin as the
		// node's power falls: 96°C, then 30 + 0.2 x (150 + 160) = 92°C.
		{"predicted steady temperature fell", cpuPod("8"), modelled(status(60), 170), modelled(status(61), 150), fwk.Queue},
		{"predicted steady temperature still too high", cpuPod("8"), modelled(status(60), 180), modelled(status(59), 170), fwk.QueueSkip},
		// The agent withdrew a thermal model that stopped predicting (a fan
		// was repaired): the node is judged on its temperature now.
		{"thermal model withdrawn", cpuPod("8"), modelled(status(60), 170), status(61), fwk.Queue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := New(*configv1.DefaultEnergyAwareArgs(), newCache())
			oldObj, newObj := plugintest.HintObjects(t, pl.cache, clock, "n", tc.old, tc.new)
			pl.rejected.Add(tc.pod, pl.reserved.Demand(tc.pod)) // as Filter did
			got, err := pl.hint(klog.Background(), tc.pod, oldObj, newObj)
			if err != nil || got != tc.want {
				t.Errorf("hint = %v, %v; want %v", got, err, tc.want)
			}
			// The PreQueueingHint names the pod whenever the hint queues
			// it, and names nothing for a node too hot for any pod or
			// usable before with no GPU come clear.
			pre, err := pl.preHint(klog.Background(), oldObj, newObj)
			if err != nil || pre.AllPods {
				t.Fatalf("preHint = %+v, %v", pre, err)
			}
			if named := len(pre.Pods) == 1; got == fwk.Queue && !named {
				t.Errorf("the hint queues the pod, the PreQueueingHint names %v", pre.Pods)
			}
		})
	}
	// The node-level answers alone name nothing.
	for _, tc := range []struct {
		name     string
		old, new *telemetryv1alpha1.NodeTelemetryStatus
	}{
		{"still too hot", status(98), status(96)},
		{"cool node warmed a little", status(60), status(65)},
		{"GPUs unchanged", status(60, 89, 70), status(60, 89, 71)},
	} {
		pl := New(*configv1.DefaultEnergyAwareArgs(), newCache())
		p := gpuPod("")
		pl.rejected.Add(p, pl.reserved.Demand(p))
		oldObj, newObj := plugintest.HintObjects(t, pl.cache, clock, "n", tc.old, tc.new)
		if pre, err := pl.preHint(klog.Background(), oldObj, newObj); err != nil || pre.AllPods || len(pre.Pods) > 0 {
			t.Errorf("%s: preHint = %+v, %v; want no pod named", tc.name, pre, err)
		}
	}
}

// Score and NormalizeScore as the framework runs them, on nodes with power
// models, one without, and one without telemetry.
func TestScore(t *testing.T) {
	withModel := func(hottest int64, idle, full int32) *telemetryv1alpha1.NodeTelemetryStatus {
		st := status(hottest)
		st.Power = &telemetryv1alpha1.PowerStatus{Watts: idle, Model: &telemetryv1alpha1.PowerModel{
			Ready: true, IdleWatts: ptr.To(idle), FullLoadWatts: ptr.To(full)}}
		return st
	}
	cache := newCache()
	for name, st := range map[string]*telemetryv1alpha1.NodeTelemetryStatus{
		"efficient": withModel(60, 100, 260), // 160 W span / 16 cores: 10 W per CPU
		"legacy":    withModel(60, 150, 630), // 480 W span: 30 W per CPU
		"mid-hot":   withModel(80, 100, 276), // 176 W span: 11 W per CPU
		"no-model":  status(40),
	} {
		observe(cache, name, st)
	}
	pl := New(*configv1.DefaultEnergyAwareArgs(), cache)
	pod := gpuPod("") // 1 CPU
	cs := framework.NewCycleState()
	_, _ = pl.PreFilter(context.Background(), cs, pod, nil)
	names := []string{"efficient", "legacy", "mid-hot", "no-model", "no-telemetry"}
	scores := make(fwk.NodeScoreList, len(names))
	for i, name := range names {
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		s, st := pl.Score(context.Background(), cs, pod, ni)
		if !st.IsSuccess() {
			t.Fatalf("Score %s: %v", name, st)
		}
		scores[i] = fwk.NodeScore{Name: name, Score: s}
	}
	if st := pl.ScoreExtensions().NormalizeScore(context.Background(), cs, pod, scores); !st.IsSuccess() {
		t.Fatalf("NormalizeScore: %v", st)
	}
	// Marginal power 10, 30, 11 W: 200 % and 10 % dearer than the
	// cheapest, over powerSpanPercent's 25 %: power scores 100, 0, 60.
	// Headroom 40, 40, 20, 60°C: thermal scores 100, 100, 50, 100 (full
	// at 40°C).
	want := map[string]int64{
		"efficient":    100, // (100*70 + 100*30)/100
		"legacy":       30,  // (0*70 + 100*30)/100
		"mid-hot":      57,  // (60*70 + 50*30)/100
		"no-model":     30,  // no power points: 100*30/100
		"no-telemetry": 30,  // the lowest of the others
	}
	for _, s := range scores {
		if s.Score != want[s.Name] {
			t.Errorf("%s scored %d, want %d", s.Name, s.Score, want[s.Name])
		}
	}
}

// PreFilter skips the filter for CPU pods while no node is too hot (the
// filter would pass every node), and only then.
func TestPreFilterSkip(t *testing.T) {
	cache := newCache()
	observe(cache, "cool", status(60))
	pl := New(*configv1.DefaultEnergyAwareArgs(), cache)
	reject := configv1.DefaultEnergyAwareArgs()
	reject.StaleTelemetryPolicy = config.StaleTelemetryReject
	plReject := New(*reject, cache)
	for _, step := range []struct {
		name     string
		set      *telemetryv1alpha1.NodeTelemetryStatus // the node "other" becomes this
		pl       *EnergyAware
		pod      *v1.Pod
		wantSkip bool
	}{
		{"no hot node", nil, pl, gpuPod(""), true},
		{"GPU pod", nil, pl, gpuPod("1"), false},
		{"stale telemetry rejected", nil, plReject, gpuPod(""), false},
		{"a node is hot", status(97), pl, gpuPod(""), false},
		{"the hot node cooled", status(80), pl, gpuPod(""), true},
		{"a node throttles", func() *telemetryv1alpha1.NodeTelemetryStatus {
			st := status(60)
			st.Thermal.Throttling = true
			return st
		}(), pl, gpuPod(""), false},
	} {
		if step.set != nil {
			observe(cache, "other", step.set)
		}
		_, st := step.pl.PreFilter(context.Background(), framework.NewCycleState(), step.pod, nil)
		if st.IsSkip() != step.wantSkip || (!step.wantSkip && !st.IsSuccess()) {
			t.Errorf("%s: PreFilter = %v, want skip %v", step.name, st, step.wantSkip)
		}
	}
}

// TestScoreConsolidates: a 2-CPU pod between a 64-CPU R740 host at 8 %,
// below its curve's knee, and a 32-CPU 2012 server (Dell R620,
// power_ssj2008-20120306-00434) at 50 %. Alone the pod adds 17.4 W to the
// first and 10.6 W to the second; eight such pods add 8.0 W each to the
// first. consolidationPods 8 ranks the first ahead; 1, or a first node
// with room for no more pods than this one, ranks the second.
func TestScoreConsolidates(t *testing.T) {
	curveStatus := func(cores, percent int32, curve []int32) *telemetryv1alpha1.NodeTelemetryStatus {
		st := status(50)
		st.CPU = &telemetryv1alpha1.CPUStatus{LogicalCores: cores, OnlineCores: cores, UtilizationPercent: percent}
		st.Power = &telemetryv1alpha1.PowerStatus{Watts: 120, Sources: []telemetryv1alpha1.PowerSource{"rapl"},
			Model: &telemetryv1alpha1.PowerModel{Ready: true, Basis: telemetryv1alpha1.PowerModelFitted,
				IdleWatts: ptr.To(curve[0]), FullLoadWatts: ptr.To(curve[10]), CurveWatts: curve, CurveUncertaintyWatts: make([]int32, 11)}}
		return st
	}
	cache := newCache()
	observe(cache, "r740-quiet", curveStatus(64, 8, []int32{52, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457}))
	observe(cache, "r620-busy", curveStatus(32, 50, []int32{54, 78, 88, 100, 115, 126, 143, 165, 196, 226, 243}))
	nodeInfo := func(name string, cpus, requested int64) fwk.NodeInfo {
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{
			Allocatable: v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI)}}})
		if requested > 0 {
			ni.AddPod(cpuPod(fmt.Sprint(requested)))
		}
		return ni
	}
	pod := cpuPod("2")
	for _, tc := range []struct {
		name          string
		pods          int32
		quietRequests int64
		want          string
	}{
		{name: "consolidationPods 8", pods: 8, want: "r740-quiet"},
		{name: "consolidationPods 1", pods: 1, want: "r620-busy"},
		{name: "consolidationPods 8, room for one pod", pods: 8, quietRequests: 62, want: "r620-busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := *configv1.DefaultEnergyAwareArgs()
			args.ConsolidationPods = tc.pods
			pl := New(args, cache)
			cs := framework.NewCycleState()
			_, _ = pl.PreFilter(context.Background(), cs, pod, nil)
			scores := fwk.NodeScoreList{}
			for _, ni := range []fwk.NodeInfo{nodeInfo("r740-quiet", 64, tc.quietRequests), nodeInfo("r620-busy", 32, 0)} {
				s, st := pl.Score(context.Background(), cs, pod, ni)
				if !st.IsSuccess() {
					t.Fatal(st)
				}
				scores = append(scores, fwk.NodeScore{Name: ni.Node().Name, Score: s})
			}
			if st := pl.NormalizeScore(context.Background(), cs, pod, scores); !st.IsSuccess() {
				t.Fatal(st)
			}
			best := bestScore(scores)
			if best.Name != tc.want {
				t.Errorf("scores %v: best %s, want %s", scores, best.Name, tc.want)
			}
		})
	}
}

// bestScore is the first of the highest scores.
func bestScore(scores fwk.NodeScoreList) fwk.NodeScore {
	best := scores[0]
	for _, s := range scores[1:] {
		if s.Score > best.Score {
			best = s
		}
	}
	return best
}
