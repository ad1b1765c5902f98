// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/sandbox/hosttree"
)

func gpuNode(t *testing.T, strategy, nvlink string, mig func(i int) []MIGDevice) *Node {
	t.Helper()
	var gpus []GPUSpec
	for i := range 4 {
		gpus = append(gpus, GPUSpec{IdleWatts: 50, TDPWatts: 400, NUMANode: i / 2, PCIAddress: "0000:07:00.0", ComputeSlices: 7, MIG: mig(i)})
	}
	return gpusNode(t, strategy, nvlink, gpus)
}

// gpusNode is a node of 8 CPUs on 2 NUMA nodes with gpus.
func gpusNode(t *testing.T, strategy, nvlink string, gpus []GPUSpec) *Node {
	t.Helper()
	n, err := NewNode(t.TempDir(), NodeSpec{
		Name: "n", MIGStrategy: strategy, NVLink: nvlink,
		Host: hosttree.Spec{CPUs: 8, NUMANodes: 2, Packages: 1, MemoryKiB: 1 << 20, IdleWatts: 100, FullLoadWatts: 300, CritMilliCelsius: 100_000},
		GPUs: gpus,
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ones(int) []MIGDevice {
	var out []MIGDevice
	for range 7 {
		out = append(out, MIGDevice{Profile: "1g.10gb", Slices: 1, MemoryMiB: 9728})
	}
	return out
}

// TestSlicePods: on the single strategy the GPU resource takes MIG
// devices; on the mixed one a profile's resource takes that profile's
// devices and the GPU resource whole GPUs; a GPU's watts rise by each busy
// device's share of its dynamic power, and leaving frees them.
func TestSlicePods(t *testing.T) {
	single := gpuNode(t, MIGSingle, "", ones)
	if diff := cmp.Diff(Alloc{Slices: []Slice{{0, 0}, {0, 1}}}, single.AddPodDevices("a", 0, Request{GPUs: 2})); diff != "" {
		t.Errorf("single strategy, 2 of the GPU resource (-want +got):\n%s", diff)
	}
	// 2 of 7 slices of one GPU: 2/7 of (400 - 50) x 95 %.
	if got, want := single.BusyShare(), 2.0/7; math.Abs(got-want) > 1e-9 {
		t.Errorf("BusyShare = %v, want %v", got, want)
	}
	if got, want := single.gpu(0).milliwatts, uint32((50+350*0.95*2/7)*1000); got != want {
		t.Errorf("GPU 0 milliwatts = %d, want %d", got, want)
	}
	if got, want := single.Spec.SliceWatts(Slice{0, 0}), 350*0.95/7; math.Abs(got-want) > 1e-9 {
		t.Errorf("SliceWatts = %v, want %v", got, want)
	}
	single.RemovePod("a")
	if got := single.BusyShare(); got != 0 {
		t.Errorf("BusyShare after the pod left = %v", got)
	}

	// GPUs 0 and 1 in MIG mode (3g + 2x2g), 2 and 3 whole.
	mixed := gpuNode(t, MIGMixed, "", func(i int) []MIGDevice {
		if i >= 2 {
			return nil
		}
		return []MIGDevice{{"3g.40gb", 3, 40192}, {"2g.20gb", 2, 19456}, {"2g.20gb", 2, 19456}}
	})
	got := mixed.AddPodDevices("b", 0, Request{GPUs: 1, MIG: map[string]int{"2g.20gb": 3}})
	if diff := cmp.Diff(Alloc{GPUs: []int{2}, Slices: []Slice{{0, 1}, {0, 2}, {1, 1}}}, got); diff != "" {
		t.Errorf("mixed strategy (-want +got):\n%s", diff)
	}
	if got, want := mixed.BusyShare(), 1+4.0/7+2.0/7; math.Abs(got-want) > 1e-9 {
		t.Errorf("BusyShare = %v, want %v", got, want)
	}
	// A GPU in MIG mode is never taken whole.
	if got := mixed.AddPodDevices("c", 0, Request{GPUs: 2}).GPUs; len(got) != 1 || got[0] != 3 {
		t.Errorf("2 whole GPUs with 1 left: took %v, want [3]", got)
	}
}

// TestLinkedPairs: on a node of NVLink pairs a 2-GPU pod takes a free
// linked pair, even when the lowest free GPUs of a NUMA node are no pair.
func TestLinkedPairs(t *testing.T) {
	n := gpuNode(t, "", NVLinkPairs, func(int) []MIGDevice { return nil })
	n.AddPod("one", 0, 1) // GPU 0: NUMA 0 has GPU 1 free, no pair
	got := n.AddPod("two", 0, 2)
	if diff := cmp.Diff([]int{2, 3}, got); diff != "" {
		t.Errorf("2-GPU pod (-want +got):\n%s", diff)
	}
	if !n.Spec.Linked(got) || n.Spec.Linked([]int{1, 2}) {
		t.Errorf("Linked: [2 3] %v, [1 2] %v; want true, false", n.Spec.Linked(got), n.Spec.Linked([]int{1, 2}))
	}
}

// TestExtraUtilizationRaisesCPUsAndIdleGPUs: the after-placement rack
// stage's extra load adds to the CPUs' utilization and to every GPU's busy
// share, a GPU capped at whole; SteadyWatts predicts it, and 0 takes it
// back.
func TestExtraUtilizationRaisesCPUsAndIdleGPUs(t *testing.T) {
	n := gpuNode(t, "", "", func(int) []MIGDevice { return nil })
	n.AddPod("p", 1000, 1) // one GPU held whole
	u := n.Utilization()
	before, predicted := n.SteadyWatts(0, 0), n.SteadyWatts(0.5, 0)
	n.SetExtraUtilization(0.5)
	if got, want := n.Utilization(), u+0.5; math.Abs(got-want) > 1e-9 {
		t.Errorf("utilization with extra 0.5: %v, want %v", got, want)
	}
	if diff := cmp.Diff(predicted, n.SteadyWatts(0.5, 0)); diff != "" {
		t.Errorf("SteadyWatts(0.5) while the extra is set (-want +got):\n%s", diff)
	}
	// The held GPU stays at whole; the three idle ones gain half their
	// busy dynamic power.
	var gpus float64
	n.mu.Lock()
	for i, g := range n.Spec.GPUs {
		gpus += gpuWatts(g, n.loadShare(i))
	}
	n.mu.Unlock()
	if want := 4*50 + 350*GPUBusyUtilization*(1+3*0.5); math.Abs(gpus-want) > 1e-9 {
		t.Errorf("GPU watts with extra 0.5: %v, want %v", gpus, want)
	}
	if predicted <= before {
		t.Errorf("SteadyWatts(0.5) = %v, want more than SteadyWatts(0) = %v", predicted, before)
	}
	n.SetExtraUtilization(0)
	if got := n.Utilization(); got != u {
		t.Errorf("utilization after the extra is taken back: %v, want %v", got, u)
	}
}

// TestPodLoadRisesAndSteadyWattsWithout: SetPodCPU changes a running pod's
// load (the after-placement rack stage's pods, placed idle, rise to their
// requests), and SteadyWatts with a negative podMilli predicts the node
// without the pod, as it is once the pod is gone.
func TestPodLoadRisesAndSteadyWattsWithout(t *testing.T) {
	n := gpuNode(t, "", "", func(int) []MIGDevice { return nil })
	n.AddPod("p", 1000, 0)
	u := n.Utilization()
	if !n.SetPodCPU("p", 3000) {
		t.Fatal("SetPodCPU of a running pod: false")
	}
	if got, want := n.Utilization(), u+2000/float64(n.Spec.Host.CPUs*1000); math.Abs(got-want) > 1e-9 {
		t.Errorf("utilization after the pod's load rose to 3000m: %v, want %v", got, want)
	}
	if n.SetPodCPU("absent", 1000) {
		t.Error("SetPodCPU of a pod that does not run here: true")
	}
	without := n.SteadyWatts(0, -3000)
	n.RemovePod("p")
	if got := n.SteadyWatts(0, 0); math.Abs(got-without) > 1e-9 {
		t.Errorf("SteadyWatts without the pod: predicted %v, %v once it is gone", without, got)
	}
}

// TestNVMLBeyondEightGPUs: the fleet format takes up to 16 GPUs a node;
// the simulated NVML (go-nvml's 8-GPU DGX A100 mock underneath) lists
// every one with its identity, MIG devices included, as the agent reads
// them.
func TestNVMLBeyondEightGPUs(t *testing.T) {
	for _, count := range []int{10, 16} {
		var gpus []GPUSpec
		for i := range count {
			g := GPUSpec{Model: "NVIDIA H100 80GB HBM3", UUID: fmt.Sprintf("GPU-%02d", i), MemoryBytes: 80 << 30, IdleWatts: 70, TDPWatts: 700,
				NUMANode: i * 2 / count, PCIAddress: fmt.Sprintf("0000:%02x:00.0", 0x10+i), ComputeSlices: 7}
			if i == count-1 {
				g.MIG = ones(i)
			}
			gpus = append(gpus, g)
		}
		lib := gpusNode(t, MIGMixed, NVLinkSwitch, gpus).NVML()
		if err := lib.Init(); err != nil {
			t.Fatal(err)
		}
		devs, err := lib.Devices()
		if err != nil {
			t.Fatalf("%d GPUs: Devices: %v", count, err)
		}
		if len(devs) != count {
			t.Fatalf("%d GPUs: Devices lists %d", count, len(devs))
		}
		for i, d := range devs {
			if u, err := d.UUID(); err != nil || u != gpus[i].UUID {
				t.Errorf("%d GPUs: GPU %d UUID %q, %v; want %q", count, i, u, err, gpus[i].UUID)
			}
		}
		last := devs[count-1]
		if migs, err := last.MIGDevices(); err != nil || len(migs.Devices) != 7 {
			t.Errorf("%d GPUs: the last GPU's MIG devices: %d, %v; want 7", count, len(migs.Devices), err)
		}
	}
}

// TestFitsMIGResourcesOnlyUnderTheMixedStrategy: a pod of
// nvidia.com/mig-1g.10gb fits a mixed-strategy node with a free 1g.10gb
// device, and no single-strategy node, whose device plugin advertises its
// devices as nvidia.com/gpu only.
func TestFitsMIGResourcesOnlyUnderTheMixedStrategy(t *testing.T) {
	req := Request{MIG: map[string]int{"1g.10gb": 1}}
	if n := gpuNode(t, MIGMixed, "", ones); !n.Fits(req) {
		t.Error("mixed strategy: a 1g.10gb device does not fit")
	}
	if n := gpuNode(t, MIGSingle, "", ones); n.Fits(req) {
		t.Error("single strategy: nvidia.com/mig-1g.10gb fits, but the node does not advertise it")
	}
	if n := gpuNode(t, MIGSingle, "", ones); !n.Fits(Request{GPUs: 1}) {
		t.Error("single strategy: nvidia.com/gpu 1 (a MIG device) does not fit")
	}
}

// TestMediaExtensionsByResourceName: a pod asks for the media-extensions
// device by the device plugin's resource (nvidia.com/mig-1g.10gb.me, a
// "+" made a "."); the node fits it while that device is free and gives
// it that device, not a plain 1g.10gb.
func TestMediaExtensionsByResourceName(t *testing.T) {
	n := gpuNode(t, MIGMixed, "", func(int) []MIGDevice {
		return []MIGDevice{{Profile: "1g.10gb", Slices: 1, MemoryMiB: 9728}, {Profile: "1g.10gb+me", Slices: 1, MemoryMiB: 9728}}
	})
	req := Request{MIG: map[string]int{"1g.10gb.me": 4}}
	if !n.Fits(req) {
		t.Fatal("4 free 1g.10gb+me devices do not fit nvidia.com/mig-1g.10gb.me: 4")
	}
	a := n.AddPodDevices("a", 0, req)
	for _, s := range a.Slices {
		if p := n.Spec.GPUs[s.GPU].MIG[s.Device].Profile; p != "1g.10gb+me" {
			t.Errorf("the pod took a %s device", p)
		}
	}
	if len(a.Slices) != 4 {
		t.Errorf("the pod took %d devices, want 4", len(a.Slices))
	}
	if n.Fits(Request{MIG: map[string]int{"1g.10gb.me": 1}}) {
		t.Error("a fifth nvidia.com/mig-1g.10gb.me fits where none is free")
	}
}
