// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package rejected

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
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

	mu      sync.Mutex
	pending map[string]struct{}
	wake    chan struct{}
}

// Requeue makes book's releases requeue, through activate (the
// framework's handle), the pods in ix that may says fit the released node
// (and its required affinity admits), until ctx ends; Nodes and Pods are
// read from the scheduler's informers, f. The book's listener only notes the node: the pods are
// looked up and activated on a goroutine of their own, never under the
// book's lock or the scheduling queue's.
func (ix *Index[N]) Requeue(ctx context.Context, plugin string, book *estimate.Book, f informers.SharedInformerFactory, activate fwk.PodActivator, may func(node string) func(N) bool) {
	r := &release[N]{plugin: plugin, ix: ix, may: may, nodes: f.Core().V1().Nodes().Lister(), pods: f.Core().V1().Pods().Lister(), activate: activate,
		pending: map[string]struct{}{}, wake: make(chan struct{}, 1)}
	book.OnRelease(r.note)
	go r.run(ctx)
}

// note records a released node; the book calls it with its lock held.
func (r *release[N]) note(node string) {
	if r.ix.Len() == 0 {
		return
	}
	r.mu.Lock()
	r.pending[node] = struct{}{}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *release[N]) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		r.mu.Lock()
		nodes := r.pending
		r.pending = map[string]struct{}{}
		r.mu.Unlock()
		for name := range nodes {
			r.requeue(logger, name)
		}
	}
}

// requeue activates the recorded pods that fit node now.
func (r *release[N]) requeue(logger klog.Logger, name string) {
	node, err := r.nodes.Get(name)
	if err != nil {
		node = nil // affinity is then left to the scheduling attempt
	}
	sel := r.ix.Select(node, r.may(name))
	if len(sel) == 0 {
		return
	}
	pods := make(map[string]*v1.Pod, len(sel))
	for _, key := range sel {
		if p, err := r.pods.Pods(key.Namespace).Get(key.Name); err == nil {
			pods[key.String()] = p
		}
	}
	if len(pods) > 0 {
		logger.V(4).Info("reservations released on a node; requeueing the pods that fit it now", "plugin", r.plugin, "node", name, "pods", len(pods))
		r.activate.Activate(logger, pods)
		activated.WithLabelValues(r.plugin, causeRelease).Add(float64(len(pods)))
	}
}
