// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/telesched/telesched/agent"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/nvml"
	"github.com/telesched/telesched/agent/nvml/nvmltest"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/version"
)

// TestHungNVMLCallDoesNotStopTheSample runs the agent's collectors (as
// --nvml-timeout=50ms wires them) over a real two-socket machine's /proc
// and /sys with eight GPUs, one of whose power readings never returns.
// Each sample still completes and carries the CPU, memory, thermal, power
// and NUMA sections; the gpu source is Failed with reason NVMLTimeout,
// naming the timeout; the second sample does not enter the stuck call
// again. The test asserts nothing about how long a sample takes.
func TestHungNVMLCallDoesNotStopTheSample(t *testing.T) {
	const machine = "../testdata/corpus/amd-epyc-7313-2socket-nps4"
	host := t.TempDir()
	copyHostTree(t, filepath.Join(machine, "root"), host)

	srv, _ := nvmltest.NewDGXA100()
	for i := range srv.Devices {
		nvmltest.Steady(nvmltest.Device(srv, i))
	}
	hang := make(chan struct{})
	var hangOnce sync.Once
	unhang := func() { hangOnce.Do(func() { close(hang) }) }
	t.Cleanup(unhang)
	stuck := nvmltest.Device(srv, 5)
	stuck.GetPowerUsageFunc = func() (uint32, gonvml.Return) {
		<-hang
		return 250_000, gonvml.SUCCESS
	}

	o := NewOptions()
	o.HostRoot, o.NodeName = host, "n"
	o.NVMLLibrary, o.NVML, o.NVMLTimeout = nvml.NewWith(srv), true, 50*time.Millisecond
	o.Complete()
	list := sources(o, hostfs.New(host))
	t.Cleanup(func() {
		unhang()
		closeCollectors(list)
	})
	sampler, err := agent.NewSampler(agent.SamplerConfig{
		Collectors: list, Interval: 10 * time.Second, AgentVersion: version.Get(),
		PowerModel: o.PowerModel, ThermalModel: o.ThermalModel, Heat: o.Heat,
	})
	if err != nil {
		t.Fatal(err)
	}
	// observe takes a sample; the bound only stops a test whose sample
	// never completes, a correct run is never near it.
	observe := func(at time.Time) agent.Observation {
		t.Helper()
		done := make(chan agent.Observation, 1)
		go func() { done <- sampler.Observe(context.Background(), at) }()
		select {
		case obs := <-done:
			return obs
		case <-time.After(time.Minute):
			t.Fatalf("the sample at %v has not completed after a minute: it waits on the stuck NVML call", at)
			return agent.Observation{}
		}
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	first := observe(t0)
	// The machine's counters a sample later, so that rates (CPU, RAPL
	// power) have a window.
	copyHostTree(t, filepath.Join(machine, "second"), host)
	second := observe(t0.Add(10 * time.Second))

	gpuSource := func(obs agent.Observation) telemetryv1alpha1.SourceStatus {
		for _, s := range obs.Status.Sources {
			if s.Name == telemetryv1alpha1.SourceGPU {
				return s
			}
		}
		return telemetryv1alpha1.SourceStatus{}
	}
	for _, tc := range []struct {
		name       string
		obs        agent.Observation
		wantPrefix string
	}{
		{"first sample: times out", first, "NVML did not return within 50ms (--nvml-timeout), reading GPU 5, since "},
		{"second sample: still stuck", second, "an NVML call is still stuck, reading GPU 5, since "},
	} {
		got := gpuSource(tc.obs)
		want := telemetryv1alpha1.SourceStatus{Name: telemetryv1alpha1.SourceGPU, State: telemetryv1alpha1.SourceFailed, Reason: "NVMLTimeout"}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(telemetryv1alpha1.SourceStatus{}, "Message")); diff != "" {
			t.Errorf("%s: gpu source (-want +got):\n%s", tc.name, diff)
		}
		if !strings.HasPrefix(got.Message, tc.wantPrefix) {
			t.Errorf("%s: gpu source message %q, want it to start %q", tc.name, got.Message, tc.wantPrefix)
		}
		if tc.obs.Status.GPUs != nil {
			t.Errorf("%s: %d GPUs published from a collection that did not finish", tc.name, len(tc.obs.Status.GPUs))
		}
	}

	// The rest of the second sample is there, as on the machine without
	// GPUs (its golden.yaml).
	st := second.Status
	sections := map[string]bool{
		"cpu": st.CPU != nil, "memory": st.Memory != nil, "thermal": st.Thermal != nil,
		"power": st.Power != nil, "numa": len(st.NUMA) > 0,
	}
	want := map[string]bool{"cpu": true, "memory": true, "thermal": true, "power": true, "numa": true}
	if diff := cmp.Diff(want, sections); diff != "" {
		t.Errorf("sections published beside the stuck GPUs (-want +got):\n%s", diff)
	}
	if n := len(stuck.GetPowerUsageCalls()); n != 1 {
		t.Errorf("the stuck power reading was entered %d times over two samples, want 1", n)
	}
}

// copyHostTree copies a host tree over dst, symbolic links as links.
func copyHostTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			_ = os.Remove(target)
			return os.Symlink(link, target)
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
