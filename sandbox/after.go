// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// afterNamespace holds the after-placement phases' pods: replicas of one
// ReplicaSet, so that telesched-descheduler (upstream's DefaultEvictor
// leaves pods without an owner alone) may evict them. No controller
// manager runs in the sandbox: the sandbox re-creates an evicted replica
// itself, under a new name, as the ReplicaSet controller would, and the
// scheduler places it.
const afterNamespace = "after"

// residentSet is the ReplicaSet the after-placement pods belong to;
// lineageLabel names the replica a pod re-creates (its first pod's name);
// idleAnnotation, on a pod placed idle, is the share of its CPU request
// (percent) it uses until its load rises (the rack stage).
const (
	residentSet    = "resident"
	lineageLabel   = "telesched.io/sandbox-lineage"
	idleAnnotation = "telesched.io/sandbox-idle-percent"
	phaseAfter     = "after-placement"
)

// afterPods is what the watcher knows of the after-placement pods: those
// it runs on a simulated node, where each was bound, the replica each
// re-creates, and the TeleschedEvicted Events. recreate, when set, is
// called (in its own goroutine) for each pod deleted while it is set.
type afterPods struct {
	mu        sync.Mutex
	running   map[types.UID]placed // pod UID → where it runs
	bound     map[string]string    // pod name → node
	lineage   map[string]string    // pod name → lineage
	evictions []eviction
	stage     string
	recreate  func(pod *corev1.Pod)
}

// placed is a running after-placement pod: its name, node and CPU
// request (milli-CPUs).
type placed struct {
	Pod, Node string
	Request   int64
}

// setStage tags the evictions from now on.
func (a *afterPods) setStage(stage string) {
	a.mu.Lock()
	a.stage = stage
	a.mu.Unlock()
}

// reset forgets a pass's pods and Events and sets recreate.
func (a *afterPods) reset(recreate func(pod *corev1.Pod)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.running, a.bound, a.lineage, a.evictions, a.stage, a.recreate = map[types.UID]placed{}, map[string]string{}, map[string]string{}, nil, stageFault, recreate
}

// on is the running pods that match.
func (a *afterPods) on(match func(placed) bool) map[types.UID]placed {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[types.UID]placed{}
	for uid, p := range a.running {
		if match(p) {
			out[uid] = p
		}
	}
	return out
}

// counts counts the pass's evictions (countEvictions) in stage, from the
// nodes named.
func (a *afterPods) counts(stage string, from ...string) EvictionCounts {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := map[string]string{}
	for _, e := range a.evictions {
		next[e.Pod] = a.bound[replicaOf(a.lineage, e.Pod)]
	}
	return countEvictions(a.evictions, next, stage, from...)
}

// replicaOf is the pod that re-created pod: the next of its lineage
// (lineage-1, lineage-2, ...), "" if none yet.
func replicaOf(lineage map[string]string, pod string) string {
	l := lineage[pod]
	if l == "" {
		return ""
	}
	gen := 0
	if rest, ok := strings.CutPrefix(pod, l+"-"); ok {
		if _, err := fmt.Sscan(rest, &gen); err != nil {
			return ""
		}
	}
	next := fmt.Sprintf("%s-%d", l, gen+1)
	if _, ok := lineage[next]; ok {
		return next
	}
	return ""
}

// onAfterPod runs a bound after-placement pod on its simulated node, once,
// and reports it running.
func (w *watcher) onAfterPod(pod *corev1.Pod) {
	a := &w.after
	a.mu.Lock()
	if a.running == nil {
		a.mu.Unlock()
		return
	}
	a.lineage[pod.Name] = pod.Labels[lineageLabel]
	start := false
	cpu, _ := podRequests(pod)
	if pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil {
		if _, ok := a.running[pod.UID]; !ok {
			a.running[pod.UID] = placed{Pod: pod.Name, Node: pod.Spec.NodeName, Request: cpu}
			a.bound[pod.Name] = pod.Spec.NodeName
			start = true
		}
	}
	a.mu.Unlock()
	if !start {
		return
	}
	if n := w.nodes[pod.Spec.NodeName]; n != nil {
		n.AddPod(pod.UID, idleLoad(pod, cpu), 0)
	}
	go w.markRunning(pod)
	w.update(func(*view) {})
}

// onAfterDelete stops a deleted after-placement pod and, while the pass
// re-creates, re-creates it.
func (w *watcher) onAfterDelete(pod *corev1.Pod) {
	a := &w.after
	a.mu.Lock()
	p, ran := a.running[pod.UID]
	delete(a.running, pod.UID)
	recreate := a.recreate
	a.mu.Unlock()
	if n := w.nodes[p.Node]; ran && n != nil {
		n.RemovePod(pod.UID)
	}
	if recreate != nil {
		go recreate(pod)
	}
	w.update(func(*view) {})
}

// onAfterEvent records a TeleschedEvicted Event on an after-placement pod.
func (w *watcher) onAfterEvent(ev *corev1.Event) {
	if ev.Reason != "TeleschedEvicted" {
		return
	}
	a := &w.after
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.evictions {
		if e.Event == ev.Name {
			return
		}
	}
	a.evictions = append(a.evictions, eviction{Event: ev.Name, Stage: a.stage, Pod: ev.InvolvedObject.Name, Lineage: a.lineage[ev.InvolvedObject.Name],
		From: a.bound[ev.InvolvedObject.Name], Destination: destinationOf(ev.Message)})
}

// idleLoad is the CPU load (milli-CPUs) a pod of request runs at when it
// starts: the idleAnnotation's share of it, else all of it.
func idleLoad(pod *corev1.Pod, request int64) int64 {
	var pct int64
	if v, ok := pod.Annotations[idleAnnotation]; ok {
		if _, err := fmt.Sscan(v, &pct); err == nil && pct >= 0 && pct <= 100 {
			return request * pct / 100
		}
	}
	return request
}

// residentPod is one replica of the resident ReplicaSet, requesting cpu:
// bound to node when node is set (placed before the phase), else left to
// scheduler; idlePercent > 0 sets idleAnnotation. Its grace period is 0:
// no kubelet runs here to finish a graceful deletion, so an evicted pod
// would stay Terminating.
func residentPod(name, lineage, node, scheduler string, owner *appsv1.ReplicaSet, cpu resource.Quantity, idlePercent int) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: resource.MustParse("1Gi")}
	zero := int64(0)
	controller := true
	var annotations map[string]string
	if idlePercent > 0 {
		annotations = map[string]string{idleAnnotation: fmt.Sprint(idlePercent)}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: afterNamespace, Annotations: annotations,
			Labels:          map[string]string{phaseLabel: phaseAfter, lineageLabel: lineage, "app": residentSet},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner.Name, UID: owner.UID, Controller: &controller}},
		},
		Spec: corev1.PodSpec{
			SchedulerName:                 scheduler,
			NodeName:                      node,
			TerminationGracePeriodSeconds: &zero,
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: req}}},
		},
	}
}

// residentReplicaSet is the ReplicaSet the resident pods name as their
// controller. Nothing reconciles it here (the sandbox does, see
// afterNamespace).
func residentReplicaSet(replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": residentSet}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: residentSet, Namespace: afterNamespace},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

// recreator re-creates a deleted resident pod under the next name of its
// lineage, with its CPU request, unbound, for the scheduler to place; the
// replica runs at its request (a workload whose load rose stays risen).
func (s *sandbox) recreator(ctx context.Context, owner *appsv1.ReplicaSet) func(pod *corev1.Pod) {
	return func(pod *corev1.Pod) {
		lineage := pod.Labels[lineageLabel]
		gen := 0
		if rest, ok := strings.CutPrefix(pod.Name, lineage+"-"); ok {
			_, _ = fmt.Sscan(rest, &gen)
		}
		next := residentPod(fmt.Sprintf("%s-%d", lineage, gen+1), lineage, "", s.opts.Profile, owner, *pod.Spec.Containers[0].Resources.Requests.Cpu(), 0)
		if _, err := s.kube.CoreV1().Pods(afterNamespace).Create(ctx, next, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "re-creating an evicted replica", "pod", klog.KObj(pod))
		}
	}
}
