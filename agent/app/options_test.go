package app

import (
	"strings"
	"testing"
	"time"
)

// Defect 4: an --interval the API refuses (intervalSeconds is 1 to 3600)
// stops the agent at start, naming the flag and the limit, instead of every
// write being refused.
func TestValidateInterval(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		wantErr  string
	}{
		{5 * time.Second, ""},
		{time.Hour, ""},
		{2 * time.Hour, "--interval 2h0m0s: the NodeTelemetry API takes at most 1h0m0s (status.intervalSeconds 3600)"},
		{50 * time.Millisecond, "--interval 50ms: must be at least 100ms"},
	} {
		o := NewOptions()
		o.HostRoot = t.TempDir()
		o.NodeName = "n"
		o.Interval = tc.interval
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
