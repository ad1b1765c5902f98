// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"fmt"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/apis/config"
)

// What every telesched plugin does the same way with telemetry.

// NoTelemetry marks, in a plugin's Score, a node without fresh telemetry;
// NormalizeMissing then gives it the lowest score of the others, so it is
// neither rejected nor favoured.
const NoTelemetry = -1

// RejectsStale reports whether Filter rejects a node whose telemetry is
// missing or stale (StaleStatus is then never nil): the Reject policy.
func RejectsStale(args config.TelemetryArgs) bool {
	return args.StaleTelemetryPolicy == config.StaleTelemetryReject
}

// StaleStatus is Filter's answer for a node whose telemetry is missing (n is
// nil) or older than args.TelemetryMaxAge at now: nothing under the Ignore
// policy, Unschedulable with the age under Reject. The age is the
// scheduler's: how long since its cache saw the node's last new sample.
// When the agent's clock is off, the reason says so, since that is the
// first thing an operator would suspect.
func StaleStatus(args config.TelemetryArgs, n *Node, now time.Time) *fwk.Status {
	if !RejectsStale(args) {
		return nil
	}
	if n == nil {
		return fwk.NewStatus(fwk.Unschedulable, "node has no NodeTelemetry (staleTelemetryPolicy Reject)")
	}
	var msg string
	switch {
	case n.Observed.IsZero():
		msg = "node telemetry has no sample of its agent's that the scheduler saw: its status was last written by someone else (no write of field manager " +
			AgentFieldManager + " on record), and counts as stale until the agent's next sample (staleTelemetryPolicy Reject)"
	case n.AgentReady && n.agentMaxAge > args.TelemetryMaxAge:
		msg = fmt.Sprintf("node telemetry is %s old > %s, the most while the node's agent pod is Ready (--telemetry-max-age-ready-agent; no new sample seen by the scheduler since; staleTelemetryPolicy Reject)",
			n.Age(now).Round(time.Second), n.agentMaxAge)
	default:
		msg = fmt.Sprintf("node telemetry is %s old > telemetryMaxAge %s (no new sample seen by the scheduler since, and no Ready agent pod seen on the node; staleTelemetryPolicy Reject)",
			n.Age(now).Round(time.Second), args.TelemetryMaxAge)
	}
	if n.Skewed {
		msg += "; " + skewNote(n)
	}
	return fwk.NewStatus(fwk.Unschedulable, msg)
}

// skewNote says how far the node's agent's clock was from the scheduler's.
func skewNote(n *Node) string {
	off := n.ClockOffset.Round(time.Second)
	if off < 0 {
		return fmt.Sprintf("its agent's clock was %s behind the scheduler's", -off)
	}
	return fmt.Sprintf("its agent's clock was %s ahead of the scheduler's", off)
}

// NormalizeMissing replaces NoTelemetry scores with the lowest other score,
// or MinScore when no node has telemetry.
func NormalizeMissing(scores fwk.NodeScoreList) {
	lowest := int64(fwk.MaxScore + 1)
	for _, s := range scores {
		if s.Score != NoTelemetry {
			lowest = min(lowest, s.Score)
		}
	}
	if lowest > fwk.MaxScore {
		lowest = fwk.MinScore
	}
	for i := range scores {
		if scores[i].Score == NoTelemetry {
			scores[i].Score = lowest
		}
	}
}
