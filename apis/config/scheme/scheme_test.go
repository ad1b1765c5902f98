// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package scheme

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedconfigv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/apis/config/validation"
)

// TestMain registers once, as the command does, before any test reads the
// scheduler's schemes; the tests then only read them and may run in
// parallel.
func TestMain(m *testing.M) {
	if err := Register(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// loadConfig writes data to a file and loads it the way kube-scheduler loads
// its --config file.
func loadConfig(t *testing.T, data string) (*schedconfig.KubeSchedulerConfiguration, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	logger, _ := ktesting.NewTestContext(t)
	return options.LoadConfigFromFile(logger, file)
}

// pluginArgs returns the args of the named plugin in profile prof of cfg,
// and their field path.
func pluginArgs(t *testing.T, cfg *schedconfig.KubeSchedulerConfiguration, prof, plugin string) (runtime.Object, *field.Path) {
	t.Helper()
	for i, p := range cfg.Profiles {
		if p.SchedulerName != prof {
			continue
		}
		for j, pc := range p.PluginConfig {
			if pc.Name == plugin {
				return pc.Args, field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j).Child("args")
			}
		}
	}
	t.Fatalf("profile %q has no pluginConfig for %s", prof, plugin)
	return nil, nil
}

const telemetryProfile = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: telesched
  plugins:
    multiPoint:
      enabled:
      - name: LoadAware
      - name: TopologyFit
      - name: EnergyAware
  pluginConfig:
  - name: LoadAware
    args:
      cpuThresholdPercent: 70
      scoringStrategy: Pack
      telemetryMaxAge: 30s
  - name: TopologyFit
    args:
      gpuResourceName: amd.com/gpu
      nonGPUPodPenaltyPercent: 0
      gpuCPUReserveMilli: 0
      gpuDeviceClassNames: []
      migDeviceClassNames: []
      staleTelemetryPolicy: Reject
  - name: EnergyAware
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: EnergyAwareArgs
      rejectThrottling: false
      powerWeight: 0
      thermalWeight: 100
- schedulerName: telesched-defaults
  plugins:
    multiPoint:
      enabled:
      - name: LoadAware
      - name: TopologyFit
      - name: EnergyAware
`

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(t, telemetryProfile)
	if err != nil {
		t.Fatalf("loading the configuration: %v", err)
	}
	// kube-scheduler's own validation accepts it, and ours too.
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		t.Errorf("kube-scheduler's validation: %v", err)
	}

	telemetryDefaults := config.TelemetryArgs{TelemetryMaxAge: 60 * time.Second, StaleTelemetryPolicy: config.StaleTelemetryIgnore}
	tests := []struct {
		name     string
		profile  string
		plugin   string
		want     runtime.Object
		validate func(*field.Path, runtime.Object) error
	}{
		{
			name:    "partial LoadAwareArgs are defaulted",
			profile: "telesched",
			plugin:  "LoadAware",
			want: &config.LoadAwareArgs{
				TelemetryArgs:           config.TelemetryArgs{TelemetryMaxAge: 30 * time.Second, StaleTelemetryPolicy: config.StaleTelemetryIgnore},
				CPUThresholdPercent:     70,
				MemoryThresholdPercent:  90,
				ScoringStrategy:         config.ScoringStrategyPack,
				Usage:                   config.UsageInstant,
				PackTargetPercent:       70,
				PodCPUScalingPercent:    100,
				PodMemoryScalingPercent: 100,
				DefaultPodCPUMilli:      100,
				DefaultPodMemoryBytes:   200 * 1024 * 1024,
			},
		},
		{
			name:    "TopologyFitArgs keep set zero values",
			profile: "telesched",
			plugin:  "TopologyFit",
			want: &config.TopologyFitArgs{
				TelemetryArgs:           config.TelemetryArgs{TelemetryMaxAge: 60 * time.Second, StaleTelemetryPolicy: config.StaleTelemetryReject},
				GPUResourceName:         "amd.com/gpu",
				NonGPUPodPenaltyPercent: 0,
				GPUCPUReserveMilli:      0,
				MIGResourcePrefix:       "nvidia.com/mig-",
				GPUDeviceClassNames:     []string{},                 // set empty: none
				MIGDeviceClassNames:     []string{},                 // set empty: none
				GPUDriverNames:          []string{"gpu.nvidia.com"}, // unset: the default
			},
		},
		{
			name:    "EnergyAwareArgs with apiVersion and kind",
			profile: "telesched",
			plugin:  "EnergyAware",
			want: &config.EnergyAwareArgs{
				TelemetryArgs:            telemetryDefaults,
				ThermalMarginCelsius:     5,
				AbsoluteLimitCelsius:     90,
				RejectThrottling:         false,
				GPUSlowdownMarginCelsius: 3,
				GPUResourceName:          "nvidia.com/gpu",
				PowerWeight:              0,
				ThermalWeight:            100,
				ConsolidationPods:        8,
				PowerSpanPercent:         25,
			},
		},
		// A plugin enabled without a pluginConfig entry gets one, defaulted
		// by kube-scheduler's v1 defaulting from kind <Plugin>Args.
		{name: "LoadAware without pluginConfig", profile: "telesched-defaults", plugin: "LoadAware", want: configv1.DefaultLoadAwareArgs()},
		{name: "TopologyFit without pluginConfig", profile: "telesched-defaults", plugin: "TopologyFit", want: configv1.DefaultTopologyFitArgs()},
		{name: "EnergyAware without pluginConfig", profile: "telesched-defaults", plugin: "EnergyAware", want: configv1.DefaultEnergyAwareArgs()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, path := pluginArgs(t, cfg, tc.profile, tc.plugin)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if err := validateArgs(path, got); err != nil {
				t.Errorf("validation: %v", err)
			}
		})
	}
}

// validateArgs validates any of the three args.
func validateArgs(path *field.Path, obj runtime.Object) error {
	switch args := obj.(type) {
	case *config.LoadAwareArgs:
		return validation.ValidateLoadAwareArgs(path, args)
	case *config.TopologyFitArgs:
		return validation.ValidateTopologyFitArgs(path, args)
	case *config.EnergyAwareArgs:
		return validation.ValidateEnergyAwareArgs(path, args)
	}
	return fmt.Errorf("args of type %T", obj)
}

func TestLoadConfigInvalidArgs(t *testing.T) {
	t.Parallel()
	const header = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: telesched
  plugins:
    multiPoint:
      enabled:
      - name: LoadAware
      - name: EnergyAware
  pluginConfig:
`
	tests := []struct {
		name         string
		pluginConfig string
		plugin       string
		// wantLoadErr is a part of the error loading returns; empty when
		// loading succeeds and validation must fail with wantErr.
		wantLoadErr string
		wantErr     string
	}{
		{
			name: "cpuThresholdPercent out of range",
			pluginConfig: `  - name: EnergyAware
    args: {}
  - name: LoadAware
    args:
      cpuThresholdPercent: 150
`,
			plugin:  "LoadAware",
			wantErr: "profiles[0].pluginConfig[1].args.cpuThresholdPercent: Invalid value: 150: must be between 1 and 100",
		},
		{
			name: "both weights zero",
			pluginConfig: `  - name: EnergyAware
    args:
      powerWeight: 0
      thermalWeight: 0
`,
			plugin: "EnergyAware",
			wantErr: "[profiles[0].pluginConfig[0].args.powerWeight: Invalid value: 0: cannot be zero at the same time as thermalWeight, " +
				"profiles[0].pluginConfig[0].args.thermalWeight: Invalid value: 0: cannot be zero at the same time as powerWeight]",
		},
		{
			name: "unknown stale telemetry policy",
			pluginConfig: `  - name: LoadAware
    args:
      staleTelemetryPolicy: Drop
`,
			plugin:  "LoadAware",
			wantErr: `profiles[0].pluginConfig[0].args.staleTelemetryPolicy: Unsupported value: "Drop": supported values: "Ignore", "Reject"`,
		},
		{
			name: "non-positive telemetryMaxAge",
			pluginConfig: `  - name: LoadAware
    args:
      telemetryMaxAge: 0s
`,
			plugin:  "LoadAware",
			wantErr: `profiles[0].pluginConfig[0].args.telemetryMaxAge: Invalid value: "0s": must be greater than zero`,
		},
		{
			name: "unknown field is a strict decoding error",
			pluginConfig: `  - name: LoadAware
    args:
      cpuThreshold: 70
`,
			wantLoadErr: `decoding args for plugin LoadAware: strict decoding error: unknown field "cpuThreshold"`,
		},
		{
			name: "wrong type",
			pluginConfig: `  - name: LoadAware
    args:
      cpuThresholdPercent: high
`,
			wantLoadErr: "decoding args for plugin LoadAware",
		},
		{
			name: "another plugin's kind",
			pluginConfig: `  - name: LoadAware
    args:
      kind: EnergyAwareArgs
      apiVersion: kubescheduler.config.k8s.io/v1
`,
			wantLoadErr: "args for plugin LoadAware were not of type LoadAwareArgs.kubescheduler.config.k8s.io, got EnergyAwareArgs.kubescheduler.config.k8s.io",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadConfig(t, header+tc.pluginConfig)
			if tc.wantLoadErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantLoadErr) {
					t.Fatalf("loading: error %v, want one containing %q", err, tc.wantLoadErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("loading: %v", err)
			}
			args, path := pluginArgs(t, cfg, "telesched", tc.plugin)
			got := ""
			if err := validateArgs(path, args); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("validation error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEncodeConfig encodes a loaded configuration as kube-scheduler does
// when it logs or writes it (--write-config-to), and loads it again.
func TestEncodeConfig(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(t, telemetryProfile)
	if err != nil {
		t.Fatal(err)
	}
	info, ok := runtime.SerializerInfoForMediaType(schedscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeYAML)
	if !ok {
		t.Fatal("no YAML serializer")
	}
	var buf bytes.Buffer
	if err := schedscheme.Codecs.EncoderForVersion(info.Serializer, schedconfigv1.SchemeGroupVersion).Encode(cfg, &buf); err != nil {
		t.Fatalf("encoding: %v", err)
	}
	for _, want := range []string{"kind: LoadAwareArgs", "cpuThresholdPercent: 70", "kind: TopologyFitArgs", "kind: EnergyAwareArgs", "thermalWeight: 100"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("encoded configuration lacks %q:\n%s", want, buf.String())
		}
	}
	again, err := loadConfig(t, buf.String())
	if err != nil {
		t.Fatalf("loading the encoded configuration: %v", err)
	}
	for _, prof := range []string{"telesched", "telesched-defaults"} {
		for _, plugin := range []string{"LoadAware", "TopologyFit", "EnergyAware"} {
			want, _ := pluginArgs(t, cfg, prof, plugin)
			got, _ := pluginArgs(t, again, prof, plugin)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s %s args after encoding and loading (-want +got):\n%s", prof, plugin, diff)
			}
		}
	}
}

func TestGroupVersions(t *testing.T) {
	t.Parallel()
	if diff := cmp.Diff(schedconfig.SchemeGroupVersion, config.SchemeGroupVersion); diff != "" {
		t.Errorf("internal group version (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(schedconfigv1.SchemeGroupVersion, configv1.SchemeGroupVersion); diff != "" {
		t.Errorf("v1 group version (-want +got):\n%s", diff)
	}
}

// TestRegisterTwice is not parallel: Register writes to kube-scheduler's
// schemes, which the parallel tests read; they run after it.
func TestRegisterTwice(t *testing.T) {
	// TestMain registered already.
	if err := Register(); err != nil {
		t.Fatalf("registering again: %v", err)
	}
	for name, s := range map[string]*runtime.Scheme{
		"kube-scheduler's scheme":             schedscheme.Scheme,
		"kube-scheduler's plugin args scheme": schedconfigv1.GetPluginArgConversionScheme(),
	} {
		for _, kind := range []string{"LoadAwareArgs", "TopologyFitArgs", "EnergyAwareArgs"} {
			for _, gvk := range []schema.GroupVersionKind{config.SchemeGroupVersion.WithKind(kind), configv1.SchemeGroupVersion.WithKind(kind)} {
				if !s.Recognizes(gvk) {
					t.Errorf("%s does not recognize %s", name, gvk)
				}
			}
		}
	}
}
