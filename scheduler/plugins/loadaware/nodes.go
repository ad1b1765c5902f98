// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/scheduler/plugins/internal/nodeset"
)

// Watch registers the plugin's handlers with the scheduler's informers:
// Nodes, for the threshold annotations (see WatchNodes), and DaemonSets,
// to tell their pods (ownedByDaemonSet). The reservation book follows
// Pods and Nodes itself (estimate.Book.Watch).
func (pl *LoadAware) Watch(factory informers.SharedInformerFactory) error {
	nodes := factory.Core().V1().Nodes()
	if err := pl.WatchNodes(nodes.Informer()); err != nil {
		return err
	}
	pl.nodes = nodes.Lister()
	pl.daemonSets = factory.Apps().V1().DaemonSets().Lister()
	return nil
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
