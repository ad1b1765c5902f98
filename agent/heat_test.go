// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent"
	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/status"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// TestHotNodeWithUnreadableSensorIsNotReportedCool runs the sampler over a
// node whose hottest sensor, 3 °C from its critical limit, starts failing
// its reads with EIO (as a dead sensor's driver returns). For the hold time
// the published status keeps it as the hottest sensor, the node stays
// Overheating, and the thermal source is Degraded naming it; after the
// hold the sensor is left out of the thermal section while the source
// stays Degraded naming it.
func TestHotNodeWithUnreadableSensorIsNotReportedCool(t *testing.T) {
	host := t.TempDir()
	const pkg = "/sys/class/hwmon/hwmon0"
	const nvme = "/sys/class/hwmon/hwmon1"
	for p, v := range map[string]string{
		pkg + "/name": "coretemp", pkg + "/temp1_label": "Package id 0", pkg + "/temp1_input": "97000", pkg + "/temp1_crit": "100000",
		nvme + "/name": "nvme", nvme + "/temp1_label": "Composite", nvme + "/temp1_input": "40850", nvme + "/temp1_crit": "84850",
	} {
		full := filepath.Join(host, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var faults hostfs.Faults
	root := hostfs.New(host).WithFaultSet(&faults)
	sampler, err := agent.NewSampler(agent.SamplerConfig{
		Collectors:   []collector.Collector{collector.NewThermalCollector(root).WithSensorHold(time.Minute)},
		Interval:     time.Second,
		AgentVersion: "test",
		PowerModel:   powermodel.DefaultConfig(),
		Heat:         status.DefaultHeatConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}

	// seen is what the steps check of a published status.
	type seen struct {
		Hottest       string
		HottestMilli  int64
		HeadroomMilli *int64
		Overheating   string
		Thermal       telemetryv1alpha1.SourceStatus
	}
	const eio = "1 of 2 temperature sensors unreadable: coretemp/Package id 0: temp1_input: input/output error; "
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		name  string
		at    time.Duration
		fault error
		want  seen
	}{
		{
			name: "both sensors read: hot",
			at:   0,
			// headroom: 100 - 97 = 3 °C <= 5 °C: Overheating
			want: seen{"coretemp/Package id 0", 97000, ptr.To[int64](3000), "True",
				telemetryv1alpha1.SourceStatus{Name: "thermal", State: "Available"}},
		},
		{
			name:  "the hottest sensor fails: its reading is held, the node stays hot",
			at:    10 * time.Second,
			fault: syscall.EIO,
			want: seen{"coretemp/Package id 0", 97000, ptr.To[int64](3000), "True",
				telemetryv1alpha1.SourceStatus{Name: "thermal", State: "Available", Reason: "Degraded",
					Message: eio + "holding its last reading, 97.0°C read at 2025-01-01T00:00:00Z, until 2025-01-01T00:01:00Z"}},
		},
		{
			name:  "after the hold the sensor is left out, still named",
			at:    61 * time.Second,
			fault: syscall.EIO,
			// headroom: 84.85 - 40.85 = 44 °C >= 8 °C: cool
			want: seen{"nvme/Composite", 40850, ptr.To[int64](44000), "False",
				telemetryv1alpha1.SourceStatus{Name: "thermal", State: "Available", Reason: "Degraded",
					Message: eio + "left out since 2025-01-01T00:01:00Z (its last reading, 97.0°C read at 2025-01-01T00:00:00Z, was held 1m0s)"}},
		},
	} {
		faults.Set(pkg+"/temp1_input", step.fault)
		obs := sampler.Observe(context.Background(), t0.Add(step.at))
		st := obs.Status
		var got seen
		if th := st.Thermal; th != nil {
			got.Hottest, got.HottestMilli, got.HeadroomMilli = th.HottestSensor, th.HottestMilliCelsius, th.HeadroomMilliCelsius
		}
		if c := meta.FindStatusCondition(st.Conditions, telemetryv1alpha1.ConditionOverheating); c != nil {
			got.Overheating = string(c.Status)
		}
		for _, s := range st.Sources {
			if s.Name == telemetryv1alpha1.SourceThermal {
				got.Thermal = s
			}
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("%s: status (-want +got):\n%s", step.name, diff)
		}
	}
}
