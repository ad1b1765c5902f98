// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/telesched/telesched/agent"
	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/nvml"
	"github.com/telesched/telesched/agent/nvml/nvmltest"
	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/status"
)

// TestHealthzFailsAfterMissedIntervals pins /healthz on a fake clock: 200
// while a sample completed within --healthz-missed-intervals (3) ×
// --interval (5s) = 15s, then 503 saying when the last sample completed
// and how long ago; before the first sample, how long since the start.
func TestHealthzFailsAfterMissedIntervals(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const prefix = "no sample completed in 3 intervals of 5s (--healthz-missed-intervals, --interval): "
	type response struct {
		Code int
		Body string
	}
	for _, tc := range []struct {
		name    string
		sampled []time.Duration // after start
		at      time.Duration   // after start
		want    response
	}{
		{"starting, no sample yet", nil, 15 * time.Second, response{200, "ok\n"}},
		{"no sample since the start", nil, 15*time.Second + time.Millisecond,
			response{503, prefix + "none since the agent started at 2025-01-01T00:00:00Z, 15.001s ago\n"}},
		// 30s - 20s = 10s <= 15s
		{"a sample 10s ago", []time.Duration{time.Second, 20 * time.Second}, 30 * time.Second, response{200, "ok\n"}},
		// 35s - 20s = 15s: not more than 15s
		{"a sample exactly 15s ago", []time.Duration{20 * time.Second}, 35 * time.Second, response{200, "ok\n"}},
		// 36s - 20s = 16s > 15s
		{"the last sample 16s ago", []time.Duration{time.Second, 20 * time.Second}, 36 * time.Second,
			response{503, prefix + "the last completed at 2025-01-01T00:00:20Z, 16s ago\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			live := newLiveness(clk, DefaultHealthzMissedIntervals, DefaultInterval)
			for _, at := range tc.sampled {
				clk.SetTime(start.Add(at))
				live.sampled()
			}
			clk.SetTime(start.Add(tc.at))
			rec := httptest.NewRecorder()
			live.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if diff := cmp.Diff(tc.want, response{rec.Code, rec.Body.String()}); diff != "" {
				t.Errorf("/healthz (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentStuckInNVMLFailsHealthz runs the agent's loop with a GPU whose
// NVML calls stop returning after the first two samples, under an NVML
// timeout far longer than the test (as an agent without one is): no sample
// completes any more, and /healthz turns 503 after 3 intervals of 100ms,
// saying when the last sample completed. The test waits for the 503 only;
// it asserts nothing about how soon it comes.
func TestAgentStuckInNVMLFailsHealthz(t *testing.T) {
	srv, _ := nvmltest.NewDGXA100()
	for i := range srv.Devices {
		nvmltest.Steady(nvmltest.Device(srv, i))
	}
	var mu sync.Mutex
	calls := 0
	hang := make(chan struct{})
	var hangOnce sync.Once
	unhang := func() { hangOnce.Do(func() { close(hang) }) }
	t.Cleanup(unhang)
	srv.DeviceGetCountFunc = func() (int, gonvml.Return) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n > 2 {
			<-hang
		}
		return len(srv.Devices), gonvml.SUCCESS
	}
	gpus := collector.NewGPUCollector(nvml.NewWith(srv), hostfs.New(t.TempDir())).WithTimeout(time.Hour)
	sampler, err := agent.NewSampler(agent.SamplerConfig{
		Collectors:   []collector.Collector{gpus},
		Interval:     100 * time.Millisecond,
		AgentVersion: "test",
		PowerModel:   powermodel.DefaultConfig(),
		Heat:         status.DefaultHeatConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.NodeName, o.Publish = "n", false
	o.Interval, o.SampleInterval, o.HealthzMissedIntervals = 100*time.Millisecond, 100*time.Millisecond, 3
	o.MetricsAddress, o.HealthAddress = freeAddress(t), freeAddress(t)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop(ctx, o, sampler) }()
	t.Cleanup(func() {
		cancel()
		unhang()
		<-done
		gpus.Close()
	})

	var code int
	var body string
	deadline := time.Now().Add(time.Minute)
	for code != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatalf("/healthz still answers %d %q a minute after NVML stopped returning", code, body)
		}
		time.Sleep(10 * time.Millisecond)
		resp, err := http.Get("http://" + o.HealthAddress + "/healthz")
		if err != nil {
			continue // not serving yet
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body = resp.StatusCode, string(b)
	}
	want := regexp.MustCompile(`^no sample completed in 3 intervals of 100ms \(--healthz-missed-intervals, --interval\): the last completed at \S+Z, [0-9.]+m?s ago\n$`)
	if !want.MatchString(body) {
		t.Errorf("/healthz body %q, want it to match %v", body, want)
	}
}

// freeAddress returns a loopback address with a port free a moment ago.
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestReady: /readyz is what the scheduler takes for the agent's word that
// its last NodeTelemetry still holds (--telemetry-max-age-ready-agent), so
// it fails once sampling stops, once no write came within the heartbeat
// plus three intervals, and once writes have failed for three intervals.
func TestReady(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	o := &Options{Interval: 5 * time.Second, Publish: true}
	o.Publisher.Heartbeat = 5 * time.Minute
	at := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	for _, tc := range []struct {
		name              string
		sample, publish   time.Duration // ago
		failing           int64
		publishing        bool
		wantErrContaining string
	}{
		{name: "sampling and written 4m ago", sample: time.Second, publish: 4 * time.Minute, publishing: true},
		{name: "no sample for 16s", sample: 16 * time.Second, publish: time.Second, publishing: true, wantErrContaining: "no sample since"},
		{name: "no write for the heartbeat plus 16s", sample: time.Second, publish: 5*time.Minute + 16*time.Second, publishing: true, wantErrContaining: "no NodeTelemetry write since"},
		{name: "writes failing for 10s", sample: time.Second, publish: time.Minute, failing: at(10 * time.Second), publishing: true},
		{name: "writes failing for 16s", sample: time.Second, publish: time.Minute, failing: at(16 * time.Second), publishing: true, wantErrContaining: "NodeTelemetry writes failing since 2026-11-26T11:59:44Z"},
		{name: "not publishing", sample: time.Second, publish: time.Hour, failing: at(time.Hour)},
	} {
		o.Publish = tc.publishing
		err := ready(o, now, now.Add(-tc.sample), now.Add(-tc.publish), tc.failing)
		switch {
		case tc.wantErrContaining == "" && err != nil:
			t.Errorf("%s: not ready: %v", tc.name, err)
		case tc.wantErrContaining != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErrContaining)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.wantErrContaining)
		}
	}
}
