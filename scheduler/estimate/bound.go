// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import "github.com/telesched/telesched/scheduler/telemetry"

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
}

// nodeLoad is one node's part of the bound.
type nodeLoad struct {
	cpuBP, memoryBP       int64
	cpuMilli, memoryBytes int64 // capacity; 0 when not reported
}

// loadOf is a node's estimated load with its reservations; zero without a
// view (LoadAware does not reject a node without telemetry by its load).
func loadOf(n *telemetry.Node, reserved Demand) nodeLoad {
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
	return l
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
	cpuBP, memoryBP       extreme // highest
	cpuMilli, memoryBytes extreme // lowest
}

func (x *loadExtremes) add(l nodeLoad) {
	x.cpuBP.add(l.cpuBP, false)
	x.memoryBP.add(l.memoryBP, false)
	x.cpuMilli.add(l.cpuMilli, true)
	x.memoryBytes.add(l.memoryBytes, true)
}

// remove takes l out, and reports false when that left an extreme without
// a node at it.
func (x *loadExtremes) remove(l nodeLoad) bool {
	ok := x.cpuBP.remove(l.cpuBP)
	ok = x.memoryBP.remove(l.memoryBP) && ok
	ok = x.cpuMilli.remove(l.cpuMilli) && ok
	return x.memoryBytes.remove(l.memoryBytes) && ok
}

func (x *loadExtremes) bound() LoadBound {
	return LoadBound{CPUBP: x.cpuBP.v, MemoryBP: x.memoryBP.v, MinCPUMilli: x.cpuMilli.v, MinMemoryBytes: x.memoryBytes.v}
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
