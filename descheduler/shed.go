// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/telesched/telesched/descheduler/minset"
)

// Move is a pod a plugin may move and the watts its leaving frees.
type Move struct {
	Pod   *v1.Pod
	Frees float64
	// Refit, when set, is what the pod frees once gone, pods of its node
	// already chosen, have left (minset.Refit).
	Refit func(gone []*v1.Pod) float64
}

// Shed evicts, for plugin, the fewest of moves whose watts reach need
// (minset.ChooseWhere, each pod's watts refit to the pods of its node
// chosen before it), at most limit of them (0: no limit): only pods the
// evictor's PreEvictionFilter lets go and for which sim finds a
// destination (among the nodes exclude does not refuse; nil: any), each
// planned there for the rest of the cycle, so the next pod's destination
// counts it. A pod without a destination is reported (NoDestination).
// When the pods with a destination cannot meet need together, only the
// one that frees most goes: its node or budget is judged again on samples
// taken after it left, not emptied up to the limits on one reading.
// It returns the moves it acted on (evicted or, in dry-run, reported),
// each with what it frees in the order they went.
func (g *Gate) Shed(ctx context.Context, ev frameworktypes.Evictor, sim *Simulator, plugin, why string,
	moves []Move, need float64, limit int, exclude func(node string) string) []Move {
	byKey := make(map[string]Move, len(moves))
	cands := make([]minset.Candidate, 0, len(moves))
	for _, m := range moves {
		key := podKey(m.Pod)
		byKey[key] = m
		var prio int32
		if m.Pod.Spec.Priority != nil {
			prio = *m.Pod.Spec.Priority
		}
		cands = append(cands, minset.Candidate{Key: key, Group: m.Pod.Spec.NodeName, Frees: m.Frees, Priority: prio})
	}
	refit := func(c minset.Candidate, gone []minset.Candidate) float64 {
		m := byKey[c.Key]
		if m.Refit == nil {
			return c.Frees
		}
		pods := make([]*v1.Pod, len(gone))
		for i, g := range gone {
			pods[i] = byKey[g.Key].Pod
		}
		return m.Refit(pods)
	}
	dests := map[string]string{}
	chosen, met := minset.ChooseWhere(cands, need, refit, func(c minset.Candidate) bool {
		pod := byKey[c.Key].Pod
		if !ev.PreEvictionFilter(pod) {
			return false
		}
		dest, whyNot := sim.Destination(ctx, pod, exclude)
		if dest == "" {
			g.NoDestination(pod, plugin, why, whyNot)
			return false
		}
		if err := sim.Plan(ctx, pod, dest); err != nil {
			klog.FromContext(ctx).Error(err, "Planning a move", "pod", klog.KObj(pod), "destination", dest)
			return false
		}
		dests[c.Key] = dest
		return true
	})
	keep := len(chosen)
	if !met && keep > 1 {
		var freed float64
		for _, c := range chosen {
			freed += c.Frees
		}
		klog.FromContext(ctx).Info("Need not met by the pods with a destination: one pod goes, the rest wait for a sample taken after it left",
			"plugin", plugin, "needWatts", need, "freedWatts", freed, "candidates", keep, "reason", why)
		keep = 1
	}
	if limit > 0 && keep > limit {
		keep = limit
	}
	for _, c := range chosen[keep:] {
		sim.Unplan(ctx, byKey[c.Key].Pod)
	}
	var acted []Move
	for _, c := range chosen[:keep] {
		pod := byKey[c.Key].Pod
		switch g.Evict(ctx, ev, plugin, pod, sim.Node(dests[c.Key]), fmt.Sprintf("%s; pod frees ~%.0fW", why, c.Frees)) {
		case ResultEvicted, ResultWouldEvict:
			acted = append(acted, Move{Pod: pod, Frees: c.Frees})
		default:
			sim.Unplan(ctx, pod) // still on its node
		}
	}
	return acted
}
