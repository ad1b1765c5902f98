// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
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

// TestValidateFailClosedFlags checks the flags of the agent's fail-closed
// behaviour: the sensor hold, the NVML timeout and the /healthz window,
// which must outlast one sample held up by NVML.
func TestValidateFailClosedFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     func(o *Options)
		wantErr string
	}{
		{"defaults", func(o *Options) {}, ""},
		{"no hold", func(o *Options) { o.SensorHold = 0 }, ""},
		{"negative hold", func(o *Options) { o.SensorHold = -time.Second }, "--sensor-hold-duration -1s: must not be negative"},
		{"negative taint hold", func(o *Options) { o.OverheatingTaintHold = -time.Minute }, "--overheating-taint-hold -1m0s: must not be negative"},
		{"throttle counters every sample", func(o *Options) { o.ThrottleInterval = 0 }, ""},
		{"no directory kept open", func(o *Options) { o.HostDirFDs = 0 }, ""},
		{"negative directory count", func(o *Options) { o.HostDirFDs = -1 }, "--host-dir-fds -1: must not be negative"},
		{"negative throttle interval", func(o *Options) { o.ThrottleInterval = -time.Second }, "--throttle-interval -1s: must not be negative"},
		{"GC target too low", func(o *Options) { o.GCPercent = 5 }, "--gc-percent 5: must be at least 10"},
		{"max procs negative", func(o *Options) { o.MaxProcs = -1 }, "--max-procs -1: must not be negative"},
		{"max procs the runtime default", func(o *Options) { o.MaxProcs = 0 }, ""},
		{"zero NVML timeout", func(o *Options) { o.NVMLTimeout = 0 }, "--nvml-timeout 0s: must be positive"},
		{"no missed intervals", func(o *Options) { o.HealthzMissedIntervals = 0 }, "--healthz-missed-intervals 0: must be at least 1"},
		// 3 × 5s = 15s
		{"NVML timeout as long as the /healthz window", func(o *Options) { o.NVMLTimeout = 15 * time.Second },
			"--nvml-timeout 15s: must be shorter than --healthz-missed-intervals × --interval (15s)"},
		{"NVML timeout within a longer window", func(o *Options) { o.NVMLTimeout, o.HealthzMissedIntervals = 15*time.Second, 4 }, ""},
		{"long NVML timeout without NVML", func(o *Options) { o.NVMLTimeout, o.NVML = time.Minute, false }, ""},
		{"long NVML timeout without probes", func(o *Options) { o.NVMLTimeout, o.HealthAddress = time.Minute, "" }, ""},
		{"probes on the metrics address", func(o *Options) { o.HealthAddress = o.MetricsAddress },
			`--health-probe-bind-address ":9102": the same as --metrics-bind-address`},
		// 5m / 1s = 300 samples
		{"default window", func(o *Options) {}, ""},
		{"no window", func(o *Options) { o.Window = 0 }, ""},
		{"negative window", func(o *Options) { o.Window = -time.Second }, "--window -1s: must not be negative"},
		{"window of one sample", func(o *Options) { o.Window = 1500 * time.Millisecond },
			"--window 1.5s with --sample-interval 1s: window 1.5s: must hold at least two samples of 1s (at least 2s)"},
		// 2h / 1s = 7200 samples
		{"window past the ring's bound", func(o *Options) { o.Window = 2 * time.Hour },
			"--window 2h0m0s with --sample-interval 1s: window 2h0m0s: holds 7200 samples of 1s, more than 3600"},
		// the default 5m against 1h samples: taken as 2h
		{"default window with long samples", func(o *Options) { o.Interval, o.SampleInterval = time.Hour, time.Hour }, ""},
		// the default 10s against a 1.5s window (3 x 500ms): taken as 750ms
		{"default NVML timeout with a short interval", func(o *Options) { o.Interval = 500 * time.Millisecond; o.SampleInterval = 100 * time.Millisecond }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { validated(t, tc.set, tc.wantErr) })
	}
}

// TestValidateSpeedFlags: a bad speed table or override stops the agent
// at start, naming the flag, the file and the row.
func TestValidateSpeedFlags(t *testing.T) {
	dir := t.TempDir()
	bad := dir + "/bad.yaml"
	if err := os.WriteFile(bad, []byte("cpus:\n- {match: \"EPYC\", milli: 0, basis: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := dir + "/good.yaml"
	if err := os.WriteFile(good, []byte("cpus:\n- {match: \"EPYC 7313\", milli: 1250, basis: ours}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		set     func(o *Options)
		wantErr string
	}{
		{"shipped table alone", func(o *Options) {}, ""},
		{"operator table", func(o *Options) { o.SpeedTable = good }, ""},
		{"bad row", func(o *Options) { o.SpeedTable = bad }, `--speed-table: speed table ` + bad + `: cpus[0] ("EPYC"): milli 0 is outside 1 to 100000`},
		{"missing file", func(o *Options) { o.SpeedTable = dir + "/none.yaml" }, "--speed-table: open " + dir + "/none.yaml"},
		{"negative override", func(o *Options) { o.CPUCoreSpeedMilli = -1 }, "--cpu-core-speed-milli -1: must be 0 (look it up) to 100000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validated(t, tc.set, tc.wantErr)
			if tc.name == "operator table" {
				if m, src, _ := o.Speed.CPU("AMD EPYC 7313 16-Core Processor"); m != 1250 || src != "operator" {
					t.Errorf("operator table: %d from %s, want 1250 from the operator", m, src)
				}
			}
		})
	}
}

// validated is the default options changed by set, completed and
// validated, checking Validate's error against wantErr ("": none; else a
// part of it).
func validated(t *testing.T, set func(o *Options), wantErr string) *Options {
	t.Helper()
	o := NewOptions()
	o.HostRoot, o.NodeName = t.TempDir(), "n"
	set(o)
	o.Complete()
	err := o.Validate()
	switch {
	case wantErr == "" && err != nil:
		t.Errorf("Validate() = %v, want no error", err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Errorf("Validate() = %v, want an error containing %q", err, wantErr)
	}
	return o
}
