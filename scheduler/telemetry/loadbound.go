package telemetry

// EstimateBP is a node's estimated utilization in basis points (1% = 100):
// the measured percentage plus added (the pods placed since the sample, and
// the pod being scheduled) as a share of capacity. With no capacity it is
// the measurement alone. Basis points keep a small pod's share of a large
// node from being rounded away.
func EstimateBP(measuredPercent int32, added, capacity int64) int64 {
	bp := int64(measuredPercent) * 100
	if capacity > 0 && added > 0 {
		bp += added * 10_000 / capacity
	}
	return bp
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
func loadOf(n *Node, reservedCPUMilli, reservedMemoryBytes int64) nodeLoad {
	var l nodeLoad
	if n == nil {
		return l
	}
	if n.HasCPU {
		l.cpuMilli = max(0, int64(n.LogicalCores)*1000)
		l.cpuBP = EstimateBP(n.CPUPercent, reservedCPUMilli, l.cpuMilli)
	}
	if n.HasMemory {
		l.memoryBytes = max(0, n.MemoryTotalBytes)
		l.memoryBP = EstimateBP(n.MemoryPercent, reservedMemoryBytes, l.memoryBytes)
	}
	return l
}

// LoadBound returns the bound over every node's latest view.
func (c *Cache) LoadBound() LoadBound {
	return *c.bound.Load()
}

// setLoad records that a node's load changed and updates the bound: in
// constant time when the node raises a maximum (a reservation) or leaves it
// alone, by a pass over every node when the node held a maximum (or a
// minimum capacity) and gave it up. The caller holds c.mu.
func (c *Cache) setLoad(e *entry, l nodeLoad) {
	old := e.load
	e.load = l
	b := *c.bound.Load()
	if (old.cpuBP == b.CPUBP && l.cpuBP < old.cpuBP) ||
		(old.memoryBP == b.MemoryBP && l.memoryBP < old.memoryBP) ||
		(old.cpuMilli != l.cpuMilli && old.cpuMilli == b.MinCPUMilli) ||
		(old.memoryBytes != l.memoryBytes && old.memoryBytes == b.MinMemoryBytes) {
		b = LoadBound{}
		for _, e := range *c.entries.Load() {
			b = b.add(e.load)
		}
	} else {
		b = b.add(l)
	}
	if b != *c.bound.Load() {
		c.bound.Store(&b)
	}
}

// add widens the bound to cover l.
func (b LoadBound) add(l nodeLoad) LoadBound {
	b.CPUBP = max(b.CPUBP, l.cpuBP)
	b.MemoryBP = max(b.MemoryBP, l.memoryBP)
	if l.cpuMilli > 0 && (b.MinCPUMilli == 0 || l.cpuMilli < b.MinCPUMilli) {
		b.MinCPUMilli = l.cpuMilli
	}
	if l.memoryBytes > 0 && (b.MinMemoryBytes == 0 || l.memoryBytes < b.MinMemoryBytes) {
		b.MinMemoryBytes = l.memoryBytes
	}
	return b
}
