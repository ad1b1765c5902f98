// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package thermal

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// modelled is a 16-core node at 50 % CPU drawing watts, with a power
// curve from 100 W idle to 300 W at full load and a thermal model
// settling at 25°C + 0.35°C/W, limit 100°C.
func modelled(watts int32) *telemetry.Node {
	m := &telemetry.Models{CurveBasis: telemetry.BasisFitted, HasThermal: true,
		Thermal: telemetry.ThermalModel{Sensor: "pkg", LimitMilli: 100_000, AmbientMilli: 25_000, MilliPerWatt: 350}}
	for i := range m.Watts {
		m.Watts[i] = 100 + 20*float64(i)
	}
	return &telemetry.Node{Name: "n", HasCPU: true, LogicalCores: 16, CPUPercent: 50, HasPower: true, Watts: watts, Models: m}
}

func TestJudgeNeedsTheWattsThatBringTheModelUnder(t *testing.T) {
	book := estimate.NewBook(telemetry.NewCache(), estimate.DefaultOptions())
	measuredHot := &telemetry.Node{Name: "m", HasThermal: true, HasHeadroom: true, HeadroomMilli: 3_000}
	for _, tc := range []struct {
		name string
		node *telemetry.Node
		want Judgement
	}{
		// steady 25 + 0.35·150 = 77.5°C < 95°C.
		{name: "predicted under limit - margin", node: modelled(150), want: Judgement{}},
		// steady 25 + 0.35·240 = 109°C >= 95°C; under at
		// w < (100000-5000-25000-1)/350 = 199.997 W: shed 240-199.997 = 40.003 W.
		{name: "predicted over: shed to under", node: modelled(240), want: Judgement{Hot: true, NeedWatts: 40.003}},
		// headroom 3°C <= 5°C, no model: hot, need unknown (one pod).
		{name: "measured hot without a model", node: measuredHot, want: Judgement{Hot: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Judge(tc.node, book, 5_000, 90_000)
			got.Why = ""
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 0.001 && b-a < 0.001 })); diff != "" {
				t.Errorf("Judge (-want +got):\n%s", diff)
			}
		})
	}
}
