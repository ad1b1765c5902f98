// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/plugins/internal/nodeset"
)

// windowed is status(cpu, mem) with a 5m window whose cpu and memory p90
// are cpuP90 and memP90 (p50 10 points lower, max 10 higher, within 100).
func windowed(cpu, mem, cpuP90, memP90 int32) *telemetryv1alpha1.NodeTelemetryStatus {
	st := status(cpu, mem, 0)
	st.Windows = &telemetryv1alpha1.WindowsStatus{DurationSeconds: 300, Samples: 300,
		CPUPercent:    &telemetryv1alpha1.UsageWindow{P50: cpuP90 - 10, P90: cpuP90, Max: max(cpu, min(cpuP90+10, 100))},
		MemoryPercent: &telemetryv1alpha1.UsageWindow{P50: memP90 - 10, P90: memP90, Max: max(mem, min(memP90+10, 100))},
	}
	return st
}

// TestFilterOnWindow: with usage P90 the thresholds apply to the window's
// 90th percentile, so a short spike (instant above the threshold, p90
// below) leaves the node in and sustained load (p90 above) keeps it out.
// The pod asks 2 of 16 cores: +12.5 points of CPU; 1Gi of 64Gi: +1.56
// points of memory.
func TestFilterOnWindow(t *testing.T) {
	for _, tc := range []struct {
		name       string
		usage      config.UsageType
		status     *telemetryv1alpha1.NodeTelemetryStatus
		wantReason string // "" fits
	}{
		// p90 50 + 12.5 = 62.5 <= 80, though the last sample says 95.
		{name: "short spike, P90: fits", usage: config.UsageP90, status: windowed(95, 50, 50, 50)},
		// instant 95 + 12.5 = 107.5 > 80: the default judges the spike.
		{name: "short spike, Instant: refused", usage: config.UsageInstant, status: windowed(95, 50, 50, 50),
			wantReason: "node cpu 107.50 percent > threshold 80 percent (measured 95, +12.50 placed since the sample and this pod)"},
		// p90 75 + 12.5 = 87.5 > 80, though the last sample says 40.
		{name: "sustained load, P90: refused", usage: config.UsageP90, status: windowed(40, 50, 75, 50),
			wantReason: "node cpu 87.50 percent > threshold 80 percent (p90 over 5m0s 75, +12.50 placed since the sample and this pod)"},
		// max is 95, the spike: 107.5 > 80.
		{name: "short spike, Max: refused", usage: config.UsageMax, status: windowed(95, 50, 50, 50),
			wantReason: "node cpu 107.50 percent > threshold 80 percent (max over 5m0s 95, +12.50 placed since the sample and this pod)"},
		// p50 65 + 12.5 = 77.5 <= 80 where p90 75 would refuse.
		{name: "sustained load, P50: fits", usage: config.UsageP50, status: windowed(40, 50, 75, 50)},
		// memory p90 89 + 1.56 = 90.56 > 90.
		{name: "memory, P90: refused", usage: config.UsageP90, status: windowed(10, 20, 10, 89),
			wantReason: "node memory 90.56 percent > threshold 90 percent (p90 over 5m0s 89, +1.56 placed since the sample and this pod)"},
		// No window: the last sample, 95 + 12.5, and the reason says so.
		{name: "no window, P90: the last sample stands in", usage: config.UsageP90, status: status(95, 50, 0),
			wantReason: "node cpu 107.50 percent > threshold 80 percent (measured 95 in the last sample: the node publishes no cpu window for p90, +12.50 placed since the sample and this pod)"},
		// A window without cpu: cpu from the last sample, memory from p90.
		{name: "no cpu window, P90: the last sample stands in for cpu", usage: config.UsageP90, status: func() *telemetryv1alpha1.NodeTelemetryStatus {
			st := windowed(95, 50, 50, 50)
			st.Windows.CPUPercent = nil
			return st
		}(), wantReason: "(measured 95 in the last sample: the node publishes no cpu window for p90, +12.50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := newCache()
			observe(cache, "n", tc.status)
			args := *configv1.DefaultLoadAwareArgs()
			args.Usage = tc.usage
			pl := New(args, cache)
			p := pod("2")
			cs := framework.NewCycleState()
			if _, st := pl.PreFilter(context.Background(), cs, p, nil); !st.IsSuccess() && !st.IsSkip() {
				t.Fatalf("PreFilter: %v", st)
			}
			st := pl.Filter(context.Background(), cs, p, nodeInfo("n", nil))
			switch {
			case tc.wantReason == "" && !st.IsSuccess():
				t.Errorf("Filter = %v, want success", st)
			case tc.wantReason != "" && (st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), tc.wantReason)):
				t.Errorf("Filter = %v, want Unschedulable containing %q", st, tc.wantReason)
			}
		})
	}
}

// TestScoreOnWindow: with usage P90 a node's score is that of its p90, not
// of its last sample: a node in a short spike outranks one under
// sustained load.
func TestScoreOnWindow(t *testing.T) {
	cache := newCache()
	observe(cache, "spike", windowed(95, 50, 30, 50))
	observe(cache, "sustained", windowed(40, 50, 70, 50))
	args := *configv1.DefaultLoadAwareArgs()
	args.Usage = config.UsageP90
	pl := New(args, cache)
	p := pod("2")
	cs := framework.NewCycleState()
	if st := pl.PreScore(context.Background(), cs, p, nil); !st.IsSuccess() {
		t.Fatalf("PreScore: %v", st)
	}
	got := map[string]int64{}
	for _, n := range []string{"spike", "sustained"} {
		s, st := pl.Score(context.Background(), cs, p, nodeInfo(n, nil))
		if !st.IsSuccess() {
			t.Fatalf("Score(%s): %v", n, st)
		}
		got[n] = s
	}
	// spike: cpu p90 30 + 12.5 = 42.5, memory 50 + 1.56: 51.56 the higher;
	// sustained: cpu 70 + 12.5 = 82.5.
	want := map[string]int64{"spike": spreadScore(5156), "sustained": spreadScore(8250)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

// TestPickOnWindow: with usage P90 a rejected pod is named for
// activation when the node's p90 falls under the threshold, even while its
// last sample rises, and not when only the last sample falls.
func TestPickOnWindow(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new *telemetryv1alpha1.NodeTelemetryStatus
		want     bool
	}{
		// p90 90 -> 50 (+6.25 for 1 core: 56.25 <= 80); instant 50 -> 95.
		{"p90 fell under, instant rose", windowed(50, 50, 90, 50), windowed(95, 50, 50, 50), true},
		// p90 90 -> 85: still over; instant 95 -> 20.
		{"instant fell, p90 still over", windowed(95, 50, 90, 50), windowed(20, 50, 85, 50), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { clock.Set(now) })
			args := *configv1.DefaultLoadAwareArgs()
			args.Usage = config.UsageP90
			pl := New(args, newCache())
			if got := picks(t, pl, pod("1"), "n", tc.old, tc.new); got != tc.want {
				t.Errorf("pick names the pod: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPreFilterRunsOnWindow: the fleet's LoadBound is of last samples, so
// with usage P90 it cannot prove that no node fails: a node idle now whose
// p90 is over the threshold must still be filtered.
func TestPreFilterRunsOnWindow(t *testing.T) {
	cache := newCache()
	// last sample 10% (10 + 12.5 fits by the bound), p90 95%.
	observe(cache, "n", windowed(10, 50, 95, 50))
	args := *configv1.DefaultLoadAwareArgs()
	args.Usage = config.UsageP90
	pl := New(args, cache)
	pl.lowered = nodeset.New(pl.lowersThreshold)
	p := pod("2")
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(context.Background(), cs, p, nil); st.IsSkip() || !st.IsSuccess() {
		t.Fatalf("PreFilter = %v, want success (the filter runs)", st.Code())
	}
	// p90 95 + 12.5 = 107.5 > 80
	want := "node cpu 107.50 percent > threshold 80 percent (p90 over 5m0s 95"
	if st := pl.Filter(context.Background(), cs, p, nodeInfo("n", nil)); !strings.Contains(st.Message(), want) {
		t.Errorf("Filter = %v, want Unschedulable containing %q", st, want)
	}
}
