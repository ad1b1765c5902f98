// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/telesched/telesched/sandbox/sim"
)

// phaseUnits places pods of GPU units other than whole GPUs: MIG devices
// under both of the device plugin's strategies, a 2-GPU pod on a node of
// NVLink pairs, and a pod of a DRA ResourceClaim for one GPU. It runs on
// fleets that have such nodes.
const phaseUnits = "gpu-units"

// unitsSettle is how many sampling intervals the unit phase waits for its
// pods to be bound; a pod still pending then is refused, and judged
// against the units free.
const unitsSettle = 20

// sliceWattsTolerance is how far, in percent of the simulation's, the
// scheduler's estimate of a MIG device's watts may be off.
const sliceWattsTolerance = 15.0

// UnitsResult is the unit phase's checks.
type UnitsResult struct {
	// Pods are the phase's pods, Refused those not bound in time, and
	// ByBudget those of Refused a PowerBudget refused (with its reasons),
	// which is no failure.
	Pods, Refused, ByBudget []string
	// Alone are unpinned 2-GPU pods placed on no linked pair on the only
	// node that passed the filters (the scheduler's log says so), which
	// is no failure.
	Alone []string
	// Violations fail the run: a pod refused while units of its kind
	// were free on a node it may go to, a 2-GPU pod on a node of NVLink
	// pairs that got no linked pair, a claim pod off a DRA node or
	// holding no simulated GPU, a MIG device's (a claim pod's) estimated
	// watts off the simulation's by more than sliceWattsTolerance.
	Violations []string
}

// unitsWorkload is the unit phase's pods for a fleet: three MIG devices
// of the single strategy's GPU resource on its first such node, one MIG
// device of every profile the mixed strategy lists (mixedProfiles), and a
// 2-GPU pod on the first node of NVLink pairs, and a pod of a claim for
// one GPU where a node publishes its GPUs for DRA.
func unitsWorkload(specs []sim.NodeSpec) []podSpec {
	first := func(ok func(sim.NodeSpec) bool) string {
		for _, s := range specs {
			if ok(s) {
				return s.Name
			}
		}
		return ""
	}
	var out []podSpec
	if n := first(func(s sim.NodeSpec) bool { return s.MIGStrategy == sim.MIGSingle }); n != "" {
		for i := range 3 {
			out = append(out, podSpec{name: fmt.Sprintf("slice-single-%d", i), phase: phaseUnits, cpu: "2", memory: "8Gi", gpus: 1, nodeName: n, workSeconds: unitsWorkSeconds})
		}
	}
	for i, p := range mixedProfiles(specs) {
		out = append(out, podSpec{name: fmt.Sprintf("slice-mixed-%d", i), phase: phaseUnits, cpu: "2", memory: "8Gi", mig: map[string]int{p: 1}, workSeconds: unitsWorkSeconds})
	}
	if n := first(func(s sim.NodeSpec) bool { return s.NVLink == sim.NVLinkPairs && s.WholeGPUs() >= 2 }); n != "" {
		out = append(out, podSpec{name: "pair-0", phase: phaseUnits, cpu: "4", memory: "16Gi", gpus: 2, nodeName: n, workSeconds: unitsWorkSeconds})
	}
	if first(func(s sim.NodeSpec) bool {
		return s.DRA && slices.ContainsFunc(s.GPUs, func(g sim.GPUSpec) bool { return g.MIG == nil })
	}) != "" {
		out = append(out, podSpec{name: "claim-0", phase: phaseUnits, cpu: "2", memory: "8Gi", claimGPUs: 1, workSeconds: unitsWorkSeconds})
	}
	for i, p := range draMIGProfiles(specs) {
		out = append(out, podSpec{name: fmt.Sprintf("claim-mig-%d", i), phase: phaseUnits, cpu: "2", memory: "8Gi", claimMIG: p, workSeconds: unitsWorkSeconds})
	}
	return out
}

// unitsPhase runs the unit phase and checks it (UnitsResult).
func (s *sandbox) unitsPhase(ctx context.Context) error {
	pods := unitsWorkload(s.opts.Fleet.Nodes)
	if len(pods) == 0 {
		s.res.skip(phaseUnits, "no node with MIG, NVLink pairs or DRA")
		return nil
	}
	s.printf("\n  %s: %d pods of MIG devices (single and mixed strategy), NVLink pairs and DRA claims\n", phaseUnits, len(pods))
	for _, p := range pods {
		s.res.Units.Pods = append(s.res.Units.Pods, p.name)
	}
	if err := s.createPods(ctx, demoNamespace, s.opts.Profile, pods, 0); err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, unitsSettle*s.opts.Interval)
	_ = s.waitBound(waitCtx, demoNamespace, pods)
	cancel()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	zero := int64(0)
	for _, p := range pods {
		var bound bool
		s.read(func(v *view) { _, bound = v.bound[demoNamespace+"/"+p.name] })
		if bound {
			continue
		}
		s.res.Units.Refused = append(s.res.Units.Refused, p.name)
		last := lastRejection(s.res.Rejections[p.name])
		if free := s.freeFor(p); len(free) > 0 {
			if refusal, ok := budgetRefusal(p.name, last, len(free)); ok {
				s.res.Units.ByBudget = append(s.res.Units.ByBudget, refusal)
			} else {
				s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("%s refused while %s had its units free (the scheduler's last word: %s)",
					p.name, strings.Join(free, ", "), last))
			}
		}
		if err := s.kube.CoreV1().Pods(demoNamespace).Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", p.name, err)
		}
	}
	step, err := s.linkedPairStep(ctx)
	if err != nil {
		return err
	}
	for _, p := range step {
		s.res.Units.Pods = append(s.res.Units.Pods, p.name)
	}
	s.waitJudged(ctx, phaseUnits)
	s.printUnits(append(pods, step...))
	if err := s.releaseUnits(ctx, step); err != nil {
		return err
	}
	s.res.ran(phaseUnits)
	return nil
}

// freeFor is the nodes pod p may go to whose free devices meet its
// request now.
func (s *sandbox) freeFor(p podSpec) []string {
	var out []string
	for _, n := range s.sortedNodes() {
		switch {
		case p.claimGPUs > 0:
			if n.Spec.DRA && int64(n.FreeGPUs()) >= p.claimGPUs {
				out = append(out, n.Spec.Name)
			}
			continue
		case p.claimMIG != "":
			if n.Spec.DRA && n.FreeMIG(p.claimMIG) >= 1 {
				out = append(out, n.Spec.Name)
			}
			continue
		}
		if (p.nodeName == "" || p.nodeName == n.Spec.Name) && n.Fits(sim.Request{GPUs: int(p.gpus), MIG: p.mig}) {
			out = append(out, n.Spec.Name)
		}
	}
	return out
}

func lastRejection(ms []string) string {
	if len(ms) == 0 {
		return "none"
	}
	return ms[len(ms)-1]
}

// printUnits prints the unit phase's placements and checks, and records
// the placements' violations.
func (s *sandbox) printUnits(pods []podSpec) {
	s.read(func(v *view) {
		tw := newTable(s.opts.Out)
		fmt.Fprintf(tw, "    POD\tREQUEST\tNODE\tDEVICES\tWATTS PER MIG DEVICE (CLAIM: THE POD), SCHEDULER / SIMULATION\n")
		for _, p := range pods {
			pl, ok := s.res.PlacementOf(p.name)
			if !ok {
				fmt.Fprintf(tw, "    %s\t%s\trefused\t-\t-\n", p.name, unitsRequest(p))
				continue
			}
			devices, watts := "-", "-"
			if n := s.nodes[pl.Node]; n != nil {
				devices = deviceCell(n.Spec, pl)
				if p.nodeName == "" && p.gpus == 2 && !pl.Linked {
					if evaluated, feasible, ok := boundFeasible(s.logs.schedulerPath, demoNamespace+"/"+p.name); ok && evaluated > 1 && feasible == 1 {
						// Every other node failed a filter (a rack's
						// budget, its GPUs): nothing to choose.
						s.res.Units.Alone = append(s.res.Units.Alone, fmt.Sprintf("%s on %s, the only one of %d nodes that passed the filters", p.name, pl.Node, evaluated))
					} else {
						s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("%s (unpinned) took GPUs %v and MIG devices %v on %s, no linked pair, while another node had one free", p.name, pl.GPUs, pl.Slices, pl.Node))
					}
				} else if len(pl.GPUs) == 2 && n.Spec.NVLink == sim.NVLinkPairs && !pl.Linked {
					s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("%s took GPUs %v on %s, no linked pair", p.name, pl.GPUs, pl.Node))
				}
				if p.claimGPUs > 0 && (!n.Spec.DRA || int64(len(pl.GPUs)) != p.claimGPUs) {
					s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("%s went to %s (DRA: %v) and holds simulated GPUs %v, want %d of a DRA node's",
						p.name, pl.Node, n.Spec.DRA, pl.GPUs, p.claimGPUs))
				}
				if p.claimMIG != "" && (!n.Spec.DRA || len(pl.GPUs) != 0 || len(pl.Slices) != 1 || n.Spec.GPUs[pl.Slices[0].GPU].MIG[pl.Slices[0].Device].Profile != p.claimMIG) {
					s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("%s went to %s (DRA: %v) and holds simulated GPUs %v and MIG devices %s, want one %s MIG device of a DRA node's",
						p.name, pl.Node, n.Spec.DRA, pl.GPUs, deviceCell(n.Spec, pl), p.claimMIG))
				}
			}
			if p.claimGPUs > 0 {
				watts = s.claimWatts(p, pl)
			}
			if len(pl.Slices) > 0 {
				watts = "no estimate / " + fmt.Sprintf("%.1f W", pl.SliceTrueWatts)
				if pl.HasSliceLearned {
					e := 100 * (pl.SliceLearnedWatts - pl.SliceTrueWatts) / pl.SliceTrueWatts
					watts = fmt.Sprintf("%.1f / %.1f W (%+.0f%%)", pl.SliceLearnedWatts, pl.SliceTrueWatts, e)
					if math.Abs(e) > sliceWattsTolerance {
						s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("%s: the scheduler estimates %.1f W a MIG device, the simulation draws %.1f W (%+.0f%%, more than %.0f%%)",
							p.name, pl.SliceLearnedWatts, pl.SliceTrueWatts, e, sliceWattsTolerance))
					}
				}
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", p.name, unitsRequest(p), pl.Node, devices, watts)
		}
		_ = tw.Flush()
	})
	s.printf("    check: no pod refused while units of its kind were free: %d of %d pods refused", len(s.res.Units.Refused), len(s.res.Units.Pods))
	if len(s.res.Units.Refused) > 0 {
		s.printf(" (%s)", strings.Join(s.res.Units.Refused, ", "))
	}
	if len(s.res.Units.ByBudget) > 0 {
		s.printf(", by a rack's budget, as it should: %s", strings.Join(s.res.Units.ByBudget, ", "))
	}
	if len(s.res.Units.Alone) > 0 {
		s.printf("; no linked pair, but no choice: %s", strings.Join(s.res.Units.Alone, ", "))
	}
	s.printf("; MIG device (claim pod) watts within %.0f%% of the simulation's; 2-GPU pods on NVLink pairs linked, and the unpinned one on a linked pair; claim pods on a DRA node's GPU: ", sliceWattsTolerance)
	if len(s.res.Units.Violations) == 0 {
		s.printf("PASS\n")
		return
	}
	s.printf("FAIL\n")
	for _, v := range s.res.Units.Violations {
		s.printf("      %s\n", v)
	}
}

// unitsRequest is a unit pod's request in a few words.
func unitsRequest(p podSpec) string {
	var parts []string
	if p.gpus > 0 {
		parts = append(parts, fmt.Sprintf("%s: %d", gpuResource, p.gpus))
	}
	var profiles []string
	for pr := range p.mig {
		profiles = append(profiles, pr)
	}
	slices.Sort(profiles)
	for _, pr := range profiles {
		parts = append(parts, fmt.Sprintf("%s: %d", migResource(pr), p.mig[pr]))
	}
	if p.claimGPUs > 0 {
		parts = append(parts, fmt.Sprintf("claim: %d x %s", p.claimGPUs, draDriver))
	}
	if p.claimMIG != "" {
		parts = append(parts, fmt.Sprintf("claim: 1 x %s %s", draMIGClass, p.claimMIG))
	}
	if p.nodeName != "" {
		parts = append(parts, "pinned")
	}
	return strings.Join(parts, ", ")
}

// deviceCell names the devices a placement took: "GPU 0/1g.10gb#2",
// "GPUs [0 1] (NVLink pair)".
func deviceCell(spec sim.NodeSpec, p Placement) string {
	var parts []string
	for _, sl := range p.Slices {
		parts = append(parts, fmt.Sprintf("GPU %d/%s#%d", sl.GPU, spec.GPUs[sl.GPU].MIG[sl.Device].Profile, sl.Device))
	}
	if len(p.GPUs) > 0 {
		g := fmt.Sprintf("GPUs %v", p.GPUs)
		if p.Linked {
			g += " (NVLink-linked)"
		}
		parts = append(parts, g)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// claimWatts is a claim pod's cell: what the scheduler estimated the pod
// adds and what it adds by the simulation (its CPUs and its GPU), and it
// records a violation when they differ by more than sliceWattsTolerance.
func (s *sandbox) claimWatts(p podSpec, pl Placement) string {
	if !pl.HasTrue || pl.TrueWatts <= 0 {
		return "-"
	}
	if !pl.HasLearned {
		return fmt.Sprintf("no estimate / %.1f W (pod)", pl.TrueWatts)
	}
	e := 100 * (pl.LearnedWatts - pl.TrueWatts) / pl.TrueWatts
	if math.Abs(e) > sliceWattsTolerance {
		s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("%s: the scheduler estimates the pod adds %.1f W, the simulation %.1f W (%+.0f%%, more than %.0f%%)",
			p.name, pl.LearnedWatts, pl.TrueWatts, e, sliceWattsTolerance))
	}
	return fmt.Sprintf("%.1f / %.1f W (%+.0f%%) (pod)", pl.LearnedWatts, pl.TrueWatts, e)
}

// unitsVerdict is the run's error when the unit phase's checks failed.
func (r *Result) unitsVerdict() error {
	if len(r.Units.Violations) == 0 {
		return nil
	}
	return fmt.Errorf("verdict: %d GPU unit checks failed: %s", len(r.Units.Violations), strings.Join(r.Units.Violations, "; "))
}

// The linked-pair step of the unit phase: pinned 1-GPU pods (holdPrefix)
// hold every whole GPU the unit pods left free on the node of NVLink pairs
// that pair-0 went to, then those holding the second GPU of a pair are
// deleted, so that only GPUs whose NVLink peer is held stay free there.
// Once that node's NodeTelemetry publishes the allocations (read from the
// kubelet's pod-resources API), an unpinned 2-GPU pod, pairFreePod, must
// go to a linked pair, on another node.
const (
	holdPrefix  = "hold-"
	pairFreePod = "pair-free"
)

// linkedPairPod reports whether pod is one of the linked-pair step's,
// deleted before the phase ends (the summary counts no such pod).
func linkedPairPod(pod string) bool { return strings.HasPrefix(pod, holdPrefix) || pod == pairFreePod }

// migStrategyLabel is the label GPU feature discovery puts on a node of
// MIG GPUs: the device plugin's MIG strategy.
const migStrategyLabel = "nvidia.com/mig.strategy"

// linkedPairStep runs the linked-pair step and returns its pods still
// bound, which releaseUnits deletes after the phase's checks; nil when
// the fleet has no node of NVLink pairs or no other node with a free
// linked pair.
func (s *sandbox) linkedPairStep(ctx context.Context) ([]podSpec, error) {
	var pairs *sim.Node
	for _, spec := range s.opts.Fleet.Nodes {
		if spec.NVLink == sim.NVLinkPairs && spec.WholeGPUs() >= 2 {
			pairs = s.nodes[spec.Name]
			break
		}
	}
	if pairs == nil {
		return nil, nil
	}
	var other []string
	for _, n := range s.sortedNodes() {
		if n != pairs && !n.Spec.DRA && n.Spec.MIGStrategy != sim.MIGSingle && freeLinkedPair(n.Spec, n.HeldGPUs()) {
			other = append(other, n.Spec.Name)
		}
	}
	if len(other) == 0 {
		s.printf("    linked pair: skipped, no node but %s has a free NVLink-linked pair\n", pairs.Spec.Name)
		return nil, nil
	}
	var holds []podSpec
	for i, held := range pairs.HeldGPUs() {
		if !held && pairs.Spec.GPUs[i].MIG == nil {
			holds = append(holds, podSpec{name: fmt.Sprintf("%s%d", holdPrefix, len(holds)), phase: phaseUnits, cpu: "1", memory: "1Gi", gpus: 1, nodeName: pairs.Spec.Name})
		}
	}
	s.printf("    linked pair: %d pinned 1-GPU pods hold %s's free GPUs, those on the second GPU of a pair leave; then an unpinned 2-GPU pod\n", len(holds), pairs.Spec.Name)
	if err := s.createPods(ctx, demoNamespace, s.opts.Profile, holds, 0); err != nil {
		return nil, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, unitsSettle*s.opts.Interval)
	err := s.waitBound(waitCtx, demoNamespace, holds)
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		var unbound, byBudget []string
		s.read(func(v *view) {
			for _, h := range holds {
				if _, ok := v.bound[demoNamespace+"/"+h.name]; !ok {
					unbound = append(unbound, h.name)
					if refusal, ok := budgetRefusal(h.name, lastRejection(s.res.Rejections[h.name]), 1); ok { // pinned to one node
						byBudget = append(byBudget, refusal)
					}
				}
			}
		})
		if len(unbound) > 0 && len(byBudget) == len(unbound) {
			// The rack's budget holds no more busy GPUs: the step cannot
			// be set up, and nothing was placed wrong.
			s.res.Units.ByBudget = append(s.res.Units.ByBudget, byBudget...)
			s.printf("      the step is skipped: a rack's budget refused %s\n", strings.Join(unbound, ", "))
			return holds, nil
		}
		s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("linked pair: the pods holding %s's GPUs were not all bound: %v", pairs.Spec.Name, err))
		return holds, nil
	}
	var kept, leave []podSpec
	for _, h := range holds {
		pl, _ := s.res.PlacementOf(h.name)
		if len(pl.GPUs) == 1 && pl.GPUs[0]%2 == 1 {
			leave = append(leave, h)
		} else {
			kept = append(kept, h)
		}
	}
	if err := s.deletePods(ctx, leave); err != nil {
		return nil, err
	}
	waitCtx, cancel = context.WithTimeout(ctx, unitsSettle*s.opts.Interval)
	err = s.waitAllocationsPublished(waitCtx, pairs)
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("linked pair: %s's NodeTelemetry never published the GPUs its pods hold: %v", pairs.Spec.Name, err))
		return kept, nil
	}
	s.printf("      %s publishes GPUs %s allocated, %s free (no linked pair); free linked pairs on %s\n", pairs.Spec.Name,
		heldList(pairs.HeldGPUs(), true), heldList(pairs.HeldGPUs(), false), strings.Join(other, ", "))
	// The unit pods' watts counted once, in their nodes' samples, not on
	// top of them as well: the step asks where the pod's topology is, not
	// how the reservation hold meets a rack's budget.
	s.waitSampled(ctx, phaseUnits)
	pair := podSpec{name: pairFreePod, phase: phaseUnits, cpu: "4", memory: "16Gi", gpus: 2, wholeGPUs: true}
	if err := s.createPods(ctx, demoNamespace, s.opts.Profile, []podSpec{pair}, 0); err != nil {
		return nil, err
	}
	waitCtx, cancel = context.WithTimeout(ctx, unitsSettle*s.opts.Interval)
	err = s.waitBound(waitCtx, demoNamespace, []podSpec{pair})
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		s.res.Units.Refused = append(s.res.Units.Refused, pair.name)
		last := lastRejection(s.res.Rejections[pair.name])
		if refusal, ok := budgetRefusal(pair.name, last, len(other)); ok {
			s.res.Units.ByBudget = append(s.res.Units.ByBudget, refusal)
		} else {
			s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("%s refused while %s had a free linked pair (the scheduler's last word: %s)",
				pair.name, strings.Join(other, ", "), last))
		}
	}
	return append(kept, pair), nil
}

// freeLinkedPair reports whether two free whole GPUs of spec reach each
// other over NVLink (held marks the GPUs pods hold).
func freeLinkedPair(spec sim.NodeSpec, held []bool) bool {
	for i := range spec.GPUs {
		for j := i + 1; j < len(spec.GPUs); j++ {
			if !held[i] && !held[j] && spec.GPUs[i].MIG == nil && spec.GPUs[j].MIG == nil && spec.Linked([]int{i, j}) {
				return true
			}
		}
	}
	return false
}

// heldList is the indexes of the GPUs whose held mark is want.
func heldList(held []bool, want bool) string {
	var out []int
	for i, h := range held {
		if h == want {
			out = append(out, i)
		}
	}
	return fmt.Sprint(out)
}

// waitAllocationsPublished waits until n's NodeTelemetry publishes each
// whole GPU allocated exactly when the simulation has a pod hold it.
func (s *sandbox) waitAllocationsPublished(ctx context.Context, n *sim.Node) error {
	return s.watch.waitFor(ctx, n.Spec.Name+"'s telemetry to publish its GPU allocations", func(v *view) bool {
		tel := v.telemetry[n.Spec.Name]
		if tel == nil {
			return false
		}
		held := n.HeldGPUs()
		seen := 0
		for _, g := range tel.GPUs {
			i := int(g.Index)
			if i < 0 || i >= len(held) || n.Spec.GPUs[i].MIG != nil {
				continue
			}
			want := int8(0)
			if held[i] {
				want = 1
			}
			if g.Allocated != want {
				return false
			}
			seen++
		}
		return seen == n.Spec.WholeGPUs()
	})
}

// deletePods deletes the demo pods and waits until the watcher has seen
// them go (and the simulation freed their devices).
func (s *sandbox) deletePods(ctx context.Context, pods []podSpec) error {
	zero := int64(0)
	for _, p := range pods {
		if err := s.kube.CoreV1().Pods(demoNamespace).Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", p.name, err)
		}
	}
	return s.watch.waitFor(ctx, fmt.Sprintf("%d pods to be deleted", len(pods)), func(v *view) bool {
		for _, p := range pods {
			if _, ok := v.bound[demoNamespace+"/"+p.name]; ok {
				return false
			}
		}
		return true
	})
}

// releaseUnits deletes the linked-pair step's pods, and waits until the
// nodes' telemetry publishes their GPUs free again, so the GPU phase finds
// the fleet as the unit pods left it.
func (s *sandbox) releaseUnits(ctx context.Context, pods []podSpec) error {
	if len(pods) == 0 {
		return nil
	}
	nodes := map[string]bool{}
	for _, p := range pods {
		if pl, ok := s.res.PlacementOf(p.name); ok {
			nodes[pl.Node] = true
		}
	}
	if err := s.deletePods(ctx, pods); err != nil {
		return err
	}
	for _, n := range s.sortedNodes() {
		if !nodes[n.Spec.Name] {
			continue
		}
		waitCtx, cancel := context.WithTimeout(ctx, unitsSettle*s.opts.Interval)
		err := s.waitAllocationsPublished(waitCtx, n)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			s.printf("    (%s's telemetry still shows the released GPUs allocated: %v)\n", n.Spec.Name, err)
		}
	}
	return nil
}

// mixedProfiles are the MIG profiles the fleet's mixed-strategy nodes
// hold, fewest compute slices first, then by name: the unit phase asks
// for one device of each, so every profile the fleet holds is placed.
func mixedProfiles(specs []sim.NodeSpec) []string {
	return profilesOf(specs, func(s sim.NodeSpec) bool { return s.MIGStrategy == sim.MIGMixed })
}

// draMIGProfiles are the MIG profiles the fleet's DRA nodes publish, in
// mixedProfiles' order: the unit phase claims one device of each.
func draMIGProfiles(specs []sim.NodeSpec) []string {
	return profilesOf(specs, func(s sim.NodeSpec) bool { return s.DRA })
}

// profilesOf are the MIG profiles of the nodes of specs that ok takes,
// fewest compute slices first, then by name.
func profilesOf(specs []sim.NodeSpec, ok func(sim.NodeSpec) bool) []string {
	slices := map[string]int{}
	for _, s := range specs {
		if ok(s) {
			for _, g := range s.GPUs {
				for _, d := range g.MIG {
					slices[d.Profile] = d.Slices
				}
			}
		}
	}
	out := make([]string, 0, len(slices))
	for p := range slices {
		out = append(out, p)
	}
	sort.Slice(out, func(a, b int) bool {
		if slices[out[a]] != slices[out[b]] {
			return slices[out[a]] < slices[out[b]]
		}
		return out[a] < out[b]
	})
	return out
}

// boundLine is kube-scheduler's log line of a binding (schedule_one.go,
// level 2), with how many nodes it evaluated and how many passed the
// filters.
var boundLine = regexp.MustCompile(`"Successfully bound pod to node" pod="([^"]+)" node="[^"]*" evaluatedNodes=(\d+) feasibleNodes=(\d+)`)

// boundFeasible reads the scheduler's log at path for pod's (namespace/
// name) last binding: the nodes it evaluated and those that passed the
// filters. ok is false when the log has none. A batch's hinted pod shows
// 1 and 1 (it evaluated only its hint).
func boundFeasible(path, pod string) (evaluated, feasible int, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "Successfully bound pod to node") || !strings.Contains(line, `pod="`+pod+`"`) {
			continue
		}
		if m := boundLine.FindStringSubmatch(line); m != nil && m[1] == pod {
			evaluated, _ = strconv.Atoi(m[2])
			feasible, _ = strconv.Atoi(m[3])
			ok = true
		}
	}
	return evaluated, feasible, ok
}
