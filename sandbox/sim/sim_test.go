package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/sandbox/hosttree"
)

func testNode(t *testing.T) *Node {
	t.Helper()
	gpu := func(numa int) GPUSpec {
		return GPUSpec{IdleWatts: 50, TDPWatts: 400, NUMANode: numa, PCIAddress: "0000:07:00.0"}
	}
	n, err := NewNode(t.TempDir(), NodeSpec{
		Name: "n", BaseUtilization: 0.1,
		Host: hosttree.Spec{CPUs: 8, NUMANodes: 2, Packages: 1, MemoryKiB: 1 << 20, IdleWatts: 100, FullLoadWatts: 300, CritMilliCelsius: 100_000},
		// GPUs 0 and 2 on NUMA 0, 1 and 3 on NUMA 1.
		GPUs: []GPUSpec{gpu(0), gpu(1), gpu(0), gpu(1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGPUsTakenOnOneNUMANode(t *testing.T) {
	n := testNode(t)
	// 2 GPUs fit on NUMA 0: 0 and 2, not 0 and 1.
	if diff := cmp.Diff([]int{0, 2}, n.AddPod("a", 0, 2)); diff != "" {
		t.Errorf("first pod's GPUs (-want +got):\n%s", diff)
	}
	// 2 left, both on NUMA 1.
	if diff := cmp.Diff([]int{1, 3}, n.AddPod("b", 0, 2)); diff != "" {
		t.Errorf("second pod's GPUs (-want +got):\n%s", diff)
	}
	n.RemovePod("a")
	n.RemovePod("b")
	n.AddPod("c", 0, 1) // GPU 0
	// 3 GPUs: no NUMA node has 3 free (NUMA 0 has 1, NUMA 1 has 2): split.
	if diff := cmp.Diff([]int{2, 1, 3}, n.AddPod("d", 0, 3)); diff != "" {
		t.Errorf("split pod's GPUs (-want +got):\n%s", diff)
	}
}

func TestUtilizationAndWatts(t *testing.T) {
	n := testNode(t)
	n.AddPod("a", 2000, 1)
	// 0.1 base + 2 CPUs / 8 = 0.35.
	if got := n.Utilization(); got != 0.35 {
		t.Errorf("utilization = %v, want 0.35", got)
	}
	n.Sweep(0.9)
	if got := n.Utilization(); got != 0.9 {
		t.Errorf("utilization while sweeping = %v, want 0.9", got)
	}
	n.EndSweep()
	// CPU 100 + 200 × 0.5 = 200 W; GPUs: one busy 50 + 350 × 0.95 = 382.5,
	// three idle 3 × 50 = 150: 732.5 W.
	if got := n.Spec.EstimatedWatts(0.5, 1); got != 732.5 {
		t.Errorf("EstimatedWatts(0.5, 1) = %v, want 732.5", got)
	}
}
