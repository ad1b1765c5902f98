// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/telesched/telesched/agent/kube"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// fakeAPI answers the agent's calls: its Node, and apply patches, keeping
// the CPU utilization of every status write.
type fakeAPI struct {
	mu     sync.Mutex
	writes []int32
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/nodes/"):
		_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","uid":"u"}}`)
	case r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/status"):
		var body struct {
			Status telemetryv1alpha1.NodeTelemetryStatus `json:"status"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Status.CPU == nil {
			http.Error(w, "bad status", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.writes = append(f.writes, body.Status.CPU.UtilizationPercent)
		f.mu.Unlock()
		_, _ = io.WriteString(w, `{}`)
	case r.Method == http.MethodPatch:
		_, _ = io.WriteString(w, `{}`)
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	}
}

func (f *fakeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes)
}

func (f *fakeAPI) last() int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes[len(f.writes)-1]
}

// TestPublishingLatencyAndRate drives the publisher side of the loop at the
// default flags with the samples of a host whose CPU utilization is steady
// at 30% for two minutes, then jumps between 70% and 20% every 15 seconds
// for two minutes (the load of `make bench-agent`), on a fake clock. A
// sample reads the mean utilization over the --sample-interval before it,
// as the CPU collector does from /proc/stat, so the sample straddling a
// jump reads a value between the two levels.
func TestPublishingLatencyAndRate(t *testing.T) {
	api := &fakeAPI{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	client, err := kube.New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.NodeName = "n"
	o.Complete()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	p, err := newPublishing(o, client, clk)
	if err != nil {
		t.Fatal(err)
	}

	const (
		period = 15 * time.Second
		// The jumps start 0.3s into a sample, so the sample straddling
		// each reads 30% of the old level and 70% of the new; and away
		// from the heartbeats (1s, 31s, ..., 121s).
		jumps = 125*time.Second + 300*time.Millisecond
		end   = jumps + 2*time.Minute
	)
	// utilization at el since start: 30% idle, then 70%, 20%, 70%, ...
	utilization := func(el time.Duration) float64 {
		if el < jumps {
			return 30
		}
		if (el-jumps)/period%2 == 0 {
			return 70
		}
		return 20
	}
	// mean over the sample window (el-step, el], in 10ms slices.
	step := o.SampleInterval
	measure := func(el time.Duration) int32 {
		var sum float64
		const slice = 10 * time.Millisecond
		for at := el - step + slice; at <= el; at += slice {
			sum += utilization(at)
		}
		return int32(math.Round(sum / float64(step/slice)))
	}

	var idleWrites, loadWrites int
	var latencies []time.Duration
	pendingSince, target := time.Duration(-1), 30.0
	for el := step; el <= end; el += step {
		clk.SetTime(start.Add(el))
		if u := utilization(el); u != target {
			// The jump happened in the window of this sample.
			pendingSince, target = jumps+(el-jumps)/period*period, u
		}
		st := &telemetryv1alpha1.NodeTelemetryStatus{
			SampleTime:      metav1.NewTime(clk.Now()),
			IntervalSeconds: 1,
			AgentVersion:    "test",
			CPU:             &telemetryv1alpha1.CPUStatus{LogicalCores: 8, OnlineCores: 8, UtilizationPercent: measure(el)},
			// Memory in bytes of a real host, in use as the load grows:
			// 30% -> 35 GiB free, 70% -> 22.4 GiB.
			NUMA: []telemetryv1alpha1.NUMANodeStatus{{ID: 0, CPUs: "0-7", LogicalCores: 8,
				MemoryTotalBytes: 64 << 30, MemoryFreeBytes: (64 << 30) * int64(100-measure(el)/2) / 100}},
		}
		before := api.count()
		out := p.offer(t.Context(), st)
		if out.Err != nil {
			t.Fatalf("at %v: %v", el, out.Err)
		}
		if api.count() == before {
			continue
		}
		got := api.last()
		if math.Abs(float64(got)-target) > float64(o.Publisher.Deadbands.UtilizationPoints) {
			t.Errorf("at %v: wrote cpu %d%%, a half-measured value: the host is at %.0f%% since %v", el, got, target, pendingSince)
		}
		switch {
		case el < 10*time.Second: // the first write
		case el < jumps:
			idleWrites++
		default:
			loadWrites++
		}
		if pendingSince >= 0 {
			latencies = append(latencies, el-pendingSince)
			pendingSince = -1
		}
	}

	// At idle only the heartbeat writes: one per 30s.
	perMinute := func(n int, d time.Duration) float64 { return float64(n) / d.Minutes() }
	if got := perMinute(idleWrites, jumps-10*time.Second); got > 60/o.Publisher.Heartbeat.Seconds()+0.5 {
		t.Errorf("idle: %d writes = %.1f/min, want the heartbeat's %.0f/min", idleWrites, got, 60/o.Publisher.Heartbeat.Seconds())
	}
	// Under load, one write per jump: 8 jumps in 2 minutes = 4/min.
	if got := perMinute(loadWrites, end-jumps); got > 4 {
		t.Errorf("changing load: %d writes = %.1f/min, want one per jump, 4/min", loadWrites, got)
	}
	// Every jump is published within --interval + 2s.
	if len(latencies) != 8 {
		t.Errorf("published %d of 8 jumps", len(latencies))
	}
	for i, l := range latencies {
		if l > o.Interval+2*time.Second {
			t.Errorf("jump %d published %v after it happened, want <= %v", i, l, o.Interval+2*time.Second)
		}
	}
	t.Logf("idle %d writes, changing load %d writes, latencies %v", idleWrites, loadWrites, latencies)
}
