// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package v1

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/apis/config"
)

func TestConversionRoundTrip(t *testing.T) {
	t.Parallel()
	// Every field is set, and to a value other than its default, so that a
	// field the conversions drop shows up as a difference.
	tests := []struct {
		name     string
		in       runtime.Object // v1
		internal runtime.Object // the internal object to convert into
		want     runtime.Object // internal
	}{
		{
			name: "LoadAwareArgs",
			in: &LoadAwareArgs{
				TelemetryArgs: TelemetryArgs{
					TelemetryMaxAge:      &metav1.Duration{Duration: 90 * time.Second},
					StaleTelemetryPolicy: ptr.To(StaleTelemetryReject),
				},
				CPUThresholdPercent:     ptr.To[int32](81),
				MemoryThresholdPercent:  ptr.To[int32](82),
				ScoringStrategy:         ptr.To(ScoringStrategyPack),
				Usage:                   ptr.To(UsageMax),
				PackTargetPercent:       ptr.To[int32](83),
				PodCPUScalingPercent:    ptr.To[int32](150),
				PodMemoryScalingPercent: ptr.To[int32](250),
				DefaultPodCPUMilli:      ptr.To[int64](250),
				DefaultPodMemoryBytes:   ptr.To[int64](1 << 30),
			},
			internal: &config.LoadAwareArgs{},
			want: &config.LoadAwareArgs{
				TelemetryArgs: config.TelemetryArgs{
					TelemetryMaxAge:      90 * time.Second,
					StaleTelemetryPolicy: config.StaleTelemetryReject,
				},
				CPUThresholdPercent:     81,
				MemoryThresholdPercent:  82,
				ScoringStrategy:         config.ScoringStrategyPack,
				Usage:                   config.UsageMax,
				PackTargetPercent:       83,
				PodCPUScalingPercent:    150,
				PodMemoryScalingPercent: 250,
				DefaultPodCPUMilli:      250,
				DefaultPodMemoryBytes:   1 << 30,
			},
		},
		{
			name: "TopologyFitArgs",
			in: &TopologyFitArgs{
				TelemetryArgs: TelemetryArgs{
					TelemetryMaxAge:      &metav1.Duration{Duration: 2 * time.Minute},
					StaleTelemetryPolicy: ptr.To(StaleTelemetryReject),
				},
				GPUResourceName:         ptr.To("amd.com/gpu"),
				NonGPUPodPenaltyPercent: ptr.To[int32](25),
				GPUCPUReserveMilli:      ptr.To[int64](8000),
				MIGResourcePrefix:       ptr.To("example.com/mig-"),
				GPUDeviceClassNames:     []string{"gpu.example.com"},
				MIGDeviceClassNames:     []string{"mig.example.com"},
				GPUDriverNames:          []string{"gpu.example.com", "gpu.nvidia.com"},
			},
			internal: &config.TopologyFitArgs{},
			want: &config.TopologyFitArgs{
				TelemetryArgs: config.TelemetryArgs{
					TelemetryMaxAge:      2 * time.Minute,
					StaleTelemetryPolicy: config.StaleTelemetryReject,
				},
				GPUResourceName:         "amd.com/gpu",
				NonGPUPodPenaltyPercent: 25,
				GPUCPUReserveMilli:      8000,
				MIGResourcePrefix:       "example.com/mig-",
				GPUDeviceClassNames:     []string{"gpu.example.com"},
				MIGDeviceClassNames:     []string{"mig.example.com"},
				GPUDriverNames:          []string{"gpu.example.com", "gpu.nvidia.com"},
			},
		},
		{
			name: "EnergyAwareArgs",
			in: &EnergyAwareArgs{
				TelemetryArgs: TelemetryArgs{
					TelemetryMaxAge:      &metav1.Duration{Duration: 30 * time.Second},
					StaleTelemetryPolicy: ptr.To(StaleTelemetryReject),
				},
				ThermalMarginCelsius:     ptr.To[int32](7),
				AbsoluteLimitCelsius:     ptr.To[int32](95),
				RejectThrottling:         ptr.To(false),
				GPUSlowdownMarginCelsius: ptr.To[int32](4),
				GPUResourceName:          ptr.To("amd.com/gpu"),
				PowerWeight:              ptr.To[int32](40),
				ThermalWeight:            ptr.To[int32](60),
				ConsolidationPods:        ptr.To[int32](4),
				PowerSpanPercent:         ptr.To[int32](25),
			},
			internal: &config.EnergyAwareArgs{},
			want: &config.EnergyAwareArgs{
				TelemetryArgs: config.TelemetryArgs{
					TelemetryMaxAge:      30 * time.Second,
					StaleTelemetryPolicy: config.StaleTelemetryReject,
				},
				ThermalMarginCelsius:     7,
				AbsoluteLimitCelsius:     95,
				RejectThrottling:         false,
				GPUSlowdownMarginCelsius: 4,
				GPUResourceName:          "amd.com/gpu",
				PowerWeight:              40,
				ThermalWeight:            60,
				ConsolidationPods:        4,
				PowerSpanPercent:         25,
			},
		},
		{
			name: "PowerBudgetArgs",
			in: &PowerBudgetArgs{
				TelemetryMaxAge:          &metav1.Duration{Duration: 45 * time.Second},
				GPUResourceName:          ptr.To("amd.com/gpu"),
				FullScoreHeadroomPercent: ptr.To[int32](30),
			},
			internal: &config.PowerBudgetArgs{},
			want:     &config.PowerBudgetArgs{TelemetryMaxAge: 45 * time.Second, GPUResourceName: "amd.com/gpu", FullScoreHeadroomPercent: 30},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if unset := nilFields(reflect.ValueOf(tc.in).Elem(), ""); len(unset) > 0 {
				t.Fatalf("test object leaves fields unset, so their conversion is not tested: %v", unset)
			}
			s := runtime.NewScheme()
			if err := config.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			if err := AddToScheme(s); err != nil {
				t.Fatal(err)
			}

			internal := tc.internal.DeepCopyObject()
			if err := s.Convert(tc.in, internal, nil); err != nil {
				t.Fatalf("v1 -> internal: %v", err)
			}
			if diff := cmp.Diff(tc.want, internal); diff != "" {
				t.Errorf("internal args (-want +got):\n%s", diff)
			}

			back := reflect.New(reflect.TypeOf(tc.in).Elem()).Interface().(runtime.Object)
			if err := s.Convert(internal, back, nil); err != nil {
				t.Fatalf("internal -> v1: %v", err)
			}
			if diff := cmp.Diff(tc.in, back); diff != "" {
				t.Errorf("round trip v1 -> internal -> v1 (-want +got):\n%s", diff)
			}
		})
	}
}

// nilFields names the nil pointer fields of v, a struct, looking into
// embedded structs; TypeMeta is skipped.
func nilFields(v reflect.Value, prefix string) []string {
	var names []string
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		switch {
		case sf.Name == "TypeMeta":
		case sf.Anonymous && f.Kind() == reflect.Struct:
			names = append(names, nilFields(f, prefix+sf.Name+".")...)
		case f.Kind() == reflect.Pointer && f.IsNil():
			names = append(names, prefix+sf.Name)
		}
	}
	return names
}

func TestDefaultInternalArgs(t *testing.T) {
	t.Parallel()
	telemetry := config.TelemetryArgs{TelemetryMaxAge: 60 * time.Second, StaleTelemetryPolicy: config.StaleTelemetryIgnore}
	tests := []struct {
		name string
		got  runtime.Object
		want runtime.Object
	}{
		{
			name: "LoadAwareArgs",
			got:  DefaultLoadAwareArgs(),
			want: &config.LoadAwareArgs{
				TelemetryArgs:           telemetry,
				CPUThresholdPercent:     80,
				MemoryThresholdPercent:  90,
				ScoringStrategy:         config.ScoringStrategySpread,
				Usage:                   config.UsageInstant,
				PackTargetPercent:       70,
				PodCPUScalingPercent:    100,
				PodMemoryScalingPercent: 100,
				DefaultPodCPUMilli:      100,
				DefaultPodMemoryBytes:   200 * 1024 * 1024,
			},
		},
		{
			name: "TopologyFitArgs",
			got:  DefaultTopologyFitArgs(),
			want: &config.TopologyFitArgs{
				TelemetryArgs:           telemetry,
				GPUResourceName:         "nvidia.com/gpu",
				NonGPUPodPenaltyPercent: 50,
				GPUCPUReserveMilli:      4000,
				MIGResourcePrefix:       "nvidia.com/mig-",
				GPUDeviceClassNames:     []string{"gpu.nvidia.com"},
				MIGDeviceClassNames:     []string{"mig.nvidia.com"},
				GPUDriverNames:          []string{"gpu.nvidia.com"},
			},
		},
		{
			name: "EnergyAwareArgs",
			got:  DefaultEnergyAwareArgs(),
			want: &config.EnergyAwareArgs{
				TelemetryArgs:            telemetry,
				ThermalMarginCelsius:     5,
				AbsoluteLimitCelsius:     90,
				RejectThrottling:         true,
				GPUSlowdownMarginCelsius: 3,
				GPUResourceName:          "nvidia.com/gpu",
				PowerWeight:              70,
				ThermalWeight:            30,
				ConsolidationPods:        8,
				PowerSpanPercent:         25,
			},
		},
		{
			name: "PowerBudgetArgs",
			got:  DefaultPowerBudgetArgs(),
			want: &config.PowerBudgetArgs{TelemetryMaxAge: time.Minute, GPUResourceName: "nvidia.com/gpu", FullScoreHeadroomPercent: 50},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("default internal args (-want +got):\n%s", diff)
			}
		})
	}
}
