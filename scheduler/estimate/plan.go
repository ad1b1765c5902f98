// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// Plan counts demand d toward node as a reservation, until Unplan or
// ClearPlans: the descheduler's what-if for a pod it means to move there,
// so that the plugins judging the next destination of the same cycle see
// it, as the scheduler's would once the pod lands. A plan is not a pod:
// no sample retires it, no calibration counts it, and undoing it neither
// disturbs the node's calibration nor releases pods the node kept out.
// key names the plan (the pod's UID); planning a key twice on a node
// keeps the first.
func (b *Book) Plan(node string, key types.UID, d Demand) {
	b.mu.Lock()
	defer b.mu.Unlock()
	uid := planUID(key)
	m := b.pods[node]
	if m == nil {
		m = map[types.UID]*reservation{}
		b.pods[node] = m
	}
	if _, ok := m[uid]; ok {
		return
	}
	m[uid] = &reservation{Demand: d, at: b.cache.Now(), planned: true}
	if b.plans == nil {
		b.plans = map[types.UID]string{}
	}
	b.plans[uid] = node
	b.publish(node, b.entry(node))
}

// Unplan undoes the plan key made on node.
func (b *Book) Unplan(node string, key types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unplan(node, planUID(key))
}

func (b *Book) unplan(node string, uid types.UID) {
	delete(b.plans, uid)
	if res, ok := b.pods[node][uid]; !ok || !res.planned {
		return // expired, or its node gone
	}
	delete(b.pods[node], uid)
	b.publish(node, b.lookup(node))
}

// ClearPlans undoes every plan.
func (b *Book) ClearPlans() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, uid := range slices.Collect(maps.Keys(b.plans)) {
		b.unplan(b.plans[uid], uid)
	}
}

// Plans is the number of plans counted now.
func (b *Book) Plans() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.plans)
}

// planUID keeps a plan apart from the pod's own reservation, on its node
// or another.
func planUID(key types.UID) types.UID { return "plan/" + key }
