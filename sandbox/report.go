// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	configv1 "github.com/telesched/telesched/apis/config/v1"
)

// printPlacements prints a phase's pods: node, the node's telemetry when
// the pod was bound, the watts the pod adds to it as the scheduler
// learned them and by the simulation's physics, and the default profile's
// choice.
func (s *sandbox) printPlacements(ctx context.Context, phase string) {
	s.waitJudged(ctx, phase)
	s.read(func(*view) {
		base := map[string]Placement{}
		for _, p := range s.res.Baseline {
			base[p.Pod] = p
		}
		tw := newTable(s.opts.Out)
		rows := 0
		for i := range s.res.Placements {
			p := &s.res.Placements[i]
			if p.Phase != phase {
				continue
			}
			why := p.Why
			if len(p.GPUs) > 0 {
				why += fmt.Sprintf("; GPUs %v, %s", p.GPUs, alignment(p.GPUsAligned))
			}
			def := base[p.Pod].Node
			if phase == phaseGPU && def != "" {
				def += ", " + alignment(base[p.Pod].GPUsAligned)
			}
			if rows++; rows == 1 {
				fmt.Fprintf(tw, "    POD\tNODE\tNODE WHEN PLACED\tADDS, LEARNED / TRUE\tDEFAULT PROFILE\n")
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", p.Pod, p.Node, why, marginalCell(p), def)
		}
		_ = tw.Flush()
	})
}

func alignment(ok bool) string {
	if ok {
		return "one NUMA node"
	}
	return "NOT on one NUMA node"
}

// summary judges the last bindings, computes the run's figures and
// prints them.
func (s *sandbox) summary() {
	s.watch.update(func(v *view) { s.watch.judgeBound(v, true) })
	s.read(func(v *view) {
		s.account()
		s.printSummary(v)
	})
}

// printSummary prints each node's pods under each placement, the heat
// phases' outcomes, the pods refused, the watts and the racks. The caller
// holds the watcher's lock; the figures are computed (account).
func (s *sandbox) printSummary(v *view) {
	res := s.res
	load := func(ps []Placement, node string) string {
		n, milli := 0, int64(0)
		for _, p := range ps {
			if p.Node == node && p.Phase != phaseProbe && p.Phase != phaseAhead && !linkedPairPod(p.Pod) {
				n++
				milli += p.PodCPUMilli
			}
		}
		return fmt.Sprintf("%d / %s", n, strings.TrimSuffix(fmt.Sprintf("%.1f", float64(milli)/1000), ".0"))
	}
	var names []string
	for name := range s.nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	s.printf("  Pods / CPUs requested on each node: telesched's, the default profile's, and the oracles' (the cheapest placements, below):\n")
	tw := newTable(s.opts.Out)
	fmt.Fprintf(tw, "  NODE\tTELESCHED\tDEFAULT PROFILE\tORACLE\tORACLE, CPU PODS OFF GPU NODES\tPEAK TEMP\tTELEMETRY NOW\n")
	for _, name := range names {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%.0f°C\t%s\n", name, load(res.Placements, name), load(res.Baseline, name),
			load(res.Energy.Oracle.Placements, name), load(res.Energy.OracleOffGPU.Placements, name), res.PeakCelsius[name], describe(v.telemetry[name]))
	}
	_ = tw.Flush()

	if res.Heat.Node != "" {
		s.printf("\n  Hot nodes avoided: %s peaked at %.0f°C; pods placed on a node while its telemetry had it at its limit: %d",
			res.Heat.Node, res.Heat.PeakCelsius, len(res.Heat.HotPlacements))
		if len(res.Heat.HotPlacements) > 0 {
			s.printf(" (%s)", strings.Join(res.Heat.HotPlacements, "; "))
		}
		s.printf(".\n  %s was rejected while the node was hot and scheduled after it cooled: %v.\n", probePod, res.Heat.ProbeScheduledAfterCooling)
	}
	s.printf("  Heat ahead: pods placed where the node, with its pods, settles at or past its limit - %d°C: %d",
		thermalMarginMilli/1000, len(res.Ahead.PredictedHotPlacements))
	if len(res.Ahead.PredictedHotPlacements) > 0 {
		s.printf(" (%s)", strings.Join(res.Ahead.PredictedHotPlacements, "; "))
	}
	s.printf("; nodes refused on their predicted steady temperature: %d times; %s refused on its prediction: %v.\n", res.Ahead.PredictionRejections, aheadPod, res.Ahead.Refused)
	s.printf("  GPU pods: telesched put %s; the default profile %s; the oracle %s.\n", gpuPlacements(res.Placements), gpuPlacements(res.Baseline), gpuPlacements(res.Energy.Oracle.Placements))
	if len(res.Skipped) > 0 {
		var skipped []string
		for _, ph := range []string{phaseUnits, phaseAhead, phaseFault, phaseCool} {
			if why, ok := res.Skipped[ph]; ok {
				skipped = append(skipped, ph+" ("+why+")")
			}
		}
		s.printf("  Phases skipped: %s.\n", strings.Join(skipped, "; "))
	}
	if len(res.Refused) > 0 {
		s.printf("  Refused by the racks' power budgets (%d pods, deleted; telesched's watts below leave them out, the default profile's do not):\n", len(res.Refused))
		for _, r := range res.Refused {
			s.printf("    %s (%s): %s\n", r.Pod, r.Phase, strings.Join(r.Reasons, "; "))
		}
	}
	s.printEnergy()
	if len(res.Racks) > 0 {
		s.printRacks()
	}
}

// printEnergy prints each profile's energy for the scenario's work beside
// the oracles', telesched's share of the achievable saving in joules, the
// workload watts beside them, the finite pods' completion times, and how
// well the scheduler learned the marginal watts it placed by. The caller
// holds the watcher's lock.
func (s *sandbox) printEnergy() {
	res := s.res
	t, d, o, off := res.Energy.TeleschedJoules, res.Energy.DefaultJoules, res.Energy.Oracle, res.Energy.OracleOffGPU
	tw, dw := res.Energy.TeleschedWork, res.Energy.DefaultWork
	dSeconds := res.Energy.DefaultSeconds
	placed := s.placedPods()
	if len(res.Refused) > 0 {
		// Compare like with like: the pods telesched placed, as each
		// profile and the oracle placed them.
		var ps []Placement
		for _, p := range res.Baseline {
			if !res.refused(p.Pod) {
				ps = append(ps, p)
			}
		}
		dw = s.work(ps)
		d, dSeconds = s.energy(ps)
		s.printf("  The figures below are over the %d pods telesched placed (the default profile placed all %d: %s for their work with the %d refused among them).\n",
			len(placed), len(workloadPods()), kwhCell(res.Energy.DefaultJoules.Total()), len(res.Refused))
		if res.Energy.WorkloadInfeasible {
			s.printf("  No placement of all %d pods fits the constraints below, budgets included: the refusals were necessary (the oracle's lower bound; see sandbox/oracle).\n", len(workloadPods()))
		} else {
			s.printf("  A placement of all %d pods within the constraints below may exist: the oracle does not prove otherwise.\n", len(workloadPods()))
		}
	}
	s.printf("  Energy for the same work (docs/energy-models.md): the services' (CPU pods') work over %.0f minutes and each finite pod's (GPU jobs')\n", serviceHorizon/60)
	s.printf("  until it ends, at each node's speed (a service keeps its requests over its node's CPU speed busy; a GPU job runs its\n")
	s.printf("  work over its devices' speed); the fleet's energy beyond its %.0f W without the workload, by the simulated nodes' true curves,\n", res.Energy.IdleWatts)
	s.printf("  leakage at the settled temperature included. The oracle is the placement of the same %d pods that spends the least under\n", len(placed))
	s.printf("  the constraints telesched enforces (allocatable CPU, memory and GPUs; single-NUMA pods on one NUMA node; base load + requests\n")
	s.printf("  within LoadAware's %d%%; settling below limit - %d°C; racks within budget - reserve", configv1.DefaultLoadAwareArgs().CPUThresholdPercent, thermalMarginMilli/1000)
	if res.Heat.Node != "" {
		s.printf(";\n  the %s pods off %s, past its limit while they were placed", phaseHeat, res.Heat.Node)
	}
	s.printf("); its CPU pods may use GPU nodes' CPUs, as\n")
	s.printf("  TopologyFit only scores against that. SHARE is telesched's share of the achievable saving in joules, (default - telesched) / (default - oracle):\n")
	table := newTable(s.opts.Out)
	fmt.Fprintf(table, "    \tTELESCHED\tDEFAULT PROFILE\tRATIO\tORACLE\tSHARE\tORACLE, CPU PODS OFF GPU NODES\tSHARE\n")
	fmt.Fprintf(table, "    CPU pods (services)\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", kwhCell(t.CPU), kwhCell(d.CPU), ratio(t.CPU, d.CPU),
		kwhCell(o.CPUJoules), s.shareCell(t.CPU, d.CPU, o.CPUJoules), kwhCell(off.CPUJoules), s.shareCell(t.CPU, d.CPU, off.CPUJoules))
	gpuDefault, gpuShare, gpuShareOff := math.NaN(), "-", "-"
	if s.baselineGPUPods() > 0 {
		gpuDefault = d.GPU
		gpuShare, gpuShareOff = s.shareCell(t.GPU, d.GPU, o.Joules.GPU), s.shareCell(t.GPU, d.GPU, off.Joules.GPU)
	}
	fmt.Fprintf(table, "    GPU pods (on top; %d jobs: training and units)\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.gpuPods(), kwhCell(t.GPU), kwhCell(gpuDefault), ratio(t.GPU, gpuDefault),
		kwhCell(o.Joules.GPU), gpuShare, kwhCell(off.Joules.GPU), gpuShareOff)
	fmt.Fprintf(table, "    all\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", kwhCell(t.Total()), kwhCell(d.Total()), ratio(t.Total(), d.Total()),
		kwhCell(o.Joules.Total()), s.shareCell(t.Total(), d.Total(), o.Joules.Total()), kwhCell(off.Joules.Total()), s.shareCell(t.Total(), d.Total(), off.Joules.Total()))
	_ = table.Flush()
	s.printf("  Workload watts beside it (fleet watts minus the fleet's %.0f W without the workload, every pod running; a limit's measure, not energy):\n", res.Energy.IdleWatts)
	table = newTable(s.opts.Out)
	fmt.Fprintf(table, "    \tTELESCHED\tDEFAULT PROFILE\tRATIO\tORACLE\tORACLE, CPU PODS OFF GPU NODES\n")
	fmt.Fprintf(table, "    CPU pods\t%.0f W\t%.0f W\t%s\t%s\t%s\n", tw.CPU, dw.CPU, ratio(tw.CPU, dw.CPU), wattsCell(o.Work.CPU), wattsCell(off.Work.CPU))
	fmt.Fprintf(table, "    GPU pods (on top)\t%.0f W\t%.0f W\t%s\t%s\t%s\n", tw.GPU, dw.GPU, ratio(tw.GPU, dw.GPU), wattsCell(o.Work.GPU), wattsCell(off.Work.GPU))
	fmt.Fprintf(table, "    all\t%.0f W\t%.0f W\t%s\t%s\t%s\n", tw.Total(), dw.Total(), ratio(tw.Total(), dw.Total()), wattsCell(o.Work.Total()), wattsCell(off.Work.Total()))
	_ = table.Flush()
	s.printf("  Fleet watts running the workload: telesched %.0f W, default profile %.0f W, oracle %s; average watts over the work: telesched %.0f W, default profile %.0f W.\n",
		res.Energy.TeleschedWatts, dw.Total()+res.Energy.IdleWatts, wattsCell(o.Work.Total()+res.Energy.IdleWatts),
		averageWatts(t.Total(), res.Energy.TeleschedSeconds), averageWatts(d.Total(), dSeconds))
	s.printCompletion(t.Total(), d.Total(), o.Joules.Total(), res.Energy.TeleschedSeconds, dSeconds, o.Seconds)
	for _, x := range []struct {
		name string
		r    OracleReport
	}{{"oracle", o}, {"oracle with CPU pods off GPU nodes", off}} {
		switch {
		case x.r.Infeasible:
			s.printf("  The %s: no placement of every pod exists within the constraints (%s find no room, by the lower bound's relaxation; see sandbox/oracle).\n", x.name, strings.Join(x.r.Unplaced, ", "))
			continue
		case len(x.r.Unplaced) > 0:
			s.printf("  The %s found no placement of %s within the constraints (greedy and local search; not a proof that none exists).\n", x.name, strings.Join(x.r.Unplaced, ", "))
			continue
		}
		s.printf("  The %s is optimal within %s: no placement can spend less than %s (CPU pods) and %s (all) (see sandbox/oracle).\n", x.name,
			kwhCell(max(x.r.CPUJoules-x.r.CPULowerBound, x.r.Joules.Total()-x.r.LowerBound, 0)), kwhCell(x.r.CPULowerBound), kwhCell(x.r.LowerBound))
	}
	m := res.Energy.Marginal
	s.printf("  Learned vs true marginal watts at telesched's placements (ADDS in the tables): median absolute error %s over %d placements (CPU pods %s over %d, GPU pods %s over %d).\n",
		percentCell(m.All), m.NAll, percentCell(m.CPU), m.NCPU, percentCell(m.GPU), m.NGPU)
}

// averageWatts is energy spread over the time its work takes: the
// services' horizon, or the last finite pod's end when later.
func averageWatts(joules float64, seconds map[string]float64) float64 {
	return joules / workSpan(seconds)
}

// workSpan is how long the scenario's work takes: the services' horizon,
// or the last finite pod's end when later.
func workSpan(seconds map[string]float64) float64 {
	span := float64(serviceHorizon)
	for _, sec := range seconds {
		span = max(span, sec)
	}
	return span
}

// printCompletion prints each finite pod's completion time under each
// placement, and says where energy and completion time pull apart: a
// placement that spends less energy than another while its finite pods
// end later.
func (s *sandbox) printCompletion(tel, def, orc float64, ts, ds, os map[string]float64) {
	if len(ts) == 0 && len(ds) == 0 {
		return
	}
	pods := maps.Clone(ts)
	maps.Copy(pods, ds)
	names := slices.Sorted(maps.Keys(pods))
	cell := func(m map[string]float64, name string) string {
		if sec, ok := m[name]; ok {
			return fmt.Sprintf("%.0f min", sec/60)
		}
		return "-"
	}
	s.printf("  Finite pods' completion (their work over their devices' speed, from the start):\n")
	table := newTable(s.opts.Out)
	fmt.Fprintf(table, "    POD\tTELESCHED\tDEFAULT PROFILE\tORACLE\n")
	for _, name := range names {
		fmt.Fprintf(table, "    %s\t%s\t%s\t%s\n", name, cell(ts, name), cell(ds, name), cell(os, name))
	}
	fmt.Fprintf(table, "    all work done\t%.0f min\t%.0f min\t%s\n", workSpan(ts)/60, workSpan(ds)/60, spanCell(os))
	_ = table.Flush()
	for _, p := range s.res.Placements {
		if p.Queued && !s.res.JobsCreated.IsZero() {
			s.printf("  %s waited for another job's work to be done (a rack's budget or its GPUs kept it pending; the run ends a job %.0f times sooner than its work takes)\n"+
				"  and started at %.0f min: telesched's figures count it from then. The oracles may queue jobs too: each of a node's jobs may wait for the one before it there\n"+
				"  (sandbox/oracle, Options.Queue; their completion times above).\n",
				p.Pod, s.opts.WorkSpeedup, p.At.Sub(s.res.JobsCreated).Seconds()*s.opts.WorkSpeedup/60)
		}
	}
	for _, x := range []struct {
		name   string
		joules float64
		span   float64
	}{{"the default profile", def, workSpan(ds)}, {"the oracle", orc, spanOf(os)}} {
		if math.IsNaN(x.joules) || math.IsNaN(x.span) {
			continue
		}
		mine := workSpan(ts)
		switch {
		case tel < x.joules && mine > x.span+1:
			s.printf("  Energy and completion time pull apart: telesched spends %s less than %s, and its work ends %.0f min later (%.0f against %.0f min).\n",
				kwhCell(x.joules-tel), x.name, (mine-x.span)/60, mine/60, x.span/60)
		case tel > x.joules && mine < x.span-1:
			s.printf("  Energy and completion time pull apart: telesched spends %s more than %s, and its work ends %.0f min sooner (%.0f against %.0f min).\n",
				kwhCell(tel-x.joules), x.name, (x.span-mine)/60, mine/60, x.span/60)
		}
	}
}

func spanOf(m map[string]float64) float64 {
	if m == nil {
		return math.NaN()
	}
	return workSpan(m)
}

func spanCell(m map[string]float64) string {
	if m == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f min", workSpan(m)/60)
}

// kwhCell is joules as kilowatt-hours, "-" for NaN.
func kwhCell(j float64) string {
	if math.IsNaN(j) {
		return "-"
	}
	return fmt.Sprintf("%.3f kWh", j/3.6e6)
}

// achievableFloor is the least achievable saving, as a share of the
// default profile's watts, for which the report gives telesched's share.
const achievableFloor = 0.05

// captured is telesched's share of the achievable saving, (def - tel) /
// (def - oracle); ok false where the achievable saving is under
// achievableFloor of def's watts (or unknown), where a share says little.
func captured(tel, def, oracle float64) (float64, bool) {
	if math.IsNaN(oracle) || def <= 0 || def-oracle < achievableFloor*def {
		return 0, false
	}
	return (def - tel) / (def - oracle), true
}

// shareCell is captured for the report, or what stands in its place.
func (s *sandbox) shareCell(tel, def, oracle float64) string {
	if math.IsNaN(oracle) {
		return "-"
	}
	if c, ok := captured(tel, def, oracle); ok {
		return fmt.Sprintf("%.0f%%", 100*c)
	}
	if def < oracle {
		if s.defaultOverBudget() {
			return fmt.Sprintf("none: the default profile's placement breaks a rack's budget, %s below what the budgets allow", kwhCell(oracle-def))
		}
		return fmt.Sprintf("none to gain: oracle %s above the default", kwhCell(oracle-def))
	}
	return fmt.Sprintf("achievable %s < %.0f%% of %s", kwhCell(def-oracle), 100*achievableFloor, kwhCell(def))
}

func wattsCell(w float64) string {
	if math.IsNaN(w) {
		return "-"
	}
	return fmt.Sprintf("%.0f W", w)
}

func percentCell(p float64) string {
	if math.IsNaN(p) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", p)
}

// defaultOverBudget reports whether the default profile's placement
// takes a rack past its limit (the default profile ignores budgets).
func (s *sandbox) defaultOverBudget() bool {
	for _, r := range s.res.Racks {
		if r.DefaultWatts > float64(r.BudgetWatts-r.ReserveWatts) {
			return true
		}
	}
	return false
}

// printRacks prints each rack's budget, its peak measured watts over the
// run, and its watts running each profile's placement. The caller holds
// the watcher's lock.
func (s *sandbox) printRacks() {
	res := s.res
	s.printf("  Racks (PowerBudgets): the peak is the largest sum of the rack's published watts after the calibration sweep;\n  the profiles' watts are the rack running each placement, by the nodes' curves (the default profile ignores budgets):\n")
	tw := newTable(s.opts.Out)
	fmt.Fprintf(tw, "    BUDGET\tNODES\tBUDGET W\tLIMIT W\tPEAK MEASURED\tTELESCHED\tDEFAULT PROFILE\tEXCEEDED\n")
	for i := range res.Racks {
		r := &res.Racks[i]
		limit := r.BudgetWatts - r.ReserveWatts
		fmt.Fprintf(tw, "    %s\t%d\t%d\t%d\t%.0f W (%.0f%%)\t%.0f W\t%.0f W%s\t%v\n", r.Budget, len(r.Nodes), r.BudgetWatts, limit,
			r.PeakWatts, 100*r.PeakWatts/float64(r.BudgetWatts), r.TeleschedWatts, r.DefaultWatts, over(r.DefaultWatts, limit), r.PeakWatts > float64(r.BudgetWatts))
	}
	_ = tw.Flush()
	s.printf("  Nodes refused on a PowerBudget: %d times.\n", res.BudgetRejections)
}

// over marks watts past a limit.
func over(w float64, limit int64) string {
	if w > float64(limit) {
		return " (over)"
	}
	return ""
}

// gpuPlacements says where a placement put the GPU pods and whether each
// got its GPUs on one NUMA node.
// gpuPods is how many GPU pods telesched placed (training and unit pods).
func (s *sandbox) gpuPods() int {
	n := 0
	for _, p := range s.placedPods() {
		if p.gpuPod() {
			n++
		}
	}
	return n
}

// baselineGPUPods is how many GPU pods the default profile placed.
func (s *sandbox) baselineGPUPods() int {
	gpu := map[string]bool{}
	for _, p := range allPods(s.opts.Fleet) {
		gpu[p.name] = p.gpuPod()
	}
	n := 0
	for _, p := range s.res.Baseline {
		if gpu[p.Pod] {
			n++
		}
	}
	return n
}

func gpuPlacements(ps []Placement) string {
	var out []string
	for _, p := range ps {
		if p.Phase == phaseGPU {
			out = append(out, fmt.Sprintf("%s on %s (%s)", p.Pod, p.Node, alignment(p.GPUsAligned)))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// ratio is a / b to two places, "-" when b is not positive (or NaN).
func ratio(a, b float64) string {
	if b <= 0 || math.IsNaN(b) {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
