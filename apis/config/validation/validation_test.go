// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package validation

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
)

// errString is err's message, or "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// telemetryCases are the cases of the fields every plugin has; set applies
// a case to a plugin's TelemetryArgs.
var telemetryCases = []struct {
	name    string
	set     func(*config.TelemetryArgs)
	wantErr string
}{
	{name: "telemetryMaxAge 1ns", set: func(a *config.TelemetryArgs) { a.TelemetryMaxAge = time.Nanosecond }},
	{
		name:    "telemetryMaxAge 0",
		set:     func(a *config.TelemetryArgs) { a.TelemetryMaxAge = 0 },
		wantErr: "telemetryMaxAge: Invalid value: \"0s\": must be greater than zero",
	},
	{
		name:    "telemetryMaxAge negative",
		set:     func(a *config.TelemetryArgs) { a.TelemetryMaxAge = -time.Second },
		wantErr: "telemetryMaxAge: Invalid value: \"-1s\": must be greater than zero",
	},
	{name: "staleTelemetryPolicy Ignore", set: func(a *config.TelemetryArgs) { a.StaleTelemetryPolicy = config.StaleTelemetryIgnore }},
	{name: "staleTelemetryPolicy Reject", set: func(a *config.TelemetryArgs) { a.StaleTelemetryPolicy = config.StaleTelemetryReject }},
	{
		name:    "staleTelemetryPolicy lower case",
		set:     func(a *config.TelemetryArgs) { a.StaleTelemetryPolicy = "reject" },
		wantErr: `staleTelemetryPolicy: Unsupported value: "reject": supported values: "Ignore", "Reject"`,
	},
	{
		name:    "staleTelemetryPolicy empty",
		set:     func(a *config.TelemetryArgs) { a.StaleTelemetryPolicy = "" },
		wantErr: `staleTelemetryPolicy: Unsupported value: "": supported values: "Ignore", "Reject"`,
	},
}

func TestValidateTelemetryArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range telemetryCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			la, tf, ea := configv1.DefaultLoadAwareArgs(), configv1.DefaultTopologyFitArgs(), configv1.DefaultEnergyAwareArgs()
			tc.set(&la.TelemetryArgs)
			tc.set(&tf.TelemetryArgs)
			tc.set(&ea.TelemetryArgs)
			for plugin, err := range map[string]error{
				"LoadAware":   ValidateLoadAwareArgs(nil, la),
				"TopologyFit": ValidateTopologyFitArgs(nil, tf),
				"EnergyAware": ValidateEnergyAwareArgs(nil, ea),
			} {
				if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
					t.Errorf("%s: error (-want +got):\n%s", plugin, diff)
				}
			}
		})
	}
}

func TestValidateLoadAwareArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		path    *field.Path
		set     func(*config.LoadAwareArgs)
		wantErr string
	}{
		{name: "defaults", set: func(*config.LoadAwareArgs) {}},
		{
			name:    "cpuThresholdPercent 0",
			set:     func(a *config.LoadAwareArgs) { a.CPUThresholdPercent = 0 },
			wantErr: "cpuThresholdPercent: Invalid value: 0: must be between 1 and 100",
		},
		{name: "cpuThresholdPercent 1", set: func(a *config.LoadAwareArgs) { a.CPUThresholdPercent = 1 }},
		{name: "cpuThresholdPercent 100", set: func(a *config.LoadAwareArgs) { a.CPUThresholdPercent = 100 }},
		{
			name:    "cpuThresholdPercent 101",
			set:     func(a *config.LoadAwareArgs) { a.CPUThresholdPercent = 101 },
			wantErr: "cpuThresholdPercent: Invalid value: 101: must be between 1 and 100",
		},
		{
			name:    "cpuThresholdPercent 150",
			set:     func(a *config.LoadAwareArgs) { a.CPUThresholdPercent = 150 },
			wantErr: "cpuThresholdPercent: Invalid value: 150: must be between 1 and 100",
		},
		{
			name:    "cpuThresholdPercent 150 under a path",
			path:    field.NewPath("profiles").Index(0).Child("pluginConfig").Index(2).Child("args"),
			set:     func(a *config.LoadAwareArgs) { a.CPUThresholdPercent = 150 },
			wantErr: "profiles[0].pluginConfig[2].args.cpuThresholdPercent: Invalid value: 150: must be between 1 and 100",
		},
		{
			name:    "memoryThresholdPercent 0",
			set:     func(a *config.LoadAwareArgs) { a.MemoryThresholdPercent = 0 },
			wantErr: "memoryThresholdPercent: Invalid value: 0: must be between 1 and 100",
		},
		{name: "memoryThresholdPercent 1", set: func(a *config.LoadAwareArgs) { a.MemoryThresholdPercent = 1 }},
		{name: "memoryThresholdPercent 100", set: func(a *config.LoadAwareArgs) { a.MemoryThresholdPercent = 100 }},
		{
			name:    "memoryThresholdPercent 101",
			set:     func(a *config.LoadAwareArgs) { a.MemoryThresholdPercent = 101 },
			wantErr: "memoryThresholdPercent: Invalid value: 101: must be between 1 and 100",
		},
		{name: "scoringStrategy Pack", set: func(a *config.LoadAwareArgs) { a.ScoringStrategy = config.ScoringStrategyPack }},
		{
			name:    "scoringStrategy unknown",
			set:     func(a *config.LoadAwareArgs) { a.ScoringStrategy = "MostAllocated" },
			wantErr: `scoringStrategy: Unsupported value: "MostAllocated": supported values: "Spread", "Pack"`,
		},
		{name: "usage P90", set: func(a *config.LoadAwareArgs) { a.Usage = config.UsageP90 }},
		{name: "usage Max", set: func(a *config.LoadAwareArgs) { a.Usage = config.UsageMax }},
		{
			name:    "usage unknown",
			set:     func(a *config.LoadAwareArgs) { a.Usage = "p95" },
			wantErr: `usage: Unsupported value: "p95": supported values: "Instant", "P50", "P90", "Max"`,
		},
		{
			name:    "usage empty",
			set:     func(a *config.LoadAwareArgs) { a.Usage = "" },
			wantErr: `usage: Unsupported value: "": supported values: "Instant", "P50", "P90", "Max"`,
		},
		{
			name:    "packTargetPercent 0",
			set:     func(a *config.LoadAwareArgs) { a.PackTargetPercent = 0 },
			wantErr: "packTargetPercent: Invalid value: 0: must be between 1 and 100",
		},
		{name: "packTargetPercent 1", set: func(a *config.LoadAwareArgs) { a.PackTargetPercent = 1 }},
		{name: "packTargetPercent 100", set: func(a *config.LoadAwareArgs) { a.PackTargetPercent = 100 }},
		{
			name:    "packTargetPercent 101",
			set:     func(a *config.LoadAwareArgs) { a.PackTargetPercent = 101 },
			wantErr: "packTargetPercent: Invalid value: 101: must be between 1 and 100",
		},
		{
			name:    "podCPUScalingPercent 0",
			set:     func(a *config.LoadAwareArgs) { a.PodCPUScalingPercent = 0 },
			wantErr: "podCPUScalingPercent: Invalid value: 0: must be between 1 and 1000",
		},
		{name: "podCPUScalingPercent 1", set: func(a *config.LoadAwareArgs) { a.PodCPUScalingPercent = 1 }},
		{name: "podCPUScalingPercent 1000", set: func(a *config.LoadAwareArgs) { a.PodCPUScalingPercent = 1000 }},
		{
			name:    "podCPUScalingPercent 1001",
			set:     func(a *config.LoadAwareArgs) { a.PodCPUScalingPercent = 1001 },
			wantErr: "podCPUScalingPercent: Invalid value: 1001: must be between 1 and 1000",
		},
		{
			name:    "podMemoryScalingPercent 0",
			set:     func(a *config.LoadAwareArgs) { a.PodMemoryScalingPercent = 0 },
			wantErr: "podMemoryScalingPercent: Invalid value: 0: must be between 1 and 1000",
		},
		{name: "podMemoryScalingPercent 1", set: func(a *config.LoadAwareArgs) { a.PodMemoryScalingPercent = 1 }},
		{name: "podMemoryScalingPercent 1000", set: func(a *config.LoadAwareArgs) { a.PodMemoryScalingPercent = 1000 }},
		{
			name:    "podMemoryScalingPercent 1001",
			set:     func(a *config.LoadAwareArgs) { a.PodMemoryScalingPercent = 1001 },
			wantErr: "podMemoryScalingPercent: Invalid value: 1001: must be between 1 and 1000",
		},
		{name: "defaultPodCPUMilli 0", set: func(a *config.LoadAwareArgs) { a.DefaultPodCPUMilli = 0 }},
		{
			name:    "defaultPodCPUMilli -1",
			set:     func(a *config.LoadAwareArgs) { a.DefaultPodCPUMilli = -1 },
			wantErr: "defaultPodCPUMilli: Invalid value: -1: must not be negative",
		},
		{name: "defaultPodMemoryBytes 0", set: func(a *config.LoadAwareArgs) { a.DefaultPodMemoryBytes = 0 }},
		{
			name:    "defaultPodMemoryBytes -1",
			set:     func(a *config.LoadAwareArgs) { a.DefaultPodMemoryBytes = -1 },
			wantErr: "defaultPodMemoryBytes: Invalid value: -1: must not be negative",
		},
		{
			name: "every error is reported",
			set: func(a *config.LoadAwareArgs) {
				a.CPUThresholdPercent = 0
				a.MemoryThresholdPercent = 101
			},
			wantErr: "[cpuThresholdPercent: Invalid value: 0: must be between 1 and 100, " +
				"memoryThresholdPercent: Invalid value: 101: must be between 1 and 100]",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := configv1.DefaultLoadAwareArgs()
			tc.set(args)
			err := ValidateLoadAwareArgs(tc.path, args)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateTopologyFitArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		set           func(*config.TopologyFitArgs)
		wantErr       string
		wantErrPrefix string // instead of wantErr
	}{
		{name: "defaults", set: func(*config.TopologyFitArgs) {}},
		{name: "gpuResourceName amd.com/gpu", set: func(a *config.TopologyFitArgs) { a.GPUResourceName = "amd.com/gpu" }},
		{name: "no DRA GPUs", set: func(a *config.TopologyFitArgs) { a.GPUDeviceClassNames, a.GPUDriverNames = nil, nil }},
		{
			name:          "gpuDeviceClassNames not a DNS subdomain",
			set:           func(a *config.TopologyFitArgs) { a.GPUDeviceClassNames = []string{"gpu.nvidia.com", "GPU_Class"} },
			wantErrPrefix: `gpuDeviceClassNames[1]: Invalid value: "GPU_Class": `,
		},
		{
			name:    "migDeviceClassNames duplicate",
			set:     func(a *config.TopologyFitArgs) { a.MIGDeviceClassNames = []string{"mig.nvidia.com", "mig.nvidia.com"} },
			wantErr: `migDeviceClassNames[1]: Duplicate value: "mig.nvidia.com"`,
		},
		{
			name:    "gpuDriverNames duplicate",
			set:     func(a *config.TopologyFitArgs) { a.GPUDriverNames = []string{"gpu.nvidia.com", "gpu.nvidia.com"} },
			wantErr: `gpuDriverNames[1]: Duplicate value: "gpu.nvidia.com"`,
		},
		{
			name:          "gpuDriverNames empty name",
			set:           func(a *config.TopologyFitArgs) { a.GPUDriverNames = []string{""} },
			wantErrPrefix: `gpuDriverNames[0]: Invalid value: "": `,
		},
		{
			name:    "gpuResourceName native resource",
			set:     func(a *config.TopologyFitArgs) { a.GPUResourceName = "cpu" },
			wantErr: `gpuResourceName: Invalid value: "cpu": is not an extended resource name`,
		},
		{
			name:    "gpuResourceName in kubernetes.io",
			set:     func(a *config.TopologyFitArgs) { a.GPUResourceName = "kubernetes.io/gpu" },
			wantErr: `gpuResourceName: Invalid value: "kubernetes.io/gpu": is not an extended resource name`,
		},
		{
			name:    "gpuResourceName requests. prefix",
			set:     func(a *config.TopologyFitArgs) { a.GPUResourceName = "requests.nvidia.com/gpu" },
			wantErr: `gpuResourceName: Invalid value: "requests.nvidia.com/gpu": is not an extended resource name`,
		},
		// The messages of IsQualifiedName are apimachinery's; only their
		// start is checked.
		{
			name:          "gpuResourceName not a qualified name",
			set:           func(a *config.TopologyFitArgs) { a.GPUResourceName = "nvidia.com/gpu/0" },
			wantErrPrefix: `gpuResourceName: Invalid value: "nvidia.com/gpu/0": `,
		},
		{
			name:          "gpuResourceName empty",
			set:           func(a *config.TopologyFitArgs) { a.GPUResourceName = "" },
			wantErrPrefix: `[gpuResourceName: Invalid value: "": name part must be non-empty, `,
		},
		{name: "migResourcePrefix example.com/slice-", set: func(a *config.TopologyFitArgs) { a.MIGResourcePrefix = "example.com/slice-" }},
		{
			name:    "migResourcePrefix empty",
			set:     func(a *config.TopologyFitArgs) { a.MIGResourcePrefix = "" },
			wantErr: `migResourcePrefix: Invalid value: "": must name a resource prefix such as "nvidia.com/mig-"`,
		},
		{
			name:    "migResourcePrefix native",
			set:     func(a *config.TopologyFitArgs) { a.MIGResourcePrefix = "mig-" },
			wantErr: `migResourcePrefix: Invalid value: "mig-": mig- + a profile such as "1g.10gb": is not an extended resource name`,
		},
		{
			name:    "migResourcePrefix covers the GPU resource",
			set:     func(a *config.TopologyFitArgs) { a.MIGResourcePrefix = "nvidia.com/" },
			wantErr: `migResourcePrefix: Invalid value: "nvidia.com/": gpuResourceName "nvidia.com/gpu" must not start with it: it would count as a MIG profile`,
		},
		{name: "nonGPUPodPenaltyPercent 0", set: func(a *config.TopologyFitArgs) { a.NonGPUPodPenaltyPercent = 0 }},
		{
			name:    "nonGPUPodPenaltyPercent -1",
			set:     func(a *config.TopologyFitArgs) { a.NonGPUPodPenaltyPercent = -1 },
			wantErr: "nonGPUPodPenaltyPercent: Invalid value: -1: must be between 0 and 100",
		},
		{name: "nonGPUPodPenaltyPercent 100", set: func(a *config.TopologyFitArgs) { a.NonGPUPodPenaltyPercent = 100 }},
		{name: "gpuCPUReserveMilli 0", set: func(a *config.TopologyFitArgs) { a.GPUCPUReserveMilli = 0 }},
		{
			name:    "gpuCPUReserveMilli -1",
			set:     func(a *config.TopologyFitArgs) { a.GPUCPUReserveMilli = -1 },
			wantErr: "gpuCPUReserveMilli: Invalid value: -1: must not be negative",
		},
		{
			name:    "nonGPUPodPenaltyPercent 101",
			set:     func(a *config.TopologyFitArgs) { a.NonGPUPodPenaltyPercent = 101 },
			wantErr: "nonGPUPodPenaltyPercent: Invalid value: 101: must be between 0 and 100",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := configv1.DefaultTopologyFitArgs()
			tc.set(args)
			got := errString(ValidateTopologyFitArgs(nil, args))
			if tc.wantErrPrefix != "" {
				if !strings.HasPrefix(got, tc.wantErrPrefix) {
					t.Errorf("error %q, want it to start with %q", got, tc.wantErrPrefix)
				}
				return
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateEnergyAwareArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		set     func(*config.EnergyAwareArgs)
		wantErr string
	}{
		{name: "defaults", set: func(*config.EnergyAwareArgs) {}},
		{name: "gpuResourceName amd.com/gpu", set: func(a *config.EnergyAwareArgs) { a.GPUResourceName = "amd.com/gpu" }},
		{
			name:    "gpuResourceName native resource",
			set:     func(a *config.EnergyAwareArgs) { a.GPUResourceName = "cpu" },
			wantErr: `gpuResourceName: Invalid value: "cpu": is not an extended resource name`,
		},
		{
			name:    "thermalMarginCelsius -1",
			set:     func(a *config.EnergyAwareArgs) { a.ThermalMarginCelsius = -1 },
			wantErr: "thermalMarginCelsius: Invalid value: -1: must be between 0 and 50",
		},
		{name: "thermalMarginCelsius 0", set: func(a *config.EnergyAwareArgs) { a.ThermalMarginCelsius = 0 }},
		{name: "thermalMarginCelsius 50", set: func(a *config.EnergyAwareArgs) { a.ThermalMarginCelsius = 50 }},
		{
			name:    "thermalMarginCelsius 51",
			set:     func(a *config.EnergyAwareArgs) { a.ThermalMarginCelsius = 51 },
			wantErr: "thermalMarginCelsius: Invalid value: 51: must be between 0 and 50",
		},
		{
			name:    "absoluteLimitCelsius 29",
			set:     func(a *config.EnergyAwareArgs) { a.AbsoluteLimitCelsius = 29 },
			wantErr: "absoluteLimitCelsius: Invalid value: 29: must be between 30 and 150",
		},
		{name: "absoluteLimitCelsius 30", set: func(a *config.EnergyAwareArgs) { a.AbsoluteLimitCelsius = 30 }},
		{name: "absoluteLimitCelsius 150", set: func(a *config.EnergyAwareArgs) { a.AbsoluteLimitCelsius = 150 }},
		{
			name:    "absoluteLimitCelsius 151",
			set:     func(a *config.EnergyAwareArgs) { a.AbsoluteLimitCelsius = 151 },
			wantErr: "absoluteLimitCelsius: Invalid value: 151: must be between 30 and 150",
		},
		{name: "rejectThrottling false", set: func(a *config.EnergyAwareArgs) { a.RejectThrottling = false }},
		{
			name:    "gpuSlowdownMarginCelsius -1",
			set:     func(a *config.EnergyAwareArgs) { a.GPUSlowdownMarginCelsius = -1 },
			wantErr: "gpuSlowdownMarginCelsius: Invalid value: -1: must be between 0 and 50",
		},
		{name: "gpuSlowdownMarginCelsius 0", set: func(a *config.EnergyAwareArgs) { a.GPUSlowdownMarginCelsius = 0 }},
		{name: "gpuSlowdownMarginCelsius 50", set: func(a *config.EnergyAwareArgs) { a.GPUSlowdownMarginCelsius = 50 }},
		{
			name:    "gpuSlowdownMarginCelsius 51",
			set:     func(a *config.EnergyAwareArgs) { a.GPUSlowdownMarginCelsius = 51 },
			wantErr: "gpuSlowdownMarginCelsius: Invalid value: 51: must be between 0 and 50",
		},
		{
			name:    "powerWeight -1",
			set:     func(a *config.EnergyAwareArgs) { a.PowerWeight = -1 },
			wantErr: "powerWeight: Invalid value: -1: must be between 0 and 100",
		},
		{name: "powerWeight 0", set: func(a *config.EnergyAwareArgs) { a.PowerWeight = 0 }},
		{name: "powerWeight 100", set: func(a *config.EnergyAwareArgs) { a.PowerWeight = 100 }},
		{
			name:    "powerWeight 101",
			set:     func(a *config.EnergyAwareArgs) { a.PowerWeight = 101 },
			wantErr: "powerWeight: Invalid value: 101: must be between 0 and 100",
		},
		{
			name:    "thermalWeight -1",
			set:     func(a *config.EnergyAwareArgs) { a.ThermalWeight = -1 },
			wantErr: "thermalWeight: Invalid value: -1: must be between 0 and 100",
		},
		{name: "thermalWeight 0", set: func(a *config.EnergyAwareArgs) { a.ThermalWeight = 0 }},
		{name: "thermalWeight 100", set: func(a *config.EnergyAwareArgs) { a.ThermalWeight = 100 }},
		{
			name:    "thermalWeight 101",
			set:     func(a *config.EnergyAwareArgs) { a.ThermalWeight = 101 },
			wantErr: "thermalWeight: Invalid value: 101: must be between 0 and 100",
		},
		{
			name:    "consolidationPods 0",
			set:     func(a *config.EnergyAwareArgs) { a.ConsolidationPods = 0 },
			wantErr: "consolidationPods: Invalid value: 0: must be between 1 and 64",
		},
		{name: "consolidationPods 1", set: func(a *config.EnergyAwareArgs) { a.ConsolidationPods = 1 }},
		{name: "consolidationPods 64", set: func(a *config.EnergyAwareArgs) { a.ConsolidationPods = 64 }},
		{
			name:    "consolidationPods 65",
			set:     func(a *config.EnergyAwareArgs) { a.ConsolidationPods = 65 },
			wantErr: "consolidationPods: Invalid value: 65: must be between 1 and 64",
		},
		{
			name:    "powerSpanPercent 0",
			set:     func(a *config.EnergyAwareArgs) { a.PowerSpanPercent = 0 },
			wantErr: "powerSpanPercent: Invalid value: 0: must be between 1 and 1000",
		},
		{name: "powerSpanPercent 1000", set: func(a *config.EnergyAwareArgs) { a.PowerSpanPercent = 1000 }},
		{
			name:    "powerSpanPercent 1001",
			set:     func(a *config.EnergyAwareArgs) { a.PowerSpanPercent = 1001 },
			wantErr: "powerSpanPercent: Invalid value: 1001: must be between 1 and 1000",
		},
		{
			name: "both weights 0",
			set: func(a *config.EnergyAwareArgs) {
				a.PowerWeight = 0
				a.ThermalWeight = 0
			},
			wantErr: "[powerWeight: Invalid value: 0: cannot be zero at the same time as thermalWeight, " +
				"thermalWeight: Invalid value: 0: cannot be zero at the same time as powerWeight]",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := configv1.DefaultEnergyAwareArgs()
			tc.set(args)
			err := ValidateEnergyAwareArgs(nil, args)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidatePowerBudgetArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		set     func(*config.PowerBudgetArgs)
		wantErr string
	}{
		{name: "defaults", set: func(*config.PowerBudgetArgs) {}},
		{
			name:    "telemetryMaxAge 0",
			set:     func(a *config.PowerBudgetArgs) { a.TelemetryMaxAge = 0 },
			wantErr: `telemetryMaxAge: Invalid value: "0s": must be greater than zero`,
		},
		{
			name:    "gpuResourceName native resource",
			set:     func(a *config.PowerBudgetArgs) { a.GPUResourceName = "memory" },
			wantErr: `gpuResourceName: Invalid value: "memory": is not an extended resource name`,
		},
		{name: "fullScoreHeadroomPercent 100", set: func(a *config.PowerBudgetArgs) { a.FullScoreHeadroomPercent = 100 }},
		{
			name:    "fullScoreHeadroomPercent 0",
			set:     func(a *config.PowerBudgetArgs) { a.FullScoreHeadroomPercent = 0 },
			wantErr: "fullScoreHeadroomPercent: Invalid value: 0: must be between 1 and 100",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := configv1.DefaultPowerBudgetArgs()
			tc.set(args)
			err := ValidatePowerBudgetArgs(nil, args)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
