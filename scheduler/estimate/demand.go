// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package estimate is the scheduler's one answer to "what does this pod
// cost this node": its demand (Demand), the pods placed on a node that its
// telemetry does not show yet (Book), the watts a pod adds (Watts) and
// whether the node may run it without overheating (heat.Verdict, through
// Heat). LoadAware, TopologyFit, EnergyAware and PowerBudget read these and
// keep only their thresholds and scores, so no two plugins can disagree on
// what a pod costs; PowerBudget's domains add up the same estimates.
package estimate

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	configv1 "github.com/telesched/telesched/apis/config/v1"
)

// Demand is what a pod asks of a node: CPU in millicores, memory in bytes
// and GPUs.
type Demand struct {
	CPUMilli, MemoryBytes, GPUs int64
}

// Plus is d and o together.
func (d Demand) Plus(o Demand) Demand {
	return Demand{CPUMilli: d.CPUMilli + o.CPUMilli, MemoryBytes: d.MemoryBytes + o.MemoryBytes, GPUs: d.GPUs + o.GPUs}
}

// CPUOnly is d without its GPUs.
func (d Demand) CPUOnly() Demand { return Demand{CPUMilli: d.CPUMilli, MemoryBytes: d.MemoryBytes} }

// Minus is d less o.
func (d Demand) Minus(o Demand) Demand {
	return Demand{CPUMilli: d.CPUMilli - o.CPUMilli, MemoryBytes: d.MemoryBytes - o.MemoryBytes, GPUs: d.GPUs - o.GPUs}
}

// Options say how a pod's demand is counted.
type Options struct {
	// DefaultCPUMilli and DefaultMemoryBytes are counted for a container
	// that requests none (kube-scheduler's own non-zero requests by
	// default, as LoadAwareArgs' defaultPodCPUMilli and
	// defaultPodMemoryBytes).
	DefaultCPUMilli, DefaultMemoryBytes int64
	// GPUResource is the extended resource that counts GPUs
	// (gpuResourceName).
	GPUResource v1.ResourceName
}

// DefaultOptions are the plugins' defaults.
func DefaultOptions() Options {
	return Options{
		DefaultCPUMilli:    configv1.DefaultPodCPUMilli,
		DefaultMemoryBytes: configv1.DefaultPodMemoryBytes,
		GPUResource:        configv1.DefaultGPUResourceName,
	}
}

// Counter computes pods' demand by one set of Options.
type Counter struct {
	defaults v1.ResourceList
	gpu      v1.ResourceName
}

// NewCounter returns a Counter for o.
func NewCounter(o Options) Counter {
	return Counter{gpu: o.GPUResource, defaults: v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(o.DefaultCPUMilli, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(o.DefaultMemoryBytes, resource.BinarySI),
	}}
}

// Of is the pod's demand: its effective requests (init containers and
// overhead as kube-scheduler counts them), with the defaults for a
// container that requests no CPU or memory, and its GPUs.
func (c Counter) Of(pod *v1.Pod) Demand {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{NonMissingContainerRequests: c.defaults})
	gpus := req[c.gpu]
	return Demand{CPUMilli: req.Cpu().MilliValue(), MemoryBytes: req.Memory().Value(), GPUs: gpus.Value()}
}
