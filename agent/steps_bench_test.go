// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/telesched/telesched/agent"
	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/metrics"
	"github.com/telesched/telesched/agent/nvml"
	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/publisher"
	"github.com/telesched/telesched/agent/status"
	"github.com/telesched/telesched/agent/thermalmodel"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/sandbox/hosttree"
)

// stepHost is bench-agent's host: a simulated 64-CPU, two-package,
// two-NUMA-node server with hwmon, thermal zones and RAPL.
func stepHost(b *testing.B) *hosttree.Host {
	b.Helper()
	h, err := hosttree.New(b.TempDir(), hosttree.Large)
	if err != nil {
		b.Fatal(err)
	}
	h.SetUtilization(0.4)
	h.SetTemperature(62_000)
	return h
}

// stepCollectors are the agent's collectors in app.sources' order with
// its defaults, the GPU collector over the system's NVML (absent on a node
// without GPUs) and no pod-resources socket; throttleEvery is the CPU
// collector's --throttle-interval.
func stepCollectors(root hostfs.Root, throttleEvery time.Duration) []collector.Collector {
	return []collector.Collector{
		collector.NewCPUCollector(root).WithThrottleInterval(throttleEvery),
		collector.NewMemoryCollector(root),
		collector.NewNUMACollector(root),
		collector.NewThermalCollector(root),
		collector.NewGPUCollector(nvml.New(), root),
		collector.NewPowerCollector(root),
		collector.NewPodResourcesCollector(root, ""),
	}
}

// BenchmarkSampleSteps is the cost of each step of one sample on
// bench-agent's host, after warm-up: each collector alone (in the order
// the agent runs them, on the sample the ones before it filled), the
// whole Observe (collectors, models, heat, status build and fit), the
// metrics update, the settler's deadband check, and the status's JSON.
// collect/cpu-throttle-every-sample is the CPU collector reading the
// thermal throttle counters every sample (--throttle-interval=0).
// The host's counters advance one second per sample, outside the timer.
func BenchmarkSampleSteps(b *testing.B) {
	ctx := context.Background()
	h := stepHost(b)
	root := hostfs.New(h.Dir)
	now := time.Now()
	advance := func(b *testing.B) {
		b.StopTimer()
		now = now.Add(time.Second)
		if err := h.AdvanceTo(now); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}

	list := stepCollectors(root, collector.DefaultThrottleInterval)
	every := stepCollectors(root, 0)[0]
	for i, c := range append(list, every) {
		name := "collect/" + string(c.Name())
		if i == len(list) {
			name, i = "collect/cpu-throttle-every-sample", 0
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				advance(b)
				s := &collector.Sample{Time: now}
				for _, before := range list[:i] {
					b.StopTimer()
					_ = before.Collect(ctx, s)
					b.StartTimer()
				}
				if err := c.Collect(ctx, s); err != nil && !errors.Is(err, collector.ErrWarmingUp) && !collector.IsDegraded(err) {
					var se *collector.SourceError
					if !errors.As(err, &se) || se.State != telemetryv1alpha1.SourceUnavailable {
						b.Fatal(err)
					}
				}
			}
		})
	}

	// observe opens every file by its full path; observe/dir-cache as the
	// agent does (app.Run: --host-dir-fds), relative to kept directories.
	cached := root.WithDirCache()
	defer cached.Close()
	var obs agent.Observation
	for _, v := range []struct {
		name string
		root hostfs.Root
	}{{"observe", root}, {"observe/dir-cache", cached}} {
		sampler, err := agent.NewSampler(agent.SamplerConfig{
			Collectors:   stepCollectors(v.root, collector.DefaultThrottleInterval),
			Interval:     time.Second,
			AgentVersion: "bench",
			PowerModel:   powermodel.DefaultConfig(),
			ThermalModel: thermalmodel.DefaultConfig(),
			Heat:         status.DefaultHeatConfig(),
		})
		if err != nil {
			b.Fatal(err)
		}
		for range 3 {
			advance(b)
			obs = sampler.Observe(ctx, now)
		}
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				advance(b)
				obs = sampler.Observe(ctx, now)
			}
		})
	}
	b.Run("metrics", func(b *testing.B) {
		m := metrics.New(prometheus.NewRegistry(), "bench")
		b.ReportAllocs()
		for b.Loop() {
			m.Observe(&obs)
		}
	})
	b.Run("settler", func(b *testing.B) {
		clk := clocktesting.NewFakePassiveClock(now)
		s := publisher.NewSettler(publisher.DefaultDeadbands(), 5*time.Minute, 5*time.Second, clk)
		published := obs.Status
		s.Published(&published, now)
		b.ReportAllocs()
		for b.Loop() {
			st := obs.Status
			if why := s.Hold(&st); why != "" {
				b.Fatal(why)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&obs.Status); err != nil {
				b.Fatal(err)
			}
		}
	})
}
