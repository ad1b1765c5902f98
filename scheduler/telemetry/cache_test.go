// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/telesched/telesched/test/fixtures"
)

func TestFromStatus(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	n := FromStatus("gpu-node", new(fixtures.FullStatus(now, 2, 8)))
	if !n.HasCPU || n.CPUPercent != 45 || n.LogicalCores != 128 || !n.HasMemory || n.MemoryPercent != 62 {
		t.Errorf("cpu/memory view = %+v", n)
	}
	// The fixture throttles (CPU counters rose and the thermal section says so).
	if !n.HasThermal || n.HottestMilli != 71_000 || !n.HasLimit || n.LimitMilli != 100_000 || !n.HasHeadroom || n.HeadroomMilli != 12_000 || !n.Throttling {
		t.Errorf("thermal view = %+v", n)
	}
	if !n.HasPower || n.Watts != 2150 || n.GPUWatts != 1400 || !n.ModelReady || n.IdleWatts != 180 || n.FullLoadWatts != 610 {
		t.Errorf("power view = %+v", n)
	}
	wantGPU0 := GPU{
		Index: 0, UUID: "GPU-5ab4f5d1-8c3e-0000-b1f0-6a2e9c4d7e00", Model: "NVIDIA H100 80GB HBM3", NUMANode: 0,
		MemoryTotalBytes: 85_520_809_984, MemoryUsedBytes: 61_203_283_968, Healthy: false,
		HasTemperature: true, TemperatureMilli: 78_000, HasSlowdown: true, SlowdownMilli: 90_000, ThermalThrottled: true,
		HasPower: true, PowerWatts: 175,
		Speed: 2.06, SpeedSource: "table",
	}
	// The layout fields (MIG, allocation, links) are TestGPULayout's.
	layout := cmpopts.IgnoreFields(GPU{}, "MIG", "ComputeSlices", "MIGProfiles", "Allocated", "NVSwitch", "LinkGroup", "Peers", "PCIeRoot")
	if diff := cmp.Diff(wantGPU0, n.GPUs[0], layout); diff != "" || len(n.GPUs) != 8 || !n.HasGPUSource {
		t.Errorf("GPU 0 (-want +got):\n%s (%d GPUs, source %v)", diff, len(n.GPUs), n.HasGPUSource)
	}
	if n.CPUSpeed != 1 || n.CPUSpeedSource != "table" {
		t.Errorf("CPU speed %v from %q, want 1 from the table", n.CPUSpeed, n.CPUSpeedSource)
	}
	wantNUMA := []NUMANode{
		{ID: 0, LogicalCores: 64, AllocatedExclusiveCPUs: 16, MemoryTotalBytes: 1_082_331_758_592, MemoryFreeBytes: 411_286_068_265, CPUPercent: 44},
		{ID: 1, LogicalCores: 64, AllocatedExclusiveCPUs: 16, MemoryTotalBytes: 1_082_331_758_592, MemoryFreeBytes: 411_286_068_265, CPUPercent: 44},
	}
	if diff := cmp.Diff(wantNUMA, n.NUMA); diff != "" {
		t.Errorf("NUMA (-want +got):\n%s", diff)
	}
	if n.Fresh(now, time.Hour) {
		t.Error("a view the cache never stored is fresh")
	}
}

// TestSetKeepsTheNewerView: the scheduler's informer (through hints) and the
// cache's own deliver the same updates at different times; a late delivery
// must not roll a node back.
func TestSetKeepsTheNewerView(t *testing.T) {
	c := NewCache()
	c.Set(&Node{Name: "a", CPUPercent: 90, resourceVersion: 7})
	c.Set(&Node{Name: "a", CPUPercent: 20, resourceVersion: 9}) // from a hint, first
	c.Set(&Node{Name: "a", CPUPercent: 90, resourceVersion: 7}) // the cache's informer, late
	if n, _ := c.Get("a"); n.CPUPercent != 20 {
		t.Errorf("CPUPercent = %d, want 20 from resourceVersion 9", n.CPUPercent)
	}
	c.Set(&Node{Name: "a", CPUPercent: 50, resourceVersion: 10})
	if n, _ := c.Get("a"); n.CPUPercent != 50 {
		t.Errorf("CPUPercent = %d, want 50 from resourceVersion 10", n.CPUPercent)
	}
}

func TestGPUNodes(t *testing.T) {
	c := NewCache()
	obj := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetName(name)
		return u
	}
	gpus := []GPU{{Index: 0}, {Index: 1}}
	for _, step := range []struct {
		do   func()
		what string
		want int
	}{
		{func() { c.Set(&Node{Name: "cpu"}) }, "a CPU node", 0},
		{func() { c.Set(&Node{Name: "a", GPUs: gpus}) }, "a GPU node", 1},
		{func() { c.Set(&Node{Name: "b", GPUs: gpus}) }, "a second GPU node", 2},
		{func() { c.Set(&Node{Name: "a", GPUs: gpus}) }, "a GPU node's update", 2},
		{func() { c.Set(&Node{Name: "a"}) }, "a GPU node that lost its GPUs", 1},
		{func() { c.remove(obj("b")) }, "a GPU node deleted", 0},
		{func() { c.remove(obj("a")) }, "a CPU node deleted", 0},
	} {
		step.do()
		if got := c.GPUNodes(); got != step.want {
			t.Errorf("after %s: GPUNodes = %d, want %d", step.what, got, step.want)
		}
	}
}

// TestConcurrentReadersAndWriters runs lock-free readers beside writers
// (run it with -race): a reader never sees a view without its name, and a
// node deleted and written again comes back.
func TestConcurrentReadersAndWriters(t *testing.T) {
	c := NewCache()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	nodes := []string{"a", "b", "c", "d"}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, name := range nodes {
					if n, ok := c.Get(name); ok && (n.Name != name || n.Observed.IsZero()) {
						t.Errorf("Get(%s) = %q observed %v", name, n.Name, n.Observed)
					}
				}
			}
		})
	}
	var writers sync.WaitGroup
	for w, name := range nodes {
		writers.Go(func() {
			for i := range 200 {
				c.Set(&Node{Name: name, SampleTime: t0.Add(time.Duration(i) * time.Second), Interval: time.Second, resourceVersion: uint64(2*i + 1)})
				if w == 0 && i == 100 {
					c.remove(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name, "resourceVersion": fmt.Sprint(2*i + 2)}}})
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	for _, name := range nodes {
		if n, ok := c.Get(name); !ok || n.resourceVersion != 399 {
			t.Errorf("Get(%s) = %+v, %v; want resourceVersion 399", name, n, ok)
		}
	}
	if got := c.Len(); got != len(nodes) {
		t.Errorf("Len() = %d, want %d", got, len(nodes))
	}
}
