// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// reading is one of the sandbox's own readings of the simulation during
// an after-placement phase: the hot node's package temperature, or a
// rack's watts, at a time.
type reading struct {
	At    time.Time
	Value float64
}

// secondsAtOrPast is how long, of the readings' span, the value was at or
// past limit: each reading holds until the next (the last one holds until
// end).
func secondsAtOrPast(rs []reading, limit float64, end time.Time) float64 {
	return secondsWhere(rs, end, func(v float64) bool { return v >= limit })
}

// secondsOver is secondsAtOrPast for a value strictly past limit (watts
// over a budget).
func secondsOver(rs []reading, limit float64, end time.Time) float64 {
	return secondsWhere(rs, end, func(v float64) bool { return v > limit })
}

// secondsWhere is how long, of the readings' span, past held for the
// value: each reading holds until the next (the last one until end).
func secondsWhere(rs []reading, end time.Time, past func(float64) bool) float64 {
	var total time.Duration
	for i, r := range rs {
		next := end
		if i+1 < len(rs) {
			next = rs[i+1].At
		}
		if past(r.Value) && next.After(r.At) {
			total += next.Sub(r.At)
		}
	}
	return total.Seconds()
}

// backUnder is how long after the readings first reached limit they were
// back under it for good (the last crossing back); -1 when they never
// reached it or never came back, 0 never reached.
func backUnder(rs []reading, limit float64) (seconds float64, reached, back bool) {
	var first, last time.Time
	for i, r := range rs {
		if r.Value >= limit {
			if first.IsZero() {
				first = r.At
			}
			last = time.Time{}
			continue
		}
		if !first.IsZero() && last.IsZero() && i > 0 {
			last = r.At
		}
	}
	if first.IsZero() {
		return 0, false, false
	}
	if last.IsZero() {
		return 0, true, false
	}
	return last.Sub(first).Seconds(), true, true
}

// eviction is one TeleschedEvicted Event on a pod of the after-placement
// phases: the pod, its lineage (the workload it is a replica of, which the
// sandbox re-creates under a new name), where it ran and the destination
// the descheduler checked ("" when the Event names none).
type eviction struct {
	Event, Pod, Lineage, From, Destination string
	// Stage is the phase it came in: stageFault or stageRack.
	Stage string
}

// The after-placement stages evictions are counted by.
const (
	stageFault = "fault"
	stageRack  = "rack"
)

// destinationRE reads the checked destination from a TeleschedEvicted
// Event's message (descheduler.Gate.Evict: "...; evicted from N,
// destination D (checked)").
var destinationRE = regexp.MustCompile(`destination (\S+) \(checked\)`)

// destinationOf is the node a TeleschedEvicted message names, or "".
func destinationOf(message string) string {
	if m := destinationRE.FindStringSubmatch(message); m != nil {
		return m[1]
	}
	return ""
}

// EvictionCounts are a pass's evictions, as the report counts them.
type EvictionCounts struct {
	// Evicted counts the TeleschedEvicted Events, one per evicted pod.
	Evicted int
	// NoDestination counts evicted pods whose Event names no checked
	// destination, or whose re-created replica was never bound.
	NoDestination int
	// Twice counts pods evicted more than once (two TeleschedEvicted
	// Events); WorkloadTwice workloads (lineages: a pod and the replicas
	// that re-create it) evicted more than once.
	Twice, WorkloadTwice int
	// AsChecked counts replicas bound on the destination the descheduler
	// checked; the rest went elsewhere (the scheduler chose again).
	AsChecked int
	// FromTarget counts the evictions from the nodes the stage acts on:
	// the hot node (stageFault), the rack's nodes (stageRack).
	FromTarget int
}

// countEvictions counts the evictions of evs in stage, from is the
// stage's target nodes: next maps an evicted pod to the node its replica
// was bound to ("" or absent: not bound).
func countEvictions(evs []eviction, next map[string]string, stage string, from ...string) EvictionCounts {
	var c EvictionCounts
	seen := map[string]bool{}
	perPod := map[string]int{}
	perLineage := map[string]int{}
	for _, e := range evs {
		if e.Stage != stage || seen[e.Event] { // an Event seen twice (an update)
			continue
		}
		seen[e.Event] = true
		lineage := e.Lineage
		if lineage == "" {
			lineage = e.Pod
		}
		perLineage[lineage]++
		if perPod[e.Pod]++; perPod[e.Pod] > 1 {
			continue
		}
		c.Evicted++
		if slices.Contains(from, e.From) {
			c.FromTarget++
		}
		n := next[e.Pod]
		switch {
		case e.Destination == "" || n == "":
			c.NoDestination++
		case n == e.Destination:
			c.AsChecked++
		}
	}
	for _, n := range perPod {
		if n > 1 {
			c.Twice++
		}
	}
	for _, n := range perLineage {
		if n > 1 {
			c.WorkloadTwice++
		}
	}
	return c
}

// beyondOracle is how many evictions from the target exceed the oracle's
// minimum (0 when within it; the oracle's -1, "no subset is enough",
// counts all of them).
func beyondOracle(fromTarget, oracleMin int) int {
	if oracleMin < 0 {
		return fromTarget
	}
	return max(0, fromTarget-oracleMin)
}

// afterVerdict fails a run whose pass with the descheduler broke what it
// promises: an evicted pod with no destination, a pod evicted twice, more
// than one eviction past the oracle's minimum, or the hot node (the rack)
// not back under its limit − margin (its limit) within the fault (the
// rise) or past its bound.
func (r *Result) afterVerdict() error {
	var errs []error
	for _, a := range r.After {
		if !a.Descheduler {
			continue
		}
		e, re := a.Evictions, a.RackEvictions
		if n := e.NoDestination + re.NoDestination; n > 0 {
			errs = append(errs, fmt.Errorf("after placement: %d pods evicted with no destination", n))
		}
		if n := e.Twice + re.Twice; n > 0 {
			errs = append(errs, fmt.Errorf("after placement: %d pods evicted twice", n))
		}
		errs = append(errs, stageVerdict(a.HotNode, a.HotNode, fmt.Sprintf("%.1f°C", a.LimitCelsius), fmt.Sprintf("the fault (%v)", faultHold),
			e.FromTarget, a.OracleMin, a.Reached, a.BackUnder, a.BackUnderSeconds, a.BoundSeconds)...)
		if a.Rack != "" {
			errs = append(errs, stageVerdict(a.Rack+"'s nodes", a.Rack, fmt.Sprintf("its limit %.0fW", a.RackLimitWatts), fmt.Sprintf("the rise (%v)", rackHold),
				re.FromTarget, a.RackOracleMin, a.RackReached, a.RackBackUnder, a.RackBackUnderSeconds, a.RackBoundSeconds)...)
		}
	}
	return errors.Join(errs...)
}

// stageVerdict is what afterVerdict finds wrong with one stage: more than
// one eviction from target past the oracle's minimum, or subject not back
// under limit within the stage (within) or past its bound.
func stageVerdict(target, subject, limit, within string, fromTarget, oracleMin int, reached, back bool, seconds, bound float64) []error {
	var errs []error
	if b := beyondOracle(fromTarget, oracleMin); b > 1 {
		errs = append(errs, fmt.Errorf("after placement: %d evictions from %s, %d past the oracle's minimum %d", fromTarget, target, b, oracleMin))
	}
	switch {
	case reached && !back:
		errs = append(errs, fmt.Errorf("after placement: %s not back under %s within %s", subject, limit, within))
	case back && seconds > bound:
		errs = append(errs, fmt.Errorf("after placement: %s back under %s after %.1fs, past the bound %.1fs", subject, limit, seconds, bound))
	}
	return errs
}
