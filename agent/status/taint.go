// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"fmt"
	"time"
)

// DefaultTaintHold is how long a tainted node must stay cool before its
// overheating taint is removed: a few of a server's thermal time constants
// are minutes, and a node let back into scheduling at the first cool sample
// is hot again as soon as the pods that were waiting land on it.
const DefaultTaintHold = 2 * time.Minute

// TaintState is the node's overheating taint after one sample.
type TaintState struct {
	// Tainted is whether the node should carry the taint.
	Tainted bool
	// Changed is true when Tainted flipped with this sample.
	Changed bool
	// Reason and Message say why, for the Node condition and the Event.
	Reason  string
	Message string
}

// Reasons of the Node condition TeleschedOverheating (besides the heat
// reasons ReasonNearThermalLimit and ReasonThermalThrottling, which it
// takes from the node's heat when the taint is set).
const (
	ReasonCooledDown = "CooledDown"
)

// TaintTracker sets a node's overheating taint while the node is too hot
// and removes it only after the node has stayed cool for a hold time. Too
// hot is the Overheating condition (HeatTracker: headroom at or below
// HotHeadroomMilliCelsius, or throttling CPUs); cool is headroom at or
// above CoolHeadroomMilliCelsius, the margin plus the hysteresis, without
// throttling, in every sample of the hold: a sample between the two
// restarts the hold. A node with no thermal data counts as cool: nothing
// says it is hot.
type TaintTracker struct {
	cfg       HeatConfig
	hold      time.Duration
	tainted   bool
	coolSince time.Time
}

// NewTaintTracker returns a tracker that starts tainted or not (the taint
// the Node carries when the agent starts, so a restart neither drops a
// taint nor skips its hold).
func NewTaintTracker(cfg HeatConfig, hold time.Duration, tainted bool) *TaintTracker {
	return &TaintTracker{cfg: cfg, hold: hold, tainted: tainted}
}

// Tainted reports whether the node should carry the taint now.
func (t *TaintTracker) Tainted() bool { return t.tainted }

// Update takes the node's heat in the sample taken at now.
func (t *TaintTracker) Update(now time.Time, h HeatState) TaintState {
	was := t.tainted
	hr := h.Headroom
	cool := !h.Hot && (!h.Known || !hr.Known || hr.MilliCelsius >= t.cfg.CoolHeadroomMilliCelsius)
	switch {
	case h.Hot:
		t.tainted, t.coolSince = true, time.Time{}
	case !t.tainted:
	case !cool:
		t.coolSince = time.Time{}
	case t.coolSince.IsZero():
		t.coolSince = now
		t.tainted = t.hold > 0
	case now.Sub(t.coolSince) >= t.hold:
		t.tainted = false
	}
	st := TaintState{Tainted: t.tainted, Changed: t.tainted != was}
	switch {
	case h.Hot:
		st.Reason = h.Reason
		st.Message = fmt.Sprintf("%s; the taint is removed once the headroom has stayed at or above %s (margin %s + hysteresis %s) for %v",
			h.Message, celsius(t.cfg.CoolHeadroomMilliCelsius), celsius(t.cfg.HotHeadroomMilliCelsius),
			celsius(t.cfg.CoolHeadroomMilliCelsius-t.cfg.HotHeadroomMilliCelsius), t.hold)
	case t.tainted && cool:
		st.Reason = ReasonCooledDown
		st.Message = fmt.Sprintf("%s; cool since %s, the taint is removed after %v", h.Message, t.coolSince.UTC().Format(time.RFC3339), t.hold)
	case t.tainted:
		st.Reason = ReasonNearThermalLimit
		st.Message = fmt.Sprintf("%s; not yet back at %s headroom, the taint stays", h.Message, celsius(t.cfg.CoolHeadroomMilliCelsius))
	case st.Changed:
		st.Reason = ReasonCooledDown
		st.Message = fmt.Sprintf("%s; at or above %s headroom for %v", h.Message, celsius(t.cfg.CoolHeadroomMilliCelsius), t.hold)
	default:
		st.Reason, st.Message = h.Reason, h.Message
	}
	return st
}
