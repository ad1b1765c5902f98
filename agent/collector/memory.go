// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// MemoryCollector reads /proc/meminfo and /proc/pressure/memory.
type MemoryCollector struct {
	root hostfs.Root
	// buf holds each file the collector reads while it parses it.
	buf [4096]byte
}

// NewMemoryCollector returns a memory collector reading under root.
func NewMemoryCollector(root hostfs.Root) *MemoryCollector {
	return &MemoryCollector{root: root}
}

// Name implements Collector.
func (c *MemoryCollector) Name() telemetryv1alpha1.SourceName {
	return telemetryv1alpha1.SourceMemory
}

// Collect implements Collector.
func (c *MemoryCollector) Collect(_ context.Context, s *Sample) error {
	data, err := c.root.ReadInto("/proc/meminfo", c.buf[:])
	if err != nil {
		if hostfs.IsAbsent(err) {
			return Unavailable("NoMeminfo", "%s does not exist: is /proc mounted under --host-root?", c.root.Path("/proc/meminfo"))
		}
		return Failed("ReadError", err, "reading /proc/meminfo")
	}
	m, err := parseMeminfo(data)
	if err != nil {
		return Failed("ParseError", err, "parsing /proc/meminfo")
	}
	switch {
	case m.total <= 0:
		return Failed("ParseError", errMalformed, "/proc/meminfo has no MemTotal")
	case m.available < 0:
		// Kernels before 3.14 lack MemAvailable; an estimate from MemFree
		// would overstate pressure, so say it instead.
		return Failed("NoMemAvailable", nil, "/proc/meminfo has no MemAvailable (kernel older than 3.14)")
	}
	available := min(m.available, m.total)
	s.Memory = &telemetryv1alpha1.MemoryStatus{
		TotalBytes:         m.total,
		AvailableBytes:     available,
		UtilizationPercent: percent(float64(m.total-available) / float64(m.total)),
		Pressure:           readPressure(c.root, "/proc/pressure/memory", c.buf[:]),
	}
	return nil
}
