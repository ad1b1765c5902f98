// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import (
	"slices"
	"strings"

	"github.com/telesched/telesched/sandbox/sim"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// newNode is spec's capacities. On a node of the single MIG strategy the
// GPU resource counts its MIG devices, each taking its share of its GPU
// (the mean, as every GPU is cut alike); elsewhere it counts the GPUs not
// in MIG mode (none on a DRA node, whose GPUs go to claims), and the
// mixed strategy's MIG devices are counted per profile.
func (o *oracle) newNode(s sim.NodeSpec) oNode {
	n := oNode{spec: s, capMilli: int64(s.Host.CPUs) * 1000, memBytes: s.Host.MemoryKiB << 10, numa: max(s.Host.NUMANodes, 1),
		hasGPU: len(s.GPUs) > 0, unitShare: 1}
	n.gpusOn = make([]int, n.numa)
	n.migFree = make([]int, len(o.profiles))
	n.migShare = make([]float64, len(o.profiles))
	single := s.MIGStrategy == sim.MIGSingle
	var shares float64
	for i, g := range s.GPUs {
		k := g.NUMANode
		onNUMA := func(c int) {
			n.gpus += c
			if k >= 0 && k < n.numa {
				n.gpusOn[k] += c
			}
		}
		switch {
		case g.MIG == nil && s.DRA:
			n.claimable++
		case g.MIG == nil && !single:
			onNUMA(1)
		case single:
			onNUMA(len(g.MIG))
		}
		for j, d := range g.MIG {
			share := s.SliceShare(sim.Slice{GPU: i, Device: j})
			if single {
				shares += share
				continue
			}
			k := o.profiles[migKey(s.DRA, d.Profile)]
			n.migFree[k]++
			n.migShare[k] = share
		}
	}
	if single && n.gpus > 0 {
		n.unitShare = shares / float64(n.gpus)
	}
	if s.NVLink == sim.NVLinkPairs && !single && !s.DRA {
		for i := 0; i+1 < len(s.GPUs); i += 2 {
			if s.GPUs[i].MIG == nil && s.GPUs[i+1].MIG == nil {
				n.pairs++
			}
		}
		n.lone, n.linkPairs = n.gpus-2*n.pairs, true
	}
	return n
}

// profile is a MIG profile's index (by migKey), added when new.
func (o *oracle) profile(p string) int {
	i, ok := o.profiles[p]
	if !ok {
		i = len(o.profiles)
		o.profiles[p] = i
		o.slices = append(o.slices, int(telemetry.ProfileSlices(strings.TrimPrefix(p, claimPrefix))))
	}
	return i
}

// claimPrefix keys a DRA node's MIG devices apart from the device
// plugin's: a claim for a MIG device (Pod.ClaimMIG) takes only the former,
// a pod of the mixed strategy's resources (Pod.MIG) only the latter.
const claimPrefix = "claim:"

// migKey is the key of a profile's MIG devices, a DRA node's or claim's
// (dra) or the device plugin's.
func migKey(dra bool, profile string) string {
	if dra {
		return claimPrefix + profile
	}
	return profile
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
