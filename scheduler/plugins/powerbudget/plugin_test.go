// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powerbudget

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	v1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/powerbudget"
	"github.com/telesched/telesched/scheduler/telemetry"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

var clock = plugintest.NewClock(now)

// curve is 100 W idle to 900 W at full load, a straight line: on 16 cores
// each 1000m adds 800/16 = 50 W.
var curve = []int32{100, 180, 260, 340, 420, 500, 580, 660, 740, 820, 900}

// status is a 16-core node 40 % busy drawing watts, sampled at sample,
// with the curve above unless bare.
func status(sample time.Time, watts int32, bare bool) *v1alpha1.NodeTelemetryStatus {
	st := &v1alpha1.NodeTelemetryStatus{
		SampleTime: metav1.NewTime(sample), IntervalSeconds: 5,
		CPU:   &v1alpha1.CPUStatus{LogicalCores: 16, OnlineCores: 16, UtilizationPercent: 40},
		Power: &v1alpha1.PowerStatus{Watts: watts},
	}
	if !bare {
		st.Power.Model = &v1alpha1.PowerModel{Ready: true, Basis: v1alpha1.PowerModelFitted,
			CurveWatts: curve, CurveUncertaintyWatts: make([]int32, telemetry.CurveKnots)}
	}
	return st
}

func spec(key, value string, watts int64, reserve, unmetered *int64) v1alpha1.PowerBudgetSpec {
	return v1alpha1.PowerBudgetSpec{NodeSelector: v1alpha1.NodeSelector{MatchLabels: map[string]v1alpha1.LabelValue{key: v1alpha1.LabelValue(value)}},
		BudgetWatts: watts, ReserveWatts: reserve, UnmeteredNodeWatts: unmetered}
}

// The domains of every test:
//
//	rack-a  2000 W: a1-a4 at 475 W: 1900 W, 95 %
//	rack-b  1500 W, unmetered 400 W: b1 500 W, b2 without telemetry and b3
//	        stale (its last sample: 500 W) at 400 W each: 1300 W
//	rack-c  2000 W: c1 500 W, c2 without telemetry, c3 300 W without a curve: 800 W
//	pdu-1   5000 W: x1, x2 700 W, z1 500 W: 1900 W
//	row-2   1000 W, reserve 100 W: x1 700 W, y1 100 W: 800 W of 900 W
//	aisle-1  600 W: z1 500 W
//	rack-g  1000 W: g1 650 W, two GPUs that draw 200 W more busy than idle
//	free, in no budget
var budgets = map[string]v1alpha1.PowerBudgetSpec{
	"rack-a":  spec("rack", "a", 2000, nil, nil),
	"rack-b":  spec("rack", "b", 1500, nil, ptr.To[int64](400)),
	"rack-c":  spec("rack", "c", 2000, nil, nil),
	"pdu-1":   spec("pdu", "1", 5000, nil, nil),
	"row-2":   spec("row", "2", 1000, ptr.To[int64](100), nil),
	"aisle-1": spec("aisle", "1", 600, nil, nil),
	"rack-g":  spec("rack", "g", 1000, nil, nil),
}

var nodes = []struct {
	name   string
	labels map[string]string
	watts  int32 // 0: no telemetry
	bare   bool  // no power curve
}{
	{"a1", map[string]string{"rack": "a"}, 475, false}, {"a2", map[string]string{"rack": "a"}, 475, false},
	{"a3", map[string]string{"rack": "a"}, 475, false}, {"a4", map[string]string{"rack": "a"}, 475, false},
	{"b1", map[string]string{"rack": "b"}, 500, false}, {"b2", map[string]string{"rack": "b"}, 0, false},
	{"b3", map[string]string{"rack": "b"}, 500, false},
	{"c1", map[string]string{"rack": "c"}, 500, false}, {"c2", map[string]string{"rack": "c"}, 0, false},
	{"c3", map[string]string{"rack": "c"}, 300, true},
	{"x1", map[string]string{"pdu": "1", "row": "2"}, 700, false}, {"x2", map[string]string{"pdu": "1"}, 700, false},
	{"y1", map[string]string{"row": "2"}, 100, false}, {"z1", map[string]string{"pdu": "1", "aisle": "1"}, 500, false},
	{"g1", map[string]string{"rack": "g"}, 650, false},
	{"free", map[string]string{"rack": "z"}, 500, false},
}

// apiServer answers the domains' PowerBudget informer: an empty list, and
// a watch that stays open until its request ends. A watch-list request is
// refused, so the reflector falls back to list and watch.
type apiServer struct{}

func (apiServer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Request: r}
	switch q := r.URL.Query(); {
	case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
		resp.StatusCode = http.StatusBadRequest
		resp.Body = io.NopCloser(strings.NewReader(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400}`))
	case q.Get("watch") == "true":
		pr, pw := io.Pipe()
		go func() { <-r.Context().Done(); _ = pw.Close() }()
		resp.Body = pr
	default:
		resp.Body = io.NopCloser(strings.NewReader(`{"apiVersion":"telemetry.telesched.io/v1alpha1","kind":"PowerBudgetList","metadata":{"resourceVersion":"1"},"items":[]}`))
	}
	return resp, nil
}

// newPlugin is the plugin over the domains above: budgets set directly,
// Nodes through the informers Start follows, telemetry observed now.
func newPlugin(t *testing.T) *PowerBudget {
	t.Helper()
	clock.Set(now)
	cache := plugintest.NewCache(clock)
	d := powerbudget.NewDomains(cache, estimate.NewBook(cache, estimate.DefaultOptions()), nil)
	for name, s := range budgets {
		if err := d.SetBudget(&v1alpha1.PowerBudget{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: s}); err != nil {
			t.Fatal(err)
		}
	}
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.labels}})
		if n.watts > 0 {
			sample := now
			if n.name == "b3" {
				sample = now.Add(-2 * time.Minute)
			}
			st := status(sample, n.watts, n.bare)
			if n.name == "g1" { // an idle GPU at 50 W, a busy one at 250 W
				st.GPUs = []v1alpha1.GPUStatus{{Index: 0, PowerWatts: ptr.To[int32](50), UtilizationPercent: ptr.To[int32](0)},
					{Index: 1, PowerWatts: ptr.To[int32](250), UtilizationPercent: ptr.To[int32](100)}}
			}
			plugintest.Observe(cache, clock, n.name, st)
		}
	}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	args := *configv1.DefaultPowerBudgetArgs()
	if err := d.Start(t.Context(), &rest.Config{Host: "http://api.test", Transport: apiServer{}}, factory, args, nil); err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	factory.WaitForCacheSync(t.Context().Done())
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s, all := d.Snapshot(now, args.TelemetryMaxAge), true
		for _, n := range nodes {
			all = all && (s.Node(n.name) != nil) == (n.name != "free")
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the domains did not see every Node's labels")
		}
	}
	pl := New(args, cache, d)
	pl.nodes = factory.Core().V1().Nodes().Lister() // as NewFactory sets it
	return pl
}

// snapshot is the domains as the plugin sees them now.
func snapshot(pl *PowerBudget) *powerbudget.Snapshot {
	return pl.domains.Snapshot(clock.Now(), pl.args.TelemetryMaxAge)
}

func TestFits(t *testing.T) {
	pl := newPlugin(t)
	for _, tc := range []struct {
		node           string
		cpuMilli, gpus int64
		want           string
	}{
		// 4 cores at 50 W each on a rack at 95 %.
		{"a1", 4000, 0, "PowerBudget rack-a: measured 1900W + reserved 0W + this pod 200W = 2100W > budget 2000W - reserve 0W (4 nodes)"},
		{"a1", 1000, 0, ""},
		{"a1", 2000, 0, ""}, // 1900 + 100: at the budget
		// 2001m adds 100.05 W, shown rounded up.
		{"a1", 2001, 0, "PowerBudget rack-a: measured 1900W + reserved 0W + this pod 101W = 2001W > budget 2000W - reserve 0W (4 nodes)"},
		{"b1", 4000, 0, ""}, // 1300 + 200: at the budget
		// Unmetered, at 400 W already: the pod adds 0 (on b3's stale curve,
		// 16 cores would add 480 W).
		{"b2", 16000, 0, ""},
		{"b3", 16000, 0, ""},
		{"free", 64000, 0, ""}, // in no budget
		{"ghost", 1000, 0, ""},
		{"c2", 1000, 0, "node has no fresh power telemetry and PowerBudget rack-c sets no unmeteredNodeWatts (2 of its 3 nodes lack one or the other)"},
		{"c3", 1000, 0, "node has no power curve to estimate the pod's watts and PowerBudget rack-c sets no unmeteredNodeWatts (2 of its 3 nodes lack one or the other)"},
		{"c1", 1000, 0, ""},
		// x1 is in pdu-1 (plenty of room) and row-2: 800 + 100 <= 1000 - 100.
		{"x1", 2000, 0, ""},
		{"x1", 3000, 0, "PowerBudget row-2: measured 800W + reserved 0W + this pod 150W = 950W > budget 1000W - reserve 100W (2 nodes)"},
		{"x2", 3000, 0, ""}, // pdu-1 only
		// z1 is in aisle-1 (500 + 150 > 600) and pdu-1 (room).
		{"z1", 3000, 0, "PowerBudget aisle-1: measured 500W + reserved 0W + this pod 150W = 650W > budget 600W - reserve 0W (1 nodes)"},
		{"z1", 2000, 0, ""},
		{"g1", 0, 1, ""}, // 650 + 200
		{"g1", 0, 2, "PowerBudget rack-g: measured 650W + reserved 0W + this pod 400W = 1050W > budget 1000W - reserve 0W (1 nodes)"},
	} {
		if got := fits(snapshot(pl), tc.node, estimate.Demand{CPUMilli: tc.cpuMilli, GPUs: tc.gpus}); got != tc.want {
			t.Errorf("fits(%s, %dm, %d GPUs) = %q, want %q", tc.node, tc.cpuMilli, tc.gpus, got, tc.want)
		}
	}

	// A pod placed on a2 since its sample: 2000m, 100 W, fills rack-a.
	pl.domains.Book().Reserve("a2", pod("p", "2"))
	want := "PowerBudget rack-a: measured 1900W + reserved 100W + this pod 50W = 2050W > budget 2000W - reserve 0W (4 nodes)"
	if got := fits(snapshot(pl), "a1", estimate.Demand{CPUMilli: 1000, GPUs: 0}); got != want {
		t.Errorf("with 100 W reserved, fits = %q, want %q", got, want)
	}
	pl.domains.Book().Unreserve("a2", "p")
	if got := fits(snapshot(pl), "a1", estimate.Demand{CPUMilli: 1000, GPUs: 0}); got != "" {
		t.Errorf("after Unreserve, fits = %q", got)
	}
}

// TestScore: 100 × the smallest share of a domain's limit left with the
// pod placed, over fullScoreHeadroomPercent: at 100 % the share itself, at
// the default 50 % twice it, up to 100.
func TestScore(t *testing.T) {
	pl := newPlugin(t)
	s := snapshot(pl)
	for _, tc := range []struct {
		node          string
		cpuMilli      int64
		full100, full int64 // fullScoreHeadroomPercent 100, 50
	}{
		{"free", 1000, 100, 100},
		{"b2", 1000, 13, 26}, // unmetered, the pod adds 0: 200/1500 = 13.3 %
		{"b3", 1000, 13, 26},
		{"b1", 1000, 10, 20},  // (1500 - 1300 - 50)/1500
		{"z1", 1000, 8, 16},   // aisle-1: (600 - 500 - 50)/600 = 8.3 %, below pdu-1's 61
		{"x2", 1000, 61, 100}, // (5000 - 1900 - 50)/5000
		{"x1", 1000, 5, 11},   // row-2: (900 - 800 - 50)/900 = 5.6 %, below pdu-1's 61
		{"a1", 1000, 2, 5},    // (2000 - 1900 - 50)/2000 = 2.5 %
		{"a1", 4000, 0, 0},    // -5 %, floored at 0
	} {
		for full, want := range map[int32]int64{100: tc.full100, configv1.DefaultFullScoreHeadroomPercent: tc.full} {
			if got := score(s, tc.node, estimate.Demand{CPUMilli: tc.cpuMilli}, full); got != want {
				t.Errorf("score(%s, %dm, full at %d%%) = %d, want %d", tc.node, tc.cpuMilli, full, got, want)
			}
		}
	}
	if full := pl.args.FullScoreHeadroomPercent; full != 50 {
		t.Errorf("default fullScoreHeadroomPercent %d, want 50", full)
	}
}

func pod(uid, cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
	}}}}
}

// budgetObj is a PowerBudget object as the budgets' informer hands it.
func budgetObj(t *testing.T, s v1alpha1.PowerBudgetSpec) *unstructured.Unstructured {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.PowerBudget{ObjectMeta: metav1.ObjectMeta{Name: "rack-a"}, Spec: s})
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func TestBudgetHint(t *testing.T) {
	pl := New(*configv1.DefaultPowerBudgetArgs(), plugintest.NewCache(clock), newDomains(plugintest.NewCache(clock)))
	base := spec("rack", "a", 2000, ptr.To[int64](100), nil)
	for _, tc := range []struct {
		name string
		edit func(s *v1alpha1.PowerBudgetSpec) // nil: deleted
		want fwk.QueueingHint
	}{
		{"unchanged", func(*v1alpha1.PowerBudgetSpec) {}, fwk.QueueSkip},
		{"budget raised", func(s *v1alpha1.PowerBudgetSpec) { s.BudgetWatts = 2100 }, fwk.Queue},
		{"budget lowered", func(s *v1alpha1.PowerBudgetSpec) { s.BudgetWatts = 1900 }, fwk.QueueSkip},
		{"reserve lowered", func(s *v1alpha1.PowerBudgetSpec) { s.ReserveWatts = ptr.To[int64](50) }, fwk.Queue},
		{"reserve removed", func(s *v1alpha1.PowerBudgetSpec) { s.ReserveWatts = nil }, fwk.Queue},
		{"reserve raised", func(s *v1alpha1.PowerBudgetSpec) { s.ReserveWatts = ptr.To[int64](200) }, fwk.QueueSkip},
		// 2100 - 200 = 1900 = 2000 - 100: the limit holds.
		{"budget and reserve raised alike", func(s *v1alpha1.PowerBudgetSpec) { s.BudgetWatts, s.ReserveWatts = 2100, ptr.To[int64](200) }, fwk.QueueSkip},
		{"selector changed", func(s *v1alpha1.PowerBudgetSpec) { s.NodeSelector.MatchLabels["rack"] = "b" }, fwk.Queue},
		{"unmetered set", func(s *v1alpha1.PowerBudgetSpec) { s.UnmeteredNodeWatts = ptr.To[int64](300) }, fwk.Queue},
		{"deleted", nil, fwk.Queue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var newObj any
			if tc.edit != nil {
				s := spec("rack", "a", 2000, ptr.To[int64](100), nil)
				tc.edit(&s)
				newObj = budgetObj(t, s)
			}
			got, err := pl.budgetHint(klog.Background(), pod("p", "1"), budgetObj(t, base), newObj)
			if err != nil || got != tc.want {
				t.Errorf("budgetHint = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if got, err := pl.budgetHint(klog.Background(), pod("p", "1"), nil, "not a budget"); got != fwk.Queue || err == nil {
		t.Errorf("budgetHint on a bad object = %v, %v; want Queue and an error", got, err)
	}

	// A status write: the generation is unchanged, so the spec is, and
	// nothing is decoded (a spec that would not decode shows it).
	old, cur := budgetObj(t, base), budgetObj(t, base)
	for _, o := range []*unstructured.Unstructured{old, cur} {
		o.SetGeneration(3)
		if err := unstructured.SetNestedField(o.Object, "not watts", "spec", "budgetWatts"); err != nil {
			t.Fatal(err)
		}
	}
	if err := unstructured.SetNestedField(cur.Object, int64(1890), "status", "measuredWatts"); err != nil {
		t.Fatal(err)
	}
	if got, err := pl.budgetHint(klog.Background(), pod("p", "1"), old, cur); got != fwk.QueueSkip || err != nil {
		t.Errorf("budgetHint on a status write (generation 3 both) = %v, %v; want QueueSkip without decoding", got, err)
	}
	cur.SetGeneration(4)
	if got, _ := pl.budgetHint(klog.Background(), pod("p", "1"), old, cur); got != fwk.Queue {
		t.Errorf("budgetHint on a new generation = %v; want it decoded (Queue on a spec that does not decode)", got)
	}
}

func newDomains(cache *telemetry.Cache) *powerbudget.Domains {
	return powerbudget.NewDomains(cache, estimate.NewBook(cache, estimate.DefaultOptions()), nil)
}

func TestNodeHint(t *testing.T) {
	d := newDomains(plugintest.NewCache(clock))
	for name, s := range map[string]v1alpha1.PowerBudgetSpec{"rack-a": spec("rack", "a", 2000, nil, nil), "row-1": spec("row", "1", 5000, nil, nil)} {
		if err := d.SetBudget(&v1alpha1.PowerBudget{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: s}); err != nil {
			t.Fatal(err)
		}
	}
	pl := New(*configv1.DefaultPowerBudgetArgs(), plugintest.NewCache(clock), d)
	node := func(kv ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{}}}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
		return n
	}
	for _, tc := range []struct {
		name     string
		old, cur *corev1.Node
		want     fwk.QueueingHint
	}{
		{"left rack-a for rack-b", node("rack", "a"), node("rack", "b"), fwk.Queue},
		{"left row-1, still in rack-a", node("rack", "a", "row", "1"), node("rack", "a"), fwk.Queue},
		{"joined row-1", node("rack", "a"), node("rack", "a", "row", "1"), fwk.QueueSkip},
		{"joined rack-a", node("rack", "z"), node("rack", "a"), fwk.QueueSkip},
		{"in no budget", node("x", "1"), node("x", "2"), fwk.QueueSkip},
	} {
		if got, err := pl.nodeHint(klog.Background(), pod("p", "1"), tc.old, tc.cur); err != nil || got != tc.want {
			t.Errorf("%s: nodeHint = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// withAffinity gives p a required node affinity of the one term.
func withAffinity(p *corev1.Pod, term corev1.NodeSelectorTerm) *corev1.Pod {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{term},
	}}}
	return p
}

// labelTerm selects the nodes whose label key is one of values (op In) or
// none of them (NotIn).
func labelTerm(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// notNamed selects every node but those named.
func notNamed(names ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: names}}}
}

// admitted reports whether p may go to the fixture's node name by its
// required node affinity: the scheduler's NodeAffinity filter runs
// PowerBudget's Filter on no other node.
func admitted(t *testing.T, pl *PowerBudget, p *corev1.Pod, name string) bool {
	t.Helper()
	n, err := pl.nodes.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(n)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// cycle runs a scheduling cycle's PreFilter and Filter for p on every node
// of the fixture p's affinity admits, with the domains as of every sample
// the cache holds (on a clock that stands still, PreFilter's Snapshot would
// reuse one up to MaxSampleLag behind them), and returns the nodes Filter
// rejected p on. The cycle then ends (the next cycle's Begin replaces
// it), so that the index names p only as Filter recorded it.
func cycle(t *testing.T, pl *PowerBudget, p *corev1.Pod) map[string]bool {
	t.Helper()
	pl.domains.SnapshotLatest(clock.Now(), pl.args.TelemetryMaxAge) // PreFilter's Snapshot reuses it
	ctx, cs := context.Background(), framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, cs, p, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	rejected := map[string]bool{}
	for _, n := range nodes {
		if !admitted(t, pl, p, n.name) {
			continue
		}
		ni := framework.NewNodeInfo()
		ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}})
		switch st := pl.Filter(ctx, cs, p, ni); {
		case st.Code() == fwk.Unschedulable:
			rejected[n.name] = true
		case !st.IsSuccess():
			t.Fatalf("Filter on %s: %v", n.name, st)
		}
	}
	pl.rejected.End(p)
	return rejected
}

// domainMembers are the nodes of node's budgets: where the room a change
// of node's telemetry frees lies.
func domainMembers(pl *PowerBudget, node string) []string {
	snap := pl.domains.SnapshotLatest(clock.Now(), pl.args.TelemetryMaxAge)
	ns := snap.Node(node)
	if ns == nil {
		return nil
	}
	var members []string
	for _, i := range ns.Domains {
		for _, m := range snap.Domains[i].Members {
			if !slices.Contains(members, m) {
				members = append(members, m)
			}
		}
	}
	return members
}

// TestPick: a pod Filter rejected before a NodeTelemetry change is named by
// pick (so rejected.OnTelemetry activates it) when the change may have
// freed room in the node's domains and the pod fits a member its node
// affinity admits. Each case checks pick against Filter run after the
// change, too: a pod Filter now takes on a member it rejected before must
// be named; one Filter rejects on every member it may go to, not.
func TestPick(t *testing.T) {
	for _, tc := range []struct {
		name     string
		node     string
		cpu      string
		old, cur *v1alpha1.NodeTelemetryStatus // old nil: an add
		// reserved: a 4-core pod placed on the node this long before now.
		reserved time.Duration
		// affinity, when set, is the pod's required node affinity.
		affinity *corev1.NodeSelectorTerm
		want     bool
	}{
		// rack-a: 1900 W - 100 W + 200 W for 4 cores = 2000 W.
		{name: "fell enough", node: "a1", cpu: "4", old: status(now.Add(-5*time.Second), 475, false), cur: status(now, 375, false), want: true},
		// The same pod kept off a1: a2-a4 take it now.
		{name: "fell enough, pod kept off the node that changed", node: "a1", cpu: "4", old: status(now.Add(-5*time.Second), 475, false), cur: status(now, 375, false),
			affinity: ptr.To(notNamed("a1")), want: true},
		{name: "fell too little", node: "a1", cpu: "4", old: status(now.Add(-5*time.Second), 475, false), cur: status(now, 400, false), want: false},
		// 1905 + 50 fits, but nothing fell.
		{name: "rose", node: "a1", cpu: "1", old: status(now.Add(-5*time.Second), 475, false), cur: status(now, 480, false), want: false},
		{name: "unchanged", node: "a1", cpu: "1", old: status(now.Add(-5*time.Second), 475, false), cur: status(now, 475, false), want: false},
		{name: "added", node: "a1", cpu: "1", cur: status(now, 475, false), want: true},
		// c2 had no telemetry, and rack-c sets no unmeteredNodeWatts: Filter
		// rejected every pod there. Its first sample lets a 1-core pod in.
		{name: "added where there was none", node: "c2", cpu: "1", cur: status(now, 500, false), want: true},
		{name: "fresh again", node: "a1", cpu: "1", old: status(now.Add(-2*time.Minute), 475, false), cur: status(now, 475, false), want: true},
		{name: "fresh again, no room", node: "a1", cpu: "4", old: status(now.Add(-2*time.Minute), 475, false), cur: status(now, 475, false), want: false},
		// x1 falls to 600 W: 300 W for 6 cores still take row-2 past its
		// 900 W (600 + 100 + 300 = 1000), but the room is pdu-1's too,
		// and there x2 takes the pod (1800 + 300 W of 5000 W).
		{name: "room on another node of the domain", node: "x1", cpu: "6", old: status(now.Add(-5*time.Second), 700, false), cur: status(now, 600, false), want: true},
		// The same pod kept off row-2 may go only to x2 and z1 of x1's
		// domains: x2 takes it.
		{name: "affinity admits only another member with room", node: "x1", cpu: "6", old: status(now.Add(-5*time.Second), 700, false), cur: status(now, 600, false),
			affinity: ptr.To(labelTerm("row", corev1.NodeSelectorOpNotIn, "2")), want: true},
		// The same pod held to row-2 may go only to x1 and y1, which row-2
		// still keeps it off: the room on x2 is no use to it.
		{name: "affinity excludes every member with room", node: "x1", cpu: "6", old: status(now.Add(-5*time.Second), 700, false), cur: status(now, 600, false),
			affinity: ptr.To(labelTerm("row", corev1.NodeSelectorOpIn, "2")), want: false},
		{name: "in no budget", node: "free", cpu: "1", old: status(now.Add(-5*time.Second), 500, false), cur: status(now, 100, false), want: false},
		// 200 W reserved fills rack-a (2100 W); the sample 10 s after the
		// placement measures it (1905 W): a 1-core pod fits.
		{name: "reservation retired", node: "a1", cpu: "1", old: status(now.Add(-15*time.Second), 475, false), cur: status(now, 480, false),
			reserved: 10 * time.Second, want: true},
		{name: "reservation not yet retired", node: "a1", cpu: "1", old: status(now.Add(-15*time.Second), 475, false), cur: status(now, 480, false),
			reserved: 5 * time.Second, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := newPlugin(t)
			if tc.reserved > 0 {
				clock.Set(now.Add(-tc.reserved))
				pl.domains.Book().Reserve(tc.node, pod("placed", "4"))
				pl.domains.Book().Running(tc.node, "placed") // its kubelet started it at once
				clock.Set(now)
			}
			if tc.old != nil {
				plugintest.Observe(pl.cache, clock, tc.node, tc.old) // the view before the change
			}
			p := pod("p", tc.cpu)
			if tc.affinity != nil {
				p = withAffinity(p, *tc.affinity)
			}
			key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
			before := cycle(t, pl, p)
			if len(before) == 0 || pl.rejected.Len() != 1 {
				t.Fatalf("before the change Filter rejected the pod on %v and recorded %d pods; want it rejected somewhere and recorded", before, pl.rejected.Len())
			}

			prev, cur := plugintest.Change(t, pl.cache, clock, tc.node, tc.old, tc.cur)
			got := pl.pick(prev, cur)
			named := slices.Contains(got, key)
			if named != tc.want || len(got) > 1 {
				t.Errorf("pick = %v; want %v named: %v", got, key, tc.want)
			}

			// Ground truth: Filter after the change, on the members of the
			// node's domains the pod may go to.
			after := cycle(t, pl, p)
			var fitsNow, freed []string
			for _, m := range domainMembers(pl, tc.node) {
				if !admitted(t, pl, p, m) || after[m] {
					continue
				}
				fitsNow = append(fitsNow, m)
				if before[m] {
					freed = append(freed, m)
				}
			}
			if len(freed) > 0 && !named {
				t.Errorf("Filter now takes the pod on %v, which it rejected before the change, but pick = %v does not name it", freed, got)
			}
			if len(fitsNow) == 0 && named {
				t.Errorf("pick names the pod, but Filter still rejects it on every member of %s's domains it may go to (rejected on %v)", tc.node, after)
			}
		})
	}
}
