// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"math"
	"testing"

	"github.com/telesched/telesched/sandbox/sim"
)

func TestPodBusy(t *testing.T) {
	cut := func(strategy string, profiles ...sim.MIGDevice) sim.NodeSpec {
		s := sim.NodeSpec{MIGStrategy: strategy}
		for range 2 {
			s.GPUs = append(s.GPUs, sim.GPUSpec{ComputeSlices: 7, MIG: profiles})
		}
		return s
	}
	one := sim.MIGDevice{Profile: "1g.10gb", Slices: 1}
	three := sim.MIGDevice{Profile: "3g.40gb", Slices: 3}
	tests := []struct {
		name string
		spec sim.NodeSpec
		pod  podSpec
		want float64
	}{
		{"whole GPUs count whole", sim.NodeSpec{GPUs: make([]sim.GPUSpec, 8)}, podSpec{gpus: 4}, 4},
		{"nvidia.com/gpu: 4 on the single strategy is 4 MIG devices", cut(sim.MIGSingle, one, one, one, one, one, one, one), podSpec{gpus: 4}, 4.0 / 7},
		{"a mixed-strategy profile counts its slices", cut(sim.MIGMixed, three, one), podSpec{mig: map[string]int{"3g.40gb": 1, "1g.10gb": 2}}, 5.0 / 7},
		{"a DRA claim's GPU counts whole", sim.NodeSpec{DRA: true, GPUs: make([]sim.GPUSpec, 2)}, podSpec{claimGPUs: 1}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := podBusy(tc.spec, tc.pod); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("podBusy() = %.4f, want %.4f", got, tc.want)
			}
		})
	}
}
