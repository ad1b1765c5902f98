// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package validation checks the internal plugin args of package config. Each
// Validate<Plugin>Args returns nil or an aggregate of field errors whose paths
// are rooted at the path given (nil: the args themselves), so that an error
// reads "cpuThresholdPercent: Invalid value: 150: must be between 1 and 100".
// A plugin's New calls it and fails on error, which stops the scheduler at
// start.
package validation

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	"github.com/telesched/telesched/apis/config"
)

// Bounds of the numeric fields, inclusive.
const (
	MinThresholdPercent = 1
	MaxThresholdPercent = 100

	MinPodScalingPercent = 1
	MaxPodScalingPercent = 1000

	MinPenaltyPercent = 0
	MaxPenaltyPercent = 100

	MinMarginCelsius = 0
	MaxMarginCelsius = 50

	MinAbsoluteLimitCelsius = 30
	MaxAbsoluteLimitCelsius = 150

	MinWeight = 0
	MaxWeight = 100

	MinConsolidationPods = 1
	MaxConsolidationPods = 64

	MinPowerSpanPercent = 1
	MaxPowerSpanPercent = 1000
)

var (
	supportedStaleTelemetryPolicies = []config.StaleTelemetryPolicy{config.StaleTelemetryIgnore, config.StaleTelemetryReject}
	supportedScoringStrategies      = []config.ScoringStrategyType{config.ScoringStrategySpread, config.ScoringStrategyPack}
	supportedUsages                 = []config.UsageType{config.UsageInstant, config.UsageP50, config.UsageP90, config.UsageMax}
)

// ValidateLoadAwareArgs validates LoadAwareArgs.
func ValidateLoadAwareArgs(path *field.Path, args *config.LoadAwareArgs) error {
	allErrs := validateTelemetryArgs(path, &args.TelemetryArgs)
	allErrs = append(allErrs, validateRange(path.Child("cpuThresholdPercent"), args.CPUThresholdPercent, MinThresholdPercent, MaxThresholdPercent)...)
	allErrs = append(allErrs, validateRange(path.Child("memoryThresholdPercent"), args.MemoryThresholdPercent, MinThresholdPercent, MaxThresholdPercent)...)
	allErrs = append(allErrs, validateEnum(path.Child("scoringStrategy"), args.ScoringStrategy, supportedScoringStrategies)...)
	allErrs = append(allErrs, validateEnum(path.Child("usage"), args.Usage, supportedUsages)...)
	allErrs = append(allErrs, validateRange(path.Child("packTargetPercent"), args.PackTargetPercent, MinThresholdPercent, MaxThresholdPercent)...)
	allErrs = append(allErrs, validateRange(path.Child("podCPUScalingPercent"), args.PodCPUScalingPercent, MinPodScalingPercent, MaxPodScalingPercent)...)
	allErrs = append(allErrs, validateRange(path.Child("podMemoryScalingPercent"), args.PodMemoryScalingPercent, MinPodScalingPercent, MaxPodScalingPercent)...)
	allErrs = append(allErrs, validateNonNegative(path.Child("defaultPodCPUMilli"), args.DefaultPodCPUMilli)...)
	allErrs = append(allErrs, validateNonNegative(path.Child("defaultPodMemoryBytes"), args.DefaultPodMemoryBytes)...)
	return allErrs.ToAggregate()
}

// ValidateTopologyFitArgs validates TopologyFitArgs.
func ValidateTopologyFitArgs(path *field.Path, args *config.TopologyFitArgs) error {
	allErrs := validateTelemetryArgs(path, &args.TelemetryArgs)
	allErrs = append(allErrs, validateExtendedResourceName(path.Child("gpuResourceName"), args.GPUResourceName)...)
	allErrs = append(allErrs, validateRange(path.Child("nonGPUPodPenaltyPercent"), args.NonGPUPodPenaltyPercent, MinPenaltyPercent, MaxPenaltyPercent)...)
	allErrs = append(allErrs, validateNonNegative(path.Child("gpuCPUReserveMilli"), args.GPUCPUReserveMilli)...)
	allErrs = append(allErrs, validateMIGResourcePrefix(path.Child("migResourcePrefix"), args.MIGResourcePrefix, args.GPUResourceName)...)
	allErrs = append(allErrs, validateDNSSubdomains(path.Child("gpuDeviceClassNames"), args.GPUDeviceClassNames)...)
	allErrs = append(allErrs, validateDNSSubdomains(path.Child("migDeviceClassNames"), args.MIGDeviceClassNames)...)
	allErrs = append(allErrs, validateDNSSubdomains(path.Child("gpuDriverNames"), args.GPUDriverNames)...)
	return allErrs.ToAggregate()
}

// ValidateEnergyAwareArgs validates EnergyAwareArgs.
func ValidateEnergyAwareArgs(path *field.Path, args *config.EnergyAwareArgs) error {
	allErrs := validateTelemetryArgs(path, &args.TelemetryArgs)
	allErrs = append(allErrs, validateRange(path.Child("thermalMarginCelsius"), args.ThermalMarginCelsius, MinMarginCelsius, MaxMarginCelsius)...)
	allErrs = append(allErrs, validateRange(path.Child("absoluteLimitCelsius"), args.AbsoluteLimitCelsius, MinAbsoluteLimitCelsius, MaxAbsoluteLimitCelsius)...)
	allErrs = append(allErrs, validateRange(path.Child("gpuSlowdownMarginCelsius"), args.GPUSlowdownMarginCelsius, MinMarginCelsius, MaxMarginCelsius)...)
	allErrs = append(allErrs, validateExtendedResourceName(path.Child("gpuResourceName"), args.GPUResourceName)...)
	powerPath, thermalPath := path.Child("powerWeight"), path.Child("thermalWeight")
	allErrs = append(allErrs, validateRange(powerPath, args.PowerWeight, MinWeight, MaxWeight)...)
	allErrs = append(allErrs, validateRange(thermalPath, args.ThermalWeight, MinWeight, MaxWeight)...)
	allErrs = append(allErrs, validateRange(path.Child("consolidationPods"), args.ConsolidationPods, MinConsolidationPods, MaxConsolidationPods)...)
	allErrs = append(allErrs, validateRange(path.Child("powerSpanPercent"), args.PowerSpanPercent, MinPowerSpanPercent, MaxPowerSpanPercent)...)
	if args.PowerWeight == 0 && args.ThermalWeight == 0 {
		allErrs = append(allErrs,
			field.Invalid(powerPath, args.PowerWeight, "cannot be zero at the same time as thermalWeight"),
			field.Invalid(thermalPath, args.ThermalWeight, "cannot be zero at the same time as powerWeight"))
	}
	return allErrs.ToAggregate()
}

// ValidatePowerBudgetArgs validates PowerBudgetArgs.
func ValidatePowerBudgetArgs(path *field.Path, args *config.PowerBudgetArgs) error {
	var allErrs field.ErrorList
	if args.TelemetryMaxAge <= 0 {
		allErrs = append(allErrs, field.Invalid(path.Child("telemetryMaxAge"), metav1.Duration{Duration: args.TelemetryMaxAge}, "must be greater than zero"))
	}
	allErrs = append(allErrs, validateExtendedResourceName(path.Child("gpuResourceName"), args.GPUResourceName)...)
	allErrs = append(allErrs, validateRange(path.Child("fullScoreHeadroomPercent"), args.FullScoreHeadroomPercent, MinThresholdPercent, MaxThresholdPercent)...)
	return allErrs.ToAggregate()
}

func validateTelemetryArgs(path *field.Path, args *config.TelemetryArgs) field.ErrorList {
	var allErrs field.ErrorList
	if args.TelemetryMaxAge <= 0 {
		// As a metav1.Duration the value reads as written, e.g. "-1s".
		allErrs = append(allErrs, field.Invalid(path.Child("telemetryMaxAge"), metav1.Duration{Duration: args.TelemetryMaxAge}, "must be greater than zero"))
	}
	allErrs = append(allErrs, validateEnum(path.Child("staleTelemetryPolicy"), args.StaleTelemetryPolicy, supportedStaleTelemetryPolicies)...)
	return allErrs
}

func validateRange(path *field.Path, v int32, lo, hi int32) field.ErrorList {
	if v < lo || v > hi {
		return field.ErrorList{field.Invalid(path, v, fmt.Sprintf("must be between %d and %d", lo, hi))}
	}
	return nil
}

func validateNonNegative(path *field.Path, v int64) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(path, v, "must not be negative")}
	}
	return nil
}

func validateEnum[T ~string](path *field.Path, v T, supported []T) field.ErrorList {
	for _, s := range supported {
		if v == s {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(path, string(v), supported)}
}

// validateExtendedResourceName is kube-scheduler's own check of an
// extender's managed resource names: a qualified name that is an extended
// resource (not in the kubernetes.io namespace, no "requests." prefix).
// validateMIGResourcePrefix checks that prefix + a profile such as
// "1g.10gb" is an extended resource name, and that the GPU resource is not
// one of them.
func validateMIGResourcePrefix(path *field.Path, prefix, gpuResource string) field.ErrorList {
	const profile = "1g.10gb"
	if prefix == "" {
		return field.ErrorList{field.Invalid(path, prefix, `must name a resource prefix such as "nvidia.com/mig-"`)}
	}
	for _, err := range validateExtendedResourceName(path, prefix+profile) {
		return field.ErrorList{field.Invalid(path, prefix, fmt.Sprintf("%s + a profile such as %q: %s", prefix, profile, err.Detail))}
	}
	if strings.HasPrefix(gpuResource, prefix) {
		return field.ErrorList{field.Invalid(path, prefix, fmt.Sprintf("gpuResourceName %q must not start with it: it would count as a MIG profile", gpuResource))}
	}
	return nil
}

// validateDNSSubdomains checks a list of DeviceClass or driver names,
// which the API requires to be DNS subdomains, for their form and
// duplicates.
func validateDNSSubdomains(path *field.Path, names []string) field.ErrorList {
	var allErrs field.ErrorList
	seen := map[string]bool{}
	for i, name := range names {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			allErrs = append(allErrs, field.Invalid(path.Index(i), name, msg))
		}
		if seen[name] {
			allErrs = append(allErrs, field.Duplicate(path.Index(i), name))
		}
		seen[name] = true
	}
	return allErrs
}

func validateExtendedResourceName(path *field.Path, name string) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsQualifiedName(name) {
		allErrs = append(allErrs, field.Invalid(path, name, msg))
	}
	if len(allErrs) != 0 {
		return allErrs
	}
	if !v1helper.IsExtendedResourceName(v1.ResourceName(name)) {
		allErrs = append(allErrs, field.Invalid(path, name, "is not an extended resource name"))
	}
	return allErrs
}
