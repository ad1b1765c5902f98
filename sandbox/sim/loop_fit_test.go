// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/internal/powercurve"
	"github.com/telesched/telesched/sandbox/hosttree"
)

// The published SPECpower_ssj2008 curves the sandbox's fleets use
// (sandbox/fleets/*.yaml; https://www.spec.org/power_ssj2008/results/).
var (
	r740 = [11]float64{52.3, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457} // power_ssj2008-20170829-00780
	r830 = [11]float64{86.4, 181, 215, 253, 287, 315, 340, 377, 421, 483, 562} // power_ssj2008-20160705-00737
	r940 = [11]float64{106, 245, 292, 336, 383, 437, 502, 583, 694, 820, 915}  // power_ssj2008-20171010-00789
)

// phase is a stretch of a node's life in the sandbox.
type phase struct {
	seconds float64
	// sweep > 0 holds the node there (the calibration ramp); otherwise
	// it runs its base load and podCPUs.
	sweep   float64
	podCPUs int
	// faultCelsius > 0: a failed fan takes the package there.
	faultCelsius float64
}

// sandboxLife is what the sandbox does to a node: calibrate
// (sandbox/sandbox.go) holds each level of CalibrationRamp for
// CalibrationHold intervals and returns the node to its base load; the
// scenario
// (sandbox/scenario.go) then brings pods, here podStep CPUs more every 10
// s up to pods CPUs, where the node stays; with fault its fan fails
// there, taking the package 2 °C past its critical limit (100 °C) for 20
// s, and is repaired.
func sandboxLife(pods, podStep int, fault bool) []phase {
	var ps []phase
	for _, u := range CalibrationRamp() {
		ps = append(ps, phase{seconds: CalibrationHold, sweep: u})
	}
	ps = append(ps, phase{seconds: 30})
	for c := podStep; c < pods && podStep > 0; c += podStep {
		ps = append(ps, phase{seconds: 10, podCPUs: c})
	}
	ps = append(ps, phase{seconds: 60, podCPUs: pods})
	if fault {
		ps = append(ps, phase{seconds: 20, podCPUs: pods, faultCelsius: 102}, phase{seconds: 60, podCPUs: pods})
	}
	return ps
}

// timing is when the agent reads the node's counters, against the
// simulation's steps.
type timing struct {
	name string
	// start is the agent's first (baseline) read, seconds into the ramp.
	start float64
	// readDelay: a read lands up to this long after its tick;
	// stepJitter: a step lands up to this long after its tick.
	readDelay, stepJitter time.Duration
}

// fitLife lives a node through its phases as the sandbox does and feeds
// its agent's samples to model. The node's physics are StepTo's
// (TestLoopStepsAsStepTo holds them together), run sim.StepsPerInterval
// times a second without writing its tree; the agent reads the counters as
// its collectors do: utilization is the busy share of the CPU time between
// two reads (agent/collector/cpu.go), watts the energy between them over
// the time between them (agent/collector/power.go, meter.update), the
// node stepped to each read first, as the sandbox's read hook does
// (Node.BeforeRead).
func fitLife(n *Node, life []phase, tm timing, rng *rand.Rand, model *powermodel.Model) {
	step := 1.0 / StepsPerInterval
	var end float64
	starts := make([]float64, len(life))
	for i, p := range life {
		starts[i], end = end, end+p.seconds
	}
	phaseAt := func(t float64) phase {
		i := len(life) - 1
		for i > 0 && starts[i] > t {
			i--
		}
		return life[i]
	}
	type counters struct{ at, busy, joules float64 }
	var now counters  // as of the last step
	var seen counters // as of the last read
	baseline := false // a read was taken: the next one measures from it
	fault := -1.0
	k := 1
	for tick := tm.start; tick < end; tick++ {
		read := tick + rng.Float64()*tm.readDelay.Seconds()
		for {
			at := float64(k)*step + rng.Float64()*tm.stepJitter.Seconds()
			if at > read {
				break
			}
			k++
			p := phaseAt(at)
			if p.sweep > 0 {
				n.Sweep(p.sweep)
			} else {
				n.EndSweep()
				n.RemovePod("pods")
				if p.podCPUs > 0 {
					n.AddPod("pods", int64(p.podCPUs)*1000, 0)
				}
			}
			if p.faultCelsius != fault {
				fault = p.faultCelsius
				heat := 0.0
				if fault > 0 {
					heat = n.FaultHeatFor(fault)
				}
				n.SetFaultHeat(heat)
			}
			u, w := n.physicsStep(at - now.at)
			now = counters{at: at, busy: now.busy + u*(at-now.at), joules: now.joules + w*(at-now.at)}
		}
		// The read steps the node to its own time (BeforeRead), so its
		// counters are as of the read.
		if read > now.at {
			u, w := n.physicsStep(read - now.at)
			now = counters{at: read, busy: now.busy + u*(read-now.at), joules: now.joules + w*(read-now.at)}
		}
		if baseline && now.at > seen.at {
			model.Add((now.busy-seen.busy)/(now.at-seen.at), (now.joules-seen.joules)/(now.at-seen.at))
		}
		baseline, seen = true, now
	}
}

// physicsStep is StepTo's model for dt seconds without the tree: the
// utilization and CPU-side watts the step writes, the package
// temperature moved towards its target.
func (n *Node) physicsStep(dt float64) (u, watts float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	u = n.utilization()
	watts = n.Spec.cpuWatts(u, n.celsius)
	target := n.Spec.AmbientCelsius + n.Spec.CelsiusPerWatt*watts + n.faultHeat
	n.celsius += (target - n.celsius) * (1 - math.Exp(-dt/n.Spec.ThermalTimeConstant.Seconds()))
	return u, watts
}

// TestLoopStepsAsStepTo: the fit tests' stepping is StepTo's physics.
func TestLoopStepsAsStepTo(t *testing.T) {
	spec := NodeSpec{Name: "n", Curve: r740, BaseUtilization: 0.1,
		Host: hosttree.Spec{CPUs: 8, NUMANodes: 1, Packages: 1, MemoryKiB: 1 << 20, CritMilliCelsius: 100_000}}
	a, err := NewNode(t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewNode(t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	b.celsius = a.celsius
	at := a.last
	for i, u := range []float64{0.8, 0.8, 0.8, 0.3, 0.05, 0.05, 1} {
		a.Sweep(u)
		b.Sweep(u)
		if i == 3 {
			a.SetFaultHeat(20)
			b.SetFaultHeat(20)
		}
		dt := time.Duration(i+1) * 300 * time.Millisecond
		at = at.Add(dt)
		if err := a.StepTo(at); err != nil {
			t.Fatal(err)
		}
		b.physicsStep(dt.Seconds())
		if math.Abs(a.celsius-b.celsius) > 1e-9 {
			t.Fatalf("step %d: StepTo took the package to %.6f°C, the fit tests' step to %.6f°C", i, a.celsius, b.celsius)
		}
	}
}

// trueCurve is what the node draws once settled at each knot: its curve
// plus the leakage and fans at the temperature that load settles at.
func trueCurve(spec NodeSpec) powercurve.Curve {
	var c powercurve.Curve
	for k := range c {
		_, c[k] = spec.Steady(float64(k)/10, 0)
	}
	return c
}

// TestLearnedSlopeAtOperatingPoint: a node that lives what the sandbox's
// nodes live (a 93-sample ramp up and down, its base load, pods, leakage
// that lags its load, a failed fan), read by an agent whose reads fall
// where they may between the simulation's steps, publishes a curve whose
// slope where it runs is within 8 % of what it really draws, and the
// watts a pod of 1, 4 or 16 CPUs adds there within 5 % (at most 6.8 % and
// 4.1 % off over these runs; with the ramp up only and bins whose climb
// counted as noise, 7.6 % and 5.9 %). The curve never falls and is never
// negative; it is surest where the node runs and less sure at 0 %, where
// no sample reaches. Where a prior knows the hardware (RAPL package limits
// that, with Shape, describe it), the 0 % knot is at most 25 % above the
// true idle: it is extrapolated across the climb from idle, the curve's
// steepest segment (R740: 52 to 129 W), and a quarter of the idle is a
// sixth of that climb; the leakage still high from the ramp's top when
// the node comes back to its base load raises the base bin by a few watts
// and the 0 % knot with it (the warm-row node reads 5-15 % high with its
// leakage, within 3 % without).
func TestLearnedSlopeAtOperatingPoint(t *testing.T) {
	nodes := []struct {
		name string
		spec NodeSpec
		life []phase
		// priorKnows: the RAPL limits with Shape describe the node.
		priorKnows bool
	}{
		{
			// The default fleet's cpu-efficient: a warm row, one 230 W
			// package limit (a prior at half the curve's scale).
			name: "R740 32 CPUs warm row base 10% pods to 32%",
			spec: NodeSpec{Curve: r740, BaseUtilization: 0.10, AmbientCelsius: 40, CelsiusPerWatt: 0.18,
				Host: hosttree.Spec{CPUs: 32, NUMANodes: 1, Packages: 1, MemoryKiB: 128 << 20, PackageLimitWatts: 230, CritMilliCelsius: 100_000}},
			life: sandboxLife(7, 2, false), priorKnows: true,
		},
		{
			// Limits of 2 × 230 W: the prior's full load is the curve's.
			name: "R740 48 CPUs base 20% no pods",
			spec: NodeSpec{Curve: r740, BaseUtilization: 0.20,
				Host: hosttree.Spec{CPUs: 48, NUMANodes: 2, Packages: 2, MemoryKiB: 192 << 20, PackageLimitWatts: 230, CritMilliCelsius: 100_000}},
			life: sandboxLife(0, 0, false), priorKnows: true,
		},
		{
			// cpu-heater: no RAPL limits (no prior); its fan fails.
			name: "R740 32 CPUs base 15% pods to 28% fan fault",
			spec: NodeSpec{Curve: r740, BaseUtilization: 0.15,
				Host: hosttree.Spec{CPUs: 32, NUMANodes: 1, Packages: 1, MemoryKiB: 128 << 20, CritMilliCelsius: 100_000}},
			life: sandboxLife(4, 2, true),
		},
		{
			// cpu-numa2.
			name: "R940 64 CPUs base 20% pods to 40%",
			spec: NodeSpec{Curve: r940, BaseUtilization: 0.20,
				Host: hosttree.Spec{CPUs: 64, NUMANodes: 2, Packages: 2, MemoryKiB: 512 << 20, CritMilliCelsius: 100_000}},
			life: sandboxLife(13, 4, false),
		},
		{
			// cpu-legacy.
			name: "R830 32 CPUs base 12% pods to 18%",
			spec: NodeSpec{Curve: r830, BaseUtilization: 0.12,
				Host: hosttree.Spec{CPUs: 32, NUMANodes: 1, Packages: 1, MemoryKiB: 128 << 20, CritMilliCelsius: 100_000}},
			life: sandboxLife(2, 2, false),
		},
	}
	timings := []timing{
		// The agent starts with the ramp; its windows hold
		// StepsPerInterval ± 1 steps, so a sample is off by up to a
		// twentieth (TestSampledWattsAtAnyPhase).
		{name: "reads within a step", start: 1, readDelay: time.Second / StepsPerInterval, stepJitter: 10 * time.Millisecond},
		// A busy sandbox host (a control plane, eight agents and every
		// node's stepping on two cores): reads and steps land late, and
		// the agent misses the ramp's first level.
		{name: "busy host", start: 2.5, readDelay: 100 * time.Millisecond, stepJitter: 40 * time.Millisecond},
	}
	for _, nc := range nodes {
		for _, tm := range timings {
			for seed := range uint64(3) {
				t.Run(fmt.Sprintf("%s/%s/%d", nc.name, tm.name, seed), func(t *testing.T) {
					t.Parallel()
					spec := nc.spec
					spec.Name = "n"
					n, err := NewNode(t.TempDir(), spec)
					if err != nil {
						t.Fatal(err)
					}
					cfg := powermodel.DefaultConfig()
					cfg.MinSamples = 8 // the sandbox's agents (sandbox/sandbox.go)
					model, err := powermodel.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					if l := spec.Host.PackageLimitWatts; l > 0 { // agent/models.go cpuPrior
						full := l * float64(spec.Host.Packages)
						model.SetPrior(powermodel.ShapePrior(0.2*full, full, "RAPL package limits"))
					}
					fitLife(n, nc.life, tm, rand.New(rand.NewPCG(seed, 7)), model)
					fit := model.Fit()
					if fit.Basis != powermodel.Fitted {
						t.Fatalf("basis %q after the sandbox's ramp, want fitted", fit.Basis)
					}
					var got, unc powercurve.Curve
					for k, p := range fit.Curve {
						got[k], unc[k] = p.Watts, p.Uncertainty
					}
					want := trueCurve(n.Spec)
					u0 := n.Utilization()
					cpus := float64(n.Spec.Host.CPUs)
					t.Logf("at %.1f%%:\n learned %s\n       ± %s\n    true %s", 100*u0, fmtCurve(got), fmtCurve(unc), fmtCurve(want))

					gs, ws := got.Slope(u0)/cpus, want.Slope(u0)/cpus
					t.Logf("slope at %.1f%%: learned %.2f W per busy CPU, true %.2f", 100*u0, gs, ws)
					if e := math.Abs(gs-ws) / ws; e > 0.08 {
						t.Errorf("slope at %.1f%%: learned %.2f W per busy CPU, true %.2f: %.0f%% off, want within 8%%", 100*u0, gs, ws, 100*e)
					}
					_, w0 := n.Spec.Steady(u0, 0)
					for _, c := range []float64{1, 4, 16} {
						u1 := u0 + c/cpus
						_, w1 := n.Spec.Steady(u1, 0)
						g, w := got.At(u1)-got.At(u0), w1-w0
						t.Logf("pod of %2.0f CPUs: learned %+.1f W, true %+.1f W", c, g, w)
						if e := math.Abs(g-w) / w; e > 0.05 {
							t.Errorf("pod of %.0f CPUs at %.1f%%: learned %+.1f W, true %+.1f W: %.0f%% off, want within 5%%", c, 100*u0, g, w, 100*e)
						}
					}
					if err := got.Check(0); err != nil {
						t.Errorf("learned curve breaks physics: %v", err)
					}
					if at := unc.At(u0); unc[0] <= at {
						t.Errorf("uncertainty at 0%% (%.1f W) not above that at %.1f%% (%.1f W), where the node runs", unc[0], 100*u0, at)
					}
					t.Logf("0%%: learned %.0f ± %.0f W, true %.1f W", got[0], unc[0], want[0])
					if nc.priorKnows && got[0] > 1.25*want[0] {
						t.Errorf("0%% knot %.0f W, true idle %.1f W: %.0f%% above, want at most 25%%", got[0], want[0], 100*(got[0]/want[0]-1))
					}
				})
			}
		}
	}
}

func fmtCurve(c powercurve.Curve) string {
	s := make([]string, len(c))
	for k, w := range c {
		s[k] = fmt.Sprintf("%4.0f", w)
	}
	return strings.Join(s, " ")
}
