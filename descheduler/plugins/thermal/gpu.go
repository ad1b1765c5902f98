// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package thermal

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Holder is a pod known to hold a hot GPU.
type Holder struct {
	Pod *v1.Pod
	// Share is the pod's part of the GPU: 1 for the whole GPU; for MIG
	// devices, their compute slices over those allocated on the GPU.
	Share float64
	// How says how the pod is known to hold it.
	How string
}

// GPUHolders says which of pods (the running pods of node n) hold n's GPU
// gi, the GPUs hot as hot says (by their place in n.GPUs):
//
//   - A pod whose ResourceClaims hold the GPU, or MIG devices of it: the
//     claim's allocation names the device, and the DRA driver's uuid (or
//     parentUUID) attribute names the GPU (dra.Index.PodHeldGPUs).
//   - A pod of the device plugin: the kubelet tells only the node's agent
//     which GPU it got (pod-resources), and the agent publishes whether
//     each GPU, and how many MIG devices of each profile, are allocated.
//     The pod's candidates are, for its GPU resource, the GPUs not in MIG
//     mode (all of them when every GPU is, the device plugin's single
//     strategy), not held by claims and not published free; for a MIG
//     resource, the GPUs in MIG mode with a device of its profile not
//     published free. It holds GPU gi when gi is a candidate and either
//     every candidate is hot (it holds one of them), or it is the node's
//     only pod of that resource and every candidate's allocation is
//     published (its candidates are then the devices it holds).
//
// Any other pod that may hold the GPU is in maybe, by namespace/name: a
// pod the evidence cannot tell from others is not evicted for the GPU.
func GPUHolders(n *telemetry.Node, gi int, hot []bool, pods []*v1.Pod, book *estimate.Book) (held []Holder, maybe []string) {
	g := &n.GPUs[gi]
	claims := book.Claims()
	claimed := claims.Node(n.Name)
	allMIG := len(n.GPUs) > 0
	for i := range n.GPUs {
		allMIG = allMIG && n.GPUs[i].MIG
	}
	type dpPod struct {
		pod  *v1.Pod
		gpus int64                 // of the GPU resource
		mig  []estimate.MIGRequest // of MIG resources
	}
	var dp []dpPod
	byResource := map[string]int{} // resource -> device-plugin pods of it
	for _, pod := range pods {
		if migSlices, ok := claims.PodHeldGPUs(pod)[g.UUID]; ok {
			share, how := 1.0, "its ResourceClaim holds the GPU"
			if migSlices > 0 {
				share, how = sliceShare(g, migSlices), fmt.Sprintf("its ResourceClaims hold %d compute slices of the GPU's MIG devices", migSlices)
			}
			held = append(held, Holder{Pod: pod, Share: share, How: how})
			continue
		}
		p := dpPod{pod: pod, gpus: book.Demand(pod).GPUs, mig: book.MIGRequests(pod)}
		if p.gpus == 0 && len(p.mig) == 0 {
			continue
		}
		if p.gpus > 0 {
			byResource[""]++
		}
		for _, r := range p.mig {
			byResource[string(r.Resource)]++
		}
		dp = append(dp, p)
	}
	// wholeCand: GPU j may hold a device of the GPU resource; known: its
	// allocation is published.
	wholeCand := func(j int) (cand, known bool) {
		o := &n.GPUs[j]
		if o.MIG != allMIG || claimed.Held(o.UUID) {
			return false, true
		}
		if o.MIG {
			// Single strategy: the GPU resource's devices are MIG devices.
			free, known := migFree(o, "")
			return !free, known
		}
		return o.Allocated != 0, o.Allocated >= 0
	}
	migCand := func(j int, profile string) (cand, known bool) {
		o := &n.GPUs[j]
		if !o.MIG {
			return false, true
		}
		free, known := migFree(o, profile)
		return !free, known
	}
	for _, p := range dp {
		var why []string
		share := 0.0
		if p.gpus > 0 {
			if ok, how := holds(n, gi, hot, wholeCand, byResource[""] == 1); ok {
				why, share = append(why, how), 1
				if g.MIG {
					share = sliceShare(g, min(p.gpus, int64(g.ComputeSlices)))
				}
			}
		}
		for _, r := range p.mig {
			profile := r.Profile
			cand := func(j int) (bool, bool) { return migCand(j, profile) }
			if ok, how := holds(n, gi, hot, cand, byResource[string(r.Resource)] == 1); ok {
				why = append(why, how)
				share += sliceShare(g, r.Count*int64(telemetry.ProfileSlices(profile)))
			}
		}
		if len(why) == 0 {
			if c, _ := wholeCand(gi); c && p.gpus > 0 || mayHoldMIG(n, gi, p.mig, migCand) {
				maybe = append(maybe, p.pod.Namespace+"/"+p.pod.Name)
			}
			continue
		}
		held = append(held, Holder{Pod: p.pod, Share: min(share, 1), How: "device plugin: " + strings.Join(why, "; ")})
	}
	return held, maybe
}

// holds reports whether a device-plugin pod whose candidate GPUs cand
// says holds GPU gi (see GPUHolders), and why.
func holds(n *telemetry.Node, gi int, hot []bool, cand func(j int) (bool, bool), only bool) (bool, string) {
	if c, _ := cand(gi); !c {
		return false, ""
	}
	allHot, allKnown, count := true, true, 0
	for j := range n.GPUs {
		c, known := cand(j)
		allKnown = allKnown && known
		if !c {
			continue
		}
		count++
		allHot = allHot && hot[j]
	}
	switch {
	case only && allKnown:
		return true, "the node's only pod of its resource, and the GPU is allocated"
	case allHot && count == 1:
		return true, "the only GPU that may hold its devices"
	case allHot:
		return true, fmt.Sprintf("every GPU that may hold its devices (%d) is hot", count)
	}
	return false, ""
}

// mayHoldMIG reports whether a pod of MIG requests may hold devices of
// GPU gi.
func mayHoldMIG(n *telemetry.Node, gi int, reqs []estimate.MIGRequest, cand func(j int, profile string) (bool, bool)) bool {
	for _, r := range reqs {
		if c, _ := cand(gi, r.Profile); c {
			return true
		}
	}
	return false
}

// migFree reports whether GPU g, in MIG mode, has no device of profile
// allocated (of any profile when profile is ""), and whether its
// allocation is published. A GPU without the profile is free of it.
func migFree(g *telemetry.GPU, profile string) (free, known bool) {
	if g.MIGProfiles == nil {
		// Layout not published: any device may be anyone's.
		return false, false
	}
	free, known = true, true
	for _, p := range g.MIGProfiles {
		if profile != "" && p.Profile != profile {
			continue
		}
		switch {
		case p.Allocated < 0:
			free, known = false, false
		case p.Allocated > 0:
			free = false
		}
	}
	return free, known
}

// sliceShare is a pod's part of MIG GPU g holding slices compute slices
// of it: over the slices allocated on the GPU (the whole GPU's when its
// allocation is not published), at most 1.
func sliceShare(g *telemetry.GPU, slices int64) float64 {
	var alloc int64
	for _, p := range g.MIGProfiles {
		n := p.Allocated
		if n < 0 {
			n = p.Count
		}
		alloc += int64(n) * int64(p.Slices)
	}
	if alloc <= 0 {
		alloc = int64(g.ComputeSlices)
	}
	if alloc <= 0 {
		return 1
	}
	return min(1, float64(slices)/float64(alloc))
}

// observeGPUs starts, continues or ends the hot windows of n's GPUs from a
// sample, as observe does a node's: only a sample taken after a pod last
// left a GPU counts for it, and one after a gap starts its window again.
func (p *Plugin) observeGPUs(n *telemetry.Node, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	wins, evicted := p.gpuWindows[n.Name], p.gpuEvictedAt[n.Name]
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if at, ok := evicted[g.UUID]; ok {
			if !descheduler.SampledAfter(n, at) {
				delete(wins, g.UUID)
				continue
			}
			delete(evicted, g.UUID)
		}
		if !g.Hot(p.opts.GPUMarginMilli) {
			delete(wins, g.UUID)
			delete(p.unpinned[n.Name], g.UUID)
			continue
		}
		if wins == nil {
			wins = map[string]window{}
			p.gpuWindows[n.Name] = wins
		}
		wins[g.UUID] = p.extend(wins[g.UUID], n, now)
	}
	for uuid := range wins {
		if !slices.ContainsFunc(n.GPUs, func(g telemetry.GPU) bool { return g.UUID == uuid }) {
			delete(wins, uuid) // the GPU is gone
		}
	}
	if len(wins) == 0 {
		delete(p.gpuWindows, n.Name)
	}
	if len(evicted) == 0 {
		delete(p.gpuEvictedAt, n.Name)
	}
	if len(p.unpinned[n.Name]) == 0 {
		delete(p.unpinned, n.Name)
	}
}

// gpuEvicted ends a GPU's window when a pod left it.
func (p *Plugin) gpuEvicted(node, uuid string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.gpuWindows[node], uuid)
	if p.gpuEvictedAt[node] == nil {
		p.gpuEvictedAt[node] = map[string]time.Time{}
	}
	p.gpuEvictedAt[node][uuid] = now
}

// gpus judges node's GPUs: each GPU hot for a sustained window loses one
// pod known to hold it (GPUHolders), the one that frees most of its
// watts (its share of the GPU's measured draw), to a checked destination.
// The GPU has no thermal model to say how many watts must go, so one pod
// goes a window, and the next only if samples taken after it left show
// the GPU hot for a whole window again.
func (p *Plugin) gpus(ctx context.Context, node *v1.Node, n *telemetry.Node, now time.Time) {
	if len(n.GPUs) == 0 {
		return
	}
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	p.observeGPUs(n, now)
	hot := make([]bool, len(n.GPUs))
	for i := range n.GPUs {
		hot[i] = n.GPUs[i].Hot(p.opts.GPUMarginMilli)
	}
	var running []*v1.Pod
	listed := false
	for i := range n.GPUs {
		g := &n.GPUs[i]
		p.mu.Lock()
		w, ok := p.gpuWindows[node.Name][g.UUID]
		p.mu.Unlock()
		if !ok {
			continue
		}
		if now.Sub(w.since) < p.opts.Sustain {
			logger.V(2).Info("GPU hot, window not yet sustained", "node", klog.KObj(node), "gpu", g.Index, "hotFor", now.Sub(w.since).Round(time.Second), "sustain", p.opts.Sustain)
			continue
		}
		if !listed {
			var err error
			running, err = p.handle.GetPodsAssignedToNodeFunc()(node.Name, func(pod *v1.Pod) bool {
				return pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
			})
			if err != nil {
				logger.Error(err, "Listing pods", "node", klog.KObj(node))
				return
			}
			listed = true
		}
		hotWhy := g.TooHot(p.opts.GPUMarginMilli)
		held, maybe := GPUHolders(n, i, hot, running, p.book)
		var moves []descheduler.Move
		var holders []string
		for _, h := range held {
			holders = append(holders, fmt.Sprintf("%s/%s (%s)", h.Pod.Namespace, h.Pod.Name, h.How))
			if !p.movable(h.Pod) {
				continue
			}
			frees := h.Share
			if g.HasPower {
				frees *= float64(g.PowerWatts)
			}
			moves = append(moves, descheduler.Move{Pod: h.Pod, Frees: frees})
		}
		if len(moves) == 0 {
			p.mu.Lock()
			said := p.unpinned[node.Name][g.UUID]
			if !said {
				if p.unpinned[node.Name] == nil {
					p.unpinned[node.Name] = map[string]bool{}
				}
				p.unpinned[node.Name][g.UUID] = true
			}
			p.mu.Unlock()
			if !said {
				logger.Info("GPU hot, but no pod it may move is known to hold it", "node", klog.KObj(node), "gpu", g.Index, "uuid", g.UUID, "why", hotWhy,
					"holders", holders, "mayHold", maybe,
					"hint", "a device plugin's pods are told apart by the agent's published allocations; pods of a DRA driver's claims by their allocation")
			}
			continue
		}
		why := fmt.Sprintf("GPU %d (%s) of node %s at or past slowdown - margin for %s: %s; held by %s (sample taken %s, seen %s ago)",
			g.Index, g.UUID, node.Name, now.Sub(w.since).Round(time.Second), hotWhy, strings.Join(holders, ", "),
			n.SampleTime.UTC().Format(descheduler.SampleTimeLayout), now.Sub(n.Observed).Round(time.Second))
		if len(p.gate.Shed(ctx, p.handle.Evictor(), p.sim, Name, why, moves, math.SmallestNonzeroFloat64, 1, nil)) > 0 {
			p.gpuEvicted(node.Name, g.UUID, now)
		}
	}
}
