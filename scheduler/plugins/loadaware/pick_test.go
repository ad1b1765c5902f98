// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
)

// keyOf is the name pick gives p by.
func keyOf(p *v1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

// sortedNames is the names of keys, sorted.
func sortedNames(keys []types.NamespacedName) []string {
	out := []string{}
	for _, k := range keys {
		out = append(out, k.Name)
	}
	slices.Sort(out)
	return out
}

// rejectOn records p in pl's index as Filter records a pod it rejects on
// the named node: by running PreFilter and Filter on the node's current
// view (with its annotations when pl knows the Node), which records p when
// it rejects it; when Filter admits p there (the view has room, is stale
// under Ignore, or there is none), p is recorded as Filter would have
// recorded it, with AddOn and its requests as Filter computes them.
func rejectOn(t testing.TB, pl *LoadAware, p *v1.Pod, name string) {
	t.Helper()
	ni := nodeInfo(name, nil)
	if n := pl.node(name); n != nil {
		known := framework.NewNodeInfo()
		known.SetNode(n)
		ni = known
	}
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(context.Background(), cs, p, nil); !st.IsSuccess() && !st.IsSkip() {
		t.Fatalf("PreFilter: %v", st)
	}
	if st := pl.Filter(context.Background(), cs, p, ni); st.IsSuccess() {
		pl.rejected.AddOn(p, name, pl.scaledRequests(p))
	} else if st.Code() != fwk.Unschedulable {
		t.Fatalf("Filter = %v, want success or Unschedulable", st)
	}
}

// picks reports whether pl.pick names p for the update of node name's
// NodeTelemetry from old (nil: an add) to cur, p having been rejected on
// the node's old view (rejectOn) first, and the views handed to pick
// being those the cache stores for the update (plugintest.Change).
func picks(t *testing.T, pl *LoadAware, p *v1.Pod, name string, old, cur *telemetryv1alpha1.NodeTelemetryStatus) bool {
	t.Helper()
	if old != nil {
		observe(pl.cache, name, old)
	}
	rejectOn(t, pl, p, name)
	prev, curView := plugintest.Change(t, pl.cache, clock, name, old, cur)
	return slices.Contains(pl.pick(prev, curView), keyOf(p))
}

// pick names, for a NodeTelemetry update, every pod Filter rejected on the
// node's old view that Filter admits on the new one, none that Filter
// still rejects, none for an update that makes no estimate lower, and only
// pods Filter rejected: rejected.OnTelemetry activates exactly the pods
// pick names, so a pod left out would wait for the 5-minute flush of
// unschedulable pods, and one named wrongly is retried for nothing.
// Filter itself is the ground truth: it is run on the old view before the
// update and on the new one after it. Under Reject, a stale or missing
// old view kept every pod out, so an add or a node becoming fresh must
// name each pod that fits now.
func TestPickNamesWhatFilterNowAdmits(t *testing.T) {
	sizes := []string{"100m", "500m", "1", "2", "4", "8"}
	type update struct {
		name     string
		old, new *telemetryv1alpha1.NodeTelemetryStatus
		wantNone bool
	}
	updates := []update{
		{"load rose", status(85, 50, 0), status(95, 50, 0), true},
		{"unchanged", status(90, 50, 0), status(90, 50, 0), true},
		{"memory rose, cpu unchanged", status(90, 50, 0), status(90, 60, 0), true},
		{"fell a little", status(90, 50, 0), status(85, 50, 0), false},
		// Every pod that fits at 40 % fitted at 50 % already.
		{"fell, the pods fitted already", status(50, 50, 0), status(40, 50, 0), true},
		{"fell under the threshold", status(95, 50, 0), status(50, 50, 0), false},
		{"fell to idle", status(99, 50, 0), status(1, 50, 0), false},
		{"became fresh", status(50, 50, 10*time.Minute), status(50, 50, 0), false},
		{"added", nil, status(60, 50, 0), false},
	}
	for _, policy := range []config.StaleTelemetryPolicy{config.StaleTelemetryIgnore, config.StaleTelemetryReject} {
		for _, u := range updates {
			t.Run(string(policy)+"/"+u.name, func(t *testing.T) {
				t.Cleanup(func() { clock.Set(now) })
				cache := newCache()
				args := *configv1.DefaultLoadAwareArgs()
				args.StaleTelemetryPolicy = policy
				pl := New(args, cache)
				// Every pod is rejected on a full node first, as the
				// queue's backlog was.
				observe(cache, "full", status(100, 100, 0))
				pods := make([]*v1.Pod, len(sizes))
				for i, size := range sizes {
					p := pod(size)
					p.Name, p.UID = fmt.Sprintf("p%d", i), types.UID(fmt.Sprint(i))
					if st := filterOK(t, pl, p, "full"); st.IsSuccess() {
						t.Fatalf("%s fit a full node", size)
					}
					pods[i] = p
				}
				// Which of them the node's old view (none for an add) kept
				// out, by Filter.
				if u.old != nil {
					observe(cache, "n", u.old)
				}
				rejectedBefore := make([]bool, len(pods))
				for i, p := range pods {
					rejectedBefore[i] = !filterOK(t, pl, p, "n").IsSuccess()
				}
				notRejected := pod("100m")
				notRejected.Name, notRejected.UID = "never-rejected", "never"
				prev, cur := plugintest.Change(t, cache, clock, "n", u.old, u.new)
				got := pl.pick(prev, cur)
				if u.wantNone && len(got) > 0 {
					t.Errorf("pick named %v for an update that lowers no estimate", got)
				}
				if slices.Contains(got, keyOf(notRejected)) {
					t.Errorf("pick named a pod Filter never rejected")
				}
				// The cache holds the new view now: Filter's answer on it.
				for i, p := range pods {
					admitsNow := filterOK(t, pl, p, "n").IsSuccess()
					named := slices.Contains(got, keyOf(p))
					switch {
					case admitsNow && rejectedBefore[i] && !named:
						t.Errorf("Filter rejected the %s pod on the old view and admits it now, but pick left it out (named %v)", sizes[i], got)
					case !admitsNow && named:
						t.Errorf("pick named the %s pod, which Filter still rejects", sizes[i])
					}
				}
				t.Logf("named %d of %d rejected pods: %v", len(got), len(sizes), got)
			})
		}
	}
}

// An update on a node where Filter rejected no pending pod names none,
// however much its load fell: the pods were kept out elsewhere, or there by
// another filter, whose own events requeue them. On the node Filter
// rejected them on, the same update names them. The one exception is the
// pod still in its scheduling cycle, which Filter may not have recorded
// yet (rejected.Index.Begin): it is named on any node its predicate lets
// it in on, until the next pod's cycle begins or it is placed.
func TestPickOnlyOnNodesFilterRejectedOn(t *testing.T) {
	tests := []struct {
		name string
		node string
		// cycleOver: the next pod's cycle began after theirs, and Reserve
		// placed it elsewhere.
		cycleOver bool
		want      []string
	}{
		{name: "the node Filter rejected them on", node: "busy", cycleOver: true, want: []string{"p0", "p1"}},
		{name: "the node Filter rejected them on, p1 still in its cycle", node: "busy", want: []string{"p0", "p1"}},
		{name: "a node Filter rejected none on", node: "idle", cycleOver: true, want: []string{}},
		{name: "a node Filter rejected none on, p1 still in its cycle", node: "idle", want: []string{"p1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { clock.Set(now) })
			cache := newCache()
			pl := New(*configv1.DefaultLoadAwareArgs(), cache)
			pl.nodes = nodeLister(t, "busy", "idle")
			observe(cache, "busy", status(95, 50, 0))
			for i := range 2 {
				p := pod("1")
				p.Name, p.UID = fmt.Sprintf("p%d", i), types.UID(fmt.Sprint(i))
				if st := filterOK(t, pl, p, "busy"); st.IsSuccess() {
					t.Fatal("a 1-CPU pod fit a node at 95%")
				}
			}
			if tc.cycleOver {
				nextCycle(t, pl, "elsewhere")
			}
			// 95% -> 50%: 50 + 1000/16000 = 56.25 <= 80, and 95 > 80 before
			prev, cur := plugintest.Change(t, cache, clock, tc.node, status(95, 50, 0), status(50, 50, 0))
			if got := sortedNames(pl.pick(prev, cur)); !slices.Equal(got, tc.want) {
				t.Errorf("load fell on %s: pick named %v, want %v", tc.node, got, tc.want)
			}
		})
	}
}

// A node new to the cache (its NodeTelemetry created: a node added to the
// cluster) names the pods Filter rejected elsewhere that fit it: they were
// rejected before it existed, so not on it.
func TestPickOnANewNode(t *testing.T) {
	t.Cleanup(func() { clock.Set(now) })
	cache := newCache()
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	pl.nodes = nodeLister(t, "busy", "new")
	observe(cache, "busy", status(95, 50, 0))
	p := pod("1")
	if st := filterOK(t, pl, p, "busy"); st.IsSuccess() {
		t.Fatal("a 1-CPU pod fit a node at 95%")
	}
	nextCycle(t, pl, "busy") // ends p's
	prev, cur := plugintest.Change(t, cache, clock, "new", nil, status(10, 50, 0))
	if got := pl.pick(prev, cur); !slices.Equal(got, []types.NamespacedName{keyOf(p)}) {
		t.Errorf("a new node at 10%%: pick named %v, want [%v]", got, keyOf(p))
	}
	prev, cur = plugintest.Change(t, cache, clock, "new", status(10, 50, 0), status(5, 50, 0))
	if got := pl.pick(prev, cur); got != nil {
		t.Errorf("the same node, a little less loaded: pick named %v, want none (p fitted it already)", got)
	}
}

// nodeLister is a Node lister holding bare nodes of the names given.
func nodeLister(t *testing.T, names ...string) corelisters.NodeLister {
	t.Helper()
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for _, name := range names {
		if err := indexer.Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewNodeLister(indexer)
}

// nextCycle runs the next pod's cycle, which Reserve ends on node: the
// pod before it is no longer the one in its cycle (rejected.Index.Begin).
func nextCycle(t *testing.T, pl *LoadAware, node string) {
	t.Helper()
	next := pod("100m")
	next.Name, next.UID = "next", "next"
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(context.Background(), cs, next, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter(next): %v", st)
	}
	if st := pl.Reserve(context.Background(), cs, next, node); !st.IsSuccess() {
		t.Fatalf("Reserve(next): %v", st)
	}
}
