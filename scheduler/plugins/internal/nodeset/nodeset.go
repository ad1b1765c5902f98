// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nodeset keeps the set of Nodes that satisfy a predicate, from the
// scheduler's Node informer, so that a plugin can tell in constant time
// whether any node does (and skip per-node work when none does).
package nodeset

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// Set is the names of the Nodes that satisfy its predicate.
type Set struct {
	pred   func(*v1.Node) bool
	synced func() bool // whether the handler has seen the informer's first list

	mu    sync.Mutex
	nodes map[string]struct{}
}

// Watch returns the set of the nodes informer delivers that satisfy pred,
// kept current by an event handler.
func Watch(informer toolscache.SharedIndexInformer, pred func(*v1.Node) bool) (*Set, error) {
	s := New(pred)
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.Update,
		UpdateFunc: func(_, obj any) { s.Update(obj) },
		DeleteFunc: s.Delete,
	})
	if err != nil {
		return nil, fmt.Errorf("watching Nodes: %w", err)
	}
	s.synced = reg.HasSynced
	return s, nil
}

// New returns an empty set that Update and Delete keep; it counts as
// complete at once (Watch's waits for the informer's first list).
func New(pred func(*v1.Node) bool) *Set {
	return &Set{pred: pred, synced: func() bool { return true }, nodes: map[string]struct{}{}}
}

// Len is the number of nodes in the set, and false until the set is
// complete: callers must then assume any node may be in it.
func (s *Set) Len() (int, bool) {
	if !s.synced() {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.nodes), true
}

// Update adds or removes a Node by the predicate.
func (s *Set) Update(obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	in := s.pred(node)
	s.mu.Lock()
	defer s.mu.Unlock()
	if in {
		s.nodes[node.Name] = struct{}{}
	} else {
		delete(s.nodes, node.Name)
	}
}

// Delete removes a deleted Node.
func (s *Set) Delete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if node, ok := obj.(*v1.Node); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.nodes, node.Name)
	}
}
