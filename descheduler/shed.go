// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
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

// FindDestination finds a checked destination for pod, given the pods
// already planned onto nodes this cycle; "" and why not when there is none
// (Checker.Destination, Checker.DestinationOutside).
type FindDestination func(ctx context.Context, pod *v1.Pod, planned map[string][]*v1.Pod) (dest, whyNot string)

// Shed evicts, for plugin, the fewest of moves whose watts reach need
// (minset.ChooseWhere, each pod's watts refit to the pods of its node
// chosen before it), at most limit of them (0: no limit): only pods the
// evictor's PreEvictionFilter lets go and for which find names a
// destination; a pod without one is reported (NoDestination). It returns
// how many it acted on (evicted or, in dry-run, reported).
func (g *Gate) Shed(ctx context.Context, ev frameworktypes.Evictor, nodes corelisters.NodeLister, plugin, why string,
	moves []Move, need float64, limit int, find FindDestination) int {
	byKey := make(map[string]Move, len(moves))
	cands := make([]minset.Candidate, 0, len(moves))
	for _, m := range moves {
		key := m.Pod.Namespace + "/" + m.Pod.Name
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
	planned := map[string][]*v1.Pod{}
	dests := map[string]*v1.Node{}
	chosen, _ := minset.ChooseWhere(cands, need, refit, func(c minset.Candidate) bool {
		pod := byKey[c.Key].Pod
		if !ev.PreEvictionFilter(pod) {
			return false
		}
		dest, whyNot := find(ctx, pod, planned)
		if dest == "" {
			g.NoDestination(pod, plugin, why, whyNot)
			return false
		}
		dn, err := nodes.Get(dest)
		if err != nil {
			return false
		}
		planned[dest] = append(planned[dest], pod)
		dests[c.Key] = dn
		return true
	})
	if limit > 0 && len(chosen) > limit {
		chosen = chosen[:limit]
	}
	acted := 0
	for _, c := range chosen {
		switch g.Evict(ctx, ev, plugin, byKey[c.Key].Pod, dests[c.Key], fmt.Sprintf("%s; pod frees ~%.0fW", why, c.Frees)) {
		case ResultEvicted, ResultWouldEvict:
			acted++
		}
	}
	return acted
}
