// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package rejected

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// Pick names the recorded pods that a node's NodeTelemetry change from
// prev (nil: the node is new to the cache) to cur lets in by the plugin's
// Filter predicate: in general ix.Select with the predicate on cur, after
// a test of the node alone that skips most changes.
type Pick func(prev, cur *telemetry.Node) []types.NamespacedName

// SelectChange is Select for a NodeTelemetry change from prev (nil: the
// node is new to the cache) on node: a new node was not there when Filter
// rejected the pods, so none is passed over for not having been rejected
// on it.
func (ix *Index[N]) SelectChange(prev *telemetry.Node, node *v1.Node, may func(N) bool) []types.NamespacedName {
	return ix.sel(node, prev != nil, may)
}

// change is one view the cache stored for a node, with the one before it.
type change struct{ prev, cur *telemetry.Node }

// activator activates the pods a plugin's Pick names for each change the
// telemetry cache stores.
type activator[N any] struct {
	plugin   string
	ix       *Index[N]
	pick     Pick
	pods     corelisters.PodLister
	activate fwk.PodActivator
	changes  *inbox[change]
}

// OnTelemetry makes every view c stores (an added or updated
// NodeTelemetry, or one restamped when its agent's readiness changes)
// activate, through activate (the framework's handle), the pods pick names
// for it, until ctx ends; pods are read from the scheduler's informers, f.
// This takes the place of a NodeTelemetry event registered with the
// scheduling queue, which would walk every unschedulable pod, whoever
// rejected it, on every write.
//
// The cache's watcher only queues the change; while the index holds a
// pod, pick runs, and the pods are looked up and activated, on a goroutine of
// its own, never under the cache's lock or the scheduling queue's; each
// pod activated counts in telesched_scheduler_pods_activated_total. Each
// change is judged on its own, in order, as the queue would judge its
// event: two changes folded into one could hide a pod rejected on the view
// between them.
func (ix *Index[N]) OnTelemetry(ctx context.Context, plugin string, c *telemetry.Cache, f informers.SharedInformerFactory, activate fwk.PodActivator, pick Pick) {
	registerMetrics()
	a := &activator[N]{plugin: plugin, ix: ix, pick: pick, pods: f.Core().V1().Pods().Lister(), activate: activate, changes: newInbox[change]()}
	c.Watch(a.note)
	go a.changes.run(ctx, func(logger klog.Logger, changes []change) {
		for _, ch := range changes {
			a.judge(logger, ch)
		}
	})
}

// note is the cache's Watcher; it runs with the cache locked, so it takes
// no lock but the inbox's.
func (a *activator[N]) note(_ string, prev, cur *telemetry.Node) {
	if cur != nil { // a removal lets no pod in
		a.changes.put(change{prev: prev, cur: cur})
	}
}

// judge activates the pods ch lets in.
func (a *activator[N]) judge(logger klog.Logger, ch change) {
	if a.ix.Len() == 0 {
		return // no pod is waiting: nothing to pick
	}
	if names := activateKeys(logger, a.plugin, causeTelemetry, a.pods, a.activate, a.pick(ch.prev, ch.cur)); len(names) > 0 {
		logger.V(4).Info("node telemetry lets pods in; activating them", "plugin", a.plugin, "node", ch.cur.Name, "pods", names)
	}
}
