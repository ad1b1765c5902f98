// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podmemo remembers what a plugin computed from a pod, so that a
// QueueingHint, which the scheduler calls for every pending pod the plugin
// rejected on every event it registered (Pod deletions), does not compute
// a pending pod's requests again each time.
package podmemo

import (
	"sync/atomic"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Slots is how many pods a Memo remembers at once; a pod whose slot another
// pod took is computed again. 4096 covers a large backlog for 64 KiB.
const Slots = 1 << slotBits

const slotBits = 12

// Memo maps a pod (by UID and resource version) to a T. It is safe for
// concurrent use and never grows.
//
// Two candidate slots are chosen by the pod object's address, not by hashing its UID: the
// scheduler hands a hint the same object for a pending pod every time, and
// a hint runs for every pending pod on every event, so the lookup must cost
// next to nothing. The address is kept as a number, which holds nothing in
// memory; the UID and resource version confirm the match.
type Memo[T any] struct {
	slots [Slots]atomic.Pointer[entry[T]]
}

type entry[T any] struct {
	addr            uintptr
	uid             types.UID
	resourceVersion string
	v               T
}

// New returns an empty memo.
func New[T any]() *Memo[T] {
	return &Memo[T]{}
}

// Get returns f(pod), computed once per version of the pod while its slot
// holds it. A pod without a UID is always computed.
func (m *Memo[T]) Get(pod *v1.Pod, f func(*v1.Pod) T) T {
	if pod.UID == "" {
		return f(pod)
	}
	addr := uintptr(unsafe.Pointer(pod))
	h := mix(uint64(addr))
	a, b := &m.slots[h>>(64-slotBits)], &m.slots[(h>>(64-2*slotBits))&(Slots-1)]
	ea, eb := a.Load(), b.Load()
	for _, e := range [2]*entry[T]{ea, eb} {
		if e != nil && e.addr == addr && e.uid == pod.UID && e.resourceVersion == pod.ResourceVersion {
			return e.v
		}
	}
	v := f(pod)
	// Two candidate slots (two-choice hashing): a pod takes a free one, or
	// one holding an older version of itself, before evicting another.
	slot := a
	if ea != nil && ea.addr != addr && (eb == nil || eb.addr == addr) {
		slot = b
	}
	slot.Store(&entry[T]{addr: addr, uid: pod.UID, resourceVersion: pod.ResourceVersion, v: v})
	return v
}

// mix is splitmix64's finalizer. Multiplying alone (Fibonacci hashing)
// sent a backlog of pods allocated at a fixed stride to a few hundred
// slots when the stride was v1.Pod's size in Kubernetes 1.37: the high
// bits of a product repeat with some strides. Mixing spreads any stride
// like a random function, and the second slot absorbs what collides.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Affinity remembers pods' required node affinity (nodeSelector and
// requiredDuringScheduling node affinity), for hints that skip nodes the
// pod can never go to.
type Affinity struct {
	m *Memo[nodeaffinity.RequiredNodeAffinity]
}

// NewAffinity returns an empty Affinity.
func NewAffinity() Affinity { return Affinity{m: New[nodeaffinity.RequiredNodeAffinity]()} }

// Allows reports whether the pod's required node affinity admits node; a
// nil node (not known) is admitted.
func (a Affinity) Allows(pod *v1.Pod, node *v1.Node) bool {
	if node == nil {
		return true
	}
	ok, err := a.m.Get(pod, nodeaffinity.GetRequiredNodeAffinity).Match(node)
	return err != nil || ok // a malformed term: let the scheduler say so
}
