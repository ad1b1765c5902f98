// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StaleTelemetryPolicy says what a plugin does with a node whose telemetry is
// older than TelemetryMaxAge, or that has none.
type StaleTelemetryPolicy string

const (
	// StaleTelemetryIgnore: the node is neither rejected nor favoured. Filter
	// passes it and Score gives it a neutral score.
	StaleTelemetryIgnore StaleTelemetryPolicy = "Ignore"
	// StaleTelemetryReject: Filter rejects the node.
	StaleTelemetryReject StaleTelemetryPolicy = "Reject"
)

// TelemetryArgs are the arguments every telesched plugin has: how old a
// node's telemetry may be, and what to do when it is older or missing.
type TelemetryArgs struct {
	// TelemetryMaxAge: telemetry sampled longer ago than this is stale.
	// Greater than zero.
	TelemetryMaxAge time.Duration
	// StaleTelemetryPolicy applies to a node whose telemetry is stale or
	// missing.
	StaleTelemetryPolicy StaleTelemetryPolicy
}

// ScoringStrategyType is how LoadAware scores a node from its estimated
// utilization.
type ScoringStrategyType string

const (
	// ScoringStrategySpread favours the least utilized nodes.
	ScoringStrategySpread ScoringStrategyType = "Spread"
	// ScoringStrategyPack favours nodes whose utilization, with the pod
	// placed, is closest to LoadAwareArgs.PackTargetPercent.
	ScoringStrategyPack ScoringStrategyType = "Pack"
)

// UsageType is which of a node's utilization figures LoadAware filters and
// scores on.
type UsageType string

const (
	// UsageInstant is the last sample (status.cpu, status.memory).
	UsageInstant UsageType = "Instant"
	// UsageP50 is the median over the agent's window (status.windows).
	UsageP50 UsageType = "P50"
	// UsageP90 is the 90th percentile over the agent's window.
	UsageP90 UsageType = "P90"
	// UsageMax is the largest sample over the agent's window.
	UsageMax UsageType = "Max"
)

// LoadAwareArgs are the arguments of the LoadAware plugin, which filters and
// scores nodes by their measured CPU and memory utilization plus the
// requests of pods placed on them since their last sample.
//
// +kubebuilder:object:root=true
type LoadAwareArgs struct {
	metav1.TypeMeta

	TelemetryArgs

	// CPUThresholdPercent: a node whose estimated CPU utilization, with the
	// pod, exceeds this percentage is filtered out. The node annotation
	// NodeAnnotationCPUThresholdPercent overrides it per node. 1 to 100.
	CPUThresholdPercent int32
	// MemoryThresholdPercent: as CPUThresholdPercent, for memory; overridden
	// per node by NodeAnnotationMemoryThresholdPercent. 1 to 100.
	MemoryThresholdPercent int32
	// ScoringStrategy is Spread or Pack.
	ScoringStrategy ScoringStrategyType
	// Usage is the utilization figure filtered and scored on: Instant, or
	// P50, P90 or Max over the node's window, the instant sample standing
	// in where the node publishes no window.
	Usage UsageType
	// PackTargetPercent is the utilization the Pack strategy aims for.
	// 1 to 100.
	PackTargetPercent int32
	// PodCPUScalingPercent is how much of a pod's CPU request counts toward
	// its node's estimated utilization until the node's next sample reflects
	// the pod. 1 to 1000.
	PodCPUScalingPercent int32
	// PodMemoryScalingPercent: as PodCPUScalingPercent, for memory.
	// 1 to 1000.
	PodMemoryScalingPercent int32
	// DefaultPodCPUMilli is the CPU, in millicores, counted for a container
	// that requests none. Not negative.
	DefaultPodCPUMilli int64
	// DefaultPodMemoryBytes is the memory, in bytes, counted for a container
	// that requests none. Not negative.
	DefaultPodMemoryBytes int64
}

// TopologyFitArgs are the arguments of the TopologyFit plugin, which places
// pods by the node's NUMA and GPU topology. The pod annotations it reads are
// PodAnnotationNUMAPolicy, PodAnnotationGPUModel and
// PodAnnotationGPUMinMemory.
//
// +kubebuilder:object:root=true
type TopologyFitArgs struct {
	metav1.TypeMeta

	TelemetryArgs

	// GPUResourceName is the extended resource that counts GPUs.
	GPUResourceName string
	// NonGPUPodPenaltyPercent is how much a pod that requests no GPU has its
	// score reduced on a node with GPUs where it would take CPUs of the
	// node's GPU reserve (GPUCPUReserveMilli). 0 to 100.
	NonGPUPodPenaltyPercent int32
	// GPUCPUReserveMilli is the CPU, in millicores, a node with GPUs keeps
	// per unallocated GPU (per NUMA node, for the GPUs on it) for GPU pods.
	GPUCPUReserveMilli int64
	// MIGResourcePrefix is the prefix of the extended resources that count
	// MIG devices of one profile each (the device plugin's mixed strategy):
	// prefix + profile, e.g. nvidia.com/mig-1g.10gb.
	MIGResourcePrefix string
	// GPUDeviceClassNames are the DeviceClasses whose requests in a pod's
	// unallocated ResourceClaims count as whole GPUs (ExactCount mode, by
	// their count). Empty: none.
	GPUDeviceClassNames []string
	// MIGDeviceClassNames are the DeviceClasses whose requests in a pod's
	// unallocated ResourceClaims count as MIG devices (ExactCount mode, by
	// their count, each the compute slices of the profile a selector names,
	// else 1). Empty: none.
	MIGDeviceClassNames []string
	// GPUDriverNames are the DRA drivers whose devices count as GPUs: in
	// a node's ResourceSlices (its GPUs) and in claims' allocations (the
	// GPUs claims hold, joined to the node's telemetry by the device's
	// "uuid" attribute). Empty: none.
	GPUDriverNames []string
}

// EnergyAwareArgs are the arguments of the EnergyAware plugin, which rejects
// nodes running hot or throttled and scores nodes by power and temperature.
//
// +kubebuilder:object:root=true
type EnergyAwareArgs struct {
	metav1.TypeMeta

	TelemetryArgs

	// ThermalMarginCelsius: a node with a sensor within this many degrees
	// of its effective limit (critical, else max, else the vendor's, else
	// absoluteLimitCelsius) is rejected (package heat).
	// 0 to 50.
	ThermalMarginCelsius int32
	// AbsoluteLimitCelsius is the limit of a sensor that reports none and
	// has no known vendor limit, applied even when other sensors report
	// limits. Keep it equal to the agent's --absolute-limit-celsius.
	// 30 to 150.
	AbsoluteLimitCelsius int32
	// RejectThrottling: reject a node whose CPUs were thermally throttled
	// during the agent's last interval (a throttle counter rose; a sensor
	// alarm is not throttling). GPU thermal slowdown keeps GPU pods off
	// those GPUs whatever this says.
	RejectThrottling bool
	// GPUSlowdownMarginCelsius: a pod that requests GPUs is kept off nodes
	// whose GPUs are within this many degrees of their slowdown temperature
	// (too few cool ones, or a free one too hot: the kubelet may hand it
	// to the pod). 0 to 50.
	GPUSlowdownMarginCelsius int32
	// GPUResourceName is the extended resource that counts a pod's GPUs;
	// keep it equal to TopologyFit's.
	GPUResourceName string
	// PowerWeight is the weight of power draw in the score. 0 to 100; not
	// zero together with ThermalWeight.
	PowerWeight int32
	// ThermalWeight is the weight of thermal headroom in the score. 0 to 100;
	// not zero together with PowerWeight.
	ThermalWeight int32
	// ConsolidationPods: the power score ranks a pod by its share of the
	// watts that it and up to ConsolidationPods-1 more pods like it would
	// add to the node, the least over 1 to ConsolidationPods of them that
	// fit the node's unrequested CPU and LoadAware's threshold. 1 ranks by
	// the pod's own marginal watts. 1 to 64.
	ConsolidationPods int32
	// PowerSpanPercent: a node's power score falls from 100, for the
	// candidate that spends the fewest joules for a unit of the pod's
	// work, by 100 points over this much more than that: a node x percent
	// dearer scores 100*(1 - x/PowerSpanPercent), at least 0. What a few
	// watts are worth then follows from the pod's own energy, not from
	// the spread of the candidates. 1 to 1000.
	PowerSpanPercent int32
}

// PowerBudgetArgs are the arguments of the PowerBudget plugin, which keeps
// every power domain (a PowerBudget: a rack, a PDU) under its watt budget
// and scores nodes by their domains' headroom.
//
// +kubebuilder:object:root=true
type PowerBudgetArgs struct {
	metav1.TypeMeta

	// TelemetryMaxAge: a node whose telemetry the scheduler saw longer ago
	// than this has no power telemetry, and counts by its budget's
	// unmeteredNodeWatts. Greater than zero.
	TelemetryMaxAge time.Duration
	// GPUResourceName is the extended resource that counts a pod's GPUs,
	// for their marginal power; keep it equal to TopologyFit's.
	GPUResourceName string
	// FullScoreHeadroomPercent: a node whose domains all keep at least
	// this share of their limit free with the pod placed scores 100;
	// below it, the score falls linearly to 0 at no headroom. 1 to 100.
	FullScoreHeadroomPercent int32
}
