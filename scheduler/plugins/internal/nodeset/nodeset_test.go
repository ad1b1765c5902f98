// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeset

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestSet(t *testing.T) {
	labeled := func(name, v string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"x": v}}}
	}
	s := New(func(n *v1.Node) bool { return n.Labels["x"] == "yes" })
	for _, step := range []struct {
		what string
		do   func()
		want int
	}{
		{"a node without the label", func() { s.Update(labeled("a", "no")) }, 0},
		{"a node with it", func() { s.Update(labeled("b", "yes")) }, 1},
		{"the same node again", func() { s.Update(labeled("b", "yes")) }, 1},
		{"another", func() { s.Update(labeled("c", "yes")) }, 2},
		{"b loses it", func() { s.Update(labeled("b", "no")) }, 1},
		{"c deleted, last state unknown", func() {
			s.Delete(toolscache.DeletedFinalStateUnknown{Key: "c", Obj: labeled("c", "yes")})
		}, 0},
	} {
		step.do()
		if n, ok := s.Len(); !ok || n != step.want {
			t.Errorf("after %s: Len = %d, %v; want %d", step.what, n, ok, step.want)
		}
	}
	s.synced = func() bool { return false }
	if _, ok := s.Len(); ok {
		t.Error("Len of a set whose first list is not in reported it complete")
	}
}
