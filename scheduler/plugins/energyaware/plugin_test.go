// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
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

// attempt is the scheduler's attempt at pod on node against the view the
// cache holds of it now: PreFilter, then Filter unless PreFilter skips it
// (the filter would pass every node). Filter records the pod in
// pl.rejected when it rejects it. It returns Filter's status: nil when it
// passes, or PreFilter skipped it.
func attempt(pl *EnergyAware, pod *v1.Pod, node string) *fwk.Status {
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(context.Background(), cs, pod, nil); st.IsSkip() {
		return nil
	} else if !st.IsSuccess() {
		return st
	}
	return pl.Filter(context.Background(), cs, pod, nodeInfoOf(node))
}

// storeOld stores old as plugintest.Change stores a change's old view
// (resource version 1, observed at its sampleTime), so that Filter can
// run on it before the change; Change, given the same old, then finds
// it stored and hands it to pick as prev (checked by change).
func storeOld(t *testing.T, c *telemetry.Cache, name string, old *telemetryv1alpha1.NodeTelemetryStatus) *telemetry.Node {
	t.Helper()
	n, err := telemetry.Decode(plugintest.Object(t, name, 1, old, old.SampleTime.Time))
	if err != nil {
		t.Fatal(err)
	}
	saved := clock.Now()
	clock.Set(old.SampleTime.Time)
	defer clock.Set(saved)
	return c.Set(n)
}

// change stores the change of node name's telemetry from old (nil: an
// add) to cur with plugintest.Change and returns the views pick gets,
// failing unless prev is stored, the view that Filter ran on (storeOld).
func change(t *testing.T, c *telemetry.Cache, name string, stored *telemetry.Node, old, cur *telemetryv1alpha1.NodeTelemetryStatus) (prev, next *telemetry.Node) {
	t.Helper()
	prev, next = plugintest.Change(t, c, clock, name, old, cur)
	if prev != stored {
		t.Fatalf("Change handed pick %+v as the previous view, not the one Filter ran on, %+v", prev, stored)
	}
	if next == nil || next == stored {
		t.Fatalf("Change stored no new view: %+v", next)
	}
	return prev, next
}

// keyOf is pod's key, as pick names it.
func keyOf(pod *v1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}

// TestPick: a pod Filter rejected on the node's previous view is named by
// pick (and so activated, rejected.OnTelemetry) when the change lets it in
// by Filter's predicate, and only then. Each case runs PreFilter and Filter
// on the old view, as the scheduler's attempt did; a pod the old view took
// (or PreFilter let pass) is recorded as an earlier rejection on the node
// would have left it, and pick must not name it: the change did not let it
// in. After the change, Filter on the new view is the ground truth: pick
// names a pod Filter rejected before only if Filter takes it now, and
// every such pod.
func TestPick(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		old, new *telemetryv1alpha1.NodeTelemetryStatus
		// rejected: Filter rejects the pod on the old view; want: pick
		// names it.
		rejected, want bool
	}{
		{"cooled below the margin", gpuPod(""), status(97), status(80), true, true},
		{"still too hot", gpuPod(""), status(98), status(96), true, false},
		{"cool node warmed a little", gpuPod(""), status(60), status(65), false, false},
		{"a GPU cooled", gpuPod("1"), status(60, 89, 89), status(60, 89, 70), true, true},
		{"GPUs unchanged", gpuPod("1"), status(60, 89, 70), status(60, 89, 71), false, false},
		// A GPU came clear, but the node took the pod before it did.
		{"another GPU cooled, the pod fitted already", gpuPod("1"), status(60, 89, 70), status(60, 70, 70), false, false},
		// Filter's predicate: a node without GPUs never takes a GPU pod.
		{"cooled, but no GPU for a GPU pod", gpuPod("1"), status(97), status(80), true, false},
		{"one GPU cooled, the pod needs two", gpuPod("2"), status(60, 89, 89), status(60, 89, 70), true, false},
		{"added, cool", gpuPod(""), nil, status(60), false, true},
		// The prediction with the pod falls below limit - margin as the
		// node's power falls: 96°C, then 30 + 0.2 x (150 + 160) = 92°C.
		{"predicted steady temperature fell", cpuPod("8"), modelled(status(60), 170), modelled(status(61), 150), true, true},
		{"predicted steady temperature still too high", cpuPod("8"), modelled(status(60), 180), modelled(status(59), 170), true, false},
		// The agent withdrew a thermal model that stopped predicting (a fan
		// was repaired): the node is judged on its temperature now.
		{"thermal model withdrawn", cpuPod("8"), modelled(status(60), 170), status(61), true, true},
		// A thermal model lets no node-level answer skip the pods, but a
		// small pod the node took before is not let in by its power falling.
		{"predicted steady temperature fell, the pod fitted already", cpuPod("1"), modelled(status(60), 170), modelled(status(60), 150), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := New(*configv1.DefaultEnergyAwareArgs(), newCache())
			var stored *telemetry.Node
			rejected := false
			if tc.old != nil {
				stored = storeOld(t, pl.cache, "n", tc.old)
				st := attempt(pl, tc.pod, "n")
				if rejected = !st.IsSuccess(); rejected {
					t.Logf("Filter on the old view: %s", st.Message())
				}
			}
			if rejected != tc.rejected {
				t.Fatalf("Filter rejects the pod on the old view: %v, the case needs %v", rejected, tc.rejected)
			}
			if !rejected {
				// Waiting since an earlier view of the node rejected it.
				pl.rejected.AddOn(tc.pod, "n", pl.reserved.Demand(tc.pod))
			}
			prev, cur := change(t, pl.cache, "n", stored, tc.old, tc.new)
			picked := pl.pick(prev, cur)
			named := slices.Contains(picked, keyOf(tc.pod))
			if named != tc.want || len(picked) > 1 {
				t.Errorf("pick = %v; want the pod named: %v", picked, tc.want)
			}
			takes := attempt(pl, tc.pod, "n")
			switch {
			case named && !takes.IsSuccess():
				t.Errorf("pick names the pod, Filter on the new view rejects it: %v", takes)
			case rejected && takes.IsSuccess() && !named:
				t.Error("Filter rejected the pod on the old view and takes it on the new one; pick does not name it")
			}
		})
	}
	// The node-level answers alone name nothing: mayLetIn says no before
	// any pod is looked at.
	for _, tc := range []struct {
		name     string
		policy   config.StaleTelemetryPolicy
		old, new *telemetryv1alpha1.NodeTelemetryStatus
	}{
		{"still too hot", config.StaleTelemetryIgnore, status(98), status(96)},
		{"cool node warmed a little", config.StaleTelemetryIgnore, status(60), status(65)},
		{"GPUs unchanged", config.StaleTelemetryIgnore, status(60, 89, 70), status(60, 89, 71)},
		// Under Reject, a node whose heat is still unknown (no reading
		// ever held) takes no pod.
		{"heat still unknown", config.StaleTelemetryReject, sampleAt(refused(status(60)), -10*time.Second), refused(status(60))},
	} {
		args := configv1.DefaultEnergyAwareArgs()
		args.StaleTelemetryPolicy = tc.policy
		pl := New(*args, newCache())
		p := gpuPod("")
		stored := storeOld(t, pl.cache, "n", tc.old)
		if attempt(pl, p, "n").IsSuccess() {
			pl.rejected.AddOn(p, "n", pl.reserved.Demand(p)) // as an earlier view left it
		}
		prev, cur := change(t, pl.cache, "n", stored, tc.old, tc.new)
		if _, may := pl.mayLetIn(prev, cur, pl.cache.Now()); may {
			t.Errorf("%s: mayLetIn says the change may let a pod in", tc.name)
		}
		if got := pl.pick(prev, cur); got != nil {
			t.Errorf("%s: pick = %v; want no pod named", tc.name, got)
		}
	}
}

// With the scheduler's Node lister, pick names no pod whose required node
// affinity excludes the node that changed, however the change lets it in;
// one it admits is named, as is any without the lister (node unknown: the
// scheduling attempt decides).
func TestPickHonoursRequiredNodeAffinity(t *testing.T) {
	for _, tc := range []struct {
		name      string
		labels    map[string]string // the Node n's; nil: no lister
		wantPicky bool
	}{
		{"node outside the pod's selector", map[string]string{"pool": "cpu"}, false},
		{"node in the pod's selector", map[string]string{"pool": "gpu"}, true},
		{"no node lister", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := New(*configv1.DefaultEnergyAwareArgs(), newCache())
			if tc.labels != nil {
				indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
				for name, labels := range map[string]map[string]string{"n": tc.labels, "m": {"pool": "gpu"}} {
					if err := indexer.Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
						t.Fatal(err)
					}
				}
				pl.nodes = corelisters.NewNodeLister(indexer)
			}
			// picky may go to the gpu pool only: Filter rejected it on m,
			// a hot node of that pool; plain on n, hot too.
			picky := gpuPod("")
			picky.Name, picky.UID = "picky", "picky"
			picky.Spec.NodeSelector = map[string]string{"pool": "gpu"}
			plain := gpuPod("")
			observe(pl.cache, "m", status(97))
			old := status(97)
			stored := storeOld(t, pl.cache, "n", old)
			if attempt(pl, picky, "m").IsSuccess() || attempt(pl, plain, "n").IsSuccess() {
				t.Fatal("Filter takes a pod on a node at 97°C; the test needs both rejected")
			}
			prev, cur := change(t, pl.cache, "n", stored, old, status(80))
			picked := pl.pick(prev, cur)
			if !slices.Contains(picked, keyOf(plain)) {
				t.Errorf("pick = %v; want %v named: n cooled", picked, keyOf(plain))
			}
			if got := slices.Contains(picked, keyOf(picky)); got != tc.wantPicky {
				t.Errorf("pick = %v; want %v named: %v", picked, keyOf(picky), tc.wantPicky)
			}
		})
	}
}

// EnergyAware registers no event with the scheduling queue: a
// NodeTelemetry change activates the pods it lets in through pick.
func TestEventsToRegisterNone(t *testing.T) {
	pl := New(*configv1.DefaultEnergyAwareArgs(), newCache())
	events, err := pl.EventsToRegister(context.Background())
	if err != nil || len(events) != 0 {
		t.Errorf("EventsToRegister = %v, %v; want none", events, err)
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

// PreFilter skips the filter for CPU pods while no node is too hot and no
// node's predicted heat with the pod could come within the margin of its
// limit (the filter would pass every node), and only then.
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
		// TestFilter's node: 30 + 0.2 x 170 = 64°C now; 1 CPU adds 20 W
		// (4°C), 8 CPUs 160 W (32°C, to 96°C >= 100 - 5).
		{"a thermal model, a pod that leaves it far below its limit", modelled(status(60), 170), pl, cpuPod("1"), true},
		{"the pod that could take it past limit - margin", nil, pl, cpuPod("8"), false},
		{"the node's model gone", status(60), pl, cpuPod("8"), true},
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
