// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rejected keeps the pending pods a plugin's Filter rejected, each
// with what it needs, so that the plugin itself can move them back to the
// scheduler's active queue (fwk.PodActivator) when a NodeTelemetry change,
// or a reservation released, lets them in by the plugin's own predicate
// (OnTelemetry, Requeue). The plugins register no NodeTelemetry event with
// the scheduling queue: kube-scheduler walks every unschedulable pod on
// every event it is told of, under its lock, and a fleet writes tens of
// NodeTelemetry updates a second.
//
// A pod enters when Filter rejects it on some node and leaves when it is
// bound to a node or deleted (Watch). A pod that a later attempt rejected
// for another reason stays until then: the index may name more pods than
// the queue holds for the plugin, never fewer. The pod in its scheduling
// cycle (Begin) is named too, so that a change stored after Filter read
// the node and before Filter recorded the pod still reaches it: the
// scheduler then requeues it when the cycle ends (an activation of a pod
// in flight).
package rejected

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
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
	// cycle is the pod in its scheduling cycle (Begin) and what it needs:
	// named by Select on any node until End, Forget or the next Begin.
	cycle    *entry[N]
	cycleKey types.NamespacedName
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

// Begin records pod, which needs need, as the pod in its scheduling
// cycle: PreFilter calls it before Filter reads any node. kube-scheduler
// runs one cycle at a time, so the next Begin replaces it; a pod Filter
// rejected is recorded by then (Add), one that was placed leaves (End).
func (ix *Index[N]) Begin(pod *v1.Pod, need N) {
	e := &entry[N]{uid: pod.UID, resourceVersion: pod.ResourceVersion, need: need, affinity: nodeaffinity.GetRequiredNodeAffinity(pod)}
	ix.mu.Lock()
	ix.cycle, ix.cycleKey = e, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	ix.mu.Unlock()
}

// End forgets pod as the pod in its cycle: Reserve placed it.
func (ix *Index[N]) End(pod *v1.Pod) {
	ix.mu.Lock()
	if ix.cycle != nil && ix.cycle.uid == pod.UID {
		ix.cycle = nil
	}
	ix.mu.Unlock()
}

// Forget removes pod, whatever its version.
func (ix *Index[N]) Forget(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	ix.mu.Lock()
	delete(ix.pods, key)
	if ix.cycle != nil && ix.cycleKey == key {
		ix.cycle = nil
	}
	if len(ix.pods) == 0 {
		clear(ix.on)
		ix.anyNode = false
	}
	ix.mu.Unlock()
}

// Len is the number of pods recorded, the pod in its cycle included.
func (ix *Index[N]) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.cycle != nil {
		if _, ok := ix.pods[ix.cycleKey]; !ok {
			return len(ix.pods) + 1
		}
	}
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

// Select names the recorded pods that may go to node by their required
// node affinity (node nil: any node) and whose need may is true for: the
// pods a change on node may let in. It costs an affinity match and a call
// of may per recorded pod; nothing when every pod was recorded with AddOn
// and none on node (the plugin rejected none there, so no change there
// lets one in that the plugin kept out; a pod another filter rejected
// there waits for that filter's events), but for the pod in its cycle,
// which Filter may not have recorded yet.
func (ix *Index[N]) Select(node *v1.Node, may func(N) bool) []types.NamespacedName {
	return ix.sel(node, true, may)
}

func (ix *Index[N]) sel(node *v1.Node, narrow bool, may func(N) bool) []types.NamespacedName {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	all := node == nil || !narrow || ix.mayHelp(node.Name)
	return ix.collect(all, func(e *entry[N]) bool { return e.admits(node) && may(e.need) })
}

// SelectAdmitted is Select for a change whose room may lie on other
// nodes than the one that changed (a power domain's members): may is
// handed each recorded pod's need and its required node affinity as a
// test of a node (entry.admits).
func (ix *Index[N]) SelectAdmitted(may func(need N, admits func(*v1.Node) bool) bool) []types.NamespacedName {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.collect(true, func(e *entry[N]) bool { return may(e.need, e.admits) })
}

// collect names the recorded pods (all: every one, else none) and the pod
// in its cycle that ok is true for; the pod in its cycle is judged by its
// own entry unless its recorded one was named. ix.mu is held.
func (ix *Index[N]) collect(all bool, ok func(*entry[N]) bool) []types.NamespacedName {
	var pods []types.NamespacedName
	named := false
	if all {
		for key, e := range ix.pods {
			if ok(&e) {
				pods = append(pods, key)
				named = named || key == ix.cycleKey
			}
		}
	}
	if ix.cycle != nil && !named && ok(ix.cycle) {
		pods = append(pods, ix.cycleKey)
	}
	return pods
}

// admits reports whether the pod may go to node by its required node
// affinity: true for a nil node (any node) and for a malformed term,
// which is left to the scheduling attempt.
func (e *entry[N]) admits(node *v1.Node) bool {
	if node == nil {
		return true
	}
	ok, err := e.affinity.Match(node)
	return ok || err != nil
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
	ok = ok || (ix.cycle != nil && ix.cycleKey == key)
	ix.mu.RUnlock()
	if ok {
		ix.Forget(namespace, name)
	}
}
