// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent"
	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/publisher"
	"github.com/telesched/telesched/agent/status"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/test/fixtures"
)

// families gathers reg and returns the metric names that have series.
func families(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "telesched_") {
			names = append(names, mf.GetName())
		}
	}
	sort.Strings(names)
	return names
}

func TestMetricsFromFullObservation(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v1.2.3")
	st := fixtures.FullStatus(time.Now(), 2, 8)
	obs := &agent.Observation{
		Sample: &collector.Sample{
			CPUBusy:    0.45,
			IOPressure: &telemetryv1alpha1.PressureStatus{SomeAvg10BasisPoints: 12, SomeTotalMicroseconds: 5_000_000},
			Thermal: &collector.Thermal{Sensors: []collector.TempSensor{
				{Name: "coretemp.0/Package id 0", MilliCelsius: 71_000, MaxMilliCelsius: ptr.To[int64](84_000), CritMilliCelsius: ptr.To[int64](100_000)},
				{Name: "k10temp/Tctl", MilliCelsius: 60_000},
			}},
			Power: &collector.Power{Watts: 2150, EnergyJoules: 1e6, Zones: []collector.PowerZone{
				{Name: "package-0", Source: telemetryv1alpha1.PowerSourceRAPL, Watts: 750},
				{Name: "gpu-0", Source: telemetryv1alpha1.PowerSourceNVML, Watts: 175},
			}},
			Sources: st.Sources,
		},
		Results: []collector.Result{{Name: telemetryv1alpha1.SourceCPU, Duration: 3 * time.Millisecond}},
		Status:  st,
		Heat:    status.NewHeatTracker(status.DefaultHeatConfig()).Update(st.Thermal, st.CPU),
		// The limit of a sensor without one.
		AbsoluteLimitMilliCelsius: 90_000,
	}
	m.Observe(obs)
	m.Published(publisher.Outcome{Published: true, Reason: "first", Duration: 20 * time.Millisecond, Dropped: []string{"gpus"}}, time.Unix(1700000000, 0))
	m.Event("NodeOverheating")

	// client_golang's linter applies the naming rules promtool does.
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}

	// Every sensor has an effective limit, and says where it comes from.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP telesched_node_temperature_limit_celsius Effective limit of a sensor: its crit, else its max, else its vendor's published limit, else the agent's absolute limit (--absolute-limit-celsius); type says which.
# TYPE telesched_node_temperature_limit_celsius gauge
telesched_node_temperature_limit_celsius{sensor="coretemp.0/Package id 0",type="Critical"} 100
telesched_node_temperature_limit_celsius{sensor="k10temp/Tctl",type="Absolute"} 90
`), "telesched_node_temperature_limit_celsius"); err != nil {
		t.Error(err)
	}

	got := families(t, reg)
	for _, want := range []string{
		"telesched_agent_build_info", "telesched_agent_collector_duration_seconds", "telesched_agent_collector_success",
		"telesched_agent_last_publish_timestamp_seconds", "telesched_agent_publish_total", "telesched_agent_publish_sections_left_out_total", "telesched_agent_samples_total",
		"telesched_node_cpu_utilization_ratio", "telesched_node_memory_available_bytes", "telesched_node_pressure_avg10_ratio",
		"telesched_node_temperature_celsius", "telesched_node_temperature_crit_celsius", "telesched_node_thermal_headroom_celsius",
		"telesched_node_power_watts", "telesched_node_power_zone_watts", "telesched_node_power_model_idle_watts",
		"telesched_node_numa_memory_free_bytes", "telesched_gpu_temperature_celsius", "telesched_gpu_throttle_reason",
		"telesched_gpu_healthy", "telesched_node_overheating", "telesched_agent_events_total",
	} {
		if !contains(got, want) {
			t.Errorf("metric %s missing; have %v", want, got)
		}
	}
	// 8 GPUs x 3 throttle reasons
	if n := testutil.CollectAndCount(m, "telesched_gpu_throttle_reason"); n != 24 {
		t.Errorf("telesched_gpu_throttle_reason has %d series, want 24", n)
	}
	if v := testutil.ToFloat64(m.lastPublish); v != 1700000000 {
		t.Errorf("last publish timestamp = %v, want 1700000000", v)
	}
}

// TestMetricsAbsentWhenSourceMissing: a source the node lacks is an absent
// series, not a zero.
func TestMetricsAbsentWhenSourceMissing(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev")
	m.Observe(&agent.Observation{
		Sample: &collector.Sample{CPUBusy: 0.03},
		Status: telemetryv1alpha1.NodeTelemetryStatus{CPU: &telemetryv1alpha1.CPUStatus{LogicalCores: 2, OnlineCores: 2, UtilizationPercent: 3}},
	})
	var node []string
	for _, name := range families(t, reg) {
		if strings.HasPrefix(name, "telesched_node_") || strings.HasPrefix(name, "telesched_gpu_") {
			node = append(node, name)
		}
	}
	want := []string{"telesched_node_cpu_logical_cores", "telesched_node_cpu_online_cores", "telesched_node_cpu_utilization_ratio"}
	if diff := cmp.Diff(want, node); diff != "" {
		t.Errorf("node and GPU metrics with only CPU data (-want +got):\n%s", diff)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestCollectorSuccessOfADegradedSource checks that a source read in part
// (Degraded) counts as read in collector_success, and shows its reason in
// source_info, while a failed one counts as not read.
func TestCollectorSuccessOfADegradedSource(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v1.2.3")
	degraded := collector.Degraded(nil, "1 of 2 temperature sensors unreadable: ...")
	failed := collector.Failed("NVMLTimeout", nil, "NVML did not return within 10s")
	m.Observe(&agent.Observation{
		Sample: &collector.Sample{Sources: []telemetryv1alpha1.SourceStatus{
			collector.SourceStatus(telemetryv1alpha1.SourceThermal, degraded),
			collector.SourceStatus(telemetryv1alpha1.SourceGPU, failed),
		}},
		Results: []collector.Result{
			{Name: telemetryv1alpha1.SourceThermal, Err: degraded},
			{Name: telemetryv1alpha1.SourceGPU, Err: failed},
		},
	})
	want := `
# HELP telesched_agent_collector_success Whether the collector's source was read in the last sample (1, also when only in part: source_info's reason is then Degraded) or not (0).
# TYPE telesched_agent_collector_success gauge
telesched_agent_collector_success{collector="gpu"} 0
telesched_agent_collector_success{collector="thermal"} 1
# HELP telesched_agent_source_info State of each telemetry source in the last sample, with the reason when it is not Available or was read only in part (Available, reason Degraded).
# TYPE telesched_agent_source_info gauge
telesched_agent_source_info{reason="Degraded",source="thermal",state="Available"} 1
telesched_agent_source_info{reason="NVMLTimeout",source="gpu",state="Failed"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "telesched_agent_collector_success", "telesched_agent_source_info"); err != nil {
		t.Error(err)
	}
}
