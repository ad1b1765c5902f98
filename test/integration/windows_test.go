// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"testing"
	"time"

	"github.com/telesched/telesched/agent/app"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/sandbox/hosttree"
)

// TestAgentPublishesWindows: the agent's status.windows, with every
// series of a host that has sensors and a power meter, passes the API
// server's schema and reads back as written.
func TestAgentPublishesWindows(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	ctx := t.Context()
	const name = "windows"
	schedNode(ctx, t, c, name)
	host, err := hosttree.New(t.TempDir(), hosttree.Spec{CPUs: 4, NUMANodes: 1, Packages: 1, MemoryKiB: 16 << 20, IdleWatts: 80, FullLoadWatts: 200, CritMilliCelsius: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := adminKubeconfig(t)
	opts := app.NewOptions()
	opts.Kubeconfig, opts.MetricsAddress, opts.HealthAddress, opts.NVML = kubeconfig, "", "", false
	// runAgentOn samples every 500ms: 6 samples, published from the 3rd.
	opts.Window = 3 * time.Second
	runAgentOn(t, host, name, opts)

	var w *telemetryv1alpha1.WindowsStatus
	waitFor(t, "status.windows with cpu, memory, thermal margin and watts", 60*time.Second, func() bool {
		nt := getNT(ctx, c, name)
		if nt == nil || nt.Status.Windows == nil {
			return false
		}
		w = nt.Status.Windows
		return w.CPUPercent != nil && w.MemoryPercent != nil && w.ThermalMarginCelsius != nil && w.Watts != nil
	})
	t.Logf("status.windows: %+v cpu %+v memory %+v margin %+v watts %+v", *w, *w.CPUPercent, *w.MemoryPercent, *w.ThermalMarginCelsius, *w.Watts)
	if w.DurationSeconds != 3 || w.Samples < 3 || w.Samples > 6 {
		t.Errorf("durationSeconds %d, samples %d; want 3 and 3 to 6", w.DurationSeconds, w.Samples)
	}
	for _, u := range []*telemetryv1alpha1.UsageWindow{w.CPUPercent, w.MemoryPercent, w.Watts} {
		if u.P50 > u.P90 || u.P90 > u.Max {
			t.Errorf("percentiles out of order: %+v", *u)
		}
	}
	if m := w.ThermalMarginCelsius; m.Min > m.P10 || m.P10 > m.P50 {
		t.Errorf("margin percentiles out of order: %+v", *m)
	}
}
