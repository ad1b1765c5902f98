// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package rejected

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/telesched/telesched/scheduler/telemetry"
)

func pending(name, rv string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: rv}}
}

func names(ix *Index[int], may func(int) bool) []string {
	var out []string
	for _, nn := range ix.Select(nil, may) {
		out = append(out, nn.Name)
	}
	slices.Sort(out)
	return out
}

func TestSelect(t *testing.T) {
	ix := New[int]()
	ix.Add(pending("small", "1"), 1)
	ix.Add(pending("big", "1"), 8)
	ix.Add(pending("big", "1"), 8) // Filter rejects it on another node
	if got := names(ix, func(n int) bool { return n <= 4 }); !slices.Equal(got, []string{"small"}) {
		t.Errorf("room for 4: %v, want [small]", got)
	}
	// A new version of the pod needs what it says now.
	ix.Add(pending("big", "2"), 2)
	if got := names(ix, func(n int) bool { return n <= 4 }); !slices.Equal(got, []string{"big", "small"}) {
		t.Errorf("room for 4 after big shrank: %v, want [big small]", got)
	}
	if r := ix.Select(nil, func(int) bool { return false }); len(r) != 0 {
		t.Errorf("no room: %v, want no pod", r)
	}
	// A pod whose node selector excludes the node is not named for it.
	picky := pending("picky", "1")
	picky.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	ix.Add(picky, 1)
	cpuNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "cpu"}}}
	gpuNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "g", Labels: map[string]string{"pool": "gpu"}}}
	on := func(n *v1.Node) []string {
		var out []string
		for _, nn := range ix.Select(n, func(int) bool { return true }) {
			out = append(out, nn.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := on(cpuNode); !slices.Equal(got, []string{"big", "small"}) {
		t.Errorf("on a cpu node: %v, want [big small]", got)
	}
	if got := on(gpuNode); !slices.Equal(got, []string{"big", "picky", "small"}) {
		t.Errorf("on a gpu node: %v, want [big picky small]", got)
	}
}

// Pods recorded with the node Filter rejected them on are named only for
// events on such a node: no change elsewhere lets in a pod the plugin kept
// out. A pod recorded without its node makes every node one, until the
// index is empty again.
func TestSelectOnlyOnNodesThePluginRejectedOn(t *testing.T) {
	node := func(name string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	on := func(ix *Index[int], n *v1.Node) []string {
		var out []string
		for _, nn := range ix.Select(n, func(int) bool { return true }) {
			out = append(out, nn.Name)
		}
		slices.Sort(out)
		return out
	}
	ix := New[int]()
	ix.AddOn(pending("a", "1"), "busy-1", 1)
	ix.AddOn(pending("a", "1"), "busy-2", 1) // the same pod, another node
	ix.AddOn(pending("b", "1"), "busy-2", 1)
	tests := []struct {
		name string
		node *v1.Node
		want []string
	}{
		{name: "a node some pod was rejected on", node: node("busy-1"), want: []string{"a", "b"}},
		{name: "another such node", node: node("busy-2"), want: []string{"a", "b"}},
		{name: "a node no pod was rejected on", node: node("idle"), want: nil},
		{name: "any node (unknown)", node: nil, want: []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := on(ix, tc.node); !slices.Equal(got, tc.want) {
				t.Errorf("Select(%v) = %v, want %v", tc.node, got, tc.want)
			}
		})
	}
	ix.Add(pending("c", "1"), 1) // its node unknown
	if got := on(ix, node("idle")); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("after a pod recorded without its node, on idle: %v, want [a b c]", got)
	}
	for _, name := range []string{"a", "b", "c"} {
		ix.Forget("ns", name)
	}
	ix.AddOn(pending("d", "1"), "busy-1", 1)
	if got := on(ix, node("idle")); got != nil {
		t.Errorf("emptied, then d rejected on busy-1; on idle: %v, want none", got)
	}
	if got := on(ix, node("busy-2")); got != nil {
		t.Errorf("emptied, then d rejected on busy-1; on busy-2 (a node of before): %v, want none", got)
	}
}

// Watch forgets a pod once it is bound or deleted; a pending pod's update
// keeps it.
func TestWatchForgets(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b, c := pending("a", "1"), pending("b", "1"), pending("c", "1")
	client := fake.NewClientset(a, b, c)
	f := informers.NewSharedInformerFactory(client, 0)
	ix := New[int]()
	if err := ix.Watch(f); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	// The fake clientset drops what happens between the informer's list
	// and its watch: wait until a pod created now is seen.
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pending("sentinel", "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lister := f.Core().V1().Pods().Lister()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, err := lister.Pods("ns").Get("sentinel")
		return err == nil, nil
	}); err != nil {
		t.Fatal("the informer never saw a pod created after it synced")
	}
	for _, p := range []*v1.Pod{a, b, c} {
		ix.Add(p, 1)
	}
	bound := a.DeepCopy()
	bound.Spec.NodeName, bound.ResourceVersion = "n1", "2"
	if _, err := client.CoreV1().Pods("ns").Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("ns").Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	relabelled := c.DeepCopy()
	relabelled.Labels, relabelled.ResourceVersion = map[string]string{"x": "y"}, "2"
	if _, err := client.CoreV1().Pods("ns").Update(ctx, relabelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	all := func(int) bool { return true }
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return ix.Len() == 1, nil
	}); err != nil {
		t.Fatalf("index holds %v, want [c]", names(ix, all))
	}
	if got := names(ix, all); !slices.Equal(got, []string{"c"}) {
		t.Errorf("index holds %v, want [c] (a bound, b deleted)", got)
	}
}

// A node new to the cache names every recorded pod its affinity admits:
// Filter rejected them before the node existed, on other nodes.
func TestSelectChangeOnANewNodeIgnoresWhereFilterRejected(t *testing.T) {
	ix := New[int]()
	ix.AddOn(pending("a", "1"), "busy", 1)
	fresh := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new"}}
	if got := ix.Select(fresh, func(int) bool { return true }); got != nil {
		t.Errorf("Select on a node no pod was rejected on: %v, want none", got)
	}
	if got := ix.SelectChange(&telemetry.Node{Name: "new"}, fresh, func(int) bool { return true }); got != nil {
		t.Errorf("SelectChange on a node known before: %v, want none", got)
	}
	if got := ix.SelectChange(nil, fresh, func(int) bool { return true }); len(got) != 1 || got[0].Name != "a" {
		t.Errorf("SelectChange on a new node: %v, want [a]", got)
	}
}
