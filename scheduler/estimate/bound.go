// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"math"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// EstimateBP is a node's estimated utilization in basis points (1% = 100):
// the measured percentage plus added (the pods placed since the sample, and
// the pod being scheduled) as a share of capacity. With no capacity it is
// the measurement alone. Basis points keep a small pod's share of a large
// node from being rounded away. added is negative where pods come off the
// node (the victims of a preemption's dry run); the estimate stays at or
// above 0.
func EstimateBP(measuredPercent int32, added, capacity int64) int64 {
	bp := int64(measuredPercent) * 100
	if capacity > 0 && added != 0 {
		bp += added * 10_000 / capacity
	}
	return max(bp, 0)
}

// LoadBound bounds what LoadAware estimates for every node with telemetry,
// so that LoadAware can skip its filter for a pod that no node could fail:
// a node's estimate with the pod is at most CPUBP plus the pod's share of
// MinCPUMilli, plus one basis point for rounding (the same for memory).
type LoadBound struct {
	// CPUBP and MemoryBP are the highest estimated CPU and memory
	// utilization of any node, in basis points, with the pods reserved
	// since its sample. Stale views count too.
	CPUBP, MemoryBP int64
	// MinCPUMilli and MinMemoryBytes are the smallest CPU and memory
	// capacity of the nodes that report one; 0 when none does.
	MinCPUMilli, MinMemoryBytes int64
	// HasHeat is true when some node's heat is predicted (Heat), and
	// then HeatRoomMilli is the least, over those nodes, of how far
	// below its limit Slot.SteadyBound has the node's sensor settle with
	// its reservations and a pod of no CPU, and HeatMicroPerMilli the
	// most that each millicore of the pod adds to that bound on any of
	// them, in micro-°C: EnergyAware skips its filter for a pod that no
	// node's bound could take within its margin (HeatClear).
	HasHeat                          bool
	HeatRoomMilli, HeatMicroPerMilli int64
}

// HeatClear reports whether a pod of cpuMilli leaves every node's
// Slot.SteadyBound more than marginMilli below its limit: then no node's
// Heat with the pod reaches its limit less the margin.
func (l LoadBound) HeatClear(cpuMilli, marginMilli int64) bool {
	if !l.HasHeat {
		return true
	}
	rise := math.Ceil(float64(l.HeatMicroPerMilli) * float64(max(0, cpuMilli)) / 1000)
	return float64(l.HeatRoomMilli)-rise > float64(marginMilli)
}

// nodeLoad is one node's part of the bound.
type nodeLoad struct {
	cpuBP, memoryBP       int64
	cpuMilli, memoryBytes int64 // capacity; 0 when not reported
	// heatRoom is heatRoomBase plus the node's part of HeatRoomMilli (at
	// least 1), 0 when its heat is not predicted; heatPerMilli its part
	// of HeatMicroPerMilli.
	heatRoom, heatPerMilli int64
}

// heatRoomBase keeps a node's heat room positive, as extreme counts only
// positive values, however far past its limit the node's bound is.
const heatRoomBase = 1 << 40

// loadOf is a node's estimated load with its reservations, its watts
// calibrated by cal; zero without a view (LoadAware does not reject a
// node without telemetry by its load).
func loadOf(n *telemetry.Node, reserved Demand, cal calibration) nodeLoad {
	var l nodeLoad
	if n == nil {
		return l
	}
	if n.HasCPU {
		l.cpuMilli = max(0, int64(n.LogicalCores)*1000)
		l.cpuBP = EstimateBP(n.CPUPercent, reserved.CPUMilli, l.cpuMilli)
	}
	if n.HasMemory {
		l.memoryBytes = max(0, n.MemoryTotalBytes)
		l.memoryBP = EstimateBP(n.MemoryPercent, reserved.MemoryBytes, l.memoryBytes)
	}
	l.heatRoom, l.heatPerMilli = heatRoom(n, reserved, cal)
	return l
}

// heatRoom is a node's part of the bound's heat: Slot.SteadyBound with
// reservations reserved and a pod of d millicores is at most the limit
// less (room - heatRoomBase) plus perMilli*d/1000. Both are 0 where Heat
// predicts nothing; room is 1, the least, where SteadyBound cannot tell.
func heatRoom(n *telemetry.Node, reserved Demand, cal calibration) (room, perMilli int64) {
	if n.Models == nil || !n.Models.HasThermal || !hasCurve(n) {
		return 0, 0
	}
	t := &n.Models.Thermal
	base, w, fixed, ok := boundWatts(n, reserved, cal)
	if !ok {
		return 1, 0
	}
	watts := base + fixed // the pod's step, whatever its CPU
	// SteadyBound is Steady(watts + w*d) + 1: the model's line, rounded
	// (half a milli-degree), plus 1; plus half for the floats' last bits.
	steady := float64(t.AmbientMilli) + float64(t.MilliPerWatt)*watts + 2
	r := math.Floor(float64(t.LimitMilli) - steady)
	room = int64(max(1, min(2*heatRoomBase, heatRoomBase+r)))
	perMilli = int64(min(math.Ceil(float64(t.MilliPerWatt)*w*1000), 1<<40))
	return room, perMilli
}

// LoadBound returns the bound over every node's latest view.
func (b *Book) LoadBound() LoadBound {
	return *b.bound.Load()
}

// setLoad records that a node's load changed and updates the bound: in
// constant time, unless the node was the last one at an extreme (the most
// loaded, or the smallest) and left it, when a pass over every node finds
// the new extreme. Counting the nodes at each extreme keeps the pass rare:
// pods spread evenly leave many nodes tied at the highest load, and
// deleting them one by one would otherwise take a pass each. A zero load
// (no view) is not kept. The caller holds b.mu.
func (b *Book) setLoad(name string, l nodeLoad) {
	old := b.loads[name]
	if l == (nodeLoad{}) {
		delete(b.loads, name)
	} else {
		b.loads[name] = l
	}
	if b.extremes.remove(old) {
		b.extremes.add(l)
	} else {
		b.loadPasses++
		b.extremes = loadExtremes{}
		for _, l := range b.loads {
			b.extremes.add(l)
		}
	}
	nb := b.extremes.bound()
	if nb != *b.bound.Load() {
		b.bound.Store(&nb)
	}
}

// loadExtremes are the extremes of the LoadBound with the number of nodes
// at each.
type loadExtremes struct {
	cpuBP, memoryBP, heatPerMilli extreme // highest
	cpuMilli, memoryBytes         extreme // lowest
	heatRoom                      extreme // lowest
}

func (x *loadExtremes) add(l nodeLoad) {
	x.cpuBP.add(l.cpuBP, false)
	x.memoryBP.add(l.memoryBP, false)
	x.cpuMilli.add(l.cpuMilli, true)
	x.memoryBytes.add(l.memoryBytes, true)
	x.heatRoom.add(l.heatRoom, true)
	x.heatPerMilli.add(l.heatPerMilli, false)
}

// remove takes l out, and reports false when that left an extreme without
// a node at it.
func (x *loadExtremes) remove(l nodeLoad) bool {
	ok := x.cpuBP.remove(l.cpuBP)
	ok = x.memoryBP.remove(l.memoryBP) && ok
	ok = x.cpuMilli.remove(l.cpuMilli) && ok
	ok = x.heatRoom.remove(l.heatRoom) && ok
	ok = x.heatPerMilli.remove(l.heatPerMilli) && ok
	return x.memoryBytes.remove(l.memoryBytes) && ok
}

func (x *loadExtremes) bound() LoadBound {
	l := LoadBound{CPUBP: x.cpuBP.v, MemoryBP: x.memoryBP.v, MinCPUMilli: x.cpuMilli.v, MinMemoryBytes: x.memoryBytes.v}
	if x.heatRoom.v > 0 {
		l.HasHeat, l.HeatRoomMilli, l.HeatMicroPerMilli = true, x.heatRoom.v-heatRoomBase, x.heatPerMilli.v
	}
	return l
}

// extreme is the highest (or lowest) positive value over the nodes, 0 when
// none has one, and how many nodes have it.
type extreme struct {
	v       int64
	holders int
}

func (x *extreme) add(v int64, lowest bool) {
	switch {
	case v <= 0:
	case x.v == 0 || (lowest && v < x.v) || (!lowest && v > x.v):
		x.v, x.holders = v, 1
	case v == x.v:
		x.holders++
	}
}

// remove reports false when v was the last node's at the extreme.
func (x *extreme) remove(v int64) bool {
	if v <= 0 || v != x.v {
		return true
	}
	x.holders--
	return x.holders > 0
}
