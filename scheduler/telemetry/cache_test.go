package telemetry

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/google/go-cmp/cmp"

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
	}
	if diff := cmp.Diff(wantGPU0, n.GPUs[0]); diff != "" || len(n.GPUs) != 8 || !n.HasGPUSource {
		t.Errorf("GPU 0 (-want +got):\n%s (%d GPUs, source %v)", diff, len(n.GPUs), n.HasGPUSource)
	}
	wantNUMA := []NUMANode{
		{ID: 0, LogicalCores: 64, AllocatedExclusiveCPUs: 16, MemoryTotalBytes: 1_082_331_758_592, MemoryFreeBytes: 411_286_068_265, CPUPercent: 44},
		{ID: 1, LogicalCores: 64, AllocatedExclusiveCPUs: 16, MemoryTotalBytes: 1_082_331_758_592, MemoryFreeBytes: 411_286_068_265, CPUPercent: 44},
	}
	if diff := cmp.Diff(wantNUMA, n.NUMA); diff != "" {
		t.Errorf("NUMA (-want +got):\n%s", diff)
	}
	if !n.Fresh(now.Add(time.Minute), time.Minute) || n.Fresh(now.Add(time.Minute+time.Second), time.Minute) {
		t.Error("freshness: a sample exactly maxAge old is fresh, a second more is stale")
	}
}

func TestReservations(t *testing.T) {
	c := NewCache()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	c.Set(&Node{Name: "a", SampleTime: t0, Interval: 5 * time.Second})
	c.Reserve("a", "pod-1", 500, 1<<30, t0.Add(time.Second))
	c.Reserve("a", "pod-2", 250, 1<<29, t0.Add(4*time.Second))
	c.Reserve("b", "pod-3", 100, 1, t0)
	if cpu, mem := reserved(c, "a"); cpu != 750 || mem != 3<<29 {
		t.Fatalf("Reserved(a) = %d, %d; want 750m, 1.5Gi", cpu, mem)
	}
	// Hold = max(2 x 5s, 10s) = 10s: a sample at t0+10s covers neither
	// pod-1 (reserved t0+1s, 9s before) nor pod-2.
	c.Set(&Node{Name: "a", SampleTime: t0.Add(10 * time.Second), Interval: 5 * time.Second})
	if cpu, _ := reserved(c, "a"); cpu != 750 {
		t.Errorf("after a sample 9s after pod-1: reserved %dm, want 750m", cpu)
	}
	// t0+11s is 10s after pod-1: it is measured now; pod-2 is not yet.
	c.Set(&Node{Name: "a", SampleTime: t0.Add(11 * time.Second), Interval: 5 * time.Second})
	if cpu, _ := reserved(c, "a"); cpu != 250 {
		t.Errorf("after a sample 10s after pod-1: reserved %dm, want 250m (pod-2)", cpu)
	}
	c.Unreserve("a", "pod-2")
	if cpu, mem := reserved(c, "a"); cpu != 0 || mem != 0 {
		t.Errorf("after Unreserve: %d, %d", cpu, mem)
	}
	if cpu, _ := reserved(c, "b"); cpu != 100 {
		t.Errorf("node b's reservation was touched: %dm", cpu)
	}
}

// TestSetKeepsTheNewerView: the scheduler's informer (through hints) and the
// cache's own deliver the same updates at different times; a late delivery
// must not roll a node back.
func TestSetKeepsTheNewerView(t *testing.T) {
	c := NewCache()
	c.Set(&Node{Name: "a", CPUPercent: 90, resourceVersion: 7})
	c.Observe(&Node{Name: "a", CPUPercent: 20, resourceVersion: 9}) // from a hint, first
	c.Set(&Node{Name: "a", CPUPercent: 90, resourceVersion: 7})     // the cache's informer, late
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

// TestReservationsExpireWithoutSamples: a node whose agent stopped gets no
// sample to retire its reservations; they must not pile up forever.
func TestReservationsExpireWithoutSamples(t *testing.T) {
	c := NewCache()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	c.Reserve("dead", "old", 100, 0, t0)
	c.Reserve("dead", "newer", 200, 0, t0.Add(9*time.Minute))
	// 10m01s after "old": it expires; "newer" (1m01s old) stays.
	c.Reserve("dead", "new", 400, 0, t0.Add(10*time.Minute+time.Second))
	if cpu, _ := reserved(c, "dead"); cpu != 600 {
		t.Errorf("reserved %dm, want 600m (200 + 400; the 10-minute-old one expired)", cpu)
	}
}

// TestConcurrentReadersAndWriters runs lock-free readers beside writers
// (run it with -race): a reader never sees a view without its name, and
// the reservation sums end where the writers left them.
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
					if n, cpu, _, ok := c.GetWithReserved(name); ok && (n.Name != name || cpu < 0) {
						t.Errorf("GetWithReserved(%s) = %q, %dm", name, n.Name, cpu)
					}
				}
			}
		})
	}
	var writers sync.WaitGroup
	for w, name := range nodes {
		writers.Go(func() {
			for i := range 200 {
				c.Set(&Node{Name: name, SampleTime: t0, Interval: time.Second, resourceVersion: uint64(i + 1)})
				uid := types.UID(fmt.Sprintf("%s-%d", name, i))
				c.Reserve(name, uid, 10, 1, t0)
				if i%2 == 1 {
					c.Unreserve(name, uid)
				}
				if w == 0 && i == 100 {
					c.remove(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name}}})
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	for i, name := range nodes {
		// 200 reservations, every odd one undone: 100 × 10m, 100 × 1 byte.
		// Node a lost its object at i = 100 and its reservations with it:
		// the even ones from 102 to 198 remain, 49.
		want := int64(100)
		if i == 0 {
			want = 49
		}
		if _, cpu, mem, ok := c.GetWithReserved(name); !ok || cpu != 10*want || mem != want {
			t.Errorf("GetWithReserved(%s) = %dm, %d bytes, %v; want %dm, %d, true", name, cpu, mem, ok, 10*want, want)
		}
	}
	if got := c.Len(); got != len(nodes) {
		t.Errorf("Len() = %d, want %d", got, len(nodes))
	}
}

// reserved is the reservation sums GetWithReserved returns.
func reserved(c *Cache, node string) (cpuMilli, memoryBytes int64) {
	_, cpuMilli, memoryBytes, _ = c.GetWithReserved(node)
	return cpuMilli, memoryBytes
}
