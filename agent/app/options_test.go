package app

import (
	"strings"
	"testing"
	"time"
)

// Defect 4: a sample window the API refuses (status.intervalSeconds is 1
// to 3600) stops the agent at start, naming the flag and the limit, instead
// of every write being refused. --interval 2h with the default 1s samples is
// fine: intervalSeconds reports the sample window.
func TestValidateInterval(t *testing.T) {
	for _, tc := range []struct {
		interval, sample time.Duration
		wantErr          string
	}{
		{5 * time.Second, time.Second, ""},
		{2 * time.Hour, time.Second, ""},
		{time.Hour, time.Hour, ""},
		{2 * time.Hour, 2 * time.Hour, "--sample-interval 2h0m0s: the NodeTelemetry API takes at most 1h0m0s (status.intervalSeconds 3600)"},
		{50 * time.Millisecond, time.Second, "--interval 50ms: must be at least 100ms"},
	} {
		o := NewOptions()
		o.HostRoot = t.TempDir()
		o.NodeName = "n"
		o.Interval, o.SampleInterval = tc.interval, tc.sample
		o.Complete()
		err := o.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("--interval %v: %v, want no error", tc.interval, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("--interval %v: %v, want an error containing %q", tc.interval, err, tc.wantErr)
		}
	}
}
