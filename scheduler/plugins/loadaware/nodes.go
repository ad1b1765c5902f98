package loadaware

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/scheduler/plugins/internal/nodeset"
)

// Watch registers the plugin's handlers with the scheduler's informers:
// Nodes, for the threshold annotations (see WatchNodes) and so that a
// deleted node's reservations go with it; Pods, so that a pod deleted or
// finished before its node's next sample stops counting toward the node's
// estimated load; and DaemonSets, to tell their pods (ownedByDaemonSet).
func (pl *LoadAware) Watch(factory informers.SharedInformerFactory) error {
	nodes := factory.Core().V1().Nodes()
	if err := pl.WatchNodes(nodes.Informer()); err != nil {
		return err
	}
	if _, err := nodes.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: pl.nodeGone}); err != nil {
		return fmt.Errorf("watching Nodes: %w", err)
	}
	pl.nodes = nodes.Lister()
	_, err := factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { pl.podGone(obj, false) },
		DeleteFunc: func(obj any) { pl.podGone(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("watching Pods: %w", err)
	}
	pl.daemonSets = factory.Apps().V1().DaemonSets().Lister()
	return nil
}

// nodeGone drops a deleted Node's reservations.
func (pl *LoadAware) nodeGone(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if node, ok := obj.(*v1.Node); ok {
		pl.res.ForgetNode(node.Name)
	}
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
		pl.res.Unreserve(pod.Spec.NodeName, pod.UID)
	}
}

// WatchNodes follows the threshold annotations of the Nodes informer
// delivers (the scheduler's own), so that PreFilter knows whether any node
// has a threshold lower than the args'. Until it is called, and until the
// handler has seen the informer's first list, PreFilter assumes one may.
func (pl *LoadAware) WatchNodes(informer toolscache.SharedIndexInformer) error {
	s, err := nodeset.Watch(informer, pl.lowersThreshold)
	if err != nil {
		return err
	}
	pl.lowered = s
	return nil
}

// lowersThreshold reports whether a node's annotations set a threshold
// below the args' (a higher or invalid value is ignored, as Filter ignores
// it).
func (pl *LoadAware) lowersThreshold(node *v1.Node) bool {
	return threshold(node, config.NodeAnnotationCPUThresholdPercent, pl.args.CPUThresholdPercent) < pl.args.CPUThresholdPercent ||
		threshold(node, config.NodeAnnotationMemoryThresholdPercent, pl.args.MemoryThresholdPercent) < pl.args.MemoryThresholdPercent
}
