// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"fmt"
	"strconv"

	fwk "k8s.io/kube-scheduler/framework"
)

// The score of a node for a GPU pod has two parts, NUMA alignment first:
//
//	aligned (the pod fits in one NUMA node): 51 + pack*49/100, in [51, 100]
//	not aligned:                             pack*50/100,     in [0, 50]
//
// so that any aligned node outranks any unaligned one, and among equally
// aligned nodes the tighter fit wins. pack is the share of the node's free
// matching GPUs that the pod takes:
//
//	pack = 100 * requested / unallocated
//
// For a given pod (requested fixed) it falls as unallocated grows: the node
// left with the fewest free matching GPUs after placement scores highest
// (best fit), which keeps whole GPU nodes free for large pods. A pod taking
// every free GPU of a node scores 100; one GPU of an empty 8-GPU node, 12.
//
// A pod that requests no GPU scores 100*(100-penalty)/100 on a node with
// GPUs where it would take CPUs that the node keeps for its free GPUs
// (TopologyFitArgs.GPUCPUReserveMilli each; see takesGPUReserve), and 100
// on any other node, so CPU pods leave GPU pods the CPUs they will need
// (penalty is TopologyFitArgs.NonGPUPodPenaltyPercent).

// gpuPackScore is 100 * requested / unallocated, 0 when the pod does not
// fit (or there is nothing free).
func gpuPackScore(requested, unallocated int64) int64 {
	if requested <= 0 || unallocated <= 0 || requested > unallocated {
		return fwk.MinScore
	}
	return clampScore(fwk.MaxScore * requested / unallocated)
}

// gpuPodScore combines NUMA alignment and the packing score; see above.
func gpuPodScore(aligned bool, pack int64) int64 {
	pack = clampScore(pack)
	if aligned {
		return 51 + pack*49/fwk.MaxScore
	}
	return pack * 50 / fwk.MaxScore
}

// A pod of k >= 2 units ranks nodes first by where k free units sit
// together, then as above: in one NVLink group (link), under one PCIe root
// (root), on the NUMA node that fits the pod (aligned). The three, as bits
// link·root·aligned, pick one of 8 bands of [0, 100], and pack places the
// node within its band:
//
//	band b = 4*link + 2*root + aligned, lo(b) = b*101/8, hi(b) = lo(b+1)-1
//	score  = lo(b) + pack*(hi(b)-lo(b))/100
//
// so a node with k free linked units outranks any without, whatever its
// pack (0b111: [88, 100], 0b011: [37, 49], 0b001: [12, 24]).
func gpuPodScoreTogether(link, root, aligned bool, pack int64) int64 {
	var b int64
	if link {
		b |= 4
	}
	if root {
		b |= 2
	}
	if aligned {
		b |= 1
	}
	lo, hi := b*101/8, (b+1)*101/8-1
	return lo + clampScore(pack)*(hi-lo)/fwk.MaxScore
}

// nonGPUPodScore is the score of a pod that requests no GPU.
func nonGPUPodScore(penalized bool, penaltyPercent int32) int64 {
	if !penalized {
		return fwk.MaxScore
	}
	return clampScore(fwk.MaxScore * (100 - int64(penaltyPercent)) / 100)
}

func clampScore(s int64) int64 {
	return max(fwk.MinScore, min(fwk.MaxScore, s))
}

// numaFreeCPUMilli is the CPU, in millicores, free for a new pod on one NUMA
// node:
//
//   - with the kubelet's exclusive allocations published (allocated >= 0):
//     (logicalCores - allocated) * 1000, the CPUs the static CPU manager can
//     still hand out;
//   - otherwise an approximation: logicalCores*1000 minus the CPU requests
//     of all pods on the node divided evenly over its numaNodes NUMA nodes
//     (where the kubelet actually put them is not published).
func numaFreeCPUMilli(logicalCores, allocated int32, nodeRequestedMilli int64, numaNodes int) int64 {
	if allocated >= 0 {
		return int64(logicalCores-allocated) * 1000
	}
	if numaNodes <= 0 {
		numaNodes = 1
	}
	return int64(logicalCores)*1000 - nodeRequestedMilli/int64(numaNodes)
}

// takeFromLowest assigns up to held of the GPUs allocated on a node that are
// not yet placed to one NUMA node with matching GPUs: it returns how many of
// those stay free and how many allocated GPUs remain for the next NUMA node.
// Called for NUMA nodes in ascending id, it models allocations filling the
// lowest NUMA nodes first (see fitNUMA).
func takeFromLowest(matching, held int64) (free, rest int64) {
	take := min(matching, max(held, 0))
	return matching - take, held - take
}

// containsFoldASCII reports whether s contains lowerSub, comparing ASCII
// letters case-insensitively and a space, a dash and an underscore as one
// (lowerSub must be folded so, by lowerASCIIString), every other byte
// exactly: a GPU model matches its NVML name ("NVIDIA H100 80GB HBM3") and
// GPU Feature Discovery's nvidia.com/gpu.product label, the name with its
// spaces as dashes ("NVIDIA-H100-80GB-HBM3"). It does not allocate,
// unlike strings.ToLower.
func containsFoldASCII(s, lowerSub string) bool {
	n := len(lowerSub)
	if n == 0 {
		return true
	}
	for i := 0; i+n <= len(s); i++ {
		j := 0
		for j < n && lowerASCII(s[i+j]) == lowerSub[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

// lowerASCIIString folds s as containsFoldASCII compares it: ASCII
// letters lower-cased, a dash and an underscore as a space, other bytes
// left.
func lowerASCIIString(s string) string {
	b := []byte(s)
	for i := range b {
		b[i] = lowerASCII(b[i])
	}
	return string(b)
}

func lowerASCII(c byte) byte {
	switch {
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	case c == '-' || c == '_':
		return ' '
	}
	return c
}

// formatCPU renders millicores as cores, e.g. 1500 as "1.5" and 16000 as
// "16".
func formatCPU(milli int64) string {
	if milli%1000 == 0 {
		return strconv.FormatInt(milli/1000, 10)
	}
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}

// formatBytes renders bytes in the largest binary unit they reach: whole
// ("64Gi") when exact, else with one decimal (411286068265 is "383.0Gi").
func formatBytes(b int64) string {
	units := []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}}
	abs := b
	if abs < 0 {
		abs = -abs
	}
	for _, u := range units {
		if abs >= u.size {
			if b%u.size == 0 {
				return fmt.Sprintf("%d%s", b/u.size, u.suffix)
			}
			return fmt.Sprintf("%.1f%s", float64(b)/float64(u.size), u.suffix)
		}
	}
	return strconv.FormatInt(b, 10)
}
