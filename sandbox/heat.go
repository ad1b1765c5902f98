// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/telesched/telesched/scheduler/estimate"
)

// heatPhase fails the heater's fan, places the heat phase's pods and a pod
// pinned to the heater, repairs the fan and waits for the pinned pod.
func (s *sandbox) heatPhase(ctx context.Context, pods []podSpec) error {
	name := s.res.Heat.Node
	heater := s.nodes[name]
	crit := float64(heater.Spec.Host.CritMilliCelsius) / 1000
	s.printf("\n  heat: %s's fan fails (the model adds heat until the package reaches %.0f°C, past its %.0f°C critical limit)\n", name, crit+2, crit)
	heater.SetFaultHeat(heater.FaultHeatFor(crit + 2))
	var hotAt time.Time
	if err := s.watch.waitFor(ctx, name+" to report it is past its thermal limit", func(v *view) bool {
		if t := v.telemetry[name]; hot(t) && hotAt.IsZero() {
			hotAt = time.Now()
		}
		t := v.telemetry[name]
		return t != nil && t.HasLimit && t.HottestMilli >= t.LimitMilli
	}); err != nil {
		return err
	}
	s.read(func(v *view) { s.printf("    %s reports %s\n", name, describe(v.telemetry[name])) })
	probe := podSpec{name: probePod, phase: phaseProbe, cpu: "500m", memory: "512Mi", nodeName: name}
	s.printf("    now %d pods of 2 CPUs, and %s (nodeSelector: %s)\n", len(pods), probePod, name)
	if err := s.createPods(ctx, demoNamespace, s.opts.Profile, append(pods, probe), 0); err != nil {
		return err
	}
	if err := s.waitPlaced(ctx, pods); err != nil {
		return err
	}
	s.printPlacements(ctx, phaseHeat)
	if err := s.watch.waitFor(ctx, probePod+"'s FailedScheduling event", func(*view) bool { return len(s.res.Rejections[probePod]) > 0 }); err != nil {
		return err
	}
	s.res.ran(phaseFault)
	s.read(func(*view) {
		s.printf("    %s rejected:\n", probePod)
		for _, m := range s.res.Rejections[probePod] {
			s.printf("      %s\n", m)
		}
	})

	s.printf("\n  cool: %s's fan is repaired\n", name)
	heater.SetFaultHeat(0)
	var coolAt time.Time
	if err := s.watch.waitFor(ctx, name+" to cool below its limit", func(v *view) bool {
		if t := v.telemetry[name]; t != nil && !hot(t) {
			coolAt = time.Now()
			return true
		}
		return false
	}); err != nil {
		return err
	}
	if err := s.waitPlaced(ctx, []podSpec{probe}); err != nil {
		return err
	}
	if s.res.refused(probePod) {
		s.res.skip(phaseCool, probePod+" was refused by a PowerBudget after the node cooled")
		return nil
	}
	// Its binding is judged against the sample the scheduler had once the
	// next sample of the node arrives (an interval).
	if err := s.watch.waitFor(ctx, probePod+"'s binding to be judged", func(v *view) bool {
		for _, b := range v.unjudged {
			if b.key == demoNamespace+"/"+probePod {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	s.read(func(v *view) {
		p := v.bound[demoNamespace+"/"+probePod]
		s.res.Heat.ProbeScheduledAfterCooling = p.Node == name && p.At.After(hotAt)
		s.printf("    %s reported cool %.1fs after the repair began; %s scheduled on %s %.1fs later (%s), requeued by the telemetry update\n",
			name, coolAt.Sub(hotAt).Seconds(), probePod, p.Node, p.At.Sub(coolAt).Seconds(), p.Why)
	})
	s.res.ran(phaseCool)
	return nil
}

// aheadPod asks for enough CPUs to take a node past its limit - margin
// once it settles, though the node is cool now and the pod fits its CPUs
// and LoadAware's threshold.
const aheadPod = "too-hot-later"

// aheadModelWait bounds the wait for the target node's thermal model. The
// agent publishes one after 60 sample pairs of the sensor closest to its
// limit; when that sensor changes (the package and a core that read the
// same trade places), the model starts again, and a minute was not always
// enough (1 default-fleet run in 6, docs/benchmarks.md). Three minutes
// still fit the e2e test's 8.
const aheadModelWait = 3 * time.Minute

// aheadMaxUtilization keeps the heat-ahead pod under LoadAware's 80 %
// threshold, so only the thermal prediction can refuse it.
const aheadMaxUtilization = 0.77

// aheadTarget picks the CPU node (no GPUs, no fan fault) that a pod of the
// fewest whole CPUs would take, by the simulation's physics, 3°C past its
// limit - margin once it settles, within aheadMaxUtilization. False when
// no node can be.
func (s *sandbox) aheadTarget() (string, int, float64, bool) {
	best, bestCPUs, bestC := "", 0, 0.0
	for _, n := range s.sortedNodes() {
		if len(n.Spec.GPUs) > 0 || n.Spec.Name == s.res.Heat.Node {
			continue
		}
		capacity := float64(n.Spec.Host.CPUs)
		limit := float64(n.Spec.Host.CritMilliCelsius)/1000 - float64(thermalMarginMilli)/1000
		u0 := n.Utilization()
		for c := 1; (u0 + float64(c)/capacity) <= aheadMaxUtilization; c++ {
			if t, _ := n.Spec.Steady(u0+float64(c)/capacity, 0); t >= limit+3 {
				if best == "" || c < bestCPUs {
					best, bestCPUs, bestC = n.Spec.Name, c, t
				}
				break
			}
		}
	}
	return best, bestCPUs, bestC, best != ""
}

// aheadPhase places a pod, pinned to a cool node, that would take the node
// past its limit - margin once it settles: EnergyAware's thermal model
// must refuse it. The pod is then deleted.
func (s *sandbox) aheadPhase(ctx context.Context) error {
	name, cpus, settles, ok := s.aheadTarget()
	if !ok {
		why := fmt.Sprintf("no CPU node in this fleet would settle past its limit - %d°C under a pod within %.0f%% CPU",
			thermalMarginMilli/1000, 100*aheadMaxUtilization)
		s.res.skip(phaseAhead, why)
		s.printf("\n  heat ahead: %s; skipped\n", why)
		return nil
	}
	// The phase is about the prediction: wait for the node's thermal model
	// (an agent withdraws one that stopped predicting, and relearns it).
	modelCtx, cancelModel := context.WithTimeout(ctx, aheadModelWait)
	defer cancelModel()
	if err := s.watch.waitFor(modelCtx, name+"'s thermal model", func(v *view) bool {
		t := v.telemetry[name]
		return t != nil && t.Models != nil && t.Models.HasThermal
	}); err != nil {
		if ctx.Err() != nil {
			return err
		}
		why := fmt.Sprintf("%s published no thermal model within %v", name, aheadModelWait)
		s.res.skip(phaseAhead, why)
		s.printf("\n  heat ahead: %s; skipped\n", why)
		return nil
	}
	// The pod is sized to the node's load by the simulation; the scheduler
	// also counts the pods placed there until a sample at least
	// estimate.Hold(interval) after they run retires
	// them. Wait for that, so only the thermal prediction can refuse it.
	var retiredBy time.Time
	s.read(func(v *view) {
		for _, p := range v.bound {
			if p.Node == name && p.At.After(retiredBy) {
				retiredBy = p.At
			}
		}
	})
	retiredBy = retiredBy.Add(estimate.Hold(s.opts.Interval) + s.opts.Interval)
	if err := s.watch.waitFor(ctx, name+"'s reservations to retire", func(v *view) bool {
		t := v.telemetry[name]
		return t != nil && t.SampleTime.After(retiredBy)
	}); err != nil {
		return err
	}
	s.read(func(v *view) {
		s.printf("\n  heat ahead: %s asks for %d CPUs on %s (nodeSelector), cool now (%s);\n    with it the node would settle at %.1f°C (the simulation's physics)\n",
			aheadPod, cpus, name, describe(v.telemetry[name]), settles)
	})
	pod := podSpec{name: aheadPod, phase: phaseAhead, cpu: fmt.Sprint(cpus), memory: "1Gi", nodeName: name}
	s.res.Ahead.Ran = true
	s.res.ran(phaseAhead)
	if err := s.createPods(ctx, demoNamespace, s.opts.Profile, []podSpec{pod}, 0); err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := s.watch.waitFor(waitCtx, aheadPod+" to be refused on its predicted temperature, or placed", func(v *view) bool {
		if _, bound := v.bound[demoNamespace+"/"+aheadPod]; bound {
			return true
		}
		for _, m := range s.res.Rejections[aheadPod] {
			if strings.Contains(m, "predicted steady temperature") {
				return true
			}
		}
		return false
	})
	if err != nil && ctx.Err() != nil {
		return err
	}
	s.read(func(v *view) {
		if p, bound := v.bound[demoNamespace+"/"+aheadPod]; bound {
			s.printf("    %s was placed on %s (%s)\n", aheadPod, p.Node, p.Why)
			return
		}
		for _, m := range s.res.Rejections[aheadPod] {
			s.res.Ahead.Refused = s.res.Ahead.Refused || strings.Contains(m, "predicted steady temperature")
		}
		if s.res.Ahead.Refused {
			s.printf("    %s refused on its predicted temperature:\n", aheadPod)
		} else {
			s.printf("    %s NOT refused on its predicted temperature:\n", aheadPod)
		}
		for _, m := range s.res.Rejections[aheadPod] {
			s.printf("      %s\n", m)
		}
	})
	zero := int64(0)
	if err := s.kube.CoreV1().Pods(demoNamespace).Delete(ctx, aheadPod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return fmt.Errorf("deleting %s: %w", aheadPod, err)
	}
	return nil
}
