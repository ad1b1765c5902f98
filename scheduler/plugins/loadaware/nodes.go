package loadaware

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/telesched/telesched/apis/config"
)

// loweredNodes is the set of nodes whose threshold annotations lower a
// threshold below the args', kept from Node events.
type loweredNodes struct {
	mu    sync.Mutex
	nodes map[string]bool
	n     int
	// synced reports whether the handler has seen every Node of the
	// informer's first list.
	synced func() bool
}

// known reports whether the set is complete and how many nodes it holds.
func (l *loweredNodes) known() (n int, ok bool) {
	if !l.synced() {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, true
}

func (l *loweredNodes) set(name string, lowered bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.nodes[name] == lowered {
		return
	}
	if lowered {
		l.nodes[name] = true
		l.n++
	} else {
		delete(l.nodes, name)
		l.n--
	}
}

// Watch registers the plugin's handlers with the scheduler's informers:
// Nodes, for the threshold annotations (see WatchNodes), and Pods, so that
// a pod deleted or finished before its node's next sample stops counting
// toward the node's estimated load.
func (pl *LoadAware) Watch(factory informers.SharedInformerFactory) error {
	if err := pl.WatchNodes(factory.Core().V1().Nodes().Informer()); err != nil {
		return err
	}
	_, err := factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { pl.podGone(obj, false) },
		DeleteFunc: func(obj any) { pl.podGone(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("watching Pods: %w", err)
	}
	return nil
}

// podGone forgets the reservation of a pod that was deleted, or that
// finished (Succeeded or Failed): it no longer adds to its node's load.
func (pl *LoadAware) podGone(obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	if deleted || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		pl.cache.Unreserve(pod.Spec.NodeName, pod.UID)
	}
}

// WatchNodes follows the threshold annotations of the Nodes informer
// delivers (the scheduler's own), so that PreFilter knows whether any node
// has a threshold lower than the args'. Until it is called, and until the
// handler has seen the informer's first list, PreFilter assumes one may.
func (pl *LoadAware) WatchNodes(informer toolscache.SharedIndexInformer) error {
	l := &loweredNodes{nodes: map[string]bool{}}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { pl.nodeChanged(l, obj) },
		UpdateFunc: func(_, obj any) { pl.nodeChanged(l, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if node, ok := obj.(*v1.Node); ok {
				l.set(node.Name, false)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching Node threshold annotations: %w", err)
	}
	l.synced = reg.HasSynced
	pl.lowered = l
	return nil
}

func (pl *LoadAware) nodeChanged(l *loweredNodes, obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	l.set(node.Name, threshold(node, config.NodeAnnotationCPUThresholdPercent, pl.args.CPUThresholdPercent) < pl.args.CPUThresholdPercent ||
		threshold(node, config.NodeAnnotationMemoryThresholdPercent, pl.args.MemoryThresholdPercent) < pl.args.MemoryThresholdPercent)
}
