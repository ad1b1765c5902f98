// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/telesched/telesched/agent/publisher"
	"github.com/telesched/telesched/scheduler/estimate"
)

// Refusal is a pod of the scenario that the racks' power budgets kept out:
// it stayed pending, rejected by PowerBudget, after every reservation that
// could have held it back was retired.
type Refusal struct {
	Pod, Phase string
	// Reasons are the PowerBudget reasons of its last FailedScheduling
	// event, Message the whole of it (other nodes' reasons too).
	Reasons []string
	Message string
}

// budgetReason is a PowerBudget reason in a FailedScheduling message (the
// scheduler joins the reasons of every node into one message):
// "PowerBudget rack-gpu: measured 4009W + reserved 0W + this pod 1384W =
// 5393W > budget 4600W - reserve 100W (2 nodes)", or a node without
// power telemetry under a budget that sets no unmeteredNodeWatts.
var budgetReason = regexp.MustCompile(`PowerBudget [^ :]+: measured [^()]*\(\d+ nodes\)|node has no [^,]*? and PowerBudget [^ ]+ sets no unmeteredNodeWatts \([^)]*\)`)

// budgetReasons are the PowerBudget reasons of a FailedScheduling message.
func budgetReasons(msg string) []string {
	return budgetReason.FindAllString(msg, -1)
}

// budgetRefusedNodes is how many nodes a FailedScheduling message says a
// PowerBudget refused: the scheduler prefixes each distinct reason with
// the count of nodes that gave it ("2 PowerBudget rack-gpu: ...").
func budgetRefusedNodes(msg string) int {
	n := 0
	for _, m := range budgetCount.FindAllStringSubmatch(msg, -1) {
		k, _ := strconv.Atoi(m[1])
		n += k
	}
	return n
}

// budgetRefusal is pod's entry in UnitsResult.ByBudget, "pod (its
// PowerBudget reasons)", when last, the scheduler's last word on it, has
// a PowerBudget refuse at least nodes nodes (those that had its units
// free): the budget refused it rightly. ok is false otherwise.
func budgetRefusal(pod, last string, nodes int) (entry string, ok bool) {
	if budgetRefusedNodes(last) < nodes {
		return "", false
	}
	return pod + " (" + strings.Join(budgetReasons(last), "; ") + ")", true
}

// budgetCount is a budget reason (budgetReason) with its node count.
var budgetCount = regexp.MustCompile(`(?:^|[:,] )(\d+) (?:` + budgetReason.String() + `)`)

// budgetSettle is how long the scenario waits, after the last binding or
// creation of its pods, before it calls pending pods refused by the
// racks' budgets: a placed pod counts toward its rack until a sample taken
// estimate.Hold after it runs (2 intervals, at least 10 s), a node whose load
// has settled writes its next sample at its heartbeat, and a pod the
// sample lets in is retried within the scheduler's longest backoff (10 s)
// of the activation that requeues it (rejected.OnTelemetry); two intervals more for the
// binding to reach the watcher.
func budgetSettle(interval time.Duration) time.Duration {
	return estimate.Hold(interval) + publisher.DefaultHeartbeat + 10*time.Second + 2*interval
}

// refusedByBudget reports whether every one of pending (the scenario's
// pods not bound yet) is refused by the racks' budgets: its last
// FailedScheduling message names a PowerBudget reason and nothing was
// bound or created for settle since quiet. It returns them with their
// reasons; ok is false while any pending pod may still be placed, or waits
// for something else.
func refusedByBudget(pending []podSpec, rejections map[string][]string, quiet, now time.Time, settle time.Duration) ([]Refusal, bool) {
	if len(pending) == 0 || now.Sub(quiet) < settle {
		return nil, false
	}
	var out []Refusal
	for _, p := range pending {
		msgs := rejections[p.name]
		if len(msgs) == 0 {
			return nil, false
		}
		reasons := budgetReasons(msgs[len(msgs)-1])
		if len(reasons) == 0 {
			return nil, false
		}
		out = append(out, Refusal{Pod: p.name, Phase: p.phase, Reasons: reasons, Message: msgs[len(msgs)-1]})
	}
	return out, true
}
