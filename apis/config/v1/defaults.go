// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	"k8s.io/utils/ptr"
)

// Defaults of the fields every plugin has.
const (
	DefaultTelemetryMaxAge      = 60 * time.Second
	DefaultStaleTelemetryPolicy = StaleTelemetryIgnore
)

// Defaults of LoadAwareArgs.
const (
	DefaultCPUThresholdPercent     int32 = 80
	DefaultMemoryThresholdPercent  int32 = 90
	DefaultScoringStrategy               = ScoringStrategySpread
	DefaultUsage                         = UsageInstant
	DefaultPackTargetPercent       int32 = 70
	DefaultPodCPUScalingPercent    int32 = 100
	DefaultPodMemoryScalingPercent int32 = 100
	// DefaultPodCPUMilli is kube-scheduler's own CPU request for a container
	// that sets none (100m).
	DefaultPodCPUMilli = schedutil.DefaultMilliCPURequest
	// DefaultPodMemoryBytes is kube-scheduler's own memory request for a
	// container that sets none (200Mi).
	DefaultPodMemoryBytes = schedutil.DefaultMemoryRequest
)

// Defaults of TopologyFitArgs.
const (
	DefaultGPUResourceName               = "nvidia.com/gpu"
	DefaultNonGPUPodPenaltyPercent int32 = 50
	// DefaultGPUCPUReserveMilli keeps 4 CPUs per free GPU for GPU pods.
	DefaultGPUCPUReserveMilli int64 = 4000
	// DefaultMIGResourcePrefix is NVIDIA's device plugin's: its mixed MIG
	// strategy advertises nvidia.com/mig-<profile>.
	DefaultMIGResourcePrefix = "nvidia.com/mig-"
	// DefaultGPUDeviceClassName, DefaultMIGDeviceClassName and
	// DefaultGPUDriverName are those of NVIDIA's DRA driver
	// (k8s-dra-driver-gpu): its whole GPUs' and its MIG devices'
	// DeviceClasses, and its driver.
	DefaultGPUDeviceClassName = "gpu.nvidia.com"
	DefaultMIGDeviceClassName = "mig.nvidia.com"
	DefaultGPUDriverName      = "gpu.nvidia.com"
)

// Defaults of EnergyAwareArgs.
const (
	DefaultThermalMarginCelsius     int32 = 5
	DefaultAbsoluteLimitCelsius     int32 = 90
	DefaultRejectThrottling               = true
	DefaultGPUSlowdownMarginCelsius int32 = 3
	DefaultPowerWeight              int32 = 70
	DefaultThermalWeight            int32 = 30
	// DefaultConsolidationPods amortizes a node's power step over up to 8
	// pods like the one placed.
	DefaultConsolidationPods int32 = 8
	// DefaultPowerSpanPercent: a node 25 % dearer per unit of the pod's
	// work than the cheapest candidate gets no power points. At 50, an
	// H100 node (11 % fewer joules for a training job's work than an A100
	// 80GB node) lost the balanced profile's choice to PowerBudget's
	// preference for the rack it draws less from (docs/benchmarks.md,
	// "Scores that show what is at stake").
	DefaultPowerSpanPercent int32 = 25
)

// Defaults of PowerBudgetArgs.
const DefaultFullScoreHeadroomPercent int32 = 50

// RegisterDefaults adds the defaulting functions of the v1 plugin args to a
// scheme, so that scheme.Default applies them.
func RegisterDefaults(scheme *runtime.Scheme) error {
	scheme.AddTypeDefaultingFunc(&LoadAwareArgs{}, func(obj any) { SetDefaults_LoadAwareArgs(obj.(*LoadAwareArgs)) })
	scheme.AddTypeDefaultingFunc(&TopologyFitArgs{}, func(obj any) { SetDefaults_TopologyFitArgs(obj.(*TopologyFitArgs)) })
	scheme.AddTypeDefaultingFunc(&EnergyAwareArgs{}, func(obj any) { SetDefaults_EnergyAwareArgs(obj.(*EnergyAwareArgs)) })
	scheme.AddTypeDefaultingFunc(&PowerBudgetArgs{}, func(obj any) { SetDefaults_PowerBudgetArgs(obj.(*PowerBudgetArgs)) })
	return nil
}

// SetDefaults_TelemetryArgs sets the unset fields every plugin has.
func SetDefaults_TelemetryArgs(obj *TelemetryArgs) {
	if obj.TelemetryMaxAge == nil {
		obj.TelemetryMaxAge = &metav1.Duration{Duration: DefaultTelemetryMaxAge}
	}
	if obj.StaleTelemetryPolicy == nil {
		obj.StaleTelemetryPolicy = ptr.To(DefaultStaleTelemetryPolicy)
	}
}

// SetDefaults_LoadAwareArgs sets the unset fields of LoadAwareArgs.
func SetDefaults_LoadAwareArgs(obj *LoadAwareArgs) {
	SetDefaults_TelemetryArgs(&obj.TelemetryArgs)
	setDefault(&obj.CPUThresholdPercent, DefaultCPUThresholdPercent)
	setDefault(&obj.MemoryThresholdPercent, DefaultMemoryThresholdPercent)
	setDefault(&obj.ScoringStrategy, DefaultScoringStrategy)
	setDefault(&obj.Usage, DefaultUsage)
	setDefault(&obj.PackTargetPercent, DefaultPackTargetPercent)
	setDefault(&obj.PodCPUScalingPercent, DefaultPodCPUScalingPercent)
	setDefault(&obj.PodMemoryScalingPercent, DefaultPodMemoryScalingPercent)
	setDefault(&obj.DefaultPodCPUMilli, DefaultPodCPUMilli)
	setDefault(&obj.DefaultPodMemoryBytes, DefaultPodMemoryBytes)
}

// SetDefaults_TopologyFitArgs sets the unset fields of TopologyFitArgs.
func SetDefaults_TopologyFitArgs(obj *TopologyFitArgs) {
	SetDefaults_TelemetryArgs(&obj.TelemetryArgs)
	setDefault(&obj.GPUResourceName, DefaultGPUResourceName)
	setDefault(&obj.NonGPUPodPenaltyPercent, DefaultNonGPUPodPenaltyPercent)
	setDefault(&obj.GPUCPUReserveMilli, DefaultGPUCPUReserveMilli)
	setDefault(&obj.MIGResourcePrefix, DefaultMIGResourcePrefix)
	if obj.GPUDeviceClassNames == nil {
		obj.GPUDeviceClassNames = []string{DefaultGPUDeviceClassName}
	}
	if obj.MIGDeviceClassNames == nil {
		obj.MIGDeviceClassNames = []string{DefaultMIGDeviceClassName}
	}
	if obj.GPUDriverNames == nil {
		obj.GPUDriverNames = []string{DefaultGPUDriverName}
	}
}

// SetDefaults_EnergyAwareArgs sets the unset fields of EnergyAwareArgs.
func SetDefaults_EnergyAwareArgs(obj *EnergyAwareArgs) {
	SetDefaults_TelemetryArgs(&obj.TelemetryArgs)
	setDefault(&obj.ThermalMarginCelsius, DefaultThermalMarginCelsius)
	setDefault(&obj.AbsoluteLimitCelsius, DefaultAbsoluteLimitCelsius)
	setDefault(&obj.RejectThrottling, DefaultRejectThrottling)
	setDefault(&obj.GPUSlowdownMarginCelsius, DefaultGPUSlowdownMarginCelsius)
	setDefault(&obj.GPUResourceName, DefaultGPUResourceName)
	setDefault(&obj.PowerWeight, DefaultPowerWeight)
	setDefault(&obj.ThermalWeight, DefaultThermalWeight)
	setDefault(&obj.ConsolidationPods, DefaultConsolidationPods)
	setDefault(&obj.PowerSpanPercent, DefaultPowerSpanPercent)
}

// SetDefaults_PowerBudgetArgs sets the unset fields of PowerBudgetArgs.
func SetDefaults_PowerBudgetArgs(obj *PowerBudgetArgs) {
	if obj.TelemetryMaxAge == nil {
		obj.TelemetryMaxAge = &metav1.Duration{Duration: DefaultTelemetryMaxAge}
	}
	setDefault(&obj.GPUResourceName, DefaultGPUResourceName)
	setDefault(&obj.FullScoreHeadroomPercent, DefaultFullScoreHeadroomPercent)
}

// setDefault points *field at a copy of def when it is unset.
func setDefault[T any](field **T, def T) {
	if *field == nil {
		*field = ptr.To(def)
	}
}
