// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/nvml/nvmltest"
	"github.com/telesched/telesched/sandbox/hosttree"
)

// TestPodResourcesAgentAllocations: the agent's collectors, reading a
// simulated node's tree, its NVML and its pod-resources socket, publish
// as allocated exactly the GPUs and MIG devices the simulation gave its
// pods: whole GPUs, MIG devices of both strategies, a DRA claim's GPUs
// and MIG devices.
func TestPodResourcesAgentAllocations(t *testing.T) {
	mixed := func(i int) []MIGDevice {
		if i < 2 {
			return nil // GPUs 0 and 1 whole
		}
		return []MIGDevice{{Profile: "3g.40gb", Slices: 3, MemoryMiB: 40192}, {Profile: "1g.10gb", Slices: 1, MemoryMiB: 9728}, {Profile: "1g.10gb", Slices: 1, MemoryMiB: 9728}}
	}
	type pod struct {
		name string
		req  Request
	}
	tests := []struct {
		name     string
		strategy string
		dra      bool
		mig      func(int) []MIGDevice
		pods     []pod
	}{
		{
			name: "whole GPUs, a pod of 1 and a pod of 2",
			mig:  func(int) []MIGDevice { return nil },
			pods: []pod{{"a", Request{GPUs: 1}}, {"b", Request{GPUs: 2}}},
		},
		{
			name:     "mixed strategy: a whole GPU and MIG devices of two profiles",
			strategy: MIGMixed, mig: mixed,
			pods: []pod{{"a", Request{GPUs: 1}}, {"b", Request{MIG: map[string]int{"1g.10gb": 3}}}, {"c", Request{MIG: map[string]int{"3g.40gb": 1}}}},
		},
		{
			name:     "mixed strategy with media extensions: the agent names the +me device by its OFA",
			strategy: MIGMixed, mig: func(i int) []MIGDevice {
				return []MIGDevice{{Profile: "1g.10gb+me", Slices: 1, MemoryMiB: 9728}, {Profile: "1g.10gb", Slices: 1, MemoryMiB: 9728}, {Profile: "3g.40gb", Slices: 3, MemoryMiB: 40192}}
			},
			pods: []pod{{"a", Request{MIG: map[string]int{"1g.10gb+me": 2}}}, {"b", Request{MIG: map[string]int{"1g.10gb": 1}}}},
		},
		{
			name:     "single strategy: the GPU resource takes MIG devices",
			strategy: MIGSingle, mig: ones,
			pods: []pod{{"a", Request{GPUs: 3}}, {"b", Request{GPUs: 8}}},
		},
		{
			name: "DRA: a claim's GPUs, named by the CDI device",
			dra:  true, mig: func(int) []MIGDevice { return nil },
			pods: []pod{{"a", Request{UUIDs: []string{uuid(1), uuid(3)}, Claim: "a"}}},
		},
		{
			name: "DRA with MIG devices: a claim's MIG devices and another's whole GPU, named by the CDI device",
			dra:  true, mig: mixed,
			pods: []pod{
				{"a", Request{UUIDs: []string{nvmltest.MIGUUID(2, 0), nvmltest.MIGUUID(3, 2)}, Claim: "a"}},
				{"b", Request{UUIDs: []string{uuid(0)}, Claim: "b"}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := uuidNode(t, tc.strategy, tc.dra, tc.mig)
			type alloc struct {
				Whole   map[int]bool
				Devices map[string]int32 // "GPU/profile" -> count
			}
			want := alloc{Whole: map[int]bool{}, Devices: map[string]int32{}}
			for i, g := range n.Spec.GPUs {
				if g.MIG == nil {
					want.Whole[i] = false
				}
				for _, d := range g.MIG {
					want.Devices[fmt.Sprintf("%d/%s", i, d.Profile)] += 0
				}
			}
			for _, p := range tc.pods {
				p.req.Pod = types.NamespacedName{Namespace: "demo", Name: p.name}
				a := n.AddPodDevices(types.UID(p.name), 1000, p.req)
				asked := p.req.GPUs + len(p.req.UUIDs)
				for _, c := range p.req.MIG {
					asked += c
				}
				if got := len(a.GPUs) + len(a.Slices); got != asked {
					t.Fatalf("pod %s took GPUs %v and MIG devices %v, want %d devices", p.name, a.GPUs, a.Slices, asked)
				}
				for _, g := range a.GPUs {
					want.Whole[g] = true
				}
				for _, s := range a.Slices {
					want.Devices[fmt.Sprintf("%d/%s", s.GPU, n.Spec.GPUs[s.GPU].MIG[s.Device].Profile)]++
				}
			}
			stop, err := n.ServePodResources(app.DefaultPodResourcesSocket)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()

			root := hostfs.New(n.Dir)
			pr := collector.NewPodResourcesCollector(root, app.DefaultPodResourcesSocket)
			defer pr.Close()
			s := &collector.Sample{}
			// The CPU collector's first reading is its baseline; the NUMA
			// nodes are what the pod-resources collector counts CPUs on.
			_ = collector.NewCPUCollector(root).Collect(context.Background(), s)
			for _, c := range []collector.Collector{collector.NewNUMACollector(root), collector.NewGPUCollector(n.NVML(), root), pr} {
				if err := c.Collect(context.Background(), s); err != nil {
					t.Fatalf("%s: %v", c.Name(), err)
				}
			}
			got := alloc{Whole: map[int]bool{}, Devices: map[string]int32{}}
			for _, g := range s.GPUs {
				if g.Allocated != nil {
					got.Whole[int(g.Index)] = *g.Allocated
				}
				if g.MIG != nil {
					for _, p := range g.MIG.Profiles {
						got.Devices[fmt.Sprintf("%d/%s", g.Index, p.Profile)] = ptr.Deref(p.Allocated, -1)
					}
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the agent's allocations against the simulation's (-want +got):\n%s", diff)
			}
		})
	}
}

func uuid(i int) string { return fmt.Sprintf("GPU-sim-%d", i) }

// uuidNode is a node of 4 GPUs with UUIDs, 2 per NUMA node, in a work
// directory short enough for a unix socket under it.
func uuidNode(t *testing.T, strategy string, dra bool, mig func(i int) []MIGDevice) *Node {
	t.Helper()
	dir, err := os.MkdirTemp("", "sim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var gpus []GPUSpec
	for i := range 4 {
		gpus = append(gpus, GPUSpec{Model: "NVIDIA A100-SXM4-80GB", MemoryBytes: 80 << 30, IdleWatts: 50, TDPWatts: 400, NUMANode: i / 2,
			PCIAddress: fmt.Sprintf("0000:%02x:00.0", 7+i), UUID: uuid(i), ComputeSlices: 7, MIG: mig(i)})
	}
	n, err := NewNode(dir, NodeSpec{
		Name: "n", MIGStrategy: strategy, DRA: dra,
		Host: hosttree.Spec{CPUs: 8, NUMANodes: 2, Packages: 1, MemoryKiB: 1 << 20, IdleWatts: 100, FullLoadWatts: 300, CritMilliCelsius: 100_000},
		GPUs: gpus,
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
