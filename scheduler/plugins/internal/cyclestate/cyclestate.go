// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cyclestate keeps a plugin's per-pod state where its Filter and
// Score find it without a CycleState lookup.
//
// CycleState is a sync.Map: reading it hashes the key and walks the map on
// every call, and Filter and Score are called for every node. A plugin
// writes its state once per scheduling cycle, so it can remember the last
// state it wrote and the cycle it belongs to; a call from that cycle takes
// it with a pointer comparison. A call from another cycle (a clone made
// for preemption, or cycles that interleave) reads its own CycleState.
package cyclestate

import (
	"sync/atomic"

	fwk "k8s.io/kube-scheduler/framework"
)

// Last is the state a plugin last wrote, and the cycle it wrote it to. Its
// zero value is ready to use.
type Last[T fwk.StateData] struct {
	p atomic.Pointer[written[T]]
}

type written[T fwk.StateData] struct {
	cs fwk.CycleState
	v  T
}

// Write stores v in cs under key and remembers it as cs's state.
func (l *Last[T]) Write(cs fwk.CycleState, key fwk.StateKey, v T) {
	cs.Write(key, v)
	l.p.Store(&written[T]{cs: cs, v: v})
}

// Read returns the state under key for cs, and false when cs has none (or
// one of another type).
func (l *Last[T]) Read(cs fwk.CycleState, key fwk.StateKey) (T, bool) {
	if w := l.p.Load(); w != nil && w.cs == cs {
		return w.v, true
	}
	var zero T
	d, err := cs.Read(key)
	if err != nil {
		return zero, false
	}
	v, ok := d.(T)
	return v, ok
}
