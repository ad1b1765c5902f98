// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/apis/config/scheme"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/energyaware"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
)

// shippedProfiles loads deploy/scheduler/scheduler-config.yaml as
// kube-scheduler loads its --config.
func shippedProfiles(t *testing.T) []schedconfig.KubeSchedulerProfile {
	t.Helper()
	if err := scheme.Register(); err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "scheduler", "scheduler-config.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	logger, _ := ktesting.NewTestContext(t)
	cfg, err := options.LoadConfigFromFile(logger, path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Profiles
}

// scoreWeight is the plugin's score weight in the profile: its score
// entry's, else its multiPoint entry's (kube-scheduler's rule), 0 when
// its score is disabled or it is not enabled.
func scoreWeight(p schedconfig.KubeSchedulerProfile, plugin string) int32 {
	for _, d := range p.Plugins.Score.Disabled {
		if d.Name == plugin || d.Name == "*" {
			return 0
		}
	}
	for _, e := range p.Plugins.Score.Enabled {
		if e.Name == plugin {
			return e.Weight
		}
	}
	for _, e := range p.Plugins.MultiPoint.Enabled {
		if e.Name == plugin {
			return max(e.Weight, 1)
		}
	}
	return 0
}

// energyArgs is the profile's EnergyAware args.
func energyArgs(t *testing.T, p schedconfig.KubeSchedulerProfile) config.EnergyAwareArgs {
	t.Helper()
	for _, pc := range p.PluginConfig {
		if pc.Name == energyaware.Name {
			return *pc.Args.(*config.EnergyAwareArgs)
		}
	}
	t.Fatalf("profile %s has no EnergyAware args", p.SchedulerName)
	return config.EnergyAwareArgs{}
}

// How the plugins' weights compose (docs/architecture.md, "Scores"): the
// scheduler adds each plugin's 0-100 score times its weight. TopologyFit
// puts a node whose free GPUs for the pod share an NVLink group a band of
// 12 or more points above one where they do not (formula.go); EnergyAware's
// power score loses what a node spends above the cheapest candidate for a
// unit of the pod's work, over powerSpanPercent (energyaware.powerScore).
// So a few watts on a GPU pod cost EnergyAware a point or two, and never
// outweigh the linked pair, in either shipped profile; a node far dearer
// per unit of work (TestTrainingPodGoesWhereItsWorkCostsFewerJoules) still
// loses.
//
// The case is the sandbox's (issue 40): a 2-GPU pod between a node with a
// free NVLinked pair and a twin whose free GPUs are not linked, a few
// watts cheaper for the pod (each of its GPUs draws 1 W less). The
// nodes are the same in all else, so the other plugins score them alike.
// With EnergyAware's score min-max over the candidates, the cheaper twin
// got all of its power points and won:
//
//	weights_test.go:166: telesched: the pod goes to unlinked (TopologyFit 49 x 8 + EnergyAware 79 x 8 = 1024) over linked (100 x 8 + 9 x 8 = 872); want linked: its energy is 0.9 % more
//	weights_test.go:166: telesched-energy: the pod goes to unlinked (TopologyFit 49 x 20 + EnergyAware 93 x 16 = 2468) over linked (100 x 20 + 3 x 16 = 2048); want linked: its energy is 0.9 % more
func TestWeightsCompose(t *testing.T) {
	roots := pcieRoots("pci0000:00", "pci0000:00", "pci0000:00", "pci0000:00", "pci0000:80", "pci0000:80", "pci0000:80", "pci0000:80")
	freeLinked := allocatedGPUs(false, false, true, true, true, true, true, true)
	freeUnlinked := allocatedGPUs(false, true, false, true, true, true, true, true)
	cheaper := func(st *telemetryv1alpha1.NodeTelemetryStatus) {
		for i := range st.GPUs {
			*st.GPUs[i].PowerWatts--
		}
		*st.Power.GPUWatts -= int32(len(st.GPUs))
	}
	cool := func(st *telemetryv1alpha1.NodeTelemetryStatus) {
		st.Thermal.Throttling, st.CPU.ThermalThrottle.Throttling = false, false
	}
	nodes := []scoreNode{
		{name: "linked", tel: telNode("linked", 2, h100s(8, 4), linkedPairs, roots, freeLinked, cool), allocGPUs: 8, held: []int64{6}},
		{name: "unlinked", tel: telNode("unlinked", 2, h100s(8, 4), linkedPairs, roots, freeUnlinked, cool, cheaper), allocGPUs: 8, held: []int64{6}},
	}
	pod := makePod("p", 2, "1", "1Gi")
	tf, st := scoreAll(t, scorePlugin(0, 0, nodes), pod, nodes)
	if !st.IsSuccess() {
		t.Fatalf("TopologyFit PreScore: %v", st)
	}
	if tf["linked"] <= tf["unlinked"] {
		t.Fatalf("TopologyFit scores %v: want the linked pair first", tf)
	}
	for _, p := range shippedProfiles(t) {
		args := energyArgs(t, p)
		cache := plugintest.NewCache(plugintest.NewClock(now))
		for _, n := range nodes {
			view := *n.tel
			cache.Set(&view)
		}
		ea := energyaware.New(args, cache)
		book := estimate.NewBook(cache, estimate.DefaultOptions())
		ctx := context.Background()
		cs := framework.NewCycleState()
		if _, st := ea.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() && !st.IsSkip() {
			t.Fatalf("%s: EnergyAware PreFilter: %v", p.SchedulerName, st)
		}
		scores := make(fwk.NodeScoreList, len(nodes))
		joules := make([]float64, len(nodes))
		for i, n := range nodes {
			s, st := ea.Score(ctx, cs, pod, nodeInfo(n.name, n.allocGPUs))
			if !st.IsSuccess() {
				t.Fatalf("%s: EnergyAware Score %s: %v", p.SchedulerName, n.name, st)
			}
			scores[i] = fwk.NodeScore{Name: n.name, Score: s}
			view, _ := cache.Get(n.name)
			e, ok := book.RankJoules(view, book.Demand(pod), estimate.Demand{}, estimate.WorkService, int(args.ConsolidationPods), 1<<40)
			if !ok {
				t.Fatalf("%s: no energy for %s", p.SchedulerName, n.name)
			}
			joules[i] = e.Joules
		}
		if st := ea.NormalizeScore(ctx, cs, pod, scores); !st.IsSuccess() {
			t.Fatal(st)
		}
		// The case's premise: the unlinked twin is cheaper, by little.
		more := 100 * (joules[0] - joules[1]) / joules[1]
		if !(more > 0 && more < 2) {
			t.Fatalf("%s: energy %.1f (linked) and %.1f (unlinked): want the unlinked twin cheaper by under 2 %%", p.SchedulerName, joules[0], joules[1])
		}
		wTF, wEA := int64(scoreWeight(p, Name)), int64(scoreWeight(p, energyaware.Name))
		total := func(i int) int64 { return wTF*tf[nodes[i].name] + wEA*scores[i].Score }
		if total(0) <= total(1) {
			t.Errorf("%s: the pod goes to unlinked (TopologyFit %d x %d + EnergyAware %d x %d = %d) over linked (%d x %d + %d x %d = %d); want linked: its energy is %.1f %% more",
				p.SchedulerName, tf["unlinked"], wTF, scores[1].Score, wEA, total(1), tf["linked"], wTF, scores[0].Score, wEA, total(0), more)
		}
	}
}
