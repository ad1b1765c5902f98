package agent

import (
	"testing"
	"time"

	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/status"
	"github.com/telesched/telesched/agent/thermalmodel"
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
