// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package rejected

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// inbox hands items from a caller that holds other locks (the telemetry
// cache's, the reservation book's) to a goroutine of its own: put takes
// no lock but the inbox's, and the goroutine takes the items in the order
// put.
type inbox[T any] struct {
	mu    sync.Mutex
	items []T
	wake  chan struct{}
}

func newInbox[T any]() *inbox[T] { return &inbox[T]{wake: make(chan struct{}, 1)} }

// put queues x and wakes the goroutine.
func (b *inbox[T]) put(x T) {
	b.mu.Lock()
	b.items = append(b.items, x)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// run hands handle what was put since its last call, until ctx ends.
func (b *inbox[T]) run(ctx context.Context, handle func(klog.Logger, []T)) {
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.wake:
		}
		b.mu.Lock()
		items := b.items
		b.items = nil
		b.mu.Unlock()
		handle(logger, items)
	}
}

// activateKeys looks the pods keys names up in pods and activates those
// still pending through activate, counting them for plugin and cause;
// it returns their keys, for the caller's log line.
func activateKeys(logger klog.Logger, plugin, cause string, pods corelisters.PodLister, activate fwk.PodActivator, keys []types.NamespacedName) []string {
	if len(keys) == 0 {
		return nil
	}
	found := make(map[string]*v1.Pod, len(keys))
	var names []string
	for _, key := range keys {
		if p, err := pods.Pods(key.Namespace).Get(key.Name); err == nil && p.Spec.NodeName == "" {
			found[key.String()] = p
			names = append(names, key.String())
		}
	}
	if len(found) > 0 {
		activate.Activate(logger, found)
		activated.WithLabelValues(plugin, cause).Add(float64(len(found)))
	}
	return names
}
