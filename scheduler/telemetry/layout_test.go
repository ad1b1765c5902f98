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

// TestProfileSlices: a MIG device's compute slices, from its profile name
// as NVIDIA's device plugin names it: "<g>g.<gb>gb" for a GPU instance
// with one compute instance (its g slices), "<c>c.<g>g.<gb>gb" for a
// compute instance of c of the GPU instance's g slices (NVIDIA's MIG User
// Guide, "MIG Device Names": a compute instance that does not take its
// whole GPU instance is named so, e.g. 1c.3g.20gb on an A100 40GB; it
// runs on its c slices, the rest of the GPU instance's belong to other
// compute instances; the agent names devices so too,
// agent/collector/gpu_mig.go).
func TestProfileSlices(t *testing.T) {
	t.Parallel()
	for profile, want := range map[string]int32{
		"1g.10gb":    1,
		"1g.10gb+me": 1,
		"3g.40gb":    3,
		"7g.80gb":    7,
		"1g.20gb":    1,
		"1c.3g.40gb": 1,
		"2c.3g.40gb": 2,
		"3c.4g.40gb": 3,
		"1c.7g.80gb": 1,
		"":           0,
		"g.10gb":     0,
		"c.3g.40gb":  0,
		"2c.40gb":    0,
		"2c":         0,
		"mig":        0,
		"40gb":       0,
		"1c.40gb":    0,
	} {
		if got := ProfileSlices(profile); got != want {
			t.Errorf("ProfileSlices(%q) = %d, want %d", profile, got, want)
		}
	}
}
