// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"math"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/sandbox/hosttree"
)

// TestAgentMeasuresTheModel: the agent's own collectors, reading a
// simulated node's tree, measure the power the model draws, DRAM zones
// included (they were once written where the kernel does not list them,
// and the agent measured 10 % less than the model). The node steps and the
// agent reads on one virtual clock, as TestSampledWattsAtAnyPhase does:
// stepped by the wall clock, a loaded host's delays between a step and the
// read that follows it read as watts ("the agent measures 211.3 W, the
// model draws 200.9 W" in CI), which is what that test bounds.
func TestAgentMeasuresTheModel(t *testing.T) {
	n, err := NewNode(t.TempDir(), NodeSpec{Name: "n", BaseUtilization: 0.41,
		Curve: [11]float64{52.3, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457},
		Host:  hosttree.Spec{CPUs: 16, NUMANodes: 2, Packages: 2, MemoryKiB: 16 << 20, CritMilliCelsius: 100_000}})
	if err != nil {
		t.Fatal(err)
	}
	// Settle at the load first.
	for range 200 {
		n.celsius, _ = n.Spec.Steady(0.41, 0)
	}
	root := hostfs.New(n.Dir)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	cs := []collector.Collector{collector.NewCPUCollector(root), collector.NewPowerCollector(root).WithClock(clk)}
	if err := n.StepTo(clk.Now()); err != nil {
		t.Fatal(err)
	}
	var got float64
	for i := range 4 {
		for range StepsPerInterval {
			clk.SetTime(clk.Now().Add(time.Second / StepsPerInterval))
			if err := n.StepTo(clk.Now()); err != nil {
				t.Fatal(err)
			}
		}
		s, _ := collector.Run(context.Background(), cs, clk.Now())
		if i > 0 && s.Power != nil {
			got = s.Power.Watts
		}
	}
	_, want := n.Spec.Steady(0.41, 0)
	if got == 0 || math.Abs(got-want)/want > 0.03 {
		t.Errorf("the agent measures %.1f W, the model draws %.1f W", got, want)
	}
}

// settledR740 is a 16-CPU node on the R740's curve, settled at 30 %, and
// the watts it draws there.
func settledR740(t *testing.T) (*Node, float64) {
	t.Helper()
	n, err := NewNode(t.TempDir(), NodeSpec{Name: "n", BaseUtilization: 0.3,
		Curve: [11]float64{52.3, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457},
		Host:  hosttree.Spec{CPUs: 16, NUMANodes: 1, Packages: 1, MemoryKiB: 16 << 20, CritMilliCelsius: 100_000}})
	if err != nil {
		t.Fatal(err)
	}
	n.celsius, _ = n.Spec.Steady(0.3, 0)
	_, want := n.Spec.Steady(0.3, 0)
	return n, want
}

// TestSampledWattsAtAnyPhase: the agent reads a node's counters at times
// of its own, unaligned with the simulation's steps. Reads that fall just
// after a step and just before one, in turn, give windows holding one
// step more and one step less than an interval: the worst case. At
// StepsPerInterval steps each sample's watts stay within 5.5 % of the
// model's (at 4 steps an interval they read 25 % off).
func TestSampledWattsAtAnyPhase(t *testing.T) {
	n, want := settledR740(t)

	const interval = time.Second
	step := interval / StepsPerInterval
	root := hostfs.New(n.Dir)
	t0 := time.Now()
	clk := clocktesting.NewFakePassiveClock(t0)
	cs := []collector.Collector{collector.NewCPUCollector(root), collector.NewPowerCollector(root).WithClock(clk)}
	next := t0 // the next step
	worst := 0.0
	for k := range 12 {
		// Reads straddle the step at k intervals: 1 ms after it, then
		// 1 ms before it.
		read := t0.Add(time.Duration(k) * interval).Add(time.Millisecond)
		if k%2 == 1 {
			read = read.Add(-2 * time.Millisecond)
		}
		for !next.After(read) {
			if err := n.StepTo(next); err != nil {
				t.Fatal(err)
			}
			next = next.Add(step)
		}
		clk.SetTime(read)
		s, _ := collector.Run(context.Background(), cs, read)
		if k < 2 || s.Power == nil {
			continue // the first reads start the counters
		}
		worst = max(worst, math.Abs(s.Power.Watts-want)/want)
	}
	// A window of StepsPerInterval ± 1 steps over one interval is off by
	// 1/StepsPerInterval (and 2 ms of the interval). The agents' curves
	// are held to 5 % of the published ones (agent/powermodel's SPECpower
	// test); samples more than about that off make the sandbox's curves
	// wander by tens of watts.
	if bound := 0.055; worst > bound || worst == 0 {
		t.Errorf("samples read up to %.1f%% off the model's %.1f W, want within %.1f%% (and the straddling reads off at all)", 100*worst, want, 100*bound)
	}
	t.Logf("worst sample %.1f%% off the model's %.1f W at %d steps an interval", 100*worst, want, StepsPerInterval)
}

// TestReadsStepTheNode: an agent whose reads step the node (the
// sandbox's read hook) measures the model's power however its reads fall
// against the ticker's steps, here with no ticker at all and reads
// 300-448 ms apart: within 1 %. Read as of the last step, a sample's
// watts were off by up to a step's share of the interval (5 % at 20 steps
// an interval, TestSampledWattsAtAnyPhase), and by far more when the
// steps were held up on a loaded host.
func TestReadsStepTheNode(t *testing.T) {
	if testing.Short() {
		t.Skip("samples for 1.5s")
	}
	n, want := settledR740(t)
	root := hostfs.New(n.Dir).WithReadHook(func(hostPath string) {
		if err := n.BeforeRead(hostPath); err != nil {
			t.Error(err)
		}
	})
	cs := []collector.Collector{collector.NewCPUCollector(root), collector.NewPowerCollector(root)}
	for i := range 5 {
		time.Sleep(300*time.Millisecond + time.Duration(i)*37*time.Millisecond)
		s, _ := collector.Run(context.Background(), cs, time.Now())
		if i == 0 {
			continue // the counters' baseline
		}
		if s.Power == nil {
			t.Fatalf("read %d: no power (%v)", i, s.Sources)
		}
		if e := math.Abs(s.Power.Watts-want) / want; e > 0.01 {
			t.Errorf("read %d: %.1f W, the model draws %.1f W: %.1f%% off, want within 1%%", i, s.Power.Watts, want, 100*e)
		}
	}
}
