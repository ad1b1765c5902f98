// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package rejected

import (
	"context"

	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/scheduler/estimate"
)

// release requeues pods when the reservation book gives room back without
// a cluster event saying so: a reservation expired, or a reserved pod was
// deleted, finished or unbound (estimate.Book.OnRelease). A NodeTelemetry
// change requeues through OnTelemetry; nothing else would requeue
// these pods until kube-scheduler's flush of unschedulable pods (5
// minutes by default).
type release[N any] struct {
	plugin string
	ix     *Index[N]
	// may returns, for a node whose reservations were released, the
	// plugin's Filter predicate on it now: true for a need that fits.
	may      func(node string) func(N) bool
	nodes    corelisters.NodeLister
	pods     corelisters.PodLister
	activate fwk.PodActivator
	released *inbox[string]
}

// Requeue makes book's releases requeue, through activate (the
// framework's handle), the pods in ix that may says fit the released node
// (and its required affinity admits), until ctx ends; Nodes and Pods are
// read from the scheduler's informers, f. The book's listener only queues
// the node (it is called with the book's lock held, and Select's
// predicates read the book): the pods are looked up and activated on a
// goroutine of their own, never under the book's lock or the scheduling
// queue's.
func (ix *Index[N]) Requeue(ctx context.Context, plugin string, book *estimate.Book, f informers.SharedInformerFactory, activate fwk.PodActivator, may func(node string) func(N) bool) {
	r := &release[N]{plugin: plugin, ix: ix, may: may, nodes: f.Core().V1().Nodes().Lister(), pods: f.Core().V1().Pods().Lister(), activate: activate,
		released: newInbox[string]()}
	book.OnRelease(r.released.put)
	go r.released.run(ctx, func(logger klog.Logger, nodes []string) {
		if ix.Len() == 0 {
			return // no pod is waiting
		}
		seen := map[string]bool{}
		for _, name := range nodes {
			if !seen[name] {
				seen[name] = true
				r.requeue(logger, name)
			}
		}
	})
}

// requeue activates the recorded pods that fit node now.
func (r *release[N]) requeue(logger klog.Logger, name string) {
	node, err := r.nodes.Get(name)
	if err != nil {
		node = nil // affinity is then left to the scheduling attempt
	}
	if names := activateKeys(logger, r.plugin, causeRelease, r.pods, r.activate, r.ix.Select(node, r.may(name))); len(names) > 0 {
		logger.V(4).Info("reservations released on a node; requeueing the pods that fit it now", "plugin", r.plugin, "node", name, "pods", names)
	}
}
