// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"testing"
	"time"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/fixtures"
)

// BenchmarkMayLetInGPUNode: pick's first look at a NodeTelemetry change
// of an 8-GPU node, cool before and after, which lets no pod in (the
// common case): the cost every update of a GPU node pays while pods the
// plugin rejected wait (rejected.OnTelemetry).
//
//	go test -run '^$' -bench BenchmarkMayLetInGPUNode ./scheduler/plugins/energyaware/
func BenchmarkMayLetInGPUNode(b *testing.B) {
	now := time.Now()
	st := fixtures.FullStatus(now, 2, 8)
	st.Thermal.Throttling, st.CPU.ThermalThrottle.Throttling = false, false
	for i := range st.GPUs {
		st.GPUs[i].ThrottleReasons = nil
	}
	prev := telemetry.FromStatus("n", &st)
	cur := telemetry.FromStatus("n", &st)
	prev.Observed, cur.Observed = now, now
	cur.Models, prev.Models = nil, nil
	pl := New(*configv1.DefaultEnergyAwareArgs(), telemetry.NewCache())
	b.ReportAllocs()
	for b.Loop() {
		pl.mayLetIn(prev, cur, now)
	}
}
