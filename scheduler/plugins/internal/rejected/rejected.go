// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rejected keeps the pending pods a plugin's Filter rejected, each
// with what it needs, for the plugin's PreQueueingHintFn (KEP-6132, the
// SchedulerPreQueueingHints feature gate): on a NodeTelemetry event the
// scheduler's queue then asks the plugin's QueueingHint about the pods the
// event may help, not about every unschedulable pod, under its lock.
//
// A pod enters when Filter rejects it on some node and leaves when it is
// bound to a node or deleted (Watch). A pod that a later attempt rejected
// for another reason stays until then: the index may name more pods than
// the queue holds for the plugin, never fewer.
package rejected

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// Index maps the pods a plugin rejected to what each needs (N, as the
// plugin's predicate reads it). It is safe for concurrent use: Filter adds
// from the scheduler's parallel goroutines.
type Index[N any] struct {
	mu   sync.RWMutex
	pods map[types.NamespacedName]entry[N]
	// on are the nodes Filter rejected a recorded pod on (AddOn), since
	// the index was last empty; anyNode: some pod was recorded without
	// its node (Add), so any node may be one.
	on      map[string]struct{}
	anyNode bool
}

type entry[N any] struct {
	uid             types.UID
	resourceVersion string
	need            N
	// affinity is the pod's required node affinity (nodeSelector and
	// requiredDuringScheduling terms): no event on a node it excludes
	// helps the pod.
	affinity nodeaffinity.RequiredNodeAffinity
}

// New returns an empty index.
func New[N any]() *Index[N] {
	return &Index[N]{pods: map[types.NamespacedName]entry[N]{}, on: map[string]struct{}{}}
}

// Add records that the plugin rejected pod, which needs need, on some
// node. Filter calls it for each node it rejects, so the common case, the
// same version of a pod already recorded, takes a read lock only.
func (ix *Index[N]) Add(pod *v1.Pod, need N) { ix.add(pod, "", need) }

// AddOn records that the plugin rejected pod, which needs need, on node:
// for a plugin whose Filter judges a node by that node's state alone, so
// that an event on a node it rejected no recorded pod on helps none of
// them (Select).
func (ix *Index[N]) AddOn(pod *v1.Pod, node string, need N) { ix.add(pod, node, need) }

func (ix *Index[N]) add(pod *v1.Pod, node string, need N) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	ix.mu.RLock()
	e, ok := ix.pods[key]
	_, known := ix.on[node]
	known = known || (node == "" && ix.anyNode)
	ix.mu.RUnlock()
	if ok && known && e.uid == pod.UID && e.resourceVersion == pod.ResourceVersion {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if node == "" {
		ix.anyNode = true
	} else {
		ix.on[node] = struct{}{}
	}
	if ok && e.uid == pod.UID && e.resourceVersion == pod.ResourceVersion {
		return
	}
	ix.pods[key] = entry[N]{uid: pod.UID, resourceVersion: pod.ResourceVersion, need: need, affinity: nodeaffinity.GetRequiredNodeAffinity(pod)}
}

// Forget removes pod, whatever its version.
func (ix *Index[N]) Forget(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	ix.mu.Lock()
	delete(ix.pods, key)
	if len(ix.pods) == 0 {
		clear(ix.on)
		ix.anyNode = false
	}
	ix.mu.Unlock()
}

// Len is the number of pods recorded.
func (ix *Index[N]) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.pods)
}

// MayHelp reports whether an event on the named node may help a recorded
// pod: false when every pod was recorded with AddOn and none on node
// (see Select).
func (ix *Index[N]) MayHelp(node string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.mayHelp(node)
}

// mayHelp is MayHelp with ix.mu held.
func (ix *Index[N]) mayHelp(node string) bool {
	_, ok := ix.on[node]
	return ok || ix.anyNode
}

// None is the PreQueueingHintResult of an event that helps no pod the
// plugin rejected: the queue asks the plugin's QueueingHint about none.
func None() fwk.PreQueueingHintResult { return fwk.PreQueueingHintResult{} }

// All is the result that lets the queue ask about every pod it holds.
func All() fwk.PreQueueingHintResult { return fwk.PreQueueingHintResult{AllPods: true} }

// Views returns the views of a NodeTelemetry event for a plugin's
// PreQueueingHint, or the result to return at once: none while the index
// is empty (the plugin rejected no pending pod) or the object is gone, all
// pods on an error, with the error (the queue then does as without the
// hint).
func (ix *Index[N]) Views(c *telemetry.Cache, plugin string, oldObj, newObj any) (prev, cur *telemetry.Node, done *fwk.PreQueueingHintResult, err error) {
	if ix.Len() == 0 {
		none := None()
		return nil, nil, &none, nil
	}
	prev, cur, err = c.ObserveChange(oldObj, newObj)
	if err != nil {
		all := All()
		return nil, nil, &all, fmt.Errorf("%s: %w", plugin, err)
	}
	if cur == nil {
		none := None()
		return nil, nil, &none, nil // deleted since
	}
	return prev, cur, nil, nil
}

// Select is the result naming the recorded pods that may go to node by
// their required node affinity (node nil: any node) and whose need may is
// true for: the pods the event may help. It costs an affinity match and a
// call of may per recorded pod, once per event, against a QueueingHint
// call per pending pod; nothing when every pod was recorded with AddOn
// and none on node: the plugin rejected none there, so no change there
// lets one in that the plugin kept out (a pod another filter rejected
// there waits for that filter's events).
func (ix *Index[N]) Select(node *v1.Node, may func(N) bool) fwk.PreQueueingHintResult {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if node != nil && !ix.mayHelp(node.Name) {
		return None()
	}
	var pods []types.NamespacedName
	for key, e := range ix.pods {
		if node != nil {
			// A malformed term (err) is left to the QueueingHint.
			if ok, err := e.affinity.Match(node); err == nil && !ok {
				continue
			}
		}
		if may(e.need) {
			pods = append(pods, key)
		}
	}
	return fwk.PreQueueingHintResult{Pods: pods}
}

// Watch forgets a pod once it is bound to a node or deleted, through the
// scheduler's Pod informer.
func (ix *Index[N]) Watch(f informers.SharedInformerFactory) error {
	_, err := f.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, newObj any) {
			if p, ok := newObj.(*v1.Pod); ok && p.Spec.NodeName != "" {
				ix.forgetIfKnown(p.Namespace, p.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				ix.forgetIfKnown(p.Namespace, p.Name)
			}
		},
	})
	return err
}

// forgetIfKnown is Forget with a read lock first: most pods the informer
// reports were never rejected by this plugin.
func (ix *Index[N]) forgetIfKnown(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	ix.mu.RLock()
	_, ok := ix.pods[key]
	ix.mu.RUnlock()
	if ok {
		ix.Forget(namespace, name)
	}
}
