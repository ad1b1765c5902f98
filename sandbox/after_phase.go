// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/telesched/telesched/sandbox/oracle"
	"github.com/telesched/telesched/sandbox/sim"
)

// The after-placement phases' sizes and times (sandbox time: the
// simulation runs on the wall clock; its nodes settle with a 6 s thermal
// time constant, sim.DefaultThermalTimeConstant).
const (
	// residents pods of residentCPU run on the heater before its fan
	// fails; the fault's heat is sized so that the oracle needs
	// residentsToShed of them gone (the node then settles faultSlack
	// under its limit − margin).
	residents       = 6
	residentCPU     = "2"
	residentMilli   = 2000
	residentsToShed = 2
	faultSlack      = 1.0
	// faultHold is how long the fan stays failed, rackHold how long the
	// rack's load stays past its budget (rackOver × budget).
	faultHold = 60 * time.Second
	// The rack's published watts reach it only after the agents' deadband
	// and the PowerBudget's next computation (about 20 s here), so the
	// hold leaves the descheduler's --budget-sustain and a cycle or two
	// after that.
	rackHold = 60 * time.Second
	rackOver = 1.08
)

// The --descheduler modes.
const (
	DeschedulerOff  = "off"
	DeschedulerOn   = "on"
	DeschedulerBoth = "both"
)

// afterPhases runs the after-placement phases once per --descheduler
// pass: without the descheduler first, then with it ("both"), in the same
// cluster with the same pods.
func (s *sandbox) afterPhases(ctx context.Context) error {
	if s.res.Heat.Node == "" {
		s.res.skip(phaseAfter, "no node in this fleet has a fan fault")
		return nil
	}
	if err := s.createNamespace(ctx, afterNamespace); err != nil {
		return err
	}
	owner, err := s.kube.AppsV1().ReplicaSets(afterNamespace).Create(ctx, residentReplicaSet(residents), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	var passes []bool
	switch s.opts.Descheduler {
	case DeschedulerOff:
		passes = []bool{false}
	case DeschedulerOn:
		passes = []bool{true}
	default:
		passes = []bool{false, true}
	}
	for _, on := range passes {
		r, err := s.afterPass(ctx, owner.ObjectMeta, on)
		if err != nil {
			return err
		}
		s.res.After = append(s.res.After, r)
	}
	s.res.ran(phaseAfter)
	s.printAfter()
	return nil
}

// afterPass is one pass: residents bound to the heater, its fan fails for
// faultHold, is repaired; then a rack's load rises past its budget for
// rackHold. With on, telesched-descheduler runs through both.
func (s *sandbox) afterPass(ctx context.Context, owner metav1.ObjectMeta, on bool) (AfterResult, error) {
	name := s.res.Heat.Node
	heater := s.nodes[name]
	r := AfterResult{Descheduler: on, HotNode: name, LimitCelsius: float64(heater.Spec.Host.CritMilliCelsius)/1000 - float64(thermalMarginMilli)/1000}
	with := "without"
	if on {
		with = "with"
	}
	s.printf("\n  after placement, %s telesched-descheduler: %d pods of %s CPUs (replicas of ReplicaSet %s/%s) run on %s\n", with, residents, residentCPU, afterNamespace, residentSet, name)
	rs, err := s.kube.AppsV1().ReplicaSets(afterNamespace).Get(ctx, owner.Name, metav1.GetOptions{})
	if err != nil {
		return r, err
	}
	s.watch.after.reset(s.recreator(ctx, rs))
	for i := range residents {
		p := residentPod(fmt.Sprintf("%s-%d", residentSet, i), fmt.Sprintf("%s-%d", residentSet, i), name, s.opts.Profile, rs)
		if _, err := s.kube.CoreV1().Pods(afterNamespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return r, err
		}
	}
	if err := s.watch.waitFor(ctx, fmt.Sprintf("%d resident pods to run on %s", residents, name), func(*view) bool {
		s.watch.after.mu.Lock()
		defer s.watch.after.mu.Unlock()
		return len(s.watch.after.running) == residents
	}); err != nil {
		return r, err
	}
	if on {
		stop, err := s.startDescheduler(ctx)
		if err != nil {
			return r, err
		}
		defer stop()
	}

	// The fault: sized so that the heater settles faultSlack under its
	// limit − margin once residentsToShed residents are gone.
	u := heater.Utilization()
	perPod := float64(residentMilli) / float64(heater.Spec.Host.CPUs*1000)
	fault := faultFor(heater.Spec, u-residentsToShed*perPod, r.LimitCelsius-faultSlack)
	r.OracleMin, _ = oracle.FewestToShed(slices.Repeat([]int64{residentMilli}, residents), func(m int64) bool {
		c, _ := heater.Spec.Steady(u-float64(m)/float64(heater.Spec.Host.CPUs*1000), fault)
		return c < r.LimitCelsius
	})
	r.BoundSeconds = afterBound(r.OracleMin, s.opts.ThermalSustain, s.opts.DeschedulerInterval, heater.Spec.ThermalTimeConstant).Seconds()
	settles, _ := heater.Spec.Steady(u, fault)
	s.printf("    %s's fan fails for %v: with its pods it would settle at %.1f°C, past its limit − margin %.1f°C; the oracle's fewest evictions: %d\n",
		name, faultHold, settles, r.LimitCelsius, r.OracleMin)
	heater.SetFaultHeat(fault)
	temps, err := s.readFor(ctx, faultHold, heater.Celsius)
	heater.SetFaultHeat(0)
	if err != nil {
		return r, err
	}
	r.HotSeconds = secondsAtOrPast(temps, r.LimitCelsius, temps[len(temps)-1].At)
	r.BackUnderSeconds, r.Reached, r.BackUnder = backUnder(temps, r.LimitCelsius)

	// The rack: its nodes' unseen load rises until it draws rackOver ×
	// its budget, or halfway from its budget to the most it can draw.
	s.watch.after.setStage(stageRack)
	if rack, nodes, target := s.overloadable(name); rack != nil {
		r.Rack, r.BudgetWatts = rack.Budget, float64(rack.BudgetWatts)
		extra := extraFor(nodes, target)
		s.printf("    rack %s: its nodes' load rises %.0f points (CPUs and GPUs) for %v (to about %.0f W, budget %.0f W)\n", rack.Rack, 100*extra, rackHold, target, r.BudgetWatts)
		for _, n := range nodes {
			n.SetExtraUtilization(extra)
		}
		watts, err := s.readFor(ctx, rackHold, func() float64 {
			var w float64
			for _, n := range nodes {
				w += n.Watts()
			}
			return w
		})
		for _, n := range nodes {
			n.SetExtraUtilization(0)
		}
		if err != nil {
			return r, err
		}
		r.OverBudgetSeconds = secondsOver(watts, r.BudgetWatts, watts[len(watts)-1].At)
	} else {
		s.printf("    no rack's nodes can draw past its budget: the rack phase is skipped\n")
	}
	// Replicas still being re-created are bound by now, or never will be.
	_ = sleep(ctx, 3*s.opts.Interval)
	r.Evictions, r.RackEvictions = s.watch.after.counts(name, stageFault), s.watch.after.counts(name, stageRack)
	return r, s.endPass(ctx, r.LimitCelsius)
}

// endPass stops re-creating, deletes the pass's pods and waits for the
// heater to cool 3°C under its limit − margin.
func (s *sandbox) endPass(ctx context.Context, limit float64) error {
	s.watch.after.mu.Lock()
	s.watch.after.recreate = nil
	s.watch.after.mu.Unlock()
	zero := int64(0)
	if err := s.kube.CoreV1().Pods(afterNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		return err
	}
	heater := s.nodes[s.res.Heat.Node]
	return s.watch.waitFor(ctx, "the pass's pods to be gone and "+heater.Spec.Name+" to cool", func(*view) bool {
		s.watch.after.mu.Lock()
		defer s.watch.after.mu.Unlock()
		return len(s.watch.after.running) == 0 && heater.Celsius() < limit-3
	})
}

// readFor reads f every half interval for d.
func (s *sandbox) readFor(ctx context.Context, d time.Duration, f func() float64) ([]reading, error) {
	end := time.Now().Add(d)
	var out []reading
	for {
		now := time.Now()
		out = append(out, reading{At: now, Value: f()})
		if !now.Before(end) {
			return out, nil
		}
		if err := sleep(ctx, min(s.opts.Interval/2, end.Sub(now))); err != nil {
			return out, err
		}
	}
}

// overloadable is the rack whose load rises: the heater's when its nodes
// can draw past its budget, else the one that can go furthest past it;
// its simulated nodes and the watts to reach (rackOver × its budget, or
// halfway from it to the most the nodes draw at full load). nil when no
// rack can pass its budget.
func (s *sandbox) overloadable(heater string) (*Rack, []*sim.Node, float64) {
	var best *Rack
	var bestNodes []*sim.Node
	var bestMost float64
	for i := range s.res.Racks {
		rack := &s.res.Racks[i]
		var nodes []*sim.Node
		for _, n := range rack.Nodes {
			if s.nodes[n] != nil {
				nodes = append(nodes, s.nodes[n])
			}
		}
		budget := float64(rack.BudgetWatts)
		most := rackWatts(nodes, 1)
		if len(nodes) == 0 || most <= budget*1.01 {
			continue
		}
		if slices.Contains(rack.Nodes, heater) || best == nil || (!slices.Contains(best.Nodes, heater) && most/budget > bestMost/float64(best.BudgetWatts)) {
			best, bestNodes, bestMost = rack, nodes, most
		}
	}
	if best == nil {
		return nil, nil, 0
	}
	budget := float64(best.BudgetWatts)
	return best, bestNodes, min(rackOver*budget, budget+(bestMost-budget)/2)
}

// rackWatts is what nodes draw, by the simulation's steady physics, with
// extra added to each one's CPU utilization and GPUs' busy share.
func rackWatts(nodes []*sim.Node, extra float64) float64 {
	var w float64
	for _, n := range nodes {
		w += n.SteadyWatts(extra)
	}
	return w
}

// afterBound is how soon, from first reaching its limit − margin, the hot
// node must be back under it with the descheduler: per pod the oracle
// needs, a sustained window and a cycle (the descheduler evicts one pod
// per window without a thermal model, and starts the window again after
// pods leave), then three thermal time constants to cool (95% of the way
// to where it settles).
func afterBound(oracleMin int, sustain, interval, tau time.Duration) time.Duration {
	return time.Duration(max(1, oracleMin))*(sustain+interval) + 3*tau
}

// faultFor is the fault heat that makes spec settle at celsius at
// utilization u (bisection: Steady rises with the fault heat).
func faultFor(spec sim.NodeSpec, u, celsius float64) float64 {
	lo, hi := -100.0, 200.0
	for range 60 {
		mid := (lo + hi) / 2
		if c, _ := spec.Steady(u, mid); c < celsius {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// extraFor is the utilization to add to each of nodes so that they draw
// watts (rackWatts); 1 when even that is not enough.
func extraFor(nodes []*sim.Node, watts float64) float64 {
	lo, hi := 0.0, 1.0
	if rackWatts(nodes, hi) < watts {
		return 1
	}
	for range 40 {
		mid := (lo + hi) / 2
		if rackWatts(nodes, mid) < watts {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// printAfter prints the passes side by side.
func (s *sandbox) printAfter() {
	s.printf("\n  after placement: the heater's fan fails under running pods, a rack's load rises past its budget\n")
	tw := newTable(s.opts.Out)
	fmt.Fprintf(tw, "    DESCHEDULER\tHOT NODE\tSECONDS AT/PAST LIMIT−MARGIN\tBACK UNDER AFTER\tRACK\tSECONDS OVER BUDGET\tEVICTED\tFROM HOT NODE\tORACLE MIN\tBEYOND ORACLE\tNO DESTINATION\tEVICTED TWICE\tON CHECKED NODE\tWORKLOAD MOVED TWICE\tEVICTED IN RACK STAGE\n")
	for _, r := range s.res.After {
		with, back := "off", "not within the fault"
		if r.Descheduler {
			with = "on"
		}
		switch {
		case !r.Reached:
			back = "never reached"
		case r.BackUnder:
			back = fmt.Sprintf("%.1fs", r.BackUnderSeconds)
		}
		e := r.Evictions
		fmt.Fprintf(tw, "    %s\t%s (%.1f°C)\t%.1fs (%.2f min)\t%s (bound %.0fs)\t%s\t%.1fs (%.2f min)\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d (no destination %d, twice %d)\n", with, r.HotNode, r.LimitCelsius,
			r.HotSeconds, r.HotSeconds/60, back, r.BoundSeconds, r.Rack, r.OverBudgetSeconds, r.OverBudgetSeconds/60,
			e.Evicted, e.FromHot, r.OracleMin, beyondOracle(e.FromHot, r.OracleMin), e.NoDestination, e.Twice, e.AsChecked, e.WorkloadTwice,
			r.RackEvictions.Evicted, r.RackEvictions.NoDestination, r.RackEvictions.Twice)
	}
	_ = tw.Flush()
	s.printf("    (sandbox time is wall time; a rack is acted on by telesched-descheduler's TeleschedPowerBudget once its measured watts stay over budget for --budget-sustain, and only for pods with a checked destination outside it)\n")
}
