// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// DefaultHealthzMissedIntervals is how many --interval may pass without a
// completed sample before /healthz fails (--healthz-missed-intervals): 15s
// at the default --interval, longer than one sample held up by NVML for the
// default --nvml-timeout (10s), so only an agent that stays stuck fails.
const DefaultHealthzMissedIntervals = 3

// liveness is /healthz: the agent is alive while its samples complete. A
// sample that never completes (a read of the host or an NVML call that
// hangs without a timeout, a deadlock) fails it, so a liveness probe
// restarts the agent rather than leaving its last sample standing.
type liveness struct {
	clock    clock.PassiveClock
	missed   int
	interval time.Duration
	started  time.Time
	// last is when the last sample completed, in Unix nanoseconds; 0
	// before the first.
	last atomic.Int64
}

// newLiveness returns the liveness of an agent that starts sampling now:
// it fails once missed intervals pass without a completed sample.
func newLiveness(clk clock.PassiveClock, missed int, interval time.Duration) *liveness {
	return &liveness{clock: clk, missed: missed, interval: interval, started: clk.Now()}
}

// sampled records that a sample completed now.
func (l *liveness) sampled() { l.last.Store(l.clock.Now().UnixNano()) }

// check says why the agent is not alive: no sample completed in the last
// missed intervals; nil when one did.
func (l *liveness) check() error {
	now := l.clock.Now()
	window := time.Duration(l.missed) * l.interval
	what := fmt.Sprintf("no sample completed in %d intervals of %v (--healthz-missed-intervals, --interval)", l.missed, l.interval)
	last := l.last.Load()
	if last == 0 {
		if age := now.Sub(l.started); age > window {
			return fmt.Errorf("%s: none since the agent started at %s, %v ago", what, l.started.UTC().Format(time.RFC3339), age.Round(time.Millisecond))
		}
		return nil
	}
	at := time.Unix(0, last)
	if age := now.Sub(at); age > window {
		return fmt.Errorf("%s: the last completed at %s, %v ago", what, at.UTC().Format(time.RFC3339), age.Round(time.Millisecond))
	}
	return nil
}

// ServeHTTP answers /healthz: 200 "ok", or 503 with why.
func (l *liveness) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if err := l.check(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}
