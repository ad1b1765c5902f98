// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/apis/config"
)

// TestPluginArgsFromTheShippedSchedulerConfig: the descheduler reads the
// very file the scheduler runs with (deploy/scheduler/scheduler-config.yaml),
// named or as it ships (no --scheduler-config), and gets its telesched
// profile's LoadAware and EnergyAware args: the plugins' defaults,
// written out.
func TestPluginArgsFromTheShippedSchedulerConfig(t *testing.T) {
	la, ea, err := PluginArgsFrom(filepath.Join("..", "deploy", "scheduler", "scheduler-config.yaml"), DefaultSchedulerProfile)
	if err != nil {
		t.Fatal(err)
	}
	if la.CPUThresholdPercent != 80 || la.MemoryThresholdPercent != 90 || la.Usage != config.UsageInstant {
		t.Errorf("LoadAware args %+v: want the file's cpuThresholdPercent 80, memoryThresholdPercent 90, usage Instant", la)
	}
	if ea.ThermalMarginCelsius != 5 || ea.AbsoluteLimitCelsius != 90 || ea.TelemetryMaxAge != time.Minute {
		t.Errorf("EnergyAware args %+v: want the file's thermalMarginCelsius 5, absoluteLimitCelsius 90, telemetryMaxAge 60s", ea)
	}
	sla, sea, err := PluginArgsFrom("", DefaultSchedulerProfile)
	if err != nil {
		t.Fatal(err)
	}
	dla, dea, err := DefaultPluginArgs()
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []struct {
		from string
		la   config.LoadAwareArgs
		ea   config.EnergyAwareArgs
	}{{"the file", la, ea}, {"no --scheduler-config", sla, sea}} {
		if diff := cmp.Diff(dla, got.la); diff != "" {
			t.Errorf("%s: LoadAware args are not the plugin's defaults (-default +got):\n%s", got.from, diff)
		}
		if diff := cmp.Diff(dea, got.ea); diff != "" {
			t.Errorf("%s: EnergyAware args are not the plugin's defaults (-default +got):\n%s", got.from, diff)
		}
	}
}

func TestPluginArgsFrom(t *testing.T) {
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
	for _, tc := range []struct {
		name, file, profile string
		check               func(config.LoadAwareArgs, config.EnergyAwareArgs) string
		wantErr             string
	}{
		{
			name: "the profile's args, the rest defaulted",
			file: head + `- schedulerName: other
  pluginConfig:
  - name: EnergyAware
    args: {thermalMarginCelsius: 20}
- schedulerName: telesched
  pluginConfig:
  - name: LoadAware
    args: {apiVersion: kubescheduler.config.k8s.io/v1, kind: LoadAwareArgs, cpuThresholdPercent: 70, usage: P90}
  - name: EnergyAware
    args: {thermalMarginCelsius: 8, telemetryMaxAge: 2m}
`,
			check: func(la config.LoadAwareArgs, ea config.EnergyAwareArgs) string {
				if la.CPUThresholdPercent != 70 || la.Usage != config.UsageP90 || la.MemoryThresholdPercent != 90 {
					return "LoadAware: want cpuThresholdPercent 70, usage P90, memoryThresholdPercent defaulted to 90"
				}
				if ea.ThermalMarginCelsius != 8 || ea.TelemetryMaxAge != 2*time.Minute || ea.AbsoluteLimitCelsius != 90 {
					return "EnergyAware: want thermalMarginCelsius 8 (this profile's, not other's 20), telemetryMaxAge 2m, absoluteLimitCelsius defaulted to 90"
				}
				return ""
			},
		},
		{name: "another profile", profile: "telesched-energy", file: head + "- schedulerName: telesched-energy\n  pluginConfig:\n  - name: EnergyAware\n    args: {thermalMarginCelsius: 3}\n",
			check: func(_ config.LoadAwareArgs, ea config.EnergyAwareArgs) string {
				if ea.ThermalMarginCelsius != 3 {
					return "want telesched-energy's thermalMarginCelsius 3"
				}
				return ""
			}},
		{name: "no such profile", file: head + "- schedulerName: default-scheduler\n", wantErr: `no profile with schedulerName "telesched" (profiles: ["default-scheduler"])`},
		{name: "a misspelt field", file: head + "- schedulerName: telesched\n  pluginConfig:\n  - name: EnergyAware\n    args: {thermalMarginCelcius: 8}\n",
			wantErr: `decoding args for plugin EnergyAware: strict decoding error: unknown field "thermalMarginCelcius"`},
		{name: "args of another kind", file: head + "- schedulerName: telesched\n  pluginConfig:\n  - name: LoadAware\n    args: {kind: EnergyAwareArgs}\n",
			wantErr: `args for plugin LoadAware were not of type LoadAwareArgs.kubescheduler.config.k8s.io, got EnergyAwareArgs.kubescheduler.config.k8s.io`},
		{name: "a value the scheduler refuses", file: head + "- schedulerName: telesched\n  pluginConfig:\n  - name: LoadAware\n    args: {cpuThresholdPercent: 101}\n",
			wantErr: "profile telesched: LoadAware args: cpuThresholdPercent"},
		{name: "not a scheduler configuration", file: "apiVersion: v1\nkind: ConfigMap\n", wantErr: `want a KubeSchedulerConfiguration of kubescheduler.config.k8s.io/v1: no kind "ConfigMap" is registered for version "v1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			la, ea, err := PluginArgsFrom(path, cmpOr(tc.profile, DefaultSchedulerProfile))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one naming %s and %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(la, ea); msg != "" {
				t.Errorf("%s; got LoadAware %+v, EnergyAware %+v", msg, la, ea)
			}
		})
	}
	if _, _, err := PluginArgsFrom(filepath.Join(t.TempDir(), "absent.yaml"), DefaultSchedulerProfile); err == nil {
		t.Error("a file that is not there: no error")
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestLoadSchedulerProfile: the descheduler builds the scheduler's own
// profile, defaulted as kube-scheduler defaults it (the in-tree plugins
// merged in), from the shipped configuration or a file, and says which
// file and why when it cannot.
func TestLoadSchedulerProfile(t *testing.T) {
	p, err := LoadSchedulerProfile("", DefaultSchedulerProfile)
	if err != nil {
		t.Fatal(err)
	}
	var plugins []string
	for _, pl := range p.Plugins.MultiPoint.Enabled {
		plugins = append(plugins, pl.Name)
	}
	for _, want := range []string{"NodeResourcesFit", "VolumeBinding", "InterPodAffinity", "NodePorts", "DynamicResources", "LoadAware", "TopologyFit", "EnergyAware", "PowerBudget"} {
		if !slices.Contains(plugins, want) {
			t.Errorf("the shipped profile's plugins %q lack %s", plugins, want)
		}
	}
	if _, err := LoadSchedulerProfile("", "nosuch"); err == nil || !strings.Contains(err.Error(), `no profile with schedulerName "nosuch"`) {
		t.Errorf("unknown profile: err %v, want it named", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: -1\nprofiles:\n- schedulerName: telesched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSchedulerProfile(bad, "telesched"); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a file the scheduler would refuse: err %v, want an error naming %s", err, bad)
	}
}

// TestPowerBudgetMaxAgeIsPowerBudgets: TeleschedPowerBudget judges
// members' watts fresh by PowerBudget's telemetryMaxAge, as the
// scheduler's PowerBudget does, not EnergyAware's.
func TestPowerBudgetMaxAgeIsPowerBudgets(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "deploy", "scheduler", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// PowerBudget's args come last in each profile.
	s := string(data)
	i := strings.LastIndex(s, "kind: PowerBudgetArgs\n      telemetryMaxAge: 60s")
	if i < 0 {
		t.Fatal("the shipped configuration's PowerBudget args moved; update this test")
	}
	s = s[:i] + strings.Replace(s[i:], "telemetryMaxAge: 60s", "telemetryMaxAge: 7s", 1)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadSchedulerConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	last := &cfg.Profiles[len(cfg.Profiles)-1]
	_, ea, err := PluginArgsFrom(path, last.SchedulerName)
	if err != nil {
		t.Fatal(err)
	}
	if got := PowerBudgetMaxAge(last); got != 7*time.Second || ea.TelemetryMaxAge != time.Minute {
		t.Errorf("PowerBudget's telemetryMaxAge %v (EnergyAware's %v): want 7s, PowerBudget's own", got, ea.TelemetryMaxAge)
	}
}
