// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/sandbox/sim"
)

// migResource is the mixed strategy's resource of a MIG profile.
func migResource(profile string) corev1.ResourceName {
	return corev1.ResourceName(configv1.DefaultMIGResourcePrefix + profile)
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
