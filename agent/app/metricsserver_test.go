// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsServerLimits: connections that send no request, or stop
// halfway through one, hold at most --metrics-max-connections of the
// server's slots and are dropped after the header timeout; a scrape that
// arrives while they hold every slot is served once they are gone.
func TestMetricsServerLimits(t *testing.T) {
	saved := metricsLimits
	t.Cleanup(func() { metricsLimits = saved })
	metricsLimits.readHeader = 300 * time.Millisecond

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv, err := serveMetrics(t.Context(), addr, 2, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdownServer(srv) })

	// Two clients take both slots: one sends nothing, one half a request.
	var stuck []net.Conn
	for _, send := range []string{"", "GET /metrics HTTP/1.1\r\nHost: x\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if send != "" {
			if _, err := io.WriteString(c, send); err != nil {
				t.Fatal(err)
			}
		}
		stuck = append(stuck, c)
	}
	time.Sleep(50 * time.Millisecond) // both accepted

	start := time.Now()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("a scrape while stuck clients held every slot: %v", err)
	}
	resp.Body.Close()
	waited := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d", resp.StatusCode)
	}
	// The scrape could only be accepted once a stuck client was dropped.
	if waited < metricsLimits.readHeader/2 {
		t.Errorf("scrape served after %v, before any stuck client could have been dropped (header timeout %v): the connection cap did not hold", waited, metricsLimits.readHeader)
	}
	for i, c := range stuck {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("stuck client %d: not disconnected by the server: %v", i, err)
		}
	}
	t.Logf("scrape served after %v, once the server dropped the stuck clients", waited.Round(time.Millisecond))
}
