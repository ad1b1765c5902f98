// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"testing"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// BenchmarkAmortizedCPUWatts is what EnergyAware's Score pays a node to
// charge a 2-CPU pod its share of the node's power step over up to 8 pods
// like it, with room for all 8: on the R740 at 8 %, below its knee, where
// the pods walk the curve, and at 40 % on a straight line (scheduler_perf's
// fleet), convex from the load, where one pod's watts are the least.
//
//	go test -run '^$' -bench BenchmarkAmortizedCPUWatts ./scheduler/estimate/
func BenchmarkAmortizedCPUWatts(b *testing.B) {
	line := r740Node(40)
	for k := range line.Models.Watts {
		line.Models.Watts[k] = 100 + 30*float64(k)
	}
	for _, tc := range []struct {
		name string
		n    *telemetry.Node
	}{{"r740-below-knee", r740Node(8)}, {"line", line}} {
		b.Run(tc.name, func(b *testing.B) {
			var sink float64
			for b.Loop() {
				w, _ := AmortizedCPUWatts(tc.n, Demand{CPUMilli: 2000}, Demand{}, 8, 64_000)
				sink += w
			}
			_ = sink
		})
	}
}
