// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package cyclestate

import (
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

type state struct{ n int }

func (s *state) Clone() fwk.StateData { return s }

func TestLast(t *testing.T) {
	const key fwk.StateKey = "test"
	var last Last[*state]
	a, b := framework.NewCycleState(), framework.NewCycleState()
	if _, ok := last.Read(a, key); ok {
		t.Fatal("Read before any Write found a state")
	}
	last.Write(a, key, &state{1})
	clone := a.Clone() // what preemption filters with
	last.Write(b, key, &state{2})
	for _, tc := range []struct {
		name string
		cs   fwk.CycleState
		want int
	}{
		{"the last cycle", b, 2},
		{"an earlier cycle", a, 1},
		{"a clone of an earlier cycle", clone, 1},
	} {
		if s, ok := last.Read(tc.cs, key); !ok || s.n != tc.want {
			t.Errorf("%s: Read = %v, %v; want %d", tc.name, s, ok, tc.want)
		}
	}
	if _, ok := last.Read(framework.NewCycleState(), key); ok {
		t.Error("Read of a cycle without the state found one")
	}
}
