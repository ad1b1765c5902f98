// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/nodeset"
	"github.com/telesched/telesched/scheduler/telemetry"
)

func filterOK(t testing.TB, pl *LoadAware, p *v1.Pod, node string) *fwk.Status {
	t.Helper()
	cs := framework.NewCycleState()
	if _, st := pl.PreFilter(context.Background(), cs, p, nil); !st.IsSuccess() && !st.IsSkip() {
		t.Fatalf("PreFilter: %v", st)
	}
	return pl.Filter(context.Background(), cs, p, nodeInfo(node, nil))
}

// Defect 1: an agent 70 s behind the scheduler makes its node stale.
func TestAgentBehind(t *testing.T) {
	cache := newCache()
	t.Cleanup(func() { clock.Set(now) })
	args := *configv1.DefaultLoadAwareArgs()
	args.StaleTelemetryPolicy = config.StaleTelemetryReject
	pl := New(args, cache)
	cache.Set(telemetry.FromStatus("n", status(10, 10, 70*time.Second)))
	if st := filterOK(t, pl, pod("1"), "n"); !st.IsSuccess() {
		t.Errorf("a sample observed just now, from an agent 70s behind: Filter = %v, want success", st)
	}
}

// Defect 1: a sampleTime in the future keeps a node fresh after its agent dies.
func TestFutureSampleTime(t *testing.T) {
	cache := newCache()
	t.Cleanup(func() { clock.Set(now) })
	args := *configv1.DefaultLoadAwareArgs()
	args.StaleTelemetryPolicy = config.StaleTelemetryReject
	pl := New(args, cache)
	cache.Set(telemetry.FromStatus("n", status(10, 10, -time.Hour)))
	clock.Set(now.Add(5 * time.Minute))
	if st := filterOK(t, pl, pod("1"), "n"); st.IsSuccess() {
		t.Errorf("no sample for 5m (the last one dated an hour ahead): Filter passed, want stale under Reject")
	}
}

// Defect 1: an agent 15 s ahead retires reservations at once.
func TestAgentAhead(t *testing.T) {
	cache := newCache()
	t.Cleanup(func() { clock.Set(now) })
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	cache.Set(telemetry.FromStatus("n", status(60, 50, 0)))
	cs := framework.NewCycleState()
	p := pod("3")
	_, _ = pl.PreFilter(context.Background(), cs, p, nil)
	pl.Reserve(context.Background(), cs, p, "n")
	clock.Set(now.Add(time.Second))
	cache.Set(telemetry.FromStatus("n", status(60, 50, -15*time.Second))) // sampled 1 s later, by a clock 15 s ahead
	q := pod("3")
	q.UID = "q"
	if st := filterOK(t, pl, q, "n"); st.IsSuccess() {
		t.Error("a sample taken 1 s after the reservation retired it (agent 15 s ahead)")
	}
}

// Defect 2: a pod rejected only by reservations is named for activation
// when a sample retires them.
func TestPickOnRetirement(t *testing.T) {
	cache := newCache()
	t.Cleanup(func() { clock.Set(now) })
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	prev := cache.Set(telemetry.FromStatus("n", status(60, 50, 0)))
	cs := framework.NewCycleState()
	p := pod("3")
	_, _ = pl.PreFilter(context.Background(), cs, p, nil)
	pl.Reserve(context.Background(), cs, p, "n")
	pl.book.Running("n", p.UID) // its kubelet started it at once
	q := pod("3")
	q.Name, q.UID = "q", "q"
	if st := filterOK(t, pl, q, "n"); st.IsSuccess() {
		t.Fatal("q fit beside the reservation")
	}
	clock.Set(now.Add(11 * time.Second))
	// The views the cache's watcher hands pick: the one it held and the
	// one it stores now.
	cur := cache.Set(telemetry.FromStatus("n", status(60, 50, -11*time.Second)))
	if got := pl.pick(prev, cur); !slices.Contains(got, keyOf(q)) {
		t.Errorf("pick after the sample that retires the reservation = %v, want it to name q", got)
	}
}

// Defect 2: pick uses Filter's predicate: the pod's requests and the
// node's lowered threshold.
func TestPickMatchesFilter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cpu       string
		threshold string // the node's cpu threshold annotation, "" none
		old, new  int32  // the node's cpu percent
		want      bool
	}{
		// 95% -> 75%: measured under 80, but 75% + 4 CPUs of 16 = 100% > 80.
		{name: "a big pod still does not fit", cpu: "4", old: 95, new: 75, want: false},
		// 75% + 500m of 16 CPUs = 78.125 <= 80
		{name: "a small pod fits", cpu: "500m", old: 95, new: 75, want: true},
		// 95% -> 70%: 70 + 3.125 = 73.125 <= 80, but > 70
		{name: "over the node's lowered threshold", cpu: "500m", threshold: "70", old: 95, new: 70, want: false},
		// 95% -> 60%: 63.125 <= 70
		{name: "under the node's lowered threshold", cpu: "500m", threshold: "70", old: 95, new: 60, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := New(*configv1.DefaultLoadAwareArgs(), newCache())
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			if tc.threshold != "" {
				node.Annotations = map[string]string{config.NodeAnnotationCPUThresholdPercent: tc.threshold}
			}
			indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
			if err := indexer.Add(node); err != nil {
				t.Fatal(err)
			}
			pl.nodes = corelisters.NewNodeLister(indexer)
			if got := picks(t, pl, pod(tc.cpu), "n", status(tc.old, 50, 0), status(tc.new, 50, 0)); got != tc.want {
				t.Errorf("%s pod, node at %d%% -> %d%%: pick names it: %v, want %v", tc.cpu, tc.old, tc.new, got, tc.want)
			}
		})
	}
}

// Defect 2: deleting a pod whose reservation blocks another requeues it,
// whichever of the plugin's handlers sees the deletion first; a deletion
// that does not make room, or of a pod a sample already measured, does not.
func TestPodDeleteRequeues(t *testing.T) {
	cache := newCache()
	observe(cache, "n", status(60, 50, 0))
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	placed := func(uid, cpu string) *v1.Pod {
		p := pod(cpu)
		p.Name, p.UID, p.Spec.NodeName = uid, types.UID(uid), "n"
		pl.book.ReserveDemand("n", p.UID, estimate.Demand{CPUMilli: p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(), MemoryBytes: 0})
		return p
	}
	small, big := placed("small", "100m"), placed("big", "3")
	q := pod("2") // 60% + 3.1 CPUs reserved + 2 CPUs = 91.9% > 80; without big 72.5%
	if st := filterOK(t, pl, q, "n"); st.IsSuccess() {
		t.Fatal("q fit beside the reservations")
	}
	hint := func(gone *v1.Pod) fwk.QueueingHint {
		got, err := pl.podDeleteHint(klog.Background(), q, gone, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := hint(small); got != fwk.QueueSkip {
		t.Errorf("deleting the 100m pod: %v, want QueueSkip (q still does not fit)", got)
	}
	pl.book.End("n", big.UID) // the book's own Pod handler, first
	if got := hint(big); got != fwk.Queue {
		t.Errorf("deleting the 3-CPU pod: %v, want Queue", got)
	}
	if got := hint(placed("never", "1")); got != fwk.QueueSkip {
		t.Errorf("deleting a pod whose removal leaves q fitting as before: %v, want QueueSkip", got)
	}
	// A NodeTelemetry change activates through pick (rejected.OnTelemetry),
	// not through an event registered with the scheduling queue.
	if evs, _ := pl.EventsToRegister(context.Background()); len(evs) != 1 || evs[0].Event.Resource != fwk.Pod || evs[0].Event.ActionType != fwk.Delete {
		t.Errorf("events = %+v, want Pod Delete only", evs)
	}
}

// Defect 3: a reservation expires after 10 minutes even when no later
// Reserve or sample comes (an agent that stopped): it stops holding up the
// load bound that lets PreFilter skip.
func TestReservationExpires(t *testing.T) {
	cache := newCache()
	t.Cleanup(func() { clock.Set(now) })
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	pl.lowered = nodeset.New(pl.lowersThreshold)
	cache.Set(telemetry.FromStatus("a", status(60, 50, 0)))
	cs := framework.NewCycleState()
	p := pod("3")
	_, _ = pl.PreFilter(context.Background(), cs, p, nil)
	pl.Reserve(context.Background(), cs, p, "a")
	clock.Set(now.Add(11 * time.Minute))
	// a: 60% + 3 CPUs reserved + 2 CPUs = 91.25% > 80 while the reservation counts
	if _, st := pl.PreFilter(context.Background(), framework.NewCycleState(), pod("2"), nil); !st.IsSkip() {
		t.Errorf("11 minutes after the reservation, PreFilter = %v, want Skip (bound %+v)", st, pl.book.LoadBound())
	}
}

// Defect 7: a node annotation may lower a threshold, never raise it.
func TestAnnotationRaises(t *testing.T) {
	cache := newCache()
	cache.Set(telemetry.FromStatus("n", status(85, 50, 0)))
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	cs := framework.NewCycleState()
	p := pod("1")
	_, _ = pl.PreFilter(context.Background(), cs, p, nil)
	st := pl.Filter(context.Background(), cs, p, nodeInfo("n", map[string]string{config.NodeAnnotationCPUThresholdPercent: "95"}))
	if st.IsSuccess() {
		t.Error("a node at 85% passed a threshold of 80% raised to 95% by its annotation")
	}
}

// Defect 7: a forged DaemonSet owner reference does not skip the filter.
func TestForgedDaemonSetOwner(t *testing.T) {
	pl := New(*configv1.DefaultLoadAwareArgs(), newCache())
	p := pod("2")
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "no-such-ds", UID: "forged", Controller: ptr.To(true)}}
	if _, st := pl.PreFilter(context.Background(), framework.NewCycleState(), p, nil); st.Code() == fwk.Skip && !st.IsSuccess() {
		t.Error("a pod naming a DaemonSet that does not exist skipped LoadAware")
	}
}

// pick does not name a pod for a node its required node affinity
// excludes: no change there can let it in.
func TestPickSkipsNodesThePodCannotUse(t *testing.T) {
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	if err := indexer.Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "normal"}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pool string
		want bool
	}{{"normal", true}, {"busy", false}} {
		pl := New(*configv1.DefaultLoadAwareArgs(), newCache())
		pl.nodes = corelisters.NewNodeLister(indexer)
		p := pod("1")
		p.Spec.NodeSelector = map[string]string{"pool": tc.pool}
		if got := picks(t, pl, p, "n", status(95, 50, 0), status(50, 50, 0)); got != tc.want {
			t.Errorf("pod selecting pool %s, node in pool normal fell to 50%%: pick names it: %v, want %v", tc.pool, got, tc.want)
		}
	}
}

// One deletion is asked about every pending pod: each gets the answer of
// Filter's predicate before and after the freed reservation, although
// the deletion is read once; the next deletion is read afresh.
func TestPodDeleteHintAnswersEachPendingPod(t *testing.T) {
	cache := newCache()
	observe(cache, "n", status(60, 50, 0))
	pl := New(*configv1.DefaultLoadAwareArgs(), cache)
	placed := func(uid string, cpuMilli int64) *v1.Pod {
		p := pod("1")
		p.Name, p.UID, p.Spec.NodeName = uid, types.UID(uid), "n"
		pl.book.ReserveDemand("n", p.UID, estimate.Demand{CPUMilli: cpuMilli})
		return p
	}
	big := placed("big", 3000)
	other := placed("other", 1000)
	// reserved 4000m: 60% + (4000 + pod)/16000 > 80 for any pod over 0m;
	// without big (1000m reserved): 60% + (1000 + pod)/16000 <= 80 for a
	// pod up to 2200m.
	tests := []struct {
		name string
		cpu  string
		want fwk.QueueingHint
	}{
		{name: "fits once big is gone", cpu: "2", want: fwk.Queue},           // 60 + 3000/16000 = 78.75
		{name: "too big either way", cpu: "3", want: fwk.QueueSkip},          // 60 + 4000/16000 = 85
		{name: "the second pod that fits", cpu: "1500m", want: fwk.Queue},    // 60 + 2500/16000 = 75.6
		{name: "at the threshold after", cpu: "2200m", want: fwk.Queue},      // 60 + 3200/16000 = 80
		{name: "just over the threshold", cpu: "2216m", want: fwk.QueueSkip}, // 60 + 3216/16000 = 80.1
	}
	for _, tc := range tests {
		// Filter kept each out of n, beside big and other: 60% + (4000 +
		// 1500)/16000 = 94.4 > 80 for the smallest
		if st := filterOK(t, pl, pod(tc.cpu), "n"); st.IsSuccess() {
			t.Fatalf("a %s pod fit n beside 4 reserved CPUs", tc.cpu)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pl.podDeleteHint(klog.Background(), pod(tc.cpu), big, nil)
			if err != nil || got != tc.want {
				t.Errorf("deleting big, pending pod of %s: %v, %v; want %v", tc.cpu, got, err, tc.want)
			}
		})
	}
	// other's deletion, read afresh: big's reservation is undone already,
	// so 1000m more room: a 3-CPU pod fits after (60 + 3000/16000) and did
	// not before (60 + 4000/16000 = 85).
	if got, err := pl.podDeleteHint(klog.Background(), pod("3"), other, nil); err != nil || got != fwk.Queue {
		t.Errorf("deleting other, pending pod of 3 CPUs: %v, %v; want Queue", got, err)
	}
	// A deletion on a node Filter kept no pending pod out of helps none.
	observe(cache, "m", status(60, 50, 0))
	onM := pod("1")
	onM.Name, onM.UID, onM.Spec.NodeName = "on-m", "on-m", "m"
	pl.book.ReserveDemand("m", onM.UID, estimate.Demand{CPUMilli: 3000})
	if got, err := pl.podDeleteHint(klog.Background(), pod("2"), onM, nil); err != nil || got != fwk.QueueSkip {
		t.Errorf("deleting a pod on m, where Filter rejected none: %v, %v; want QueueSkip", got, err)
	}
}
