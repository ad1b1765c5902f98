// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package v1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func defaultTelemetryArgs() TelemetryArgs {
	return TelemetryArgs{
		TelemetryMaxAge:      &metav1.Duration{Duration: 60 * time.Second},
		StaleTelemetryPolicy: ptr.To(StaleTelemetryIgnore),
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   runtime.Object
		want runtime.Object
	}{
		{
			name: "LoadAwareArgs empty",
			in:   &LoadAwareArgs{},
			want: &LoadAwareArgs{
				TelemetryArgs:           defaultTelemetryArgs(),
				CPUThresholdPercent:     ptr.To[int32](80),
				MemoryThresholdPercent:  ptr.To[int32](90),
				ScoringStrategy:         ptr.To(ScoringStrategySpread),
				Usage:                   ptr.To(UsageInstant),
				PackTargetPercent:       ptr.To[int32](70),
				PodCPUScalingPercent:    ptr.To[int32](100),
				PodMemoryScalingPercent: ptr.To[int32](100),
				DefaultPodCPUMilli:      ptr.To[int64](100),               // 0.1 core, kube-scheduler's default
				DefaultPodMemoryBytes:   ptr.To[int64](200 * 1024 * 1024), // 200Mi, kube-scheduler's default
			},
		},
		{
			name: "LoadAwareArgs set fields kept, zero values included",
			in: &LoadAwareArgs{
				TelemetryArgs: TelemetryArgs{
					TelemetryMaxAge:      &metav1.Duration{Duration: 15 * time.Second},
					StaleTelemetryPolicy: ptr.To(StaleTelemetryReject),
				},
				CPUThresholdPercent:   ptr.To[int32](60),
				ScoringStrategy:       ptr.To(ScoringStrategyPack),
				Usage:                 ptr.To(UsageP90),
				DefaultPodCPUMilli:    ptr.To[int64](0),
				DefaultPodMemoryBytes: ptr.To[int64](0),
			},
			want: &LoadAwareArgs{
				TelemetryArgs: TelemetryArgs{
					TelemetryMaxAge:      &metav1.Duration{Duration: 15 * time.Second},
					StaleTelemetryPolicy: ptr.To(StaleTelemetryReject),
				},
				CPUThresholdPercent:     ptr.To[int32](60),
				MemoryThresholdPercent:  ptr.To[int32](90),
				ScoringStrategy:         ptr.To(ScoringStrategyPack),
				Usage:                   ptr.To(UsageP90),
				PackTargetPercent:       ptr.To[int32](70),
				PodCPUScalingPercent:    ptr.To[int32](100),
				PodMemoryScalingPercent: ptr.To[int32](100),
				DefaultPodCPUMilli:      ptr.To[int64](0),
				DefaultPodMemoryBytes:   ptr.To[int64](0),
			},
		},
		{
			name: "TopologyFitArgs empty",
			in:   &TopologyFitArgs{},
			want: &TopologyFitArgs{
				TelemetryArgs:           defaultTelemetryArgs(),
				GPUResourceName:         ptr.To("nvidia.com/gpu"),
				NonGPUPodPenaltyPercent: ptr.To[int32](50),
				GPUCPUReserveMilli:      ptr.To[int64](4000),
				MIGResourcePrefix:       ptr.To("nvidia.com/mig-"),
				GPUDeviceClassNames:     []string{"gpu.nvidia.com"},
				MIGDeviceClassNames:     []string{"mig.nvidia.com"},
				GPUDriverNames:          []string{"gpu.nvidia.com"},
			},
		},
		{
			name: "TopologyFitArgs set fields kept, zero values included",
			in: &TopologyFitArgs{
				GPUResourceName:         ptr.To("amd.com/gpu"),
				NonGPUPodPenaltyPercent: ptr.To[int32](0),
				GPUCPUReserveMilli:      ptr.To[int64](0),
				MIGResourcePrefix:       ptr.To("amd.com/partition-"),
				// An empty list turns DRA's GPUs off; it is not defaulted.
				GPUDeviceClassNames: []string{},
				MIGDeviceClassNames: []string{},
				GPUDriverNames:      []string{"gpu.amd.com"},
			},
			want: &TopologyFitArgs{
				TelemetryArgs:           defaultTelemetryArgs(),
				GPUResourceName:         ptr.To("amd.com/gpu"),
				NonGPUPodPenaltyPercent: ptr.To[int32](0),
				GPUCPUReserveMilli:      ptr.To[int64](0),
				MIGResourcePrefix:       ptr.To("amd.com/partition-"),
				GPUDeviceClassNames:     []string{},
				MIGDeviceClassNames:     []string{},
				GPUDriverNames:          []string{"gpu.amd.com"},
			},
		},
		{
			name: "EnergyAwareArgs empty",
			in:   &EnergyAwareArgs{},
			want: &EnergyAwareArgs{
				TelemetryArgs:            defaultTelemetryArgs(),
				ThermalMarginCelsius:     ptr.To[int32](5),
				AbsoluteLimitCelsius:     ptr.To[int32](90),
				RejectThrottling:         ptr.To(true),
				GPUSlowdownMarginCelsius: ptr.To[int32](3),
				GPUResourceName:          ptr.To("nvidia.com/gpu"),
				PowerWeight:              ptr.To[int32](70),
				ThermalWeight:            ptr.To[int32](30),
				ConsolidationPods:        ptr.To[int32](8),
				PowerSpanPercent:         ptr.To[int32](25),
			},
		},
		{
			name: "EnergyAwareArgs set fields kept, zero values included",
			in: &EnergyAwareArgs{
				TelemetryArgs:     TelemetryArgs{StaleTelemetryPolicy: ptr.To(StaleTelemetryReject)},
				RejectThrottling:  ptr.To(false),
				PowerWeight:       ptr.To[int32](0),
				ThermalWeight:     ptr.To[int32](100),
				ConsolidationPods: ptr.To[int32](1),
				PowerSpanPercent:  ptr.To[int32](200),
			},
			want: &EnergyAwareArgs{
				TelemetryArgs: TelemetryArgs{
					TelemetryMaxAge:      &metav1.Duration{Duration: 60 * time.Second},
					StaleTelemetryPolicy: ptr.To(StaleTelemetryReject),
				},
				ThermalMarginCelsius:     ptr.To[int32](5),
				AbsoluteLimitCelsius:     ptr.To[int32](90),
				RejectThrottling:         ptr.To(false),
				GPUSlowdownMarginCelsius: ptr.To[int32](3),
				GPUResourceName:          ptr.To("nvidia.com/gpu"),
				PowerWeight:              ptr.To[int32](0),
				ThermalWeight:            ptr.To[int32](100),
				ConsolidationPods:        ptr.To[int32](1),
				PowerSpanPercent:         ptr.To[int32](200),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Through a scheme, as kube-scheduler defaults them: this also
			// checks that RegisterDefaults registered every type.
			s := runtime.NewScheme()
			if err := AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			got := tc.in.DeepCopyObject()
			s.Default(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("defaulted args (-want +got):\n%s", diff)
			}
		})
	}
}
