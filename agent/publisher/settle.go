// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package publisher

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// Settler sits in front of a Publisher when the agent samples faster than
// it publishes. Rates (CPU utilization, watts) are measured between two
// samples, so the first sample after a change on the host straddles it and
// reads a value halfway between the old and the new. Offering every sample
// to the Publisher would write that half-measured value and, a sample
// later, the real one: two writes per change, the first of them wrong.
//
// A Settler holds back a sample whose measured values moved past their
// deadbands from the last published status until the move has settled:
// until the sample agrees, within the deadbands, with the one before it. It
// never holds back the first status, a heartbeat, a state change (see
// StateChange) or a move that has been pending for maxWait, so a signal
// that never settles is still published at least once per maxWait.
//
// Hold must see every sample in order; Published must be told of every
// write. A Settler is not safe for concurrent use.
type Settler struct {
	deadbands Deadbands
	heartbeat time.Duration
	maxWait   time.Duration
	clock     clock.PassiveClock

	published    *telemetryv1alpha1.NodeTelemetryStatus
	publishedAt  time.Time
	prev         *telemetryv1alpha1.NodeTelemetryStatus
	pendingSince time.Time // when a move past the deadbands was first seen
}

// NewSettler returns a Settler for a Publisher with these deadbands and
// heartbeat. maxWait is the longest a move is held back while it does not
// settle.
func NewSettler(d Deadbands, heartbeat, maxWait time.Duration, clk clock.PassiveClock) *Settler {
	return &Settler{deadbands: d, heartbeat: heartbeat, maxWait: maxWait, clock: clk}
}

// Hold takes the status of a new sample and says why it should not be
// offered to the Publisher yet, or returns "" when it should: the Publisher
// still decides whether it is worth a write.
func (s *Settler) Hold(st *telemetryv1alpha1.NodeTelemetryStatus) string {
	now := s.clock.Now()
	prev := s.prev
	s.prev = st
	switch {
	case s.published == nil:
		return "" // first: nothing to compare with
	case now.Sub(s.publishedAt) >= s.heartbeat:
		return ""
	case Change(s.published, st, s.deadbands) == "":
		s.pendingSince = time.Time{} // back within the deadbands
		return ""                    // the Publisher will find nothing to write
	case StateChange(s.published, st) != "":
		return ""
	}
	if s.pendingSince.IsZero() {
		s.pendingSince = now
	}
	moving := "no earlier sample"
	if prev != nil {
		if moving = Change(prev, st, s.deadbands); moving == "" {
			return "" // settled: two samples in a row agree
		}
	}
	if waited := now.Sub(s.pendingSince); waited < s.maxWait {
		return fmt.Sprintf("settling for %v: %s", waited, moving)
	}
	return "" // waited long enough: publish the latest value
}

// Published records that st was written at at.
func (s *Settler) Published(st *telemetryv1alpha1.NodeTelemetryStatus, at time.Time) {
	s.published, s.publishedAt = st, at
	s.pendingSince = time.Time{}
}
