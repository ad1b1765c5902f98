// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StaleTelemetryPolicy says what a plugin does with a node whose telemetry is
// older than telemetryMaxAge, or that has none.
type StaleTelemetryPolicy string

const (
	// StaleTelemetryIgnore: the node is neither rejected nor favoured. Filter
	// passes it and Score gives it a neutral score.
	StaleTelemetryIgnore StaleTelemetryPolicy = "Ignore"
	// StaleTelemetryReject: Filter rejects the node.
	StaleTelemetryReject StaleTelemetryPolicy = "Reject"
)

// TelemetryArgs are the arguments every telesched plugin has. They are
// inlined: in YAML they sit beside the plugin's own fields.
type TelemetryArgs struct {
	// telemetryMaxAge: a node's telemetry sampled longer ago than this is
	// stale. Greater than zero. Default 60s.
	// +optional
	TelemetryMaxAge *metav1.Duration `json:"telemetryMaxAge,omitempty"`
	// staleTelemetryPolicy applies to a node whose telemetry is stale or
	// missing: Ignore (the default) neither rejects nor favours the node, it
	// passes Filter and gets a neutral score; Reject fails Filter.
	// +optional
	StaleTelemetryPolicy *StaleTelemetryPolicy `json:"staleTelemetryPolicy,omitempty"`
}

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

// ScoringStrategyType is how LoadAware scores a node from its estimated
// utilization.
type ScoringStrategyType string

const (
	// ScoringStrategySpread favours the least utilized nodes.
	ScoringStrategySpread ScoringStrategyType = "Spread"
	// ScoringStrategyPack favours nodes whose utilization, with the pod
	// placed, is closest to packTargetPercent.
	ScoringStrategyPack ScoringStrategyType = "Pack"
)

// LoadAwareArgs are the arguments of the LoadAware plugin, which filters and
// scores nodes by their measured CPU and memory utilization plus the
// requests of pods placed on them since their last sample.
//
// +kubebuilder:object:root=true
type LoadAwareArgs struct {
	metav1.TypeMeta `json:",inline"`

	TelemetryArgs `json:",inline"`

	// cpuThresholdPercent: a node whose estimated CPU utilization, with the
	// pod, exceeds this percentage is filtered out. The node annotation
	// telesched.io/cpu-threshold-percent overrides it per node. 1 to 100,
	// default 80.
	// +optional
	CPUThresholdPercent *int32 `json:"cpuThresholdPercent,omitempty"`
	// memoryThresholdPercent: as cpuThresholdPercent, for memory; the node
	// annotation telesched.io/memory-threshold-percent overrides it per node.
	// 1 to 100, default 90.
	// +optional
	MemoryThresholdPercent *int32 `json:"memoryThresholdPercent,omitempty"`
	// scoringStrategy is Spread (the default), favouring the least utilized
	// nodes, or Pack, favouring nodes closest to packTargetPercent.
	// +optional
	ScoringStrategy *ScoringStrategyType `json:"scoringStrategy,omitempty"`
	// usage is the utilization figure the thresholds and the score apply
	// to: Instant (the default), the node's last sample; or P50, P90 or
	// Max, that percentile of the samples over the node agent's --window
	// (status.windows), so a short spike does not refuse a node and
	// sustained load does. A node that publishes no window for CPU or
	// memory is judged on its last sample, and the rejection says so.
	// +optional
	Usage *UsageType `json:"usage,omitempty"`
	// packTargetPercent is the utilization the Pack strategy aims for.
	// 1 to 100, default 70.
	// +optional
	PackTargetPercent *int32 `json:"packTargetPercent,omitempty"`
	// podCPUScalingPercent is how much of a pod's CPU request counts toward
	// its node's estimated utilization until the node's next sample reflects
	// the pod. 1 to 1000, default 100.
	// +optional
	PodCPUScalingPercent *int32 `json:"podCPUScalingPercent,omitempty"`
	// podMemoryScalingPercent: as podCPUScalingPercent, for memory.
	// 1 to 1000, default 100.
	// +optional
	PodMemoryScalingPercent *int32 `json:"podMemoryScalingPercent,omitempty"`
	// defaultPodCPUMilli is the CPU, in millicores, counted for a container
	// that requests none. Not negative; default 100, kube-scheduler's own
	// non-zero default.
	// +optional
	DefaultPodCPUMilli *int64 `json:"defaultPodCPUMilli,omitempty"`
	// defaultPodMemoryBytes is the memory, in bytes, counted for a container
	// that requests none. Not negative; default 209715200 (200Mi),
	// kube-scheduler's own non-zero default.
	// +optional
	DefaultPodMemoryBytes *int64 `json:"defaultPodMemoryBytes,omitempty"`
}

// TopologyFitArgs are the arguments of the TopologyFit plugin, which places
// pods by the node's NUMA and GPU topology. It reads the pod annotations
// telesched.io/numa-policy (single-numa-node), telesched.io/gpu-model and
// telesched.io/gpu-min-memory (a quantity such as 40Gi).
//
// +kubebuilder:object:root=true
type TopologyFitArgs struct {
	metav1.TypeMeta `json:",inline"`

	TelemetryArgs `json:",inline"`

	// gpuResourceName is the extended resource that counts GPUs. Default
	// nvidia.com/gpu.
	// +optional
	GPUResourceName *string `json:"gpuResourceName,omitempty"`
	// nonGPUPodPenaltyPercent is how much a pod that requests no GPU has its
	// score reduced on a node with GPUs where it would take CPUs kept for
	// that node's free GPUs (see gpuCPUReserveMilli). 0 to 100, default 50.
	// +optional
	NonGPUPodPenaltyPercent *int32 `json:"nonGPUPodPenaltyPercent,omitempty"`
	// gpuCPUReserveMilli is the CPU, in millicores, that a node with GPUs
	// keeps per unallocated GPU for the GPU pods to come (a GPU cut into
	// MIG devices as much, less the compute slices of its devices that
	// pods hold), on each NUMA node for the GPUs on it. A pod that
	// requests no GPU is penalized
	// (nonGPUPodPenaltyPercent) only on a node where, with it placed, the
	// unrequested CPU would fall below that reserve; the rest of a GPU node's
	// CPUs take CPU pods like any node's. Default 4000 (4 CPUs a GPU); a
	// value at least a GPU node's CPUs per GPU penalizes every pod that
	// requests no GPU while the node has a free GPU.
	// +optional
	GPUCPUReserveMilli *int64 `json:"gpuCPUReserveMilli,omitempty"`
	// migResourcePrefix is the prefix of the extended resources that
	// count MIG devices, one resource per MIG profile, as NVIDIA's device
	// plugin names them under its mixed MIG strategy: prefix + profile,
	// e.g. nvidia.com/mig-1g.10gb. A pod's request of such a resource is
	// placed on the MIG devices of that profile that nodes publish; under
	// the single strategy gpuResourceName counts MIG devices instead.
	// Default nvidia.com/mig-.
	// +optional
	MIGResourcePrefix *string `json:"migResourcePrefix,omitempty"`
	// gpuDeviceClassNames are the DeviceClasses (resource.k8s.io/v1) whose
	// requests in a pod's ResourceClaims count as whole GPUs while the claim
	// is unallocated: requests in ExactCount mode, by their count (an
	// allocated claim counts the GPU devices allocated to it, see
	// gpuDriverNames). Every profile must list the same classes, since one
	// reservation book counts a pod's GPUs for every plugin. Default
	// [gpu.nvidia.com], the class of NVIDIA's DRA driver's whole GPUs; []
	// counts no request (kept through encoding: the field has no
	// omitempty).
	// +optional
	GPUDeviceClassNames []string `json:"gpuDeviceClassNames"`
	// migDeviceClassNames are the DeviceClasses whose requests in a pod's
	// ResourceClaims count as MIG devices while the claim is unallocated:
	// requests in ExactCount mode, by their count, each device the compute
	// slices of the profile its selectors name (an expression such as
	// device.attributes["gpu.nvidia.com"].profile == "3g.40gb"), else 1,
	// the smallest. An allocated claim counts the compute slices of the MIG
	// devices allocated to it (their "profile" attribute). A pod's MIG
	// slices are priced as its MIG resources' are. Every profile must list
	// the same classes. Default [mig.nvidia.com], the class of NVIDIA's DRA
	// driver's MIG devices; [] counts no request.
	// +optional
	MIGDeviceClassNames []string `json:"migDeviceClassNames"`
	// gpuDriverNames are the DRA drivers whose devices count as GPUs: a
	// node whose ResourceSlices publish one is a GPU node, and a device
	// allocated to a ResourceClaim holds the node's GPU whose UUID is the
	// device's "uuid" attribute (a MIG device's "parentUUID"), so that no
	// pod requesting gpuResourceName is placed on it. Every profile must
	// list the same drivers. Default [gpu.nvidia.com] (NVIDIA's
	// k8s-dra-driver-gpu); [] ignores DRA.
	// +optional
	GPUDriverNames []string `json:"gpuDriverNames"`
}

// EnergyAwareArgs are the arguments of the EnergyAware plugin, which rejects
// nodes running hot or throttled and scores nodes by power and temperature.
//
// +kubebuilder:object:root=true
type EnergyAwareArgs struct {
	metav1.TypeMeta `json:",inline"`

	TelemetryArgs `json:",inline"`

	// thermalMarginCelsius: a node with a sensor within this many degrees
	// of its effective limit (critical, else max, else the vendor's, else
	// absoluteLimitCelsius) is rejected (package heat).
	// 0 to 50, default 5.
	// +optional
	ThermalMarginCelsius *int32 `json:"thermalMarginCelsius,omitempty"`
	// absoluteLimitCelsius is the limit of a sensor that reports none and
	// has no known vendor limit, applied even when other sensors report
	// limits. Keep it equal to the agent's --absolute-limit-celsius.
	// 30 to 150, default 90.
	// +optional
	AbsoluteLimitCelsius *int32 `json:"absoluteLimitCelsius,omitempty"`
	// rejectThrottling: reject a node whose CPUs were thermally throttled
	// during the agent's last interval (a throttle counter rose; a sensor
	// alarm is not throttling). GPU thermal slowdown keeps GPU pods off
	// those GPUs whatever this says. Default true.
	// +optional
	RejectThrottling *bool `json:"rejectThrottling,omitempty"`
	// gpuSlowdownMarginCelsius: a pod that requests GPUs is kept off nodes
	// whose GPUs are within this many degrees of their slowdown temperature
	// (too few cool ones, or a free one too hot: the kubelet may hand it
	// to the pod). 0 to 50, default 3.
	// +optional
	GPUSlowdownMarginCelsius *int32 `json:"gpuSlowdownMarginCelsius,omitempty"`
	// gpuResourceName is the extended resource that counts a pod's GPUs
	// (for the GPU slowdown check and the GPUs' marginal power); keep it
	// equal to TopologyFit's. Default nvidia.com/gpu.
	// +optional
	GPUResourceName *string `json:"gpuResourceName,omitempty"`
	// powerWeight is the weight of energy in the score: the joules the
	// node spends for a unit of the pod's work at its published speed
	// (status.speed; docs/energy-models.md, "Energy for the same work").
	// 0 to 100, not zero together with thermalWeight; default 70.
	// +optional
	PowerWeight *int32 `json:"powerWeight,omitempty"`
	// thermalWeight is the weight of thermal headroom in the score. 0 to 100,
	// not zero together with powerWeight; default 30.
	// +optional
	ThermalWeight *int32 `json:"thermalWeight,omitempty"`
	// consolidationPods: the power score ranks a pod by its share of the
	// watts that it and up to consolidationPods-1 more pods like it would
	// add to the node: the least, over 1 to consolidationPods such pods
	// that fit the node's unrequested CPU and LoadAware's threshold, of
	// their watts divided by their number. A node below its power curve's
	// steep first step (idle to 10 %) then ranks by what the step costs
	// each of the pods that will share it, not by the first pod paying it
	// all. 1 ranks by the pod's own marginal watts. 1 to 64, default 8.
	// +optional
	ConsolidationPods *int32 `json:"consolidationPods,omitempty"`
	// powerSpanPercent: the power score is absolute, not spread over the
	// candidates: the node that spends the fewest joules for a unit of
	// the pod's work scores 100, and a node x percent dearer scores
	// 100*(1 - x/powerSpanPercent), at least 0. A few watts more on a
	// GPU pod of hundreds of watts then cost a point or two, which never
	// outweighs TopologyFit's preference for linked GPUs; a node a
	// quarter dearer for a pod's work loses all its power points. 1 to
	// 1000, default 25.
	// +optional
	PowerSpanPercent *int32 `json:"powerSpanPercent,omitempty"`
}

// PowerBudgetArgs are the arguments of the PowerBudget plugin, which keeps
// every power domain (a PowerBudget: a rack, a PDU) under its watt budget
// and scores nodes by their domains' headroom.
//
// +kubebuilder:object:root=true
type PowerBudgetArgs struct {
	metav1.TypeMeta `json:",inline"`

	// telemetryMaxAge: a node whose telemetry the scheduler saw longer ago
	// than this has no power telemetry, and counts by its PowerBudget's
	// unmeteredNodeWatts (unset: no pod goes to it). Greater than zero,
	// default 60s.
	// +optional
	TelemetryMaxAge *metav1.Duration `json:"telemetryMaxAge,omitempty"`
	// gpuResourceName is the extended resource that counts a pod's GPUs,
	// for their marginal power; keep it equal to TopologyFit's. Default
	// nvidia.com/gpu.
	// +optional
	GPUResourceName *string `json:"gpuResourceName,omitempty"`
	// fullScoreHeadroomPercent: a node whose PowerBudgets all keep at
	// least this share of their limit (budgetWatts - reserveWatts) free
	// with the pod placed scores 100; below it the score falls linearly to
	// 0 at no headroom, so racks far from their budgets leave the choice to
	// the other plugins. 1 to 100, default 50.
	// +optional
	FullScoreHeadroomPercent *int32 `json:"fullScoreHeadroomPercent,omitempty"`
}
