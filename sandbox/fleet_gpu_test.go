// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/sandbox/sim"
)

// gpuFleet is a fleet of one CPU node and a GPU node whose gpus line is
// gpus, and a whole-GPU node for the scenario's training pods.
func gpuFleet(gpus string) string {
	return `nodes:
- name: train
  cpus: 64
  memory: 256Gi
  numaNodes: 2
  powerCurve: [50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150]
  gpus: {type: a100, count: 8, perNUMA: 4}
- name: g
  cpus: 64
  memory: 256Gi
  numaNodes: 2
  powerCurve: [50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150]
  gpus: ` + gpus + "\n"
}

// TestFleetGPUErrors: a bad MIG layout, NVLink or DRA setting is refused
// with the field that is wrong.
func TestFleetGPUErrors(t *testing.T) {
	for _, tc := range []struct {
		name, gpus, want string
	}{
		{"unknown MIG field", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: single, profiles: [1g.10gb], colour: red}}`, `unknown field "colour"`},
		{"strategy", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: double, profiles: [1g.10gb]}}`, `nodes[1].gpus.mig.strategy: "double"`},
		{"profile of another GPU", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: mixed, profiles: [1g.5gb]}}`, `nodes[1].gpus.mig.profiles[0]: "1g.5gb" is no MIG profile of an A100 80GB (1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)`},
		{"not a profile", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: mixed, profiles: [big]}}`, `nodes[1].gpus.mig.profiles[0]: "big" is not a MIG profile`},
		{"too many slices", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: mixed, profiles: [4g.40gb, 4g.40gb]}}`, "nodes[1].gpus.mig.profiles: 8 compute slices, a GPU has 7"},
		// 3 + 3 compute slices fit, but 4 + 4 + 1 memory slices of 8 do not
		// (NVIDIA's MIG User Guide, "Supported MIG Profiles").
		{"too many memory slices", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: mixed, profiles: [3g.40gb, 3g.40gb, 1g.10gb]}}`, "nodes[1].gpus.mig.profiles: 9 memory slices, a GPU has 8"},
		{"1g.20gb takes 2 memory slices", `{type: h100, count: 8, perNUMA: 4, mig: {strategy: mixed, profiles: [1g.20gb, 1g.20gb, 1g.20gb, 1g.20gb, 1g.10gb]}}`, "nodes[1].gpus.mig.profiles: 9 memory slices, a GPU has 8"},
		{"an H200's profile on an A100", `{type: a100, count: 8, perNUMA: 4, mig: {strategy: mixed, profiles: [1g.18gb]}}`, `nodes[1].gpus.mig.profiles[0]: "1g.18gb" is no MIG profile of an A100 40GB (1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)`},
		{"an H100 80GB's profile on an H100 NVL", `{type: h100-nvl, count: 2, perNUMA: 2, nvlink: pairs, mig: {strategy: mixed, profiles: [1g.10gb]}}`, `nodes[1].gpus.mig.profiles[0]: "1g.10gb" is no MIG profile of an H100 94GB (1g.12gb, 1g.24gb, 2g.24gb, 3g.47gb, 4g.47gb, 7g.94gb)`},
		{"media extensions on a 3g", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: mixed, profiles: [3g.40gb+me]}}`, `nodes[1].gpus.mig.profiles[0]: "3g.40gb+me": only the 1g profile of one memory slice has media extensions on an A100 80GB (1g.10gb+me)`},
		{"media extensions twice", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: mixed, profiles: [1g.10gb+me, 1g.10gb+me]}}`, `nodes[1].gpus.mig.profiles[1]: a second "1g.10gb+me"; a GPU has one set of media extensions`},
		{"single on half the GPUs", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: single, gpus: 4, profiles: [1g.10gb]}}`, "nodes[1].gpus.mig.gpus: 4 of 8 GPUs in MIG mode; the single strategy needs all"},
		{"single with two profiles", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: single, profiles: [1g.10gb, 2g.20gb]}}`, `nodes[1].gpus.mig.profiles[1]: "2g.20gb" beside "1g.10gb"`},
		{"layouts short", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: mixed, gpus: 2, layouts: [[1g.10gb]]}}`, "nodes[1].gpus.mig.layouts: 1 layouts for 2 GPUs"},
		{"both", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: mixed, gpus: 1, profiles: [1g.10gb], layouts: [[1g.10gb]]}}`, "nodes[1].gpus.mig: profiles and layouts are both set"},
		{"empty layout", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: mixed, gpus: 1, layouts: [[]]}}`, "nodes[1].gpus.mig.layouts[0]: a GPU in MIG mode needs at least one MIG device"},
		{"mig gpus", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: mixed, gpus: 9, profiles: [1g.10gb]}}`, "nodes[1].gpus.mig.gpus: 9 must be within 1-8"},
		{"gpu type", `{type: h100-pcie, count: 8, perNUMA: 4}`, `nodes[1].gpus.type: "h100-pcie" is not one of a100, a100-80gb, h100, h100-nvl, h200`},
		{"nvlink", `{type: a100, count: 8, perNUMA: 4, nvlink: mesh}`, `nodes[1].gpus.nvlink: "mesh" is not one of nvswitch, pairs, none`},
		{"odd pairs", `{type: a100, count: 3, perNUMA: 3, nvlink: pairs}`, "nodes[1].gpus.nvlink: pairs need an even count and perNUMA (3, 3)"},
		{"DRA with a MIG strategy", `{type: a100-80gb, count: 8, perNUMA: 4, dra: true, mig: {strategy: mixed, profiles: [1g.10gb]}}`, `nodes[1].gpus.mig.strategy: "mixed" is the device plugin's; a DRA node publishes each MIG device`},
		{"DRA MIG layout too big", `{type: h100, count: 8, perNUMA: 4, dra: true, mig: {gpus: 1, layouts: [[4g.40gb, 4g.40gb]]}}`, "nodes[1].gpus.mig.layouts[0]: 8 compute slices, a GPU has 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFleet([]byte(gpuFleet(tc.gpus)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseFleet = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestFleetMIGProfiles: every MIG profile NVIDIA documents for the GPU
// types the fleet format names (MIG User Guide, "Supported MIG
// Profiles", the A100, H100 and H200 tables), in layouts that fill the
// GPU's 7 compute and 8 memory slices, is taken, with each device's
// compute slices.
func TestFleetMIGProfiles(t *testing.T) {
	for _, tc := range []struct {
		gpu    string
		layout []string
		slices []int
	}{
		{"a100", []string{"1g.5gb", "1g.5gb", "1g.10gb", "2g.10gb", "1g.5gb", "1g.5gb"}, []int{1, 1, 1, 2, 1, 1}},
		{"a100", []string{"4g.20gb", "3g.20gb"}, []int{4, 3}},
		{"a100", []string{"7g.40gb"}, []int{7}},
		{"a100-80gb", []string{"1g.20gb", "1g.20gb", "2g.20gb", "1g.10gb", "1g.10gb"}, []int{1, 1, 2, 1, 1}},
		{"a100-80gb", []string{"4g.40gb", "3g.40gb"}, []int{4, 3}},
		{"h100", []string{"3g.40gb", "2g.20gb", "1g.20gb"}, []int{3, 2, 1}},
		{"h100", []string{"7g.80gb"}, []int{7}},
		{"h100-nvl", []string{"1g.12gb", "1g.12gb", "1g.24gb", "2g.24gb", "1g.12gb", "1g.12gb"}, []int{1, 1, 1, 2, 1, 1}},
		{"h100-nvl", []string{"4g.47gb", "3g.47gb"}, []int{4, 3}},
		{"h100-nvl", []string{"7g.94gb"}, []int{7}},
		{"h200", []string{"1g.18gb", "1g.18gb", "1g.35gb", "2g.35gb", "1g.18gb", "1g.18gb"}, []int{1, 1, 1, 2, 1, 1}},
		{"h200", []string{"4g.71gb", "3g.71gb"}, []int{4, 3}},
		{"h200", []string{"7g.141gb"}, []int{7}},
	} {
		t.Run(tc.gpu+" "+strings.Join(tc.layout, ","), func(t *testing.T) {
			f, err := ParseFleet([]byte(gpuFleet(`{type: ` + tc.gpu + `, count: 8, perNUMA: 4, mig: {strategy: mixed, gpus: 1, layouts: [[` + strings.Join(tc.layout, ", ") + `]]}}`)))
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, d := range f.Nodes[1].GPUs[0].MIG {
				got = append(got, d.Slices)
			}
			if diff := cmp.Diff(tc.slices, got); diff != "" {
				t.Errorf("compute slices (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentNamesEveryProfile: for every GPU type the fleet format names,
// a simulated GPU of each of its MIG profiles (and the media-extensions
// one) is published by the agent's own GPU collector under the profile's
// name, so the scheduler's resources, the units check and the agent agree
// on every profile. A simulated device's memory that the agent's rounding
// (the device plugin's) named otherwise fails here.
func TestAgentNamesEveryProfile(t *testing.T) {
	types := make([]string, 0, len(migGPUs))
	for name := range migGPUs {
		types = append(types, name)
	}
	slices.Sort(types)
	for _, gpuType := range types {
		t.Run(gpuType, func(t *testing.T) {
			names, _ := migProfiles(migGPUs[gpuType])
			// One GPU per profile, and the media-extensions profile.
			layouts := append([]string{}, names...)
			layouts = append(layouts, names[0]+"+me")
			var ls []string
			for _, l := range layouts {
				ls = append(ls, "["+l+"]")
			}
			f, err := ParseFleet([]byte(gpuFleet(fmt.Sprintf("{type: %s, count: 8, perNUMA: 4, mig: {strategy: mixed, gpus: %d, layouts: [%s]}}",
				gpuType, len(layouts), strings.Join(ls, ", ")))))
			if err != nil {
				t.Fatal(err)
			}
			n, err := sim.NewNode(t.TempDir(), f.Nodes[1])
			if err != nil {
				t.Fatal(err)
			}
			s := &collector.Sample{}
			if err := collector.NewGPUCollector(n.NVML(), hostfs.New(n.Dir)).Collect(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range s.GPUs {
				if g.MIG == nil {
					continue
				}
				for _, p := range g.MIG.Profiles {
					got = append(got, p.Profile)
				}
			}
			if diff := cmp.Diff(layouts, got); diff != "" {
				t.Errorf("profiles the agent publishes (-fleet +agent):\n%s", diff)
			}
		})
	}
}

// TestFleetGPUAllocatable: each node kind advertises what its device
// plugin would: whole GPUs, the single strategy's MIG devices as the GPU
// resource, the mixed strategy's per profile beside the whole GPUs, and a
// DRA node nothing.
func TestFleetGPUAllocatable(t *testing.T) {
	for _, tc := range []struct {
		name, gpus string
		want       corev1.ResourceList
	}{
		{"whole", `{type: a100, count: 8, perNUMA: 4, nvlink: pairs}`, corev1.ResourceList{gpuResource: resource.MustParse("8")}},
		{"single", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: single, profiles: [1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb]}}`,
			corev1.ResourceList{gpuResource: resource.MustParse("56")}},
		{"half mixed", `{type: a100-80gb, count: 8, perNUMA: 4, mig: {strategy: mixed, gpus: 2, layouts: [[3g.40gb, 2g.20gb, 1g.10gb], [7g.80gb]]}}`,
			corev1.ResourceList{gpuResource: resource.MustParse("6"), "nvidia.com/mig-3g.40gb": resource.MustParse("1"), "nvidia.com/mig-2g.20gb": resource.MustParse("1"),
				"nvidia.com/mig-1g.10gb": resource.MustParse("1"), "nvidia.com/mig-7g.80gb": resource.MustParse("1")}},
		// The device plugin names a resource with each "+" of the profile a
		// "." (a resource name holds no "+"; the API server refuses it).
		{"media extensions", `{type: h100-nvl, count: 2, perNUMA: 2, nvlink: pairs, mig: {strategy: mixed, gpus: 1, layouts: [[1g.12gb+me, 3g.47gb]]}}`,
			corev1.ResourceList{gpuResource: resource.MustParse("1"), "nvidia.com/mig-1g.12gb.me": resource.MustParse("1"), "nvidia.com/mig-3g.47gb": resource.MustParse("1")}},
		{"DRA", `{type: a100, count: 8, perNUMA: 4, dra: true}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFleet([]byte(gpuFleet(tc.gpus)))
			if err != nil {
				t.Fatal(err)
			}
			got := gpuAllocatable(f.Nodes[1])
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("allocatable (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGPUMixedFleet: the GPU rack fleet parses with a node of each kind.
func TestGPUMixedFleet(t *testing.T) {
	f, err := ReadFleet("fleets/gpu-mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, n := range f.Nodes {
		half := false
		for _, g := range n.GPUs {
			if (g.MIG == nil) != (n.GPUs[0].MIG == nil) {
				half = true
			}
		}
		switch {
		case half:
			kinds["half-MIG"] = true
		case n.MIGStrategy != "":
			kinds[n.MIGStrategy] = true
		case n.NVLink == sim.NVLinkPairs:
			kinds["pairs"] = true
		case len(n.GPUs) == 0:
			kinds["CPU"] = true
		}
	}
	if diff := cmp.Diff(map[string]bool{"single": true, "mixed": true, "half-MIG": true, "pairs": true, "CPU": true}, kinds); diff != "" {
		t.Errorf("node kinds (-want +got):\n%s", diff)
	}
	if len(f.Budgets) == 0 {
		t.Error("no PowerBudget")
	}
}

// TestUnitsWorkloadCoversEveryMixedProfile: the unit phase asks for one
// device of every profile the fleet's mixed-strategy nodes hold, fewest
// slices first; it asked for 1g.10gb and 3g.40gb alone.
func TestUnitsWorkloadCoversEveryMixedProfile(t *testing.T) {
	f, err := ReadFleet("fleets/gpu-mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range unitsWorkload(f.Nodes) {
		for profile := range p.mig {
			got = append(got, p.name+" "+profile)
		}
	}
	want := []string{"slice-mixed-0 1g.10gb", "slice-mixed-1 2g.20gb", "slice-mixed-2 3g.40gb", "slice-mixed-3 4g.40gb", "slice-mixed-4 7g.80gb"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MIG pods (-want +got):\n%s", diff)
	}

	// gpu-frontier's DRA node publishes MIG devices: one claim for each
	// of its profiles, beside the whole-GPU claim.
	f, err = ReadFleet("fleets/gpu-frontier.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, p := range unitsWorkload(f.Nodes) {
		if p.claimed() {
			got = append(got, fmt.Sprintf("%s %d %s", p.name, p.claimGPUs, p.claimMIG))
		}
	}
	want = []string{"claim-0 1 ", "claim-mig-0 0 1g.10gb", "claim-mig-1 0 1g.20gb", "claim-mig-2 0 2g.20gb", "claim-mig-3 0 3g.40gb"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gpu-frontier's claim pods (-want +got):\n%s", diff)
	}
}
