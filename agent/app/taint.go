// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/telesched/telesched/agent/kube"
	"github.com/telesched/telesched/agent/status"
	"github.com/telesched/telesched/internal/text"
)

// The overheating taint, the Node condition that says why, and the Events
// recorded when the taint is set and removed. deploy/policy/node-taint.yaml
// lets the agent write this taint and this condition of its own Node and
// nothing else; TestNodeTaintPolicyNames keeps the names in step.
const (
	OverheatingTaintKey          = "telesched.io/overheating"
	OverheatingTaintEffect       = "NoSchedule"
	OverheatingConditionType     = "TeleschedOverheating"
	EventOverheatingTaintAdded   = "OverheatingTaintAdded"
	EventOverheatingTaintRemoved = "OverheatingTaintRemoved"
)

// taintConflictRetries is how many times a taint write that lost a race
// with another writer of the Node's taints (a Conflict) is tried again at
// once, each after a fresh read.
const taintConflictRetries = 3

// NodeTaint keeps the overheating taint and condition of the agent's Node
// in step with the node's heat. Update runs the hysteresis on the sampling
// loop's goroutine, in sample order; the writes happen on a goroutine of
// their own, so a slow API server never delays sampling. A write that
// fails is tried again with the next sample, no sooner than retry after
// the failure, the wait doubling with every failure in a row up to
// retryMax (an agent whose RBAC lacks the Node writes, an older chart's,
// tries every retryMax rather than every sample).
type NodeTaint struct {
	client  *kube.Client
	node    string
	tracker *status.TaintTracker
	events  func(kube.Event)
	clock   clock.Clock
	retry   time.Duration
	// retryMax bounds wait, the time after a failure before the next
	// try: retry after one failure, doubling with each in a row.
	retryMax time.Duration
	// heartbeat is how often the condition's lastHeartbeatTime is
	// written while nothing changes (0: only on change), so a condition
	// whose agent stopped can be told from a live one by its age.
	heartbeat time.Duration

	queue chan status.TaintState
	done  chan struct{}

	// Writer goroutine only.
	written    bool
	wroteTaint bool
	failedAt   time.Time
	wait       time.Duration
	beatAt     time.Time // when the condition was last written
}

// DefaultConditionHeartbeat is how often the agent writes its Node's
// TeleschedOverheating condition while nothing changes: the agent's
// NodeTelemetry heartbeat (--heartbeat, 5m), as the kubelet reports its
// own conditions every nodeStatusReportFrequency (5m). A condition whose
// lastHeartbeatTime is older than a few of them is no agent's word any
// more. --overheating-condition-heartbeat changes it.
const DefaultConditionHeartbeat = 5 * time.Minute

// NewNodeTaint reads whether the Node carries the taint already (an agent
// restarted on a hot node keeps it and its hold) and starts the writer,
// which runs until Shutdown. events records an Event (nil: none).
func NewNodeTaint(ctx context.Context, client *kube.Client, node string, heat status.HeatConfig, hold, retry, retryMax, heartbeat time.Duration,
	clk clock.Clock, events func(kube.Event)) *NodeTaint {
	logger := klog.FromContext(ctx)
	tainted := false
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	n, err := client.GetNode(rctx, node)
	cancel()
	if err != nil {
		// Without the Node's taints the agent starts untainted: a hot node
		// is tainted by its next sample; a cool one loses a taint it may
		// still have been holding.
		logger.Error(err, "reading the Node's overheating taint at start; assuming none", "node", node)
	} else {
		tainted = slices.ContainsFunc(n.Taints, isOverheatingTaint)
	}
	t := &NodeTaint{
		client: client, node: node, tracker: status.NewTaintTracker(heat, hold, tainted),
		events: events, clock: clk, retry: retry, retryMax: max(retry, retryMax), heartbeat: heartbeat,
		queue: make(chan status.TaintState, 1), done: make(chan struct{}),
	}
	go t.run(ctx)
	return t
}

func isOverheatingTaint(raw json.RawMessage) bool { return kube.TaintKey(raw) == OverheatingTaintKey }

// Update runs the hysteresis on one sample's heat and hands the outcome
// to the writer, replacing one it has not taken yet; it returns the
// outcome.
func (t *NodeTaint) Update(now time.Time, h status.HeatState) status.TaintState {
	st := t.tracker.Update(now, h)
	for {
		select {
		case t.queue <- st:
			return st
		default:
			select {
			case <-t.queue:
			default:
			}
		}
	}
}

// Shutdown stops the writer, after the write in progress.
func (t *NodeTaint) Shutdown() {
	close(t.queue)
	<-t.done
}

func (t *NodeTaint) run(ctx context.Context) {
	defer close(t.done)
	logger := klog.FromContext(ctx)
	for st := range t.queue {
		if ctx.Err() != nil {
			continue // drain until Shutdown
		}
		if t.written && t.wroteTaint == st.Tainted && !t.beatDue() {
			continue
		}
		if !t.failedAt.IsZero() && t.clock.Since(t.failedAt) < t.wait {
			continue
		}
		if err := t.write(ctx, st); err != nil {
			t.failedAt = t.clock.Now()
			t.wait = min(t.retryMax, max(t.retry, 2*t.wait))
			msg := "writing the Node's overheating taint failed; trying again"
			if apierrors.IsForbidden(err) {
				msg = "writing the Node's overheating taint was forbidden: the agent's RBAC (an older chart's?) lacks patch on nodes and nodes/status; " +
					"upgrade the chart, or turn the taint off with --overheating-taint=false; trying again"
			}
			logger.Error(err, msg, "node", t.node, "tainted", st.Tainted, "retryIn", t.wait)
			continue
		}
		t.failedAt, t.wait, t.written, t.wroteTaint = time.Time{}, 0, true, st.Tainted
	}
}

// beatDue reports whether the condition's heartbeat is due.
func (t *NodeTaint) beatDue() bool {
	return t.heartbeat > 0 && !t.beatAt.IsZero() && t.clock.Since(t.beatAt) >= t.heartbeat
}

// write makes the Node carry the taint or not, and its condition say so,
// and records an Event when it set or removed the taint.
func (t *NodeTaint) write(ctx context.Context, st status.TaintState) error {
	logger := klog.FromContext(ctx)
	var n *kube.Node
	changed := false
	for try := 0; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		var err error
		n, err = t.client.GetNode(rctx, t.node)
		cancel()
		if err != nil {
			return fmt.Errorf("reading Node %s: %w", t.node, err)
		}
		has := slices.ContainsFunc(n.Taints, isOverheatingTaint)
		if has == st.Tainted {
			break
		}
		taints := slices.DeleteFunc(slices.Clone(n.Taints), isOverheatingTaint)
		if st.Tainted {
			raw, err := json.Marshal(map[string]string{"key": OverheatingTaintKey, "effect": OverheatingTaintEffect})
			if err != nil {
				return err
			}
			taints = append(taints, raw)
		}
		rctx, cancel = context.WithTimeout(ctx, requestTimeout)
		err = t.client.SetNodeTaints(rctx, t.node, n.ResourceVersion, taints)
		cancel()
		if err == nil {
			changed = true
			break
		}
		if !apierrors.IsConflict(err) || try >= taintConflictRetries {
			return fmt.Errorf("setting the taint %s on Node %s to %v: %w", OverheatingTaintKey, t.node, st.Tainted, err)
		}
	}
	if changed {
		logger.Info("overheating taint", "node", t.node, "tainted", st.Tainted, "reason", st.Reason, "message", st.Message)
	}

	want := metav1.ConditionFalse
	if st.Tainted {
		want = metav1.ConditionTrue
	}
	i := slices.IndexFunc(n.Conditions, func(c kube.NodeCondition) bool { return c.Type == OverheatingConditionType })
	if changed || i < 0 || n.Conditions[i].Status != string(want) || t.beatDue() {
		now := metav1.NewTime(t.clock.Now())
		cond := kube.NodeCondition{
			Type: OverheatingConditionType, Status: string(want),
			LastHeartbeatTime: now, LastTransitionTime: now,
			Reason: st.Reason, Message: text.Truncate(st.Message, maxEventMessage),
		}
		if i >= 0 && n.Conditions[i].Status == string(want) {
			cond.LastTransitionTime = n.Conditions[i].LastTransitionTime
		}
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		err := t.client.SetNodeCondition(rctx, t.node, cond)
		cancel()
		if err != nil {
			return fmt.Errorf("setting the condition %s of Node %s: %w", OverheatingConditionType, t.node, err)
		}
		t.beatAt = now.Time
	}
	if changed && t.events != nil {
		ev := kube.Event{Type: kube.EventTypeNormal, Reason: EventOverheatingTaintRemoved}
		if st.Tainted {
			ev = kube.Event{Type: kube.EventTypeWarning, Reason: EventOverheatingTaintAdded}
		}
		ev.Message = text.Truncate(fmt.Sprintf("%s %s:%s: %s", map[bool]string{true: "tainted", false: "removed the taint"}[st.Tainted],
			OverheatingTaintKey, OverheatingTaintEffect, st.Message), maxEventMessage)
		t.events(ev)
	}
	return nil
}

// ReasonTaintTurnedOff is the condition's reason on a Node whose agent
// runs with --overheating-taint=false.
const ReasonTaintTurnedOff = "TaintTurnedOff"

// ClearOverheatingTaint is what an agent run with --overheating-taint=false
// does at start: it removes the overheating taint an earlier agent left on
// its Node and, where that agent left the condition, sets it False with
// reason TaintTurnedOff, so no taint outlives the setting that made it and
// no condition says True with nobody keeping it. A Node with neither is
// not written.
func ClearOverheatingTaint(ctx context.Context, client *kube.Client, node string, now time.Time) error {
	for try := 0; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		n, err := client.GetNode(rctx, node)
		cancel()
		if err != nil {
			return fmt.Errorf("reading Node %s: %w", node, err)
		}
		if slices.ContainsFunc(n.Taints, isOverheatingTaint) {
			rctx, cancel = context.WithTimeout(ctx, requestTimeout)
			err = client.SetNodeTaints(rctx, node, n.ResourceVersion, slices.DeleteFunc(slices.Clone(n.Taints), isOverheatingTaint))
			cancel()
			if apierrors.IsConflict(err) && try < taintConflictRetries {
				continue
			}
			if err != nil {
				return fmt.Errorf("removing the taint %s from Node %s: %w", OverheatingTaintKey, node, err)
			}
			klog.FromContext(ctx).Info("overheating taint removed: --overheating-taint=false", "node", node)
		}
		i := slices.IndexFunc(n.Conditions, func(c kube.NodeCondition) bool { return c.Type == OverheatingConditionType })
		if i < 0 || (n.Conditions[i].Status == string(metav1.ConditionFalse) && n.Conditions[i].Reason == ReasonTaintTurnedOff) {
			return nil
		}
		at := metav1.NewTime(now)
		cond := kube.NodeCondition{Type: OverheatingConditionType, Status: string(metav1.ConditionFalse),
			LastHeartbeatTime: at, LastTransitionTime: at, Reason: ReasonTaintTurnedOff,
			Message: "the agent runs with --overheating-taint=false: it neither taints this node nor keeps this condition"}
		if n.Conditions[i].Status == string(metav1.ConditionFalse) {
			cond.LastTransitionTime = n.Conditions[i].LastTransitionTime
		}
		rctx, cancel = context.WithTimeout(ctx, requestTimeout)
		err = client.SetNodeCondition(rctx, node, cond)
		cancel()
		if err != nil {
			return fmt.Errorf("setting the condition %s of Node %s: %w", OverheatingConditionType, node, err)
		}
		return nil
	}
}
