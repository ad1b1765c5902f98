// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"testing"
	"unsafe"
)

// TestNodeLayout keeps the fields Filter and Score read for every node in
// the view's first two cache lines, and the view's size a multiple of a
// cache line, so that views, allocated in a size class of that size, start
// on a line boundary.
func TestNodeLayout(t *testing.T) {
	const line = 64
	var n Node
	for _, f := range []struct {
		name         string
		offset, size uintptr
		line         uintptr // the line it must end in or before
	}{
		{"Observed", unsafe.Offsetof(n.Observed), unsafe.Sizeof(n.Observed), 1},
		{"MemoryTotalBytes", unsafe.Offsetof(n.MemoryTotalBytes), unsafe.Sizeof(n.MemoryTotalBytes), 1},
		{"UnlimitedMilli", unsafe.Offsetof(n.UnlimitedMilli), unsafe.Sizeof(n.UnlimitedMilli), 1},
		{"HeadroomMilli", unsafe.Offsetof(n.HeadroomMilli), unsafe.Sizeof(n.HeadroomMilli), 1},
		{"CPUPercent", unsafe.Offsetof(n.CPUPercent), unsafe.Sizeof(n.CPUPercent), 1},
		{"LogicalCores", unsafe.Offsetof(n.LogicalCores), unsafe.Sizeof(n.LogicalCores), 1},
		{"MemoryPercent", unsafe.Offsetof(n.MemoryPercent), unsafe.Sizeof(n.MemoryPercent), 1},
		{"HasHeadroom", unsafe.Offsetof(n.HasHeadroom), unsafe.Sizeof(n.HasHeadroom), 1},
		{"Throttling", unsafe.Offsetof(n.Throttling), unsafe.Sizeof(n.Throttling), 2},
		{"HasUnlimited", unsafe.Offsetof(n.HasUnlimited), unsafe.Sizeof(n.HasUnlimited), 2},
		{"GPUWatts", unsafe.Offsetof(n.GPUWatts), unsafe.Sizeof(n.GPUWatts), 2},
		{"GPUs", unsafe.Offsetof(n.GPUs), unsafe.Sizeof(n.GPUs), 2},
	} {
		if end := f.offset + f.size; end > f.line*line {
			t.Errorf("Node.%s ends at byte %d, past cache line %d", f.name, end, f.line)
		}
	}
	if size := unsafe.Sizeof(n); size%line != 0 {
		t.Errorf("Node is %d bytes, not a multiple of %d", size, line)
	}
}
