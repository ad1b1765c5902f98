// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestProbesAnsweredWhileIdleClientsHoldMetrics runs the agent (no
// publishing, an empty host) and opens 64 idle connections to its metrics
// server, four times --metrics-max-connections (16): they hold every one
// of its connections for the 5s header timeout. The kubelet's probes, on
// --health-probe-bind-address, are answered within a 1s client timeout
// all the same, three times in a row (the liveness probe's
// failureThreshold), while a scrape is not.
func TestProbesAnsweredWhileIdleClientsHoldMetrics(t *testing.T) {
	o := NewOptions()
	o.HostRoot, o.NodeName = t.TempDir(), "n"
	o.Publish, o.NVML = false, false
	o.Interval, o.SampleInterval = time.Second, 100*time.Millisecond
	o.MetricsAddress, o.HealthAddress = freeAddress(t), freeAddress(t)
	o.Complete()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	client := &http.Client{Timeout: time.Second}
	get := func(addr, path string) (int, error) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	// Up, and Ready once a sample has completed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, err := get(o.HealthAddress, "/readyz")
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not get ready: /readyz %d, %v", code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	for range 64 {
		c, err := net.Dial("tcp", o.MetricsAddress)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	time.Sleep(100 * time.Millisecond) // the first 16 accepted

	for i := 1; i <= 3; i++ {
		for _, path := range []string{"/healthz", "/readyz"} {
			code, err := get(o.HealthAddress, path)
			switch {
			case err != nil:
				t.Errorf("probe %d: %v", i, err)
			case code != http.StatusOK:
				t.Errorf("probe %d: %s answered %d, want 200", i, path, code)
			}
		}
	}
	// The cap still holds the metrics server: a scrape waits behind the
	// idle clients.
	if _, err := get(o.MetricsAddress, "/metrics"); err == nil || !strings.Contains(err.Error(), "Client.Timeout") {
		t.Errorf("a scrape while 64 idle clients held the metrics server: err %v, want a client timeout (the connection cap)", err)
	}
}
