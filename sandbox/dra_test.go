// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"

	"github.com/telesched/telesched/agent/nvml/nvmltest"
	"github.com/telesched/telesched/sandbox/sim"
	"github.com/telesched/telesched/scheduler/dra"
)

// TestDRANodeWithMIG: a DRA node takes MIG layouts (without a device
// plugin strategy) and publishes, as NVIDIA's DRA driver does, its whole
// GPUs as devices of type gpu and each MIG device as a device of type mig
// with its UUID, its parent's and its profile. The DeviceClasses'
// selectors and a claim's profile selector, evaluated by the API's own
// CEL environment (k8s.io/dynamic-resource-allocation/cel, as the
// scheduler's DynamicResources plugin evaluates them), pick exactly the
// GPUs, the MIG devices, and the MIG devices of the profile.
func TestDRANodeWithMIG(t *testing.T) {
	f, err := ParseFleet([]byte(gpuFleet(`{type: h100, count: 4, perNUMA: 2, dra: true, mig: {gpus: 2, layouts: [[3g.40gb, 2g.20gb, 1g.10gb], [1g.20gb, 1g.20gb, 1g.20gb]]}}`)))
	if err != nil {
		t.Fatalf("ParseFleet: %v", err)
	}
	spec := f.Nodes[1]
	if !spec.DRA || spec.MIGStrategy != "" || len(spec.GPUs[0].MIG) != 3 || len(spec.GPUs[1].MIG) != 3 || spec.GPUs[2].MIG != nil {
		t.Fatalf("node g: DRA %t, strategy %q, MIG devices %d, %d, %v; want a DRA node of no strategy, GPUs 0 and 1 cut in three, 2 whole",
			spec.DRA, spec.MIGStrategy, len(spec.GPUs[0].MIG), len(spec.GPUs[1].MIG), spec.GPUs[2].MIG)
	}
	if got := gpuAllocatable(spec); len(got) != 0 {
		t.Errorf("a DRA node's device plugin resources %v, want none", got)
	}

	devices := draDevices(spec)
	compiler := dracel.GetCompiler(dracel.Features{})
	// matching are the devices among of that expr selects; as the
	// allocator does, a request's selectors are evaluated only on the
	// devices its class's selectors select (a MIG profile selector has no
	// profile to read on a whole GPU).
	matching := func(of []resourceapi.Device, expr string) []string {
		t.Helper()
		c := compiler.CompileCELExpression(expr, dracel.Options{})
		if c.Error != nil {
			t.Fatalf("compiling %s: %v", expr, c.Error)
		}
		var out []string
		for _, d := range of {
			ok, _, err := c.DeviceMatches(context.Background(), dracel.Device{Driver: draDriver, Attributes: d.Attributes, Capacity: d.Capacity})
			if err != nil {
				t.Fatalf("%s on %s: %v", expr, d.Name, err)
			}
			if ok {
				out = append(out, d.Name)
			}
		}
		return out
	}
	classes := map[string]string{}
	for _, c := range draClasses() {
		classes[c.Name] = c.Spec.Selectors[0].CEL.Expression
	}
	mig := func(i, j int) string { return sim.DRAMIGDevice(i, j, spec.GPUs[i].MIG[j].Profile) }
	migDevices := slices.DeleteFunc(slices.Clone(devices), func(d resourceapi.Device) bool {
		return !slices.Contains(matching(devices, classes[draMIGClass]), d.Name)
	})
	for _, tc := range []struct {
		what, expr string
		of         []resourceapi.Device
		want       []string
	}{
		{"class " + draDriver, classes[draDriver], devices, []string{"gpu-2", "gpu-3"}},
		{"class " + draMIGClass, classes[draMIGClass], devices, []string{mig(0, 0), mig(0, 1), mig(0, 2), mig(1, 0), mig(1, 1), mig(1, 2)}},
		{"a claim for 1g.20gb", claimOf(podSpec{name: "c", claimMIG: "1g.20gb"}, "demo").Spec.Devices.Requests[0].Exactly.Selectors[0].CEL.Expression,
			migDevices, []string{mig(1, 0), mig(1, 1), mig(1, 2)}},
	} {
		if got := matching(tc.of, tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("%s (%s) selects %v, want %v", tc.what, tc.expr, got, tc.want)
		}
	}
	if r := claimOf(podSpec{name: "c", claimMIG: "1g.20gb"}, "demo").Spec.Devices.Requests[0].Exactly; r.DeviceClassName != draMIGClass || r.Count != 1 {
		t.Errorf("claim for a MIG device: class %s count %d, want %s 1", r.DeviceClassName, r.Count, draMIGClass)
	}

	// The attributes the scheduler's DRA index reads.
	byName := map[string]resourceapi.Device{}
	for _, d := range devices {
		byName[d.Name] = d
	}
	d := byName[mig(0, 1)]
	for attr, want := range map[string]string{dra.AttributeUUID: nvmltest.MIGUUID(0, 1), dra.AttributeParentUUID: spec.GPUs[0].UUID, dra.AttributeProfile: "2g.20gb"} {
		if got := d.Attributes[resourceapi.QualifiedName(attr)].StringValue; got == nil || *got != want {
			t.Errorf("device %s attribute %s = %v, want %s", d.Name, attr, got, want)
		}
	}
	if got := byName["gpu-2"].Attributes[dra.AttributeUUID].StringValue; got == nil || *got != spec.GPUs[2].UUID {
		t.Errorf("device gpu-2 uuid %v, want %s", got, spec.GPUs[2].UUID)
	}
	memory := byName[mig(1, 0)].Capacity["memory"].Value
	if want := int64(spec.GPUs[1].MIG[0].MemoryMiB << 20); memory.Value() != want {
		t.Errorf("device %s memory %s, want %d bytes", mig(1, 0), memory.String(), want)
	}
}
