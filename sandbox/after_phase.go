// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
	// faultHold is how long the fan stays failed.
	faultHold = 60 * time.Second
	// rackResidents replicas of at most rackPodMilli (a quarter of the
	// rack's smallest node; fewer CPUs, whole ones, until they all fit)
	// are placed on the rack's nodes that have room for them at their
	// requests (rackFullShare), using
	// rackIdlePercent of their requests; then their load rises to their
	// requests for rackHold, and the nodes' unseen load with it, sized so
	// that the oracle needs rackToShed (or more, until the rise passes the
	// budget itself) of the rack's evictable pods gone (the rack then
	// settles rackSlackWatts under its limit).
	rackResidents   = 4
	rackPodMilli    = 16000
	rackIdlePercent = 25
	rackToShed      = 2
	rackSlackWatts  = 20.0
	rackFullShare   = 0.85
	rackHold        = 60 * time.Second
	rackSet         = "rack"
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
		p := residentPod(fmt.Sprintf("%s-%d", residentSet, i), fmt.Sprintf("%s-%d", residentSet, i), name, s.opts.Profile, rs, resource.MustParse(residentCPU), 0)
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
	r.OracleMin, _ = oracle.FewestToShed(residents, func(removed []int) bool {
		c, _ := heater.Spec.Steady(u-float64(len(removed)*residentMilli)/float64(heater.Spec.Host.CPUs*1000), fault)
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

	// The rack: pods placed idle on its nodes; their load rises.
	s.watch.after.setStage(stageRack)
	if err := s.rackStage(ctx, &r, rs); err != nil {
		return r, err
	}
	// Replicas still being re-created are bound by now, or never will be.
	_ = sleep(ctx, 3*s.opts.Interval)
	r.Evictions, r.RackEvictions = s.watch.after.counts(stageFault, name), s.watch.after.counts(stageRack, r.RackNodes...)
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
// can draw past its budget at full load, else the one that can go
// furthest past it; and its simulated nodes, by name. nil when no rack
// can pass its budget.
func (s *sandbox) overloadable(heater string) (*Rack, []*sim.Node) {
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
		var most float64
		for _, n := range nodes {
			most += n.SteadyWatts(1, 0)
		}
		if len(nodes) == 0 || most <= budget*1.01 {
			continue
		}
		if slices.Contains(rack.Nodes, heater) || best == nil || (!slices.Contains(best.Nodes, heater) && most/budget > bestMost/float64(best.BudgetWatts)) {
			best, bestNodes, bestMost = rack, nodes, most
		}
	}
	slices.SortFunc(bestNodes, func(a, b *sim.Node) int { return strings.Compare(a.Spec.Name, b.Spec.Name) })
	return best, bestNodes
}

// rackStage places rackResidents replicas, idle, on the rack's nodes
// (round robin), then raises their load to their requests and the nodes'
// unseen load (rackLoad.extraFor) for rackHold, reading the rack's watts.
func (s *sandbox) rackStage(ctx context.Context, r *AfterResult, owner *appsv1.ReplicaSet) error {
	rack, nodes := s.overloadable(r.HotNode)
	if rack == nil {
		s.printf("    no rack's nodes can draw past its budget: the rack stage is skipped\n")
		return nil
	}
	r.Rack, r.RackNodes, r.BudgetWatts, r.RackLimitWatts = rack.Budget, rack.Nodes, float64(rack.BudgetWatts), float64(rack.BudgetWatts-rack.ReserveWatts)
	milli, on := rackPods(nodes)
	cpu := *resource.NewMilliQuantity(milli, resource.DecimalSI)
	if len(on) < rackToShed {
		s.printf("    rack %s: its nodes have room for %d pods of %s CPUs (under %.0f%% CPU with them at their requests), fewer than %d: the rack stage is skipped\n",
			rack.Rack, len(on), cpu.String(), 100*rackFullShare, rackToShed)
		r.Rack = ""
		return nil
	}
	names := map[string]bool{}
	for i, node := range on {
		name := fmt.Sprintf("%s-%d", rackSet, i)
		names[name] = true
		p := residentPod(name, name, node, s.opts.Profile, owner, cpu, rackIdlePercent)
		if _, err := s.kube.CoreV1().Pods(afterNamespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	isRiser := func(p placed) bool { return names[p.Pod] }
	if err := s.watch.waitFor(ctx, fmt.Sprintf("%d pods to run idle on rack %s", len(on), rack.Rack), func(*view) bool {
		return len(s.watch.after.on(isRiser)) == len(on)
	}); err != nil {
		return err
	}
	onRack := map[string]bool{}
	for _, n := range nodes {
		onRack[n.Spec.Name] = true
	}
	risers := s.watch.after.on(isRiser)
	load := newRackLoad(nodes, s.watch.after.on(func(p placed) bool { return onRack[p.Node] }), risers)
	extra, k := load.sized(r.RackLimitWatts-rackSlackWatts, r.BudgetWatts)
	r.RackOracleMin, _ = oracle.FewestToShed(len(load.cands), func(removed []int) bool { return load.watts(extra, removed) < r.RackLimitWatts })
	r.RackBoundSeconds = rackBound(r.RackOracleMin, s.opts.Interval, s.opts.BudgetSustain, s.opts.DeschedulerInterval, nodes[0].Spec.ThermalTimeConstant).Seconds()
	settle := load.watts(extra, nil)
	s.printf("    rack %s (PowerBudget %s, %.0f W, limit %.0f W): %d pods of %s CPUs run on its nodes at %d%% of their requests; for %v their load rises to their requests and the nodes' unseen load %.1f points (GPUs; CPUs as much, short of full load), sized for %d to go: the rack would settle at %.0f W; the oracle's fewest evictions of its %d evictable pods: %d\n",
		rack.Rack, r.Rack, r.BudgetWatts, r.RackLimitWatts, len(on), cpu.String(), rackIdlePercent, rackHold, 100*extra, k, settle, len(load.cands), r.RackOracleMin)
	if settle < r.RackLimitWatts {
		// The rack's nodes have too little left to rise by: their CPUs
		// near full load (the unseen rise stops there), and too few GPUs
		// to make up for it. Say so, not a stage that passes for want of
		// anything to act on.
		s.printf("    the rack cannot be taken past its limit here: it would settle at %.0f W, under %.0f W (its nodes' CPUs too near full load for the unseen load to rise, too few GPUs to make up for it); this stage shows nothing about the descheduler\n",
			settle, r.RackLimitWatts)
	}
	for uid, p := range risers {
		s.nodes[p.Node].SetPodCPU(uid, p.Request)
	}
	for _, n := range nodes {
		n.SetExtraLoad(load.cpuExtra(n, extra), extra)
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
		return err
	}
	end := watts[len(watts)-1].At
	r.OverBudgetSeconds, r.OverLimitSeconds = secondsOver(watts, r.BudgetWatts, end), secondsOver(watts, r.RackLimitWatts, end)
	r.RackBackUnderSeconds, r.RackReached, r.RackBackUnder = backUnder(watts, r.RackLimitWatts)
	return nil
}

// rackPods sizes the rack stage's pods: the largest, in whole CPUs and at
// most rackPodMilli and a quarter of the smallest node's CPUs, that
// rackResidents of fit (rackPlacement), and the node of each; fewer
// nodes than rackResidents when not even 1-CPU pods all fit.
func rackPods(nodes []*sim.Node) (milli int64, on []string) {
	milli = rackPodMilli
	for _, n := range nodes {
		milli = min(milli, int64(n.Spec.Host.CPUs)*1000/4)
	}
	on = rackPlacement(nodes, milli, rackResidents)
	for milli > 1000 && len(on) < rackResidents {
		milli -= 1000
		on = rackPlacement(nodes, milli, rackResidents)
	}
	return milli, on
}

// rackPlacement is the node of each of up to count pods of milli: round
// robin over nodes, each taking pods while its utilization, with them at
// their requests, stays at or under rackFullShare. The pods are bound, not
// scheduled, so this keeps them to nodes that can run them: on a node past
// 100 % CPU a pod leaving frees nothing the curve says.
func rackPlacement(nodes []*sim.Node, milli int64, count int) []string {
	room := make([]int64, len(nodes))
	for i, n := range nodes {
		capacity := int64(n.Spec.Host.CPUs) * 1000
		room[i] = int64(rackFullShare*float64(capacity)) - int64(n.Utilization()*float64(capacity))
	}
	var out []string
	for placedOne := true; placedOne && len(out) < count; {
		placedOne = false
		for i, n := range nodes {
			if len(out) < count && room[i] >= milli {
				out = append(out, n.Spec.Name)
				room[i] -= milli
				placedOne = true
			}
		}
	}
	return out
}

// rackLoad is a rack stage's rack: its nodes, the evictable pods on them
// (the oracle's candidates) and how much each node's pods' load rises.
type rackLoad struct {
	nodes []*sim.Node
	cands []placed
	rise  map[string]int64 // node → milli-CPUs its pods' load rises by
	// room is each node's CPU share left below full load once its pods'
	// load has risen: the unseen CPU load stops there, while the GPUs'
	// rises on. No node past full load: what a pod frees is then what the
	// curve says, for the oracle and the descheduler alike.
	room map[string]float64
}

// newRackLoad is the rackLoad of nodes with the pods on them and the pods
// whose load rises from idleLoad to their requests.
func newRackLoad(nodes []*sim.Node, on, risers map[types.UID]placed) rackLoad {
	l := rackLoad{nodes: nodes, rise: map[string]int64{}}
	for _, p := range on {
		l.cands = append(l.cands, p)
	}
	slices.SortFunc(l.cands, func(a, b placed) int { return strings.Compare(a.Pod, b.Pod) })
	for _, p := range risers {
		l.rise[p.Node] += p.Request - p.Request*rackIdlePercent/100
	}
	l.room = map[string]float64{}
	for _, n := range nodes {
		l.room[n.Spec.Name] = max(0, 1-n.Utilization()-float64(l.rise[n.Spec.Name])/float64(n.Spec.Host.CPUs*1000))
	}
	return l
}

// cpuExtra is the unseen CPU load on node n at unseen load extra: extra,
// short of full load.
func (l rackLoad) cpuExtra(n *sim.Node, extra float64) float64 {
	return min(extra, l.room[n.Spec.Name])
}

// watts is what the rack settles at, its pods' load risen, with extra
// unseen load on each node and without the candidates removed.
func (l rackLoad) watts(extra float64, removed []int) float64 {
	less := map[string]int64{}
	for _, i := range removed {
		less[l.cands[i].Node] += l.cands[i].Request
	}
	var w float64
	for _, n := range l.nodes {
		w += n.SteadyLoadWatts(l.cpuExtra(n, extra), extra, l.rise[n.Spec.Name]-less[n.Spec.Name])
	}
	return w
}

// leastWithout is the least the rack settles at with extra when k of its
// candidates are gone (the k that free most).
func (l rackLoad) leastWithout(extra float64, k int) float64 {
	least := l.watts(extra, nil)
	oracle.EachSubset(min(len(l.cands), oracle.MaxShedCandidates), k, func(set []int) {
		least = min(least, l.watts(extra, set))
	})
	return least
}

// sized is the unseen load (extraFor) and the count k of pods it is sized
// for: the fewest, from rackToShed up, with which the rack, its load risen,
// passes over budget (the feed's budgetWatts, not only the limit); the
// largest count short of all the candidates when none does.
func (l rackLoad) sized(watts, budget float64) (float64, int) {
	k := min(rackToShed, len(l.cands))
	extra := l.extraFor(watts, k)
	for k+1 < len(l.cands) && l.watts(extra, nil) <= budget {
		k++
		extra = l.extraFor(watts, k)
	}
	return extra, k
}

// extraFor is the unseen load (bisected; on each node's CPUs at most what
// takes it to full load, cpuExtra, on its GPUs up to all of them) at which
// the rack, without the k candidates that free most, settles at watts: 0
// when it is past watts even without them (the oracle then needs more),
// the most when even that does not reach it.
func (l rackLoad) extraFor(watts float64, k int) float64 {
	lo, hi := 0.0, 0.0
	for _, n := range l.nodes {
		hi = max(hi, l.room[n.Spec.Name])
		if len(n.Spec.GPUs) > 0 {
			hi = 1
		}
	}
	if hi <= 0 {
		return 0
	}
	if l.leastWithout(lo, k) >= watts {
		return 0
	}
	if l.leastWithout(hi, k) < watts {
		return hi
	}
	_, hi = bisect(lo, hi, 40, func(extra float64) bool { return l.leastWithout(extra, k) < watts })
	return hi
}

// rackBound is how soon, from first going over its limit, the rack must
// be back under it with the descheduler, which knows the excess and each
// pod's marginal watts: the agents publish the rise within three sampling
// intervals (a sample, the next one that measures it, the settler's wait
// of one interval); the descheduler sees it at its next cycle and evicts
// once the budget has stayed over for sustain, judged at a cycle, at most
// deschedulerPerNode pods of a node per cycle, so the oracle's pods, all
// on one node at worst, take ceil(oracleMin / deschedulerPerNode) windows
// (the window starts again after pods leave); the pods' watts leave with
// them, and the nodes' leakage follows their temperature in 3 thermal
// time constants.
func rackBound(oracleMin int, agentInterval, sustain, interval, tau time.Duration) time.Duration {
	rounds := max(1, (oracleMin+deschedulerPerNode-1)/deschedulerPerNode)
	return 3*agentInterval + time.Duration(rounds)*(sustain+interval) + interval + 3*tau
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
	lo, hi := bisect(-100, 200, 60, func(fault float64) bool {
		c, _ := spec.Steady(u, fault)
		return c < celsius
	})
	return (lo + hi) / 2
}

// bisect narrows [lo, hi] in steps halvings to where below, false at hi
// and true below some point (a quantity rising with x under its target),
// turns false, and returns the bounds: below(lo) holds, below(hi) not.
func bisect(lo, hi float64, steps int, below func(x float64) bool) (float64, float64) {
	for range steps {
		mid := (lo + hi) / 2
		if below(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, hi
}

// printAfter prints the passes side by side: the fault, then the rack.
func (s *sandbox) printAfter() {
	s.printf("\n  after placement: the heater's fan fails under running pods\n")
	tw := newTable(s.opts.Out)
	fmt.Fprintf(tw, "    DESCHEDULER\tHOT NODE\tSECONDS AT/PAST LIMIT−MARGIN\tBACK UNDER AFTER\tEVICTED\tFROM HOT NODE\tORACLE MIN\tBEYOND ORACLE\tNO DESTINATION\tEVICTED TWICE\tON CHECKED NODE\tWORKLOAD MOVED TWICE\n")
	for _, r := range s.res.After {
		e := r.Evictions
		fmt.Fprintf(tw, "    %s\t%s (%.1f°C)\t%.1fs (%.2f min)\t%s (bound %.0fs)\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", onOff(r.Descheduler), r.HotNode, r.LimitCelsius,
			r.HotSeconds, r.HotSeconds/60, backText(r.Reached, r.BackUnder, r.BackUnderSeconds, "the fault"), r.BoundSeconds,
			e.Evicted, e.FromTarget, r.OracleMin, beyondOracle(e.FromTarget, r.OracleMin), e.NoDestination, e.Twice, e.AsChecked, e.WorkloadTwice)
	}
	_ = tw.Flush()
	if len(s.res.After) == 0 || s.res.After[0].Rack == "" {
		return
	}
	s.printf("\n  after placement: a rack's load rises past its budget\n")
	tw = newTable(s.opts.Out)
	fmt.Fprintf(tw, "    DESCHEDULER\tRACK (BUDGET, LIMIT)\tSECONDS OVER LIMIT\tSECONDS OVER BUDGET\tBACK UNDER LIMIT AFTER\tEVICTED\tFROM RACK\tORACLE MIN\tBEYOND ORACLE\tNO DESTINATION\tEVICTED TWICE\tON CHECKED NODE\tWORKLOAD MOVED TWICE\n")
	for _, r := range s.res.After {
		e := r.RackEvictions
		fmt.Fprintf(tw, "    %s\t%s (%.0f W, %.0f W)\t%.1fs (%.2f min)\t%.1fs (%.2f min)\t%s (bound %.0fs)\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", onOff(r.Descheduler), r.Rack, r.BudgetWatts, r.RackLimitWatts,
			r.OverLimitSeconds, r.OverLimitSeconds/60, r.OverBudgetSeconds, r.OverBudgetSeconds/60, backText(r.RackReached, r.RackBackUnder, r.RackBackUnderSeconds, "the rise"), r.RackBoundSeconds,
			e.Evicted, e.FromTarget, r.RackOracleMin, beyondOracle(e.FromTarget, r.RackOracleMin), e.NoDestination, e.Twice, e.AsChecked, e.WorkloadTwice)
	}
	_ = tw.Flush()
	s.printf("    (sandbox time is wall time; the limit is the PowerBudget's budget − reserve, which telesched-descheduler's TeleschedPowerBudget sheds to once the rack's measured watts stay over it for --budget-sustain, only pods with a checked destination outside the rack)\n")
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// backText is a report's "back under after" cell.
func backText(reached, back bool, seconds float64, within string) string {
	switch {
	case !reached:
		return "never reached"
	case back:
		return fmt.Sprintf("%.1fs", seconds)
	}
	return "not within " + within
}
