//go:build schedperf

// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package schedperf

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"

	"github.com/telesched/telesched/scheduler/estimate"
)

// kubeletSettle is how long after a started pod's hold
// (estimate.Hold(sampleInterval)) its node's agent writes the sample that
// shows it: the book retires a running pod's reservation on the first
// sample the scheduler observes at least the hold after it saw the pod
// running, taken at least an interval after the pod's containers started
// (scheduler/estimate, Book.observe and takenAfter). A pause pod moves no
// reading, so no jump shows it sooner.
const kubeletSettle = 2 * time.Second

// kubeletTick is how often the stand-in writes the samples that are due.
const kubeletTick = 500 * time.Millisecond

// startKubelet starts the kubelet stand-in: each pod bound to a node
// (outside the agent's namespace, whose pods the fleet runs) is set
// Running and Ready, its containers started now, by one status update,
// as a kubelet would once the pod's containers run; and its node's agent
// writes a sample kubeletSettle after the pod's hold, which the plugins'
// book takes as showing the pod. Without it no pod of scheduler_perf ever
// runs, and LoadAware counts each one at its requests until its
// reservation's max age.
func (f *fleet) startKubelet(ctx context.Context, tCtx ktesting.TContext, factory informers.SharedInformerFactory, wg *sync.WaitGroup) error {
	pods := make(chan *corev1.Pod, 1024)
	handle := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || p.Namespace == agentNamespace || p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil {
			return
		}
		select {
		case pods <- p:
		case <-ctx.Done():
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
	}); err != nil {
		return err
	}
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case p := <-pods:
					if err := f.run(ctx, tCtx, p); err != nil && ctx.Err() == nil {
						f.errors.Add(1)
						f.lastErr.Store(err.Error())
					}
				}
			}
		})
	}
	wg.Go(func() { f.writeDue(ctx) })
	return nil
}

// run sets pod Running and Ready, its containers started now, and
// schedules its node's sample.
func (f *fleet) run(ctx context.Context, tCtx ktesting.TContext, pod *corev1.Pod) error {
	client := tCtx.Client().CoreV1().Pods(pod.Namespace)
	now := metav1.Now()
	started := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := pod.DeepCopy()
		if started {
			var err error
			if p, err = client.Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		started = true
		if p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
			return nil // the kubelet's work is done, or no longer wanted
		}
		markRunning(p, now)
		_, err := client.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile (a preemption's victim)
	}
	if err != nil {
		return fmt.Errorf("pod %s/%s Running: %w", pod.Namespace, pod.Name, err)
	}
	f.podStarts.Add(1)
	due := now.Add(estimate.Hold(sampleInterval) + kubeletSettle)
	f.mu.Lock()
	if f.ready[pod.Spec.NodeName] {
		f.due[pod.Spec.NodeName] = append(f.due[pod.Spec.NodeName], due)
	}
	f.mu.Unlock()
	return nil
}

// markRunning sets p's status as the kubelet does once its containers run:
// Running, Ready, started at now.
func markRunning(p *corev1.Pod, now metav1.Time) {
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: new(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	conds := p.Status.Conditions[:0:0]
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodReady && c.Type != corev1.ContainersReady && c.Type != corev1.PodInitialized {
			conds = append(conds, c)
		}
	}
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		conds = append(conds, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.Conditions = conds
}

// writeDue writes, every kubeletTick, a sample of each node with a write
// due: one write for all the pods whose writes fell due since the last.
func (f *fleet) writeDue(ctx context.Context) {
	t := time.NewTicker(kubeletTick)
	defer t.Stop()
	for round := 1 << 20; ; round++ { // apart from the writer's rounds
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var todo []nodeInfo
		f.mu.Lock()
		for _, n := range f.nodes {
			d := f.due[n.name]
			k := 0
			for k < len(d) && !d[k].After(now) {
				k++
			}
			if k == 0 {
				continue
			}
			if f.due[n.name] = d[k:]; len(d) == k {
				delete(f.due, n.name)
			}
			todo = append(todo, n)
		}
		f.mu.Unlock()
		for _, n := range todo {
			if err := f.apply(ctx, n, round); err != nil {
				if ctx.Err() == nil {
					f.errors.Add(1)
					f.lastErr.Store(err.Error())
				}
				continue
			}
			f.startWrites.Add(1)
		}
	}
}
