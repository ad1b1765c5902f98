// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package config

// Node annotations read by LoadAware.
const (
	// NodeAnnotationCPUThresholdPercent overrides LoadAwareArgs.CPUThresholdPercent
	// for the annotated node; its value is an integer percentage, 1 to 100.
	NodeAnnotationCPUThresholdPercent = "telesched.io/cpu-threshold-percent"
	// NodeAnnotationMemoryThresholdPercent overrides
	// LoadAwareArgs.MemoryThresholdPercent for the annotated node; its value
	// is an integer percentage, 1 to 100.
	NodeAnnotationMemoryThresholdPercent = "telesched.io/memory-threshold-percent"
)

// Pod annotations read by TopologyFit.
const (
	// PodAnnotationNUMAPolicy asks for a NUMA placement policy. The only
	// value understood is NUMAPolicySingleNUMANode.
	PodAnnotationNUMAPolicy = "telesched.io/numa-policy"
	// NUMAPolicySingleNUMANode: the pod's CPUs, memory and GPUs must fit in
	// one NUMA node of the chosen node.
	NUMAPolicySingleNUMANode = "single-numa-node"
	// PodAnnotationGPUModel restricts a GPU pod to nodes whose GPUs are of
	// the named model: a part of the model's name as the node's telemetry
	// reports it (NVML's, "NVIDIA H100 80GB HBM3"), in any case, a dash or
	// an underscore matching a space, so GPU Feature Discovery's
	// nvidia.com/gpu.product value ("NVIDIA-H100-80GB-HBM3") matches too.
	PodAnnotationGPUModel = "telesched.io/gpu-model"
	// PodAnnotationGPUMinMemory restricts a GPU pod to nodes whose GPUs each
	// have at least this much memory; its value is a resource.Quantity such
	// as "40Gi".
	PodAnnotationGPUMinMemory = "telesched.io/gpu-min-memory"
)
