// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"math"
	"slices"
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
	// Pods are the phase's pods, Refused those not bound in time.
	Pods, Refused []string
	// Violations fail the run: a pod refused while units of its kind
	// were free on a node it may go to, a 2-GPU pod on a node of NVLink
	// pairs that got no linked pair, a claim pod off a DRA node or
	// holding no simulated GPU, a MIG device's (a claim pod's) estimated
	// watts off the simulation's by more than sliceWattsTolerance.
	Violations []string
}

// unitsWorkload is the unit phase's pods for a fleet: three MIG devices
// of the single strategy's GPU resource on its first such node, MIG
// devices of two profiles where the mixed strategy lists them, and a
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
			out = append(out, podSpec{name: fmt.Sprintf("slice-single-%d", i), phase: phaseUnits, cpu: "2", memory: "8Gi", gpus: 1, nodeName: n})
		}
	}
	profiles := map[string]bool{}
	for _, s := range specs {
		if s.MIGStrategy == sim.MIGMixed {
			for _, g := range s.GPUs {
				for _, d := range g.MIG {
					profiles[d.Profile] = true
				}
			}
		}
	}
	for i, p := range []string{"1g.10gb", "1g.10gb", "3g.40gb"} {
		if profiles[p] {
			out = append(out, podSpec{name: fmt.Sprintf("slice-mixed-%d", i), phase: phaseUnits, cpu: "2", memory: "8Gi", mig: map[string]int{p: 1}})
		}
	}
	if n := first(func(s sim.NodeSpec) bool { return s.NVLink == sim.NVLinkPairs && s.WholeGPUs() >= 2 }); n != "" {
		out = append(out, podSpec{name: "pair-0", phase: phaseUnits, cpu: "4", memory: "16Gi", gpus: 2, nodeName: n})
	}
	if first(func(s sim.NodeSpec) bool { return s.DRA && len(s.GPUs) > 0 }) != "" {
		out = append(out, podSpec{name: "claim-0", phase: phaseUnits, cpu: "2", memory: "8Gi", claimGPUs: 1})
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
		if free := s.freeFor(p); len(free) > 0 {
			s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("%s refused while %s had its units free (the scheduler's last word: %s)",
				p.name, strings.Join(free, ", "), lastRejection(s.res.Rejections[p.name])))
		}
		if err := s.kube.CoreV1().Pods(demoNamespace).Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", p.name, err)
		}
	}
	s.waitJudged(ctx, phaseUnits)
	s.printUnits(pods)
	s.res.ran(phaseUnits)
	return nil
}

// freeFor is the nodes pod p may go to whose free devices meet its
// request now.
func (s *sandbox) freeFor(p podSpec) []string {
	var out []string
	for _, n := range s.sortedNodes() {
		if p.claimGPUs > 0 {
			if n.Spec.DRA && n.BusyShare() <= float64(len(n.Spec.GPUs))-float64(p.claimGPUs) {
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
				if len(pl.GPUs) == 2 && n.Spec.NVLink == sim.NVLinkPairs && !pl.Linked {
					s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("%s took GPUs %v on %s, no linked pair", p.name, pl.GPUs, pl.Node))
				}
				if p.claimGPUs > 0 && (!n.Spec.DRA || int64(len(pl.GPUs)) != p.claimGPUs) {
					s.res.Units.Violations = append(s.res.Units.Violations, fmt.Sprintf("%s went to %s (DRA: %v) and holds simulated GPUs %v, want %d of a DRA node's",
						p.name, pl.Node, n.Spec.DRA, pl.GPUs, p.claimGPUs))
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
	s.printf("; MIG device (claim pod) watts within %.0f%% of the simulation's; 2-GPU pods on NVLink pairs linked; claim pods on a DRA node's GPU: ", sliceWattsTolerance)
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
