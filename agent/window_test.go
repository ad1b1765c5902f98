// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/status"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// cpuSeries is a CPU collector that reports the next of its values each
// sample.
type cpuSeries struct {
	values []int32
	i      int
}

func (c *cpuSeries) Name() telemetryv1alpha1.SourceName { return telemetryv1alpha1.SourceCPU }

func (c *cpuSeries) Collect(_ context.Context, s *collector.Sample) error {
	v := c.values[c.i%len(c.values)]
	c.i++
	s.CPU = &telemetryv1alpha1.CPUStatus{LogicalCores: 4, OnlineCores: 4, UtilizationPercent: v}
	s.CPUBusy = float64(v) / 100
	return nil
}

// TestSamplerPublishesWindows: the sampler's status carries the window of
// its samples once the window holds half of them, and only the series
// whose source it has (no thermal, no power here: absent, not zero).
func TestSamplerPublishesWindows(t *testing.T) {
	// A 10s window of 1s samples needs 5. Values 10, 20, ..., 100.
	src := &cpuSeries{values: []int32{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}}
	s, err := NewSampler(SamplerConfig{
		Collectors:   []collector.Collector{src},
		Interval:     time.Second,
		AgentVersion: "test",
		PowerModel:   powermodel.DefaultConfig(),
		Heat:         status.DefaultHeatConfig(),
		Window:       10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var got []*telemetryv1alpha1.WindowsStatus
	for i := range 10 {
		got = append(got, s.Observe(context.Background(), t0.Add(time.Duration(i)*time.Second)).Status.Windows)
	}
	for i := range 4 {
		if got[i] != nil {
			t.Errorf("sample %d: windows %+v, want none before 5 samples", i+1, got[i])
		}
	}
	// 5 samples 10..50: p50 the 3rd, 30; p90 the 5th, 50.
	want5 := &telemetryv1alpha1.WindowsStatus{DurationSeconds: 10, Samples: 5, CPUPercent: &telemetryv1alpha1.UsageWindow{P50: 30, P90: 50, Max: 50}}
	if diff := cmp.Diff(want5, got[4]); diff != "" {
		t.Errorf("sample 5: windows (-want +got):\n%s", diff)
	}
	// 10 samples 10..100: p50 the 5th, 50; p90 the 9th, 90.
	want10 := &telemetryv1alpha1.WindowsStatus{DurationSeconds: 10, Samples: 10, CPUPercent: &telemetryv1alpha1.UsageWindow{P50: 50, P90: 90, Max: 100}}
	if diff := cmp.Diff(want10, got[9]); diff != "" {
		t.Errorf("sample 10: windows (-want +got):\n%s", diff)
	}
}
