// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jaypipes/ghw"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/text"
)

// NUMACollector reports the NUMA nodes: their CPUs and distances from ghw's
// topology, or from nodeN/cpulist and nodeN/distance where ghw cannot read
// the layout (no distance files, a memory-only node); each cycle their
// memory from nodeN/meminfo and their CPU utilization from the CPU
// collector's per-CPU figures, so it must run after the CPU collector. The
// topology is read again when a node disappears or the set of online CPUs
// (/sys/devices/system/cpu/online) changes, and lists online CPUs only.
type NUMACollector struct {
	root  hostfs.Root
	nodes []numaNode // nil until loaded
	// online is the online CPU list the topology was read with.
	online string
	// note says where the topology came from when it is not ghw.
	note string
	// buf holds each file the collector reads every cycle while it
	// parses it.
	buf [4096]byte
}

type numaNode struct {
	id        int
	cpus      []int // sorted logical CPU ids
	cpuList   string
	distances []int32
}

// NewNUMACollector returns a NUMA collector reading under root.
func NewNUMACollector(root hostfs.Root) *NUMACollector {
	return &NUMACollector{root: root}
}

// Name implements Collector.
func (c *NUMACollector) Name() telemetryv1alpha1.SourceName { return telemetryv1alpha1.SourceNUMA }

const sysNodeDir = "/sys/devices/system/node"

// Collect implements Collector.
func (c *NUMACollector) Collect(_ context.Context, s *Sample) error {
	online := c.readOnline()
	if c.nodes == nil || online != c.online {
		if err := c.load(online); err != nil {
			c.nodes = nil
			return err
		}
	}
	out := make([]telemetryv1alpha1.NUMANodeStatus, 0, len(c.nodes))
	for _, n := range c.nodes {
		file := fmt.Sprintf("%s/node%d/meminfo", sysNodeDir, n.id)
		data, err := c.root.ReadInto(file, c.buf[:])
		if err != nil {
			if hostfs.IsAbsent(err) {
				c.nodes = nil // the topology changed; reload next cycle
			}
			return Failed("ReadError", err, "reading %s", file)
		}
		m, err := parseMeminfo(data)
		if err != nil || m.total < 0 || m.free < 0 {
			return Failed("ParseError", err, "parsing %s: want MemTotal and MemFree", file)
		}
		st := telemetryv1alpha1.NUMANodeStatus{
			ID:               int32(n.id),
			CPUs:             n.cpuList,
			LogicalCores:     int32(len(n.cpus)),
			MemoryTotalBytes: m.total,
			MemoryFreeBytes:  min(m.free, m.total),
			Distances:        n.distances,
		}
		if u, ok := meanBusy(s.PerCPUBusy, n.cpus); ok {
			st.CPUUtilizationPercent = ptr.To(percent(u))
		}
		out = append(out, st)
	}
	s.NUMA = out
	return nil
}

// Note implements Noter: how the topology was read, when not by ghw.
func (c *NUMACollector) Note() string { return c.note }

// readOnline returns /sys/devices/system/cpu/online, "" when unreadable.
func (c *NUMACollector) readOnline() string {
	b, err := c.root.ReadInto("/sys/devices/system/cpu/online", c.buf[:])
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (c *NUMACollector) load(online string) error {
	if !c.root.Exists(sysNodeDir) {
		return Unavailable("NoNUMATopology", "%s does not exist (kernel without NUMA support, or /sys not mounted under --host-root)", c.root.Path(sysNodeDir))
	}
	nodes, why := c.loadGhw()
	c.note = ""
	if len(nodes) == 0 {
		var err error
		if nodes, err = c.loadSysfs(); err != nil {
			return Failed("TopologyError", err, "reading NUMA topology (ghw: %s)", why)
		}
		if len(nodes) == 0 {
			return Failed("TopologyError", nil, "no NUMA node found under %s (ghw: %s)", c.root.Path(sysNodeDir), why)
		}
		c.note = text.Truncate("topology read from nodeN/cpulist and nodeN/distance; ghw could not: "+why, 256)
	}
	if ids, err := parseCPUList([]byte(online)); err == nil && online != "" {
		for i := range nodes {
			nodes[i].cpus = slices.DeleteFunc(nodes[i].cpus, func(cpu int) bool { return !slices.Contains(ids, cpu) })
		}
	}
	for i := range nodes {
		nodes[i].cpuList = formatCPUList(nodes[i].cpus)
	}
	slices.SortFunc(nodes, func(a, b numaNode) int { return a.id - b.id })
	c.nodes, c.online = nodes, online
	return nil
}

// loadGhw reads the topology with ghw; no nodes and ghw's reason when it
// cannot.
func (c *NUMACollector) loadGhw() ([]numaNode, string) {
	// ghw reports what it could not read as warnings, not errors: keep
	// them to say why a topology came back empty.
	var warnings bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&warnings, &slog.HandlerOptions{
		Level:       slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
	}))
	info, err := ghw.Topology(ghw.WithChroot(c.root.Dir()), ghw.WithLogger(logger))
	if err != nil {
		return nil, err.Error()
	}
	if len(info.Nodes) == 0 {
		why := strings.TrimSpace(warnings.String())
		if why == "" {
			why = "it gave no reason"
		}
		return nil, why
	}
	nodes := make([]numaNode, 0, len(info.Nodes))
	for _, n := range info.Nodes {
		var cpus []int
		for _, core := range n.Cores {
			cpus = append(cpus, core.LogicalProcessors...)
		}
		slices.Sort(cpus)
		cpus = slices.Compact(cpus)
		dist := make([]int32, len(n.Distances))
		for i, d := range n.Distances {
			dist[i] = int32(d)
		}
		nodes = append(nodes, numaNode{id: n.ID, cpus: cpus, distances: dist})
	}
	return nodes, ""
}

// loadSysfs reads each /sys/devices/system/node/nodeN: its CPUs from
// cpulist (empty for a memory-only node) and its distances from distance
// when the file exists (Documentation/ABI/stable/sysfs-devices-node).
func (c *NUMACollector) loadSysfs() ([]numaNode, error) {
	dirs, err := c.root.Glob(sysNodeDir + "/node[0-9]*")
	if err != nil {
		return nil, err
	}
	var nodes []numaNode
	for _, d := range dirs {
		id, ok := parseIndex(path.Base(d), "node")
		if !ok {
			continue
		}
		b, err := c.root.ReadFile(d + "/cpulist")
		if err != nil {
			return nil, err
		}
		cpus, err := parseCPUList(b)
		if err != nil {
			return nil, fmt.Errorf("%s/cpulist: %w", d, err)
		}
		n := numaNode{id: id, cpus: cpus}
		if b, err := c.root.ReadFile(d + "/distance"); err == nil {
			for _, f := range strings.Fields(string(b)) {
				v, err := strconv.ParseInt(f, 10, 32)
				if err != nil {
					n.distances = nil
					break
				}
				n.distances = append(n.distances, int32(v))
			}
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// dropTime removes the time from ghw's log records, which end up in a
// message, not a log.
func dropTime(a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// meanBusy averages the busy fraction of the given CPUs that have one.
func meanBusy(perCPU map[int]float64, cpus []int) (float64, bool) {
	var sum float64
	var n int
	for _, id := range cpus {
		if b, ok := perCPU[id]; ok {
			sum += b
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}
