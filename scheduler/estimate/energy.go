// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// Work is how a pod's work is counted (docs/energy-models.md, "Energy for
// the same work").
type Work uint8

const (
	// WorkService: a long-running pod does a fixed amount of work per
	// second (it serves what comes). Its requests are sized on the
	// reference machine; on a node k times faster it keeps 1/k of them
	// busy, and its energy per unit of work is the watts that smaller load
	// adds.
	WorkService Work = iota
	// WorkFinite: a pod of a Job (or one that declares it) does a fixed
	// amount of work at its requests; on a node k times faster it ends in
	// 1/k of the time, and its energy per unit of work is the watts it
	// adds over k.
	WorkFinite
)

func (w Work) String() string {
	if w == WorkFinite {
		return "finite"
	}
	return "service"
}

// WorkAnnotation declares a pod's kind of work: "finite" (a fixed amount
// of work) or "service" (fixed work per second). Without it, a pod owned
// by a Job is finite and any other is a service.
const WorkAnnotation = "telesched.io/work"

// WorkOf is the pod's kind of work, and false when its annotation holds a
// value that is neither kind (the owner decides then).
func WorkOf(pod *v1.Pod) (Work, bool) {
	switch v := strings.TrimSpace(pod.Annotations[WorkAnnotation]); v {
	case "finite":
		return WorkFinite, true
	case "service":
		return WorkService, true
	case "":
	default:
		return workByOwner(pod), false
	}
	return workByOwner(pod), true
}

func workByOwner(pod *v1.Pod) Work {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Job" && strings.HasPrefix(o.APIVersion, "batch/") {
			return WorkFinite
		}
	}
	return WorkService
}

// ReferenceComputeSlices is the compute slices of the reference GPU (an
// A100: 7), by which a MIG profile's request is sized: a pod asking
// nvidia.com/mig-3g.40gb asks 3/7 of a reference GPU's work per second.
const ReferenceComputeSlices = 7

// PodSpeed is how many times the reference's work per second node n does
// for a pod of demand d, and whether that rests on published figures (the
// node's speed source is not "reference"). A pod with GPUs runs at its
// GPUs' pace: what the devices it gets deliver (a whole GPU its speed, a
// MIG device its compute slices' share of it, the GPU resource on a node
// of the single MIG strategy a device's share) over what it asked of
// reference GPUs (a whole GPU each, a MIG profile its slices over 7). A
// CPU pod runs at a CPU core's pace. 1 and false on a node that published
// no speed (and on a view with none set).
func PodSpeed(n *telemetry.Node, d Demand) (k float64, known bool) {
	if n == nil {
		return 1, false
	}
	if d.BusyGPUs() <= 0 && d.MIGSlices <= 0 || len(n.GPUs) == 0 {
		if n.CPUSpeed <= 0 {
			return 1, false // a view not built from a status: none published
		}
		return n.CPUSpeed, n.CPUSpeedSource != "" && n.CPUSpeedSource != "reference"
	}
	s, known := gpuSpeed(n)
	share := 1.0
	if slices, total := singleStrategySlices(n); total > 0 {
		share = float64(slices) / float64(total)
	}
	var total int32 = ReferenceComputeSlices
	for i := range n.GPUs {
		if g := &n.GPUs[i]; g.MIG && g.ComputeSlices > 0 {
			total = g.ComputeSlices
			break
		}
	}
	asked := float64(d.BusyGPUs()) + float64(d.MIGSlices)/ReferenceComputeSlices
	got := s * (float64(d.GPUs)*share + float64(d.ClaimGPUs) + float64(d.MIGSlices)/float64(total))
	if asked <= 0 || got <= 0 {
		return 1, false
	}
	return got / asked, known
}

// PerGPUWork is watts, what node n's GPUs draw (as BusyGPUWatts: a busy
// GPU over an idle one), per unit of reference work: over the GPUs' mean
// speed; watts itself on a node without GPUs. Energy-aware placement
// fills GPUs cheapest per unit of work first, so a budget's headroom goes
// to them in that order too. The caller passes the watts it already has.
func PerGPUWork(n *telemetry.Node, watts float64) float64 {
	if len(n.GPUs) == 0 {
		return watts
	}
	s, _ := gpuSpeed(n)
	return watts / s
}

// gpuSpeed is the mean speed of node n's GPUs, and whether every one
// rests on a published figure.
func gpuSpeed(n *telemetry.Node) (float64, bool) {
	var sum float64
	known := true
	for i := range n.GPUs {
		g := &n.GPUs[i]
		s := g.Speed
		if s <= 0 {
			s = 1
		}
		sum += s
		known = known && g.SpeedSource != "" && g.SpeedSource != "reference"
	}
	return sum / float64(len(n.GPUs)), known
}

// Energy is what a pod's work costs a node: Joules is the energy for one
// unit of its work (what the pod does in a second on the reference at
// its requests), in joules; Speed is the node's pace for it (PodSpeed)
// and SpeedKnown whether that rests on published figures.
type Energy struct {
	Joules     float64
	Speed      float64
	SpeedKnown bool
}

// RankJoules is what EnergyAware ranks a pod of demand d and kind work on
// node n by: the joules the node spends for one unit of the pod's work.
// A service pod keeps 1/k of its requests busy on a node k times faster:
// the watts that load adds (its CPU side amortized over up to pods pods
// like it, AmortizedCPUWatts, calibrated), its GPUs' watts over k. A
// finite pod runs at its requests for 1/k of the time: the watts it adds
// (amortized and calibrated alike) over k. A unit of work takes a second
// on the reference, so a node of the reference's speed ranks a pod by its
// watts, as before. ok is false where RankWatts has no watts.
func (b *Book) RankJoules(n *telemetry.Node, d, reserved Demand, work Work, pods int, headroomMilli int64) (Energy, bool) {
	return b.slotWith(n.Name, reserved).RankJoules(n, d, work, pods, headroomMilli)
}

// RankJoules is Book.RankJoules on node n, whose slot s is.
func (s Slot) RankJoules(n *telemetry.Node, d Demand, work Work, pods int, headroomMilli int64) (Energy, bool) {
	k, known := PodSpeed(n, d)
	e := Energy{Speed: k, SpeedKnown: known}
	if work == WorkFinite {
		w, ok := s.RankWatts(n, d, pods, headroomMilli)
		e.Joules = w / k
		return e, ok
	}
	cpu, ok := AmortizedCPUWatts(n, overPace(d, k), s.unseen(), pods, int64(float64(headroomMilli)/k))
	if !ok {
		return e, false
	}
	e.Joules = s.cal.watts(Watts{Mean: cpu, Upper: cpu}).Mean + PodGPUWatts(n, d)/k
	return e, true
}

// Busy is what a pod of demand d and kind work keeps busy on node n: a
// service its CPU requests over the node's speed for it (PodSpeed), a
// finite pod its requests. What the pod's leaving frees is the watts of
// that load: the descheduler ranks the pods it may move by it.
func Busy(n *telemetry.Node, d Demand, work Work) Demand {
	if work == WorkService {
		k, _ := PodSpeed(n, d)
		return overPace(d, k)
	}
	return d
}

// overPace is d with its CPU requests over the pace k: what a service of
// demand d keeps busy on a node k times the reference's speed for it.
func overPace(d Demand, k float64) Demand {
	d.CPUMilli = int64(float64(d.CPUMilli)/k + 0.5)
	return d
}

// Busy is estimate.Busy for pod on node n, its demand counted by the
// book.
func (b *Book) Busy(n *telemetry.Node, pod *v1.Pod) Demand {
	w, _ := WorkOf(pod)
	return Busy(n, b.Demand(pod), w)
}
