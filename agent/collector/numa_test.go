// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// TestNUMASnapshots reads the real-machine snapshots.
func TestNUMASnapshots(t *testing.T) {
	for _, tc := range []struct {
		snapshot string
		want     []telemetryv1alpha1.NUMANodeStatus
	}{
		{
			// 2 sockets of 6 cores x 2 threads: 24 logical CPUs in 2 nodes.
			snapshot: "linux-amd64-xeon-l5640-2numa",
			want: []telemetryv1alpha1.NUMANodeStatus{
				{
					ID: 0, CPUs: "0,2,4,6,8,10,12,14,16,18,20,22", LogicalCores: 12,
					MemoryTotalBytes: 32980312 * 1024, MemoryFreeBytes: 29193784 * 1024, // node0/meminfo, kB
					Distances: []int32{10, 20},
				},
				{
					ID: 1, CPUs: "1,3,5,7,9,11,13,15,17,19,21,23", LogicalCores: 12,
					MemoryTotalBytes: 32940968 * 1024, MemoryFreeBytes: 30650564 * 1024,
					Distances: []int32{20, 10},
				},
			},
		},
		{
			snapshot: "linux-amd64-xeon-e5-2695v4-tesla-p100",
			want: []telemetryv1alpha1.NUMANodeStatus{{
				ID: 0, CPUs: "0-7", LogicalCores: 8,
				MemoryTotalBytes: 30601816 * 1024, MemoryFreeBytes: 29549896 * 1024,
				Distances: []int32{10},
			}},
		},
	} {
		t.Run(tc.snapshot, func(t *testing.T) {
			root := unpackSnapshot(t, tc.snapshot)
			s := &Sample{}
			if err := NewNUMACollector(root).Collect(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, s.NUMA); diff != "" {
				t.Errorf("NUMA (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNUMAUtilization: a node's utilization is the mean of its CPUs' busy
// fractions from the CPU collector; a node none of whose CPUs has one gets
// no utilization rather than 0.
func TestNUMAUtilization(t *testing.T) {
	root := unpackSnapshot(t, "linux-amd64-xeon-l5640-2numa")
	s := &Sample{PerCPUBusy: map[int]float64{0: 0.5, 2: 0.25, 4: 0.0}}
	if err := NewNUMACollector(root).Collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	// node 0: (0.5 + 0.25 + 0) / 3 = 0.25 -> 25%; node 1: no CPU with a figure.
	if diff := cmp.Diff(ptr.To[int32](25), s.NUMA[0].CPUUtilizationPercent); diff != "" {
		t.Errorf("node 0 utilization (-want +got):\n%s", diff)
	}
	if s.NUMA[1].CPUUtilizationPercent != nil {
		t.Errorf("node 1 utilization = %d, want absent", *s.NUMA[1].CPUUtilizationPercent)
	}
}

func TestMemorySnapshot(t *testing.T) {
	root := unpackSnapshot(t, "linux-amd64-xeon-l5640-2numa")
	s := &Sample{}
	if err := NewMemoryCollector(root).Collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	want := &telemetryv1alpha1.MemoryStatus{
		TotalBytes:     65921280 * 1024, // MemTotal kB
		AvailableBytes: 63844924 * 1024, // MemAvailable kB
		// (65921280 - 63844924) / 65921280 = 3.15% -> 3
		UtilizationPercent: 3,
	}
	if diff := cmp.Diff(want, s.Memory); diff != "" {
		t.Errorf("Memory (-want +got):\n%s", diff)
	}
}

func TestMemoryWithoutMemAvailable(t *testing.T) {
	root := writeTree(t, map[string]string{"/proc/meminfo": "MemTotal: 1000 kB\nMemFree: 500 kB\n"})
	err := NewMemoryCollector(root).Collect(context.Background(), &Sample{})
	var se *SourceError
	if !errors.As(err, &se) || se.Reason != "NoMemAvailable" {
		t.Errorf("Collect = %v, want reason NoMemAvailable", err)
	}
}

// Defect 5: node_exporter's real sysfs fixture has no distance files, but
// nodeN/cpulist and meminfo are there (Documentation/ABI/stable/
// sysfs-devices-node: cpulist is the node's CPUs, meminfo its memory). The
// section comes from those files, and a memory-only node is kept.
func TestNUMAWithoutDistances(t *testing.T) {
	root := hostfsFromDir(t, "testdata/numa/node-exporter-3node")
	c := NewNUMACollector(root)
	s := &Sample{}
	if err := c.Collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	want := []telemetryv1alpha1.NUMANodeStatus{
		{ID: 0, CPUs: "0-1", LogicalCores: 2, MemoryTotalBytes: 134182340 * 1024, MemoryFreeBytes: 53030372 * 1024},
		{ID: 1, CPUs: "2-3", LogicalCores: 2, MemoryTotalBytes: 134217728 * 1024, MemoryFreeBytes: 39634788 * 1024},
		{ID: 2, CPUs: "", LogicalCores: 0, MemoryTotalBytes: 134217728 * 1024, MemoryFreeBytes: 39634788 * 1024},
	}
	if diff := cmp.Diff(want, s.NUMA); diff != "" {
		t.Errorf("NUMA (-want +got):\n%s", diff)
	}
}

// Defect 5: a CPU going offline changes the published topology at the next
// sample (cpus lists online CPUs, Documentation/ABI/testing/
// sysfs-devices-system-cpu: /sys/devices/system/cpu/online).
func TestNUMAFollowsOnlineCPUs(t *testing.T) {
	meminfo := "Node 0 MemTotal:       1000 kB\nNode 0 MemFree:        500 kB\n"
	root := writeTree(t, map[string]string{
		"/sys/devices/system/cpu/online":                "0-3\n",
		"/sys/devices/system/node/node0/cpulist":        "0-3\n",
		"/sys/devices/system/node/node0/meminfo":        meminfo,
		"/sys/devices/system/node/node0/distance":       "10\n",
		"/sys/devices/system/cpu/cpu0/topology/core_id": "0\n",
	})
	c := NewNUMACollector(root)
	s := &Sample{}
	if err := c.Collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if len(s.NUMA) != 1 || s.NUMA[0].LogicalCores != 4 {
		t.Fatalf("NUMA = %+v, want one node with 4 CPUs", s.NUMA)
	}
	updateTree(t, root, map[string]string{"/sys/devices/system/cpu/online": "0-1,3\n", "/sys/devices/system/node/node0/cpulist": "0-1,3\n"})
	s = &Sample{}
	if err := c.Collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if len(s.NUMA) != 1 || s.NUMA[0].LogicalCores != 3 || s.NUMA[0].CPUs != "0-1,3" {
		t.Errorf("after cpu2 went offline: NUMA = %+v, want 3 CPUs 0-1,3", s.NUMA)
	}
}
