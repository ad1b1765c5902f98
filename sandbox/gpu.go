// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/sandbox/sim"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// migResource is the mixed strategy's resource of a MIG profile, as
// NVIDIA's device plugin names it ("1g.10gb+me": nvidia.com/mig-1g.10gb.me).
func migResource(profile string) corev1.ResourceName {
	return corev1.ResourceName(configv1.DefaultMIGResourcePrefix + telemetry.ProfileResource(profile))
}

// gpuAllocatable is what a simulated node's device plugin advertises: its
// whole GPUs as nvidia.com/gpu; on the single MIG strategy its MIG devices
// as nvidia.com/gpu instead; on the mixed strategy its MIG devices as
// nvidia.com/mig-<profile> beside its whole GPUs. A DRA node advertises
// none: its GPUs are ResourceSlices.
func gpuAllocatable(spec sim.NodeSpec) corev1.ResourceList {
	if spec.DRA || len(spec.GPUs) == 0 {
		return nil
	}
	counts := map[corev1.ResourceName]int64{}
	for _, g := range spec.GPUs {
		switch {
		case g.MIG == nil:
			counts[gpuResource]++
		case spec.MIGStrategy == sim.MIGSingle:
			counts[gpuResource] += int64(len(g.MIG))
		default:
			for _, d := range g.MIG {
				counts[migResource(d.Profile)]++
			}
		}
	}
	out := corev1.ResourceList{}
	for name, n := range counts {
		out[name] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}

// podCounter counts a pod's demand as the scheduler does, with the
// scheduler's default resource names.
var podCounter = estimate.NewCounter(estimate.DefaultOptions())

// simRequest is what a pod asks of its node's GPUs (sim.Request): the GPU
// resource and each MIG profile's.
func simRequest(pod *corev1.Pod) sim.Request {
	var r sim.Request
	for _, c := range pod.Spec.Containers {
		for name, q := range c.Resources.Requests {
			switch {
			case name == gpuResource:
				r.GPUs += int(q.Value())
			case strings.HasPrefix(string(name), configv1.DefaultMIGResourcePrefix):
				if r.MIG == nil {
					r.MIG = map[string]int{}
				}
				r.MIG[strings.TrimPrefix(string(name), configv1.DefaultMIGResourcePrefix)] += int(q.Value())
			}
		}
	}
	return r
}

// allocShare is what a pod's devices are in whole GPUs: each GPU, and
// each MIG device its share of its GPU.
func allocShare(spec sim.NodeSpec, a sim.Alloc) float64 {
	share := float64(len(a.GPUs))
	for _, s := range a.Slices {
		share += spec.SliceShare(s)
	}
	return share
}

// sliceTrueWatts is the mean of what the MIG devices add by the
// simulation; 0 for none.
func sliceTrueWatts(spec sim.NodeSpec, slices []sim.Slice) float64 {
	if len(slices) == 0 {
		return 0
	}
	var w float64
	for _, s := range slices {
		w += spec.SliceWatts(s)
	}
	return w / float64(len(slices))
}
