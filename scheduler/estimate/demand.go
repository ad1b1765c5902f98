// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package estimate is the scheduler's one answer to "what does this pod
// cost this node": its demand (Counter, which the Book owns: one count for
// every plugin), the pods placed on a node that its telemetry does not
// show yet (Book), the watts a pod adds (Watts) and where the node's
// modelled sensor settles with it (Book.Heat). LoadAware, TopologyFit,
// EnergyAware and PowerBudget read these and keep only their thresholds
// and scores, so no two plugins can disagree on what a pod costs;
// PowerBudget's domains add up the same estimates.
package estimate

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/dra"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Demand is what a pod asks of a node: CPU in millicores, memory in bytes,
// GPUs (the GPU resource: whole GPUs, or MIG devices on a node whose GPUs
// are all in MIG mode, the device plugin's single strategy), MIG compute
// slices (the devices of the MIG resources it requests, the mixed
// strategy's, each counted by its profile's slices: nvidia.com/mig-3g.40gb
// is 3) and the GPUs its ResourceClaims hold or ask for (ClaimGPUs, see
// dra.Index.PodGPUs).
type Demand struct {
	CPUMilli, MemoryBytes, GPUs, MIGSlices int64
	ClaimGPUs                              int64
}

// BusyGPUs is every GPU the pod keeps busy: by extended resource and by
// claim. Watts are priced on it.
func (d Demand) BusyGPUs() int64 { return d.GPUs + d.ClaimGPUs }

// Plus is d and o together.
func (d Demand) Plus(o Demand) Demand {
	return Demand{CPUMilli: d.CPUMilli + o.CPUMilli, MemoryBytes: d.MemoryBytes + o.MemoryBytes, GPUs: d.GPUs + o.GPUs, MIGSlices: d.MIGSlices + o.MIGSlices, ClaimGPUs: d.ClaimGPUs + o.ClaimGPUs}
}

// CPUOnly is d without its GPUs and MIG slices.
func (d Demand) CPUOnly() Demand { return Demand{CPUMilli: d.CPUMilli, MemoryBytes: d.MemoryBytes} }

// Minus is d less o.
func (d Demand) Minus(o Demand) Demand {
	return Demand{CPUMilli: d.CPUMilli - o.CPUMilli, MemoryBytes: d.MemoryBytes - o.MemoryBytes, GPUs: d.GPUs - o.GPUs, MIGSlices: d.MIGSlices - o.MIGSlices, ClaimGPUs: d.ClaimGPUs - o.ClaimGPUs}
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
	// MIGResourcePrefix is the prefix of the extended resources that count
	// MIG devices, one per profile (migResourcePrefix): prefix + profile,
	// e.g. nvidia.com/mig-1g.10gb.
	MIGResourcePrefix string
}

// DefaultOptions are the plugins' defaults.
func DefaultOptions() Options {
	return Options{
		DefaultCPUMilli:    configv1.DefaultPodCPUMilli,
		DefaultMemoryBytes: configv1.DefaultPodMemoryBytes,
		GPUResource:        configv1.DefaultGPUResourceName,
		MIGResourcePrefix:  configv1.DefaultMIGResourcePrefix,
	}
}

// Counter computes pods' demand by one set of Options.
type Counter struct {
	defaults v1.ResourceList
	gpu      v1.ResourceName
	mig      string
	// claims counts the GPUs of pods' ResourceClaims; nil: none.
	claims *dra.Index
}

// NewCounter returns a Counter for o.
func NewCounter(o Options) Counter {
	return Counter{gpu: o.GPUResource, mig: o.MIGResourcePrefix, defaults: v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(o.DefaultCPUMilli, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(o.DefaultMemoryBytes, resource.BinarySI),
	}}
}

// Of is the pod's demand: its effective requests (init containers and
// overhead as kube-scheduler counts them), with the defaults for a
// container that requests no CPU or memory, and its GPUs: the higher of
// their requests and limits, since the API server defaults an extended
// resource's request to its limit and a pod built elsewhere may lack it;
// its MIG slices likewise, from the MIG resources.
func (c Counter) Of(pod *v1.Pod) Demand {
	return c.count(pod, c.defaults)
}

// Requested is Of without the defaults: what the pod's containers request
// and nothing for those that request none, as the kubelet's CPU and
// topology managers count a pod that must fit a NUMA node.
func (c Counter) Requested(pod *v1.Pod) Demand {
	return c.count(pod, nil)
}

func (c Counter) count(pod *v1.Pod, defaults v1.ResourceList) Demand {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{NonMissingContainerRequests: defaults})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	d := Demand{CPUMilli: req.Cpu().MilliValue(), MemoryBytes: req.Memory().Value(), GPUs: higher(req, limits, c.gpu)}
	for _, r := range c.migRequests(req, limits) {
		d.MIGSlices += r.Count * int64(telemetry.ProfileSlices(r.Profile))
	}
	d.ClaimGPUs = c.claims.PodGPUs(pod)
	d.MIGSlices += c.claims.PodMIGSlices(pod) // priced as its MIG resources' slices are
	return d
}

// higher is the pod's count of an extended resource: the higher of its
// requests and limits (never below 0), since the API server defaults an
// extended resource's request to its limit and a pod built elsewhere may
// lack it.
func higher(req, limits v1.ResourceList, name v1.ResourceName) int64 {
	r, l := req[name], limits[name]
	return max(0, r.Value(), l.Value())
}

// MIGRequest is a pod's count of one MIG resource (the MIG resource
// prefix + a profile, e.g. nvidia.com/mig-1g.10gb): the higher of its
// requests and limits.
type MIGRequest struct {
	Resource v1.ResourceName
	Profile  string
	Count    int64
}

// MIGRequests are the pod's MIG resources it asks at least one of, in the
// order of their names.
func (c Counter) MIGRequests(pod *v1.Pod) []MIGRequest {
	return c.migRequests(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{}))
}

func (c Counter) migRequests(req, limits v1.ResourceList) []MIGRequest {
	if c.mig == "" {
		return nil
	}
	var out []MIGRequest
	for _, list := range []v1.ResourceList{req, limits} {
		for name := range list {
			profile, ok := strings.CutPrefix(string(name), c.mig)
			if !ok || slices.ContainsFunc(out, func(r MIGRequest) bool { return r.Resource == name }) {
				continue
			}
			if n := higher(req, limits, name); n > 0 {
				out = append(out, MIGRequest{Resource: name, Profile: profile, Count: n})
			}
		}
	}
	slices.SortFunc(out, func(a, b MIGRequest) int { return strings.Compare(string(a.Resource), string(b.Resource)) })
	return out
}

// shared is one Options field that every plugin counting demand must
// agree on, with the first plugin that set it.
type shared[T comparable] struct {
	v   T
	who string
}

// agree sets s to v for who, or reports that who disagrees with the
// plugin that set it first.
func (s *shared[T]) agree(field, who string, v T) error {
	if s.who == "" {
		s.v, s.who = v, who
		return nil
	}
	if s.v != v {
		return fmt.Errorf("%s: %s sets %v, %s sets %v: every profile must count a pod's demand alike, since one reservation book counts it for all of them",
			field, s.who, s.v, who, v)
	}
	return nil
}
