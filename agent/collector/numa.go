// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// NUMACollector reports the NUMA nodes: their CPUs and distances from
// nodeN/cpulist and nodeN/distance (Documentation/ABI/stable/
// sysfs-devices-node; a node without a distance file, or a memory-only
// node with an empty cpulist, is kept); each cycle their
// memory from nodeN/meminfo and their CPU utilization from the CPU
// collector's per-CPU figures, so it must run after the CPU collector. The
// topology is read again when a node disappears or the set of online CPUs
// (/sys/devices/system/cpu/online) changes, and lists online CPUs only.
type NUMACollector struct {
	root  hostfs.Root
	nodes []numaNode // nil until loaded
	// online is the online CPU list the topology was read with.
	online string
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
	nodes, err := c.loadSysfs()
	if err != nil {
		return Failed("TopologyError", err, "reading NUMA topology")
	}
	if len(nodes) == 0 {
		return Failed("TopologyError", nil, "no NUMA node found under %s", c.root.Path(sysNodeDir))
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
