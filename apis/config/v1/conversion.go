// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package v1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/apis/config"
)

// The conversions are written by hand: they are field-for-field copies, and
// TestConversionRoundTrip fails when a field is added to a v1 type without
// being converted. A nil v1 pointer converts to the zero value; defaulting
// runs before conversion, so that happens only to args built without it.
// TypeMeta is not converted: the scheme sets it.

// RegisterConversions adds the conversions between the v1 and the internal
// plugin args to a scheme.
func RegisterConversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*LoadAwareArgs)(nil), (*config.LoadAwareArgs)(nil), func(a, b any, scope conversion.Scope) error {
		return Convert_v1_LoadAwareArgs_To_config_LoadAwareArgs(a.(*LoadAwareArgs), b.(*config.LoadAwareArgs), scope)
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*config.LoadAwareArgs)(nil), (*LoadAwareArgs)(nil), func(a, b any, scope conversion.Scope) error {
		return Convert_config_LoadAwareArgs_To_v1_LoadAwareArgs(a.(*config.LoadAwareArgs), b.(*LoadAwareArgs), scope)
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*TopologyFitArgs)(nil), (*config.TopologyFitArgs)(nil), func(a, b any, scope conversion.Scope) error {
		return Convert_v1_TopologyFitArgs_To_config_TopologyFitArgs(a.(*TopologyFitArgs), b.(*config.TopologyFitArgs), scope)
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*config.TopologyFitArgs)(nil), (*TopologyFitArgs)(nil), func(a, b any, scope conversion.Scope) error {
		return Convert_config_TopologyFitArgs_To_v1_TopologyFitArgs(a.(*config.TopologyFitArgs), b.(*TopologyFitArgs), scope)
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*EnergyAwareArgs)(nil), (*config.EnergyAwareArgs)(nil), func(a, b any, scope conversion.Scope) error {
		return Convert_v1_EnergyAwareArgs_To_config_EnergyAwareArgs(a.(*EnergyAwareArgs), b.(*config.EnergyAwareArgs), scope)
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*config.EnergyAwareArgs)(nil), (*EnergyAwareArgs)(nil), func(a, b any, scope conversion.Scope) error {
		return Convert_config_EnergyAwareArgs_To_v1_EnergyAwareArgs(a.(*config.EnergyAwareArgs), b.(*EnergyAwareArgs), scope)
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*PowerBudgetArgs)(nil), (*config.PowerBudgetArgs)(nil), func(a, b any, scope conversion.Scope) error {
		return Convert_v1_PowerBudgetArgs_To_config_PowerBudgetArgs(a.(*PowerBudgetArgs), b.(*config.PowerBudgetArgs), scope)
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*config.PowerBudgetArgs)(nil), (*PowerBudgetArgs)(nil), func(a, b any, scope conversion.Scope) error {
		return Convert_config_PowerBudgetArgs_To_v1_PowerBudgetArgs(a.(*config.PowerBudgetArgs), b.(*PowerBudgetArgs), scope)
	})
}

// Convert_v1_TelemetryArgs_To_config_TelemetryArgs converts the fields every
// plugin has to their internal form.
func Convert_v1_TelemetryArgs_To_config_TelemetryArgs(in *TelemetryArgs, out *config.TelemetryArgs, _ conversion.Scope) error {
	out.TelemetryMaxAge = 0
	if in.TelemetryMaxAge != nil {
		out.TelemetryMaxAge = in.TelemetryMaxAge.Duration
	}
	out.StaleTelemetryPolicy = config.StaleTelemetryPolicy(ptr.Deref(in.StaleTelemetryPolicy, ""))
	return nil
}

// Convert_config_TelemetryArgs_To_v1_TelemetryArgs converts the fields every
// plugin has to their v1 form.
func Convert_config_TelemetryArgs_To_v1_TelemetryArgs(in *config.TelemetryArgs, out *TelemetryArgs, _ conversion.Scope) error {
	out.TelemetryMaxAge = &metav1.Duration{Duration: in.TelemetryMaxAge}
	out.StaleTelemetryPolicy = ptr.To(StaleTelemetryPolicy(in.StaleTelemetryPolicy))
	return nil
}

// Convert_v1_LoadAwareArgs_To_config_LoadAwareArgs converts LoadAwareArgs to
// their internal form.
func Convert_v1_LoadAwareArgs_To_config_LoadAwareArgs(in *LoadAwareArgs, out *config.LoadAwareArgs, s conversion.Scope) error {
	if err := Convert_v1_TelemetryArgs_To_config_TelemetryArgs(&in.TelemetryArgs, &out.TelemetryArgs, s); err != nil {
		return err
	}
	out.CPUThresholdPercent = ptr.Deref(in.CPUThresholdPercent, 0)
	out.MemoryThresholdPercent = ptr.Deref(in.MemoryThresholdPercent, 0)
	out.ScoringStrategy = config.ScoringStrategyType(ptr.Deref(in.ScoringStrategy, ""))
	out.Usage = config.UsageType(ptr.Deref(in.Usage, ""))
	out.PackTargetPercent = ptr.Deref(in.PackTargetPercent, 0)
	out.PodCPUScalingPercent = ptr.Deref(in.PodCPUScalingPercent, 0)
	out.PodMemoryScalingPercent = ptr.Deref(in.PodMemoryScalingPercent, 0)
	out.DefaultPodCPUMilli = ptr.Deref(in.DefaultPodCPUMilli, 0)
	out.DefaultPodMemoryBytes = ptr.Deref(in.DefaultPodMemoryBytes, 0)
	return nil
}

// Convert_config_LoadAwareArgs_To_v1_LoadAwareArgs converts LoadAwareArgs to
// their v1 form.
func Convert_config_LoadAwareArgs_To_v1_LoadAwareArgs(in *config.LoadAwareArgs, out *LoadAwareArgs, s conversion.Scope) error {
	if err := Convert_config_TelemetryArgs_To_v1_TelemetryArgs(&in.TelemetryArgs, &out.TelemetryArgs, s); err != nil {
		return err
	}
	out.CPUThresholdPercent = ptr.To(in.CPUThresholdPercent)
	out.MemoryThresholdPercent = ptr.To(in.MemoryThresholdPercent)
	out.ScoringStrategy = ptr.To(ScoringStrategyType(in.ScoringStrategy))
	out.Usage = ptr.To(UsageType(in.Usage))
	out.PackTargetPercent = ptr.To(in.PackTargetPercent)
	out.PodCPUScalingPercent = ptr.To(in.PodCPUScalingPercent)
	out.PodMemoryScalingPercent = ptr.To(in.PodMemoryScalingPercent)
	out.DefaultPodCPUMilli = ptr.To(in.DefaultPodCPUMilli)
	out.DefaultPodMemoryBytes = ptr.To(in.DefaultPodMemoryBytes)
	return nil
}

// Convert_v1_TopologyFitArgs_To_config_TopologyFitArgs converts
// TopologyFitArgs to their internal form.
func Convert_v1_TopologyFitArgs_To_config_TopologyFitArgs(in *TopologyFitArgs, out *config.TopologyFitArgs, s conversion.Scope) error {
	if err := Convert_v1_TelemetryArgs_To_config_TelemetryArgs(&in.TelemetryArgs, &out.TelemetryArgs, s); err != nil {
		return err
	}
	out.GPUResourceName = ptr.Deref(in.GPUResourceName, "")
	out.NonGPUPodPenaltyPercent = ptr.Deref(in.NonGPUPodPenaltyPercent, 0)
	out.GPUCPUReserveMilli = ptr.Deref(in.GPUCPUReserveMilli, 0)
	out.MIGResourcePrefix = ptr.Deref(in.MIGResourcePrefix, "")
	out.GPUDeviceClassNames = slices.Clone(in.GPUDeviceClassNames)
	out.MIGDeviceClassNames = slices.Clone(in.MIGDeviceClassNames)
	out.GPUDriverNames = slices.Clone(in.GPUDriverNames)
	return nil
}

// Convert_config_TopologyFitArgs_To_v1_TopologyFitArgs converts
// TopologyFitArgs to their v1 form.
func Convert_config_TopologyFitArgs_To_v1_TopologyFitArgs(in *config.TopologyFitArgs, out *TopologyFitArgs, s conversion.Scope) error {
	if err := Convert_config_TelemetryArgs_To_v1_TelemetryArgs(&in.TelemetryArgs, &out.TelemetryArgs, s); err != nil {
		return err
	}
	out.GPUResourceName = ptr.To(in.GPUResourceName)
	out.NonGPUPodPenaltyPercent = ptr.To(in.NonGPUPodPenaltyPercent)
	out.GPUCPUReserveMilli = ptr.To(in.GPUCPUReserveMilli)
	out.MIGResourcePrefix = ptr.To(in.MIGResourcePrefix)
	out.GPUDeviceClassNames = nonNil(in.GPUDeviceClassNames)
	out.MIGDeviceClassNames = nonNil(in.MIGDeviceClassNames)
	out.GPUDriverNames = nonNil(in.GPUDriverNames)
	return nil
}

// Convert_v1_EnergyAwareArgs_To_config_EnergyAwareArgs converts
// EnergyAwareArgs to their internal form.
func Convert_v1_EnergyAwareArgs_To_config_EnergyAwareArgs(in *EnergyAwareArgs, out *config.EnergyAwareArgs, s conversion.Scope) error {
	if err := Convert_v1_TelemetryArgs_To_config_TelemetryArgs(&in.TelemetryArgs, &out.TelemetryArgs, s); err != nil {
		return err
	}
	out.ThermalMarginCelsius = ptr.Deref(in.ThermalMarginCelsius, 0)
	out.AbsoluteLimitCelsius = ptr.Deref(in.AbsoluteLimitCelsius, 0)
	out.RejectThrottling = ptr.Deref(in.RejectThrottling, false)
	out.GPUSlowdownMarginCelsius = ptr.Deref(in.GPUSlowdownMarginCelsius, 0)
	out.GPUResourceName = ptr.Deref(in.GPUResourceName, "")
	out.PowerWeight = ptr.Deref(in.PowerWeight, 0)
	out.ThermalWeight = ptr.Deref(in.ThermalWeight, 0)
	out.ConsolidationPods = ptr.Deref(in.ConsolidationPods, 0)
	out.PowerSpanPercent = ptr.Deref(in.PowerSpanPercent, 0)
	return nil
}

// Convert_config_EnergyAwareArgs_To_v1_EnergyAwareArgs converts
// EnergyAwareArgs to their v1 form.
func Convert_config_EnergyAwareArgs_To_v1_EnergyAwareArgs(in *config.EnergyAwareArgs, out *EnergyAwareArgs, s conversion.Scope) error {
	if err := Convert_config_TelemetryArgs_To_v1_TelemetryArgs(&in.TelemetryArgs, &out.TelemetryArgs, s); err != nil {
		return err
	}
	out.ThermalMarginCelsius = ptr.To(in.ThermalMarginCelsius)
	out.AbsoluteLimitCelsius = ptr.To(in.AbsoluteLimitCelsius)
	out.RejectThrottling = ptr.To(in.RejectThrottling)
	out.GPUSlowdownMarginCelsius = ptr.To(in.GPUSlowdownMarginCelsius)
	out.GPUResourceName = ptr.To(in.GPUResourceName)
	out.PowerWeight = ptr.To(in.PowerWeight)
	out.ThermalWeight = ptr.To(in.ThermalWeight)
	out.ConsolidationPods = ptr.To(in.ConsolidationPods)
	out.PowerSpanPercent = ptr.To(in.PowerSpanPercent)
	return nil
}

// DefaultLoadAwareArgs returns internal LoadAwareArgs with every field at its
// default: what a plugin's New uses when it is given no args, as in unit
// tests that build a framework without a configuration file.
func DefaultLoadAwareArgs() *config.LoadAwareArgs {
	var in LoadAwareArgs
	SetDefaults_LoadAwareArgs(&in)
	out := &config.LoadAwareArgs{}
	_ = Convert_v1_LoadAwareArgs_To_config_LoadAwareArgs(&in, out, nil) // never fails
	return out
}

// DefaultTopologyFitArgs returns internal TopologyFitArgs with every field
// at its default; see DefaultLoadAwareArgs.
func DefaultTopologyFitArgs() *config.TopologyFitArgs {
	var in TopologyFitArgs
	SetDefaults_TopologyFitArgs(&in)
	out := &config.TopologyFitArgs{}
	_ = Convert_v1_TopologyFitArgs_To_config_TopologyFitArgs(&in, out, nil) // never fails
	return out
}

// DefaultEnergyAwareArgs returns internal EnergyAwareArgs with every field
// at its default; see DefaultLoadAwareArgs.
func DefaultEnergyAwareArgs() *config.EnergyAwareArgs {
	var in EnergyAwareArgs
	SetDefaults_EnergyAwareArgs(&in)
	out := &config.EnergyAwareArgs{}
	_ = Convert_v1_EnergyAwareArgs_To_config_EnergyAwareArgs(&in, out, nil) // never fails
	return out
}

// Convert_v1_PowerBudgetArgs_To_config_PowerBudgetArgs converts
// PowerBudgetArgs to their internal form.
func Convert_v1_PowerBudgetArgs_To_config_PowerBudgetArgs(in *PowerBudgetArgs, out *config.PowerBudgetArgs, _ conversion.Scope) error {
	out.TelemetryMaxAge = 0
	if in.TelemetryMaxAge != nil {
		out.TelemetryMaxAge = in.TelemetryMaxAge.Duration
	}
	out.GPUResourceName = ptr.Deref(in.GPUResourceName, "")
	out.FullScoreHeadroomPercent = ptr.Deref(in.FullScoreHeadroomPercent, 0)
	return nil
}

// Convert_config_PowerBudgetArgs_To_v1_PowerBudgetArgs converts
// PowerBudgetArgs to their v1 form.
func Convert_config_PowerBudgetArgs_To_v1_PowerBudgetArgs(in *config.PowerBudgetArgs, out *PowerBudgetArgs, _ conversion.Scope) error {
	out.TelemetryMaxAge = &metav1.Duration{Duration: in.TelemetryMaxAge}
	out.GPUResourceName = ptr.To(in.GPUResourceName)
	out.FullScoreHeadroomPercent = ptr.To(in.FullScoreHeadroomPercent)
	return nil
}

// DefaultPowerBudgetArgs returns internal PowerBudgetArgs with every field
// at its default; see DefaultLoadAwareArgs.
func DefaultPowerBudgetArgs() *config.PowerBudgetArgs {
	var in PowerBudgetArgs
	SetDefaults_PowerBudgetArgs(&in)
	out := &config.PowerBudgetArgs{}
	_ = Convert_v1_PowerBudgetArgs_To_config_PowerBudgetArgs(&in, out, nil) // never fails
	return out
}

// nonNil is a copy of s, empty rather than nil: in the v1 args nil means
// "default", and an internal empty list is none.
func nonNil(s []string) []string {
	return append([]string{}, s...)
}
