// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/telesched/telesched/agent/nvml/nvmltest"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// The device plugin's MIG strategies (k8s-device-plugin's
// --mig-strategy): single lists a node's MIG devices as the GPU resource,
// every GPU cut alike; mixed lists them as one resource per profile.
const (
	MIGSingle = "single"
	MIGMixed  = "mixed"
)

// How a node's GPUs are linked (NodeSpec.NVLink).
const (
	NVLinkSwitch = "nvswitch" // every GPU on one NVSwitch fabric, as a DGX
	NVLinkPairs  = "pairs"    // GPUs 0-1, 2-3, ... bridged in pairs, as PCIe cards
)

// MIGDevice is one MIG device of a GPU in MIG mode: its profile
// ("1g.10gb"), the compute slices it takes, its memory.
type MIGDevice struct {
	Profile   string
	Slices    int
	MemoryMiB uint64
}

// Slice is one MIG device a pod holds: GPU index, device index.
type Slice struct{ GPU, Device int }

// Request is what a pod asks of a node's GPUs, as the kubelet's device
// manager sees it: GPUs of the GPU resource (whole GPUs, or on a node of
// the single MIG strategy MIG devices), MIG devices of each profile (the
// mixed strategy's resources, keyed by profile or by the resource's name
// after its prefix: ofProfile), and the GPUs and MIG devices a DRA claim
// was allocated, by UUID (a MIG device's nvmltest.MIGUUID). Pod names the
// pod, and Claim the ResourceClaim of UUIDs, as the kubelet's
// pod-resources API reports them (ServePodResources); both may be empty.
type Request struct {
	GPUs  int
	MIG   map[string]int
	UUIDs []string
	Pod   types.NamespacedName
	Claim string
}

// Alloc is what a pod took: whole GPUs and MIG devices.
type Alloc struct {
	GPUs   []int
	Slices []Slice
}

// AddPodDevices runs a pod on the node, taking the devices it requests,
// and returns them; a pod already running returns what it holds. A
// request the free devices cannot meet takes what it can (the scheduler
// placed the pod; the report shows what it got).
func (n *Node) AddPodDevices(uid types.UID, cpuMilli int64, req Request) Alloc {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.pods[uid]; ok {
		return Alloc{GPUs: p.gpus, Slices: p.slices}
	}
	var a Alloc
	if n.Spec.MIGStrategy == MIGSingle {
		a.Slices = n.takeSlices("", req.GPUs)
	} else {
		a.GPUs = TakeGPUs(n.Spec, n.gpuBusy, req.GPUs)
	}
	profiles := make([]string, 0, len(req.MIG))
	for p := range req.MIG {
		profiles = append(profiles, p)
	}
	slices.Sort(profiles)
	for _, p := range profiles {
		a.Slices = append(a.Slices, n.takeSlices(p, req.MIG[p])...)
	}
	var claimed []int
	var claimedSlices []Slice
	for _, uuid := range req.UUIDs {
		for i, g := range n.Spec.GPUs {
			if g.UUID == uuid && !n.gpuBusy[i] && g.MIG == nil {
				n.gpuBusy[i] = true
				a.GPUs = append(a.GPUs, i)
				claimed = append(claimed, i)
			}
			for j := range g.MIG {
				if nvmltest.MIGUUID(i, j) == uuid && !n.migBusy[i][j] {
					n.migBusy[i][j] = true
					s := Slice{GPU: i, Device: j}
					a.Slices = append(a.Slices, s)
					claimedSlices = append(claimedSlices, s)
				}
			}
		}
	}
	n.pods[uid] = podLoad{cpuMilli: cpuMilli, gpus: a.GPUs, slices: a.Slices, claimed: claimed, claimedSlices: claimedSlices, name: req.Pod, claim: req.Claim}
	return a
}

// ofProfile reports whether a MIG device of profile answers want ("" any
// device): a profile as the fleet names it ("1g.10gb+me") or as the
// device plugin names its resource after the prefix ("1g.10gb.me";
// telemetry.ProfileResource), the name a pod asks by.
func ofProfile(profile, want string) bool {
	return want == "" || telemetry.ProfileResource(profile) == telemetry.ProfileResource(want)
}

// takeSlices marks count free MIG devices of profile ("" any) busy, the
// lowest GPU's first, and returns them. The caller holds n.mu.
func (n *Node) takeSlices(profile string, count int) []Slice {
	var out []Slice
	for i, g := range n.Spec.GPUs {
		for j, d := range g.MIG {
			if len(out) < count && !n.migBusy[i][j] && ofProfile(d.Profile, profile) {
				n.migBusy[i][j] = true
				out = append(out, Slice{GPU: i, Device: j})
			}
		}
	}
	return out
}

// share is GPU i's busy share, 0..1: 1 held whole, else its busy MIG
// devices' compute slices over its ComputeSlices. The caller holds n.mu.
func (n *Node) share(i int) float64 {
	if n.gpuBusy[i] {
		return 1
	}
	g := n.Spec.GPUs[i]
	if g.ComputeSlices <= 0 {
		return 0
	}
	busy := 0
	for j, d := range g.MIG {
		if n.migBusy[i][j] {
			busy += d.Slices
		}
	}
	return float64(busy) / float64(g.ComputeSlices)
}

// SliceShare is the share of its GPU a MIG device takes: its compute
// slices over the GPU's.
func (spec NodeSpec) SliceShare(s Slice) float64 {
	g := spec.GPUs[s.GPU]
	if g.ComputeSlices <= 0 || s.Device >= len(g.MIG) {
		return 0
	}
	return float64(g.MIG[s.Device].Slices) / float64(g.ComputeSlices)
}

// SliceWatts is what a busy MIG device adds to its node: its GPU's
// dynamic power busy, (TDP - idle) x GPUBusyUtilization, times its share
// (SliceShare).
func (spec NodeSpec) SliceWatts(s Slice) float64 {
	g := spec.GPUs[s.GPU]
	return (g.TDPWatts - g.IdleWatts) * GPUBusyUtilization * spec.SliceShare(s)
}

// Peer is GPU i's NVLink peer on a node of NVLink pairs (GPU i^1), -1 on
// any other node.
func (spec NodeSpec) Peer(i int) int {
	if spec.NVLink != NVLinkPairs || i^1 >= len(spec.GPUs) {
		return -1
	}
	return i ^ 1
}

// Linked reports whether gpus all reach each other over NVLink: on one
// NVSwitch fabric, or a bridged pair.
func (spec NodeSpec) Linked(gpus []int) bool {
	switch {
	case len(gpus) < 2:
		return false
	case spec.NVLink == NVLinkSwitch:
		return true
	}
	return len(gpus) == 2 && spec.Peer(gpus[0]) == gpus[1]
}

// linkedPair takes a free NVLink pair for a request of 2 on a node of
// NVLink pairs, the lowest NUMA node's first; nil when there is none or
// the request is not for 2.
func linkedPair(spec NodeSpec, busy []bool, count int) []int {
	if count != 2 || spec.NVLink != NVLinkPairs {
		return nil
	}
	best := -1
	for i := 0; i+1 < len(spec.GPUs); i += 2 {
		free := !busy[i] && !busy[i+1] && spec.GPUs[i].MIG == nil && spec.GPUs[i+1].MIG == nil
		if free && (best < 0 || spec.GPUs[i].NUMANode < spec.GPUs[best].NUMANode) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	busy[best], busy[best+1] = true, true
	return []int{best, best + 1}
}

// WholeGPUs is how many of the node's GPUs the GPU resource counts whole:
// those not in MIG mode, none on a DRA node.
func (spec NodeSpec) WholeGPUs() int {
	if spec.DRA {
		return 0
	}
	n := 0
	for _, g := range spec.GPUs {
		if g.MIG == nil {
			n++
		}
	}
	return n
}

// FreeGPUs is how many of the node's GPUs not in MIG mode are free.
func (n *Node) FreeGPUs() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.freeGPUs()
}

// FreeMIG is how many of the node's MIG devices of profile are free.
func (n *Node) FreeMIG(profile string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.freeMIG(profile)
}

// freeGPUs is FreeGPUs; the caller holds n.mu.
func (n *Node) freeGPUs() int {
	k := 0
	for i, g := range n.Spec.GPUs {
		if g.MIG == nil && !n.gpuBusy[i] {
			k++
		}
	}
	return k
}

// freeMIG is FreeMIG, of any profile for ""; the caller holds n.mu.
func (n *Node) freeMIG(profile string) int {
	k := 0
	for i, g := range n.Spec.GPUs {
		for j, d := range g.MIG {
			if !n.migBusy[i][j] && ofProfile(d.Profile, profile) {
				k++
			}
		}
	}
	return k
}

// Fits reports whether the node's free devices meet req, by the GPU
// resource's meaning on the node (MIG devices on the single strategy,
// whole GPUs elsewhere, none on a DRA node) and each profile's MIG
// devices; CPU and memory aside.
func (n *Node) Fits(req Request) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if req.GPUs > 0 {
		if n.Spec.MIGStrategy == MIGSingle {
			if n.freeMIG("") < req.GPUs {
				return false
			}
		} else if n.Spec.DRA || n.freeGPUs() < req.GPUs {
			return false // a DRA node's GPUs are no device plugin resource
		}
	}
	if len(req.MIG) > 0 && n.Spec.MIGStrategy != MIGMixed {
		return false // only the mixed strategy advertises a resource per profile
	}
	for p, k := range req.MIG {
		if n.freeMIG(p) < k {
			return false
		}
	}
	return true
}
