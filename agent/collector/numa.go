package collector

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/jaypipes/ghw"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// NUMACollector reports the NUMA nodes: their CPUs and distances from ghw's
// topology (read once, and again if a node disappears), and each cycle their
// memory from nodeN/meminfo and their CPU utilization from the CPU
// collector's per-CPU figures, so it must run after the CPU collector.
type NUMACollector struct {
	root  hostfs.Root
	nodes []numaNode // nil until loaded
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
	if c.nodes == nil {
		if err := c.load(); err != nil {
			return err
		}
	}
	out := make([]telemetryv1alpha1.NUMANodeStatus, 0, len(c.nodes))
	for _, n := range c.nodes {
		file := fmt.Sprintf("%s/node%d/meminfo", sysNodeDir, n.id)
		data, err := c.root.ReadFile(file)
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

func (c *NUMACollector) load() error {
	if !c.root.Exists(sysNodeDir) {
		return Unavailable("NoNUMATopology", "%s does not exist (kernel without NUMA support, or /sys not mounted under --host-root)", c.root.Path(sysNodeDir))
	}
	// ghw reports what it could not read as warnings, not errors: keep
	// them to say why a topology came back empty.
	var warnings bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&warnings, &slog.HandlerOptions{
		Level:       slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
	}))
	info, err := ghw.Topology(ghw.WithChroot(c.root.Dir()), ghw.WithLogger(logger))
	if err != nil {
		return Failed("TopologyError", err, "reading NUMA topology")
	}
	if len(info.Nodes) == 0 {
		why := strings.TrimSpace(warnings.String())
		if why == "" {
			why = "ghw gave no reason"
		}
		return Failed("TopologyError", nil, "no NUMA node found under %s: %s", c.root.Path(sysNodeDir), why)
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
		nodes = append(nodes, numaNode{id: n.ID, cpus: cpus, cpuList: formatCPUList(cpus), distances: dist})
	}
	slices.SortFunc(nodes, func(a, b numaNode) int { return a.id - b.id })
	c.nodes = nodes
	return nil
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
