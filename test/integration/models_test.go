// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/telesched/telesched/agent/app"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/sandbox/hosttree"
	"github.com/telesched/telesched/sandbox/sim"
	"github.com/telesched/telesched/test/fixtures"
)

// TestAgentRestartKeepsModels: an agent learns the node's power curve and
// thermal response and is stopped; a new agent on the same node publishes
// a usable model (fitted power curve, thermal model) in its very first
// sample, where a fresh agent would have to learn it again: from its state
// file, and, with the file gone (a new pod), from its NodeTelemetry.
func TestAgentRestartKeepsModels(t *testing.T) {
	needControlPlane(t)
	const interval = time.Second
	c := newClients(t)
	ctx := t.Context()
	node, err := c.kube.CoreV1().Nodes().Create(ctx, fixtures.Node("restart-node"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := adminKubeconfig(t)
	// A simulated 32-CPU node on the Dell PowerEdge R740's SPECpower_ssj2008
	// curve (power_ssj2008-20170829-00780), read through its RAPL counters
	// and coretemp sensors.
	host, err := sim.NewNode(t.TempDir(), sim.NodeSpec{
		Name: node.Name, BaseUtilization: 0.2,
		Curve: [11]float64{52.3, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457},
		Host:  hosttree.Spec{CPUs: 32, NUMANodes: 1, Packages: 1, MemoryKiB: 64 << 20, CritMilliCelsius: 100_000},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The stepping goroutine writes into the host tree: it must be gone
	// before t.TempDir's cleanup removes the tree (a write racing the
	// removal leaves "directory not empty").
	hostCtx, stopHost := context.WithCancel(ctx)
	stepped := make(chan struct{})
	defer func() { stopHost(); <-stepped }()
	go func() {
		defer close(stepped)
		tick := time.NewTicker(interval / sim.StepsPerInterval)
		defer tick.Stop()
		for {
			select {
			case <-hostCtx.Done():
				return
			case <-tick.C:
				if err := host.Step(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()

	stateFile := filepath.Join(t.TempDir(), "models.json")
	start := func() (stop func()) {
		opts := app.NewOptions()
		opts.StateFile, opts.StateEvery = stateFile, 2*time.Second
		opts.HostRoot, opts.NodeName, opts.Kubeconfig, opts.Interval = host.Dir, node.Name, kubeconfig, interval
		opts.MetricsAddress, opts.HealthAddress, opts.NVML, opts.PodResources = "", "", false, ""
		opts.Publisher.RateLimitQPS, opts.Publisher.RateLimitBurst = 10, 10
		opts.PowerModel.MinSamples = 8
		opts.ThermalModel.MinSamples, opts.ThermalModel.Memory = 8, 60
		opts.Complete()
		if err := opts.Validate(); err != nil {
			t.Fatal(err)
		}
		agentCtx, cancel := context.WithCancel(klog.NewContext(ctx, ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))))
		done := make(chan error, 1)
		go func() { done <- app.Run(agentCtx, opts, io.Discard) }()
		return func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("agent stopped with %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("agent did not stop")
			}
		}
	}
	get := func() *telemetryv1alpha1.NodeTelemetryStatus {
		u, err := c.dyn.Resource(ntResource).Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return decodeStatus(t, u)
	}

	// The first agent learns while the node's load sweeps 5 % to 80 %.
	stop := start()
	for _, u := range []float64{0.05, 0.2, 0.4, 0.6, 0.8, 0.6, 0.3, 0.1, 0.5, 0.7, 0.2, 0.45} {
		host.Sweep(u)
		time.Sleep(2 * interval)
	}
	host.EndSweep()
	var learned *telemetryv1alpha1.NodeTelemetryStatus
	waitFor(t, "a fitted power curve and a thermal model", 30*time.Second, func() bool {
		learned = get()
		return learned != nil && learned.Power != nil && learned.Power.Model != nil && learned.Power.Model.Basis == telemetryv1alpha1.PowerModelFitted &&
			learned.Thermal != nil && learned.Thermal.Model != nil
	})
	stop()
	// The agent may have published again between the read above and its
	// stop: what a restart starts from is the last write, read now.
	learned = get()
	t.Logf("learned: power model %d samples over %d%%, curve %v ± %v; thermal model %+v",
		learned.Power.Model.Samples, learned.Power.Model.UtilizationSpreadPercent, learned.Power.Model.CurveWatts, learned.Power.Model.CurveUncertaintyWatts, *learned.Thermal.Model)

	restart := func(what string) *telemetryv1alpha1.NodeTelemetryStatus {
		t.Helper()
		// The node's NodeTelemetry now holds the last sample of the
		// previous agent. Watch for the new agent's first write.
		w, err := c.dyn.Resource(ntResource).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node.Name, ResourceVersion: resourceVersion(t, c, node.Name)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		restartedAt := time.Now()
		stop = start()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case ev := <-w.ResultChan():
				if ev.Type != watch.Modified {
					continue
				}
				if st := decodeStatus(t, ev.Object.(*unstructured.Unstructured)); st.SampleTime.After(restartedAt) {
					t.Logf("%s: the first sample published %v after the agent's start", what, time.Since(restartedAt).Round(time.Millisecond))
					return st
				}
			case <-timeout:
				t.Fatalf("%s: no sample in 30s", what)
			}
		}
	}
	check := func(what string, first *telemetryv1alpha1.NodeTelemetryStatus, minSamples int32) {
		t.Helper()
		m := first.Power.Model
		if m == nil || !m.Ready || m.Basis != telemetryv1alpha1.PowerModelFitted || m.Samples < minSamples || len(m.CurveWatts) != 11 {
			t.Fatalf("%s: first sample's power model %+v, want a fitted curve of %d+ samples", what, m, minSamples)
		}
		for k, w := range m.CurveWatts {
			if want := learned.Power.Model.CurveWatts[k]; w < want-5 || w > want+5 {
				t.Errorf("%s: at %d%%: %d W, %d W before the restart", what, k*10, w, want)
			}
		}
		if tm := first.Thermal.Model; tm == nil || tm.Sensor != learned.Thermal.Model.Sensor || tm.MilliCelsiusPerWatt == 0 {
			t.Errorf("%s: first sample's thermal model %+v, want the one learned (%+v)", what, tm, *learned.Thermal.Model)
		}
	}

	// Restarted with its state file: the bins themselves.
	check("from the state file", restart("from the state file"), learned.Power.Model.Samples)
	stop()
	// A new pod on the node: no state file, the NodeTelemetry's curve.
	if err := os.Remove(stateFile); err != nil {
		t.Fatal(err)
	}
	check("from the NodeTelemetry", restart("from the NodeTelemetry"), 1)
	stop()
}

func decodeStatus(t *testing.T, u *unstructured.Unstructured) *telemetryv1alpha1.NodeTelemetryStatus {
	t.Helper()
	data, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var nt telemetryv1alpha1.NodeTelemetry
	if err := json.Unmarshal(data, &nt); err != nil {
		t.Fatal(err)
	}
	return &nt.Status
}

func resourceVersion(t *testing.T, c clients, name string) string {
	t.Helper()
	u, err := c.dyn.Resource(ntResource).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetResourceVersion()
}
