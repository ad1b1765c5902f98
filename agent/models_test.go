// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/status"
	"github.com/telesched/telesched/agent/thermalmodel"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/powercurve"
)

// TestStateRoundTrip: a saved state resumes the same models on the same
// node, and is refused by another node or another version.
func TestStateRoundTrip(t *testing.T) {
	newSampler := func() *Sampler {
		s, err := NewSampler(SamplerConfig{Interval: time.Second, PowerModel: powermodel.DefaultConfig(), ThermalModel: thermalmodel.DefaultConfig(), Heat: status.DefaultHeatConfig()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := newSampler()
	for i := range 200 {
		u := float64(i%10) / 10
		a.model.Add(u, 100+200*u)
	}
	a.thermalModel.Restore(thermalmodel.Params{Sensor: "pkg", AmbientCelsius: 30, CelsiusPerWatt: 0.1, TimeConstant: time.Minute, Samples: 100})
	st := a.State("n1", time.Unix(1_700_000_000, 0))

	b := newSampler()
	if b.RestoreState("n2", st) {
		t.Error("another node's state was taken")
	}
	old := st
	old.Version = stateVersion + 1
	if b.RestoreState("n1", old) {
		t.Error("a state of another version was taken")
	}
	if !b.RestoreState("n1", st) {
		t.Fatal("the node's own state was refused")
	}
	fa, fb := a.model.Fit(), b.model.Fit()
	if fb.Basis != powermodel.Fitted || fa.Samples != fb.Samples || fa.Curve[5] != fb.Curve[5] {
		t.Errorf("resumed power model %+v, want %+v", fb, fa)
	}
	if p, ok := b.thermalModel.Fit(); !ok || p.CelsiusPerWatt != 0.1 {
		t.Errorf("resumed thermal model %+v, %v", p, ok)
	}
}

// TestRestoreFromPublishedCurve: an agent whose state file is lost
// resumes from the curve it published (status.SeedBins) and publishes the
// same curve again, within the 5 W the integration test
// (TestAgentRestartKeepsModels) allows, extrapolated knots included.
func TestRestoreFromPublishedCurve(t *testing.T) {
	r740 := powercurve.Curve{52.3, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457}
	cfg := powermodel.DefaultConfig()
	cfg.MinSamples = 8
	newSampler := func() *Sampler {
		s, err := NewSampler(SamplerConfig{Interval: time.Second, PowerModel: cfg, ThermalModel: thermalmodel.DefaultConfig(), Heat: status.DefaultHeatConfig()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		prior *powermodel.PriorCurve
	}{
		{name: "no prior"},
		{name: "prior", prior: powermodel.ShapePrior(46, 230, "test")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newSampler()
			a.model.SetPrior(tc.prior)
			// The integration test's sweep, two samples a level, 3 %
			// noise, then its base load.
			rng := rand.New(rand.NewPCG(1, 2))
			for _, u := range []float64{0.05, 0.2, 0.4, 0.6, 0.8, 0.6, 0.3, 0.1, 0.5, 0.7, 0.2, 0.45, 0.2, 0.2, 0.2, 0.2} {
				for range 2 {
					a.model.Add(u, r740.At(u)*(1+0.03*rng.NormFloat64()))
				}
			}
			published := status.PowerModel(a.model.Fit())
			b := newSampler()
			b.model.SetPrior(tc.prior)
			b.Restore(&telemetryv1alpha1.NodeTelemetryStatus{Power: &telemetryv1alpha1.PowerStatus{Model: published}})
			again := status.PowerModel(b.model.Fit())
			t.Logf("published %v ± %v, again %v ± %v", published.CurveWatts, published.CurveUncertaintyWatts, again.CurveWatts, again.CurveUncertaintyWatts)
			if again.Basis != telemetryv1alpha1.PowerModelFitted {
				t.Fatalf("resumed basis %q, want fitted", again.Basis)
			}
			for k, w := range published.CurveWatts {
				if d := math.Abs(float64(again.CurveWatts[k] - w)); d > 5 {
					t.Errorf("at %d%%: %d W, %d W before the restart", k*10, again.CurveWatts[k], w)
				}
			}
		})
	}
}
