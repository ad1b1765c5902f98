// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

var pbResource = telemetryv1alpha1.SchemeGroupVersion.WithResource("powerbudgets")

// TestPowerBudgetValidation: the API server refuses a bad budget with the
// field that is wrong, as `kubectl apply` (strict field validation) sends
// it, and takes a good one.
func TestPowerBudgetValidation(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	ctx := t.Context()
	const good = `apiVersion: telemetry.telesched.io/v1alpha1
kind: PowerBudget
metadata:
  name: NAME
spec:
  nodeSelector:
    matchLabels:
      topology.kubernetes.io/zone: rack-a
  budgetWatts: 12000
  reserveWatts: 500
`
	for _, tc := range []struct {
		name, from, to string
		want           []string // in the error; nil: accepted
	}{
		{"good", "", "", nil},
		{"good, by expression", "    matchLabels:\n      topology.kubernetes.io/zone: rack-a\n",
			"    matchExpressions:\n    - {key: example.com/pdu, operator: In, values: [pdu-1, pdu-2]}\n", nil},
		{"zero budget", "budgetWatts: 12000", "budgetWatts: 0", []string{"spec.budgetWatts", "greater than or equal to 1"}},
		{"negative budget", "budgetWatts: 12000", "budgetWatts: -5", []string{"spec.budgetWatts", "greater than or equal to 1"}},
		{"negative reserve", "reserveWatts: 500", "reserveWatts: -1", []string{"spec.reserveWatts", "greater than or equal to 0"}},
		{"reserve over budget", "reserveWatts: 500", "reserveWatts: 12000", []string{"spec.reserveWatts", "reserveWatts must be below budgetWatts"}},
		{"no selector", "  nodeSelector:\n    matchLabels:\n      topology.kubernetes.io/zone: rack-a\n", "", []string{"spec.nodeSelector", "Required value"}},
		{"empty selector", "    matchLabels:\n      topology.kubernetes.io/zone: rack-a\n", "    matchLabels: {}\n",
			[]string{"spec.nodeSelector", "an empty selector would pick every node"}},
		{"bad label key", "topology.kubernetes.io/zone: rack-a", "Rack A: rack-a", []string{"spec.nodeSelector.matchLabels", "a label key is"}},
		{"bad label value", "zone: rack-a", "zone: rack a!", []string{"spec.nodeSelector.matchLabels.topology.kubernetes.io/zone", "should match"}},
		{"bad operator", "    matchLabels:\n      topology.kubernetes.io/zone: rack-a\n",
			"    matchExpressions:\n    - {key: rack, operator: Near, values: [a]}\n", []string{"spec.nodeSelector.matchExpressions[0].operator", "Unsupported value"}},
		{"In without values", "    matchLabels:\n      topology.kubernetes.io/zone: rack-a\n",
			"    matchExpressions:\n    - {key: rack, operator: In}\n", []string{"spec.nodeSelector.matchExpressions[0]", "In and NotIn need values"}},
		{"unknown field", "reserveWatts: 500", "reserveWatts: 500\n  budgetAmps: 50", []string{`unknown field "spec.budgetAmps"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(good, "NAME", "pb-"+strings.NewReplacer(" ", "-", ",", "").Replace(tc.name), 1)
			if tc.from != "" {
				if !strings.Contains(doc, tc.from) {
					t.Fatalf("case edits %q, which the good budget lacks", tc.from)
				}
				doc = strings.Replace(doc, tc.from, tc.to, 1)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatal(err)
			}
			_, err := c.dyn.Resource(pbResource).Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("a good budget was refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("create error = %v, want Invalid or BadRequest", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// rackNode is a fresh telemetry status of a 16-core node drawing watts at
// cpuPercent, on a straight power curve of 100 W idle to 900 W at full
// load: 50 W a core. Its thermal headroom is ample.
func rackNode(cpuPercent, watts int32) telemetryv1alpha1.NodeTelemetryStatus {
	st := nodeStatus(cpuPercent, 50, 100)
	curve := make([]int32, 11)
	for k := range curve {
		curve[k] = 100 + 80*int32(k)
	}
	st.Power = &telemetryv1alpha1.PowerStatus{
		Watts: watts, Sources: []telemetryv1alpha1.PowerSource{telemetryv1alpha1.PowerSourceRAPL},
		Model: &telemetryv1alpha1.PowerModel{
			Ready: true, Basis: telemetryv1alpha1.PowerModelFitted, Samples: 200, UtilizationSpreadPercent: 80,
			IdleWatts: ptr.To[int32](100), FullLoadWatts: ptr.To[int32](900),
			CurveWatts: curve, CurveUncertaintyWatts: make([]int32, 11),
		},
	}
	return st
}

// rackBudget creates the PowerBudget name of budgetWatts over the nodes
// labelled example.com/rack=<name>, deleted at the end of the test.
func rackBudget(ctx context.Context, t *testing.T, c clients, name string, budgetWatts int64) {
	t.Helper()
	pb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "PowerBudget",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"matchLabels": map[string]any{"example.com/rack": name}},
			"budgetWatts":  budgetWatts,
		},
	}}
	if _, err := c.dyn.Resource(pbResource).Create(ctx, pb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.dyn.Resource(pbResource).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	})
}

// rack creates nodes labelled example.com/rack=<rack>, each publishing st,
// and a PowerBudget for them.
func rack(t *testing.T, c clients, name string, nodes int, st telemetryv1alpha1.NodeTelemetryStatus, budgetWatts int64) []string {
	t.Helper()
	ctx := t.Context()
	var names []string
	for i := range nodes {
		node := schedNode(ctx, t, c, fmt.Sprintf("%s-%d", name, i))
		node.Labels["example.com/rack"] = name
		if _, err := c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.applyStatusCreating(ctx, node, st); err != nil {
			t.Fatal(err)
		}
		names = append(names, node.Name)
	}
	rackBudget(ctx, t, c, name, budgetWatts)
	return names
}

// rackPod requests cpu on the nodes of a rack.
func rackPod(t *testing.T, c clients, name, rackName, cpu string) {
	t.Helper()
	pod := testPod(name, "telesched")
	pod.Spec.NodeSelector = map[string]string{"example.com/rack": rackName}
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}
	if _, err := c.kube.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.kube.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
}

func getBudget(t *testing.T, c clients, name string) *telemetryv1alpha1.PowerBudget {
	t.Helper()
	u, err := c.dyn.Resource(pbResource).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pb := &telemetryv1alpha1.PowerBudget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, pb, true); err != nil {
		t.Fatal(err)
	}
	return pb
}

// TestPowerBudgetRack: a rack at 95 % of its budget rejects a pod whose
// watts would take it over, with the numbers in the event; takes a
// smaller pod; and takes the first pod once the rack's load falls,
// through the plugin's hint on the NodeTelemetry updates (no flush: the
// scheduler's own is every 5 minutes). The budget's status shows the
// numbers the scheduler judged by.
func TestPowerBudgetRack(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	// 4 nodes at 475 W: 1900 W of a 2000 W budget, 100 W of headroom. At
	// 50 W a core, 4 cores (200 W) do not fit and 1 core (50 W) does.
	nodes := rack(t, c, "rack-hot", 4, rackNode(47, 475), 2000)
	_, log := startScheduler(t, schedulerConfig(t, ""), "--power-budget-status-interval=1s", "--power-budget-status-heartbeat=5s")

	waitFor(t, "the budget's status", 30*time.Second, func() bool {
		st := getBudget(t, c, "rack-hot").Status
		return st.MeasuredWatts != nil && *st.MeasuredWatts == 1900 && st.Nodes == 4 && *st.HeadroomWatts == 100
	})
	// Its nodes' watts are RAPL: the status says so, and warns once with
	// an Event on the budget.
	st := getBudget(t, c, "rack-hot").Status
	if !slices.Equal(st.PowerSources, []telemetryv1alpha1.PowerSource{telemetryv1alpha1.PowerSourceRAPL}) {
		t.Errorf("status.powerSources %v, want [rapl]", st.PowerSources)
	}
	if cond := meta.FindStatusCondition(st.Conditions, "PowerSourcesComparable"); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "PartialMeters" {
		t.Errorf("PowerSourcesComparable condition %+v, want False/PartialMeters", cond)
	}
	waitFor(t, "a PartialMeters Event on the budget", 30*time.Second, func() bool {
		evs, err := c.kube.CoreV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.kind=PowerBudget,involvedObject.name=rack-hot,reason=PartialMeters"})
		return err == nil && len(evs.Items) > 0
	})

	rackPod(t, c, "rack-big", "rack-hot", "4")
	msg := waitFailedScheduling(t, c, "rack-big", 30*time.Second)
	t.Logf("FailedScheduling: %s", msg)
	if want := "PowerBudget rack-hot: measured 1900W + reserved 0W + this pod 200W = 2100W > budget 2000W - reserve 0W (4 nodes)"; !strings.Contains(msg, want) {
		t.Errorf("FailedScheduling message lacks %q", want)
	}

	rackPod(t, c, "rack-small", "rack-hot", "1")
	small := waitScheduled(t, c, "rack-small", 30*time.Second)
	t.Logf("rack-small went to %s", small)
	waitFor(t, "the small pod reserved in the budget's status", 30*time.Second, func() bool {
		st := getBudget(t, c, "rack-hot").Status
		return st.ReservedWatts != nil && *st.ReservedWatts == 50 && *st.HeadroomWatts == 50
	})
	if p, _ := c.kube.CoreV1().Pods("default").Get(t.Context(), "rack-big", metav1.GetOptions{}); p.Spec.NodeName != "" {
		t.Fatalf("rack-big was placed on %s with 50 W of headroom", p.Spec.NodeName)
	}

	// The rack's load falls to 400 W a node, one node after the other:
	// with two nodes down the domain reads 1750 W + 50 W reserved, and
	// the big pod's 200 W fit.
	fell := time.Now()
	for _, n := range nodes {
		if _, err := c.applyStatus(t.Context(), n, rackNode(37, 400)); err != nil {
			t.Fatal(err)
		}
	}
	node := waitScheduled(t, c, "rack-big", 60*time.Second)
	t.Logf("rack-big went to %s %v after the rack's load fell", node, time.Since(fell).Round(10*time.Millisecond))
	if time.Since(fell) > 4*time.Minute {
		t.Errorf("rack-big took %v: that is the scheduler's periodic flush, not the hint", time.Since(fell))
	}
	if act := regexp.MustCompile(`"node telemetry lets pods in; activating them" plugin="PowerBudget" node="rack-hot-\d" pods=\[.*"default/rack-big"`); !act.MatchString(log.String()) {
		t.Errorf("the scheduler's log lacks PowerBudget's activation of rack-big (%s)", act)
	}
	st = getBudget(t, c, "rack-hot").Status
	if ready := meta.FindStatusCondition(st.Conditions, "Ready"); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready condition %+v, want True", ready)
	}
}

// TestPowerBudgetBurst: 50 pods arrive at once at a rack with room for 10
// by its budget, and no node publishes a new sample: the pods placed count
// toward the rack (reservations), so 10 are placed and 40 wait.
func TestPowerBudgetBurst(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	// 2 nodes at 400 W, a budget of 1050 W: 250 W of headroom, at 25 W a
	// pod of 500m.
	rack(t, c, "rack-burst", 2, rackNode(37, 400), 1050)
	startScheduler(t, schedulerConfig(t, ""), "--power-budget-status-interval=1s")
	waitFor(t, "the budget's status", 30*time.Second, func() bool {
		st := getBudget(t, c, "rack-burst").Status
		return st.MeasuredWatts != nil && *st.MeasuredWatts == 800 && st.Nodes == 2
	})
	for i := range 50 {
		rackPod(t, c, fmt.Sprintf("burst-rack-%02d", i), "rack-burst", "500m")
	}
	count := func() int {
		list, err := c.kube.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range list.Items {
			if strings.HasPrefix(p.Name, "burst-rack-") && p.Spec.NodeName != "" {
				n++
			}
		}
		return n
	}
	waitFor(t, "10 pods placed", 60*time.Second, func() bool { return count() >= 10 })
	msg := waitFailedScheduling(t, c, "burst-rack-49", 60*time.Second)
	// Time for more placements, were the reservations not counted.
	time.Sleep(5 * time.Second)
	placed := count()
	t.Logf("placed %d of 50; a waiting pod's event: %s", placed, msg)
	if placed != 10 {
		t.Errorf("%d pods placed before the next samples, want the budget's 10", placed)
	}
	st := getBudget(t, c, "rack-burst").Status
	t.Logf("status: measured %d W, reserved %d W, headroom %d W", *st.MeasuredWatts, *st.ReservedWatts, *st.HeadroomWatts)
	if *st.ReservedWatts != 250 || *st.HeadroomWatts != 0 {
		t.Errorf("status reserved %d W, headroom %d W; want 250 and 0", *st.ReservedWatts, *st.HeadroomWatts)
	}
}

// TestPowerBudgetTwoReplicas: the replica that writes PowerBudget status
// need not be the one that schedules. Replica B runs a profile no pod
// names and starts first, so it holds the status Lease; replica A places
// the pods. B's status counts A's pods as reserved (it saw them bound),
// A writes nothing while B holds the Lease, and when B stops A takes the
// Lease over and the status follows the rack's next samples.
func TestPowerBudgetTwoReplicas(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	nodes := rack(t, c, "rack-two", 2, rackNode(37, 400), 2000)
	standby := strings.Replace(schedulerConfig(t, ""), "- schedulerName: telesched\n", "- schedulerName: telesched-standby\n", 1)
	cmdB, logB := startScheduler(t, standby, "--power-budget-status-interval=1s")
	waitFor(t, "replica B to hold the status Lease", 30*time.Second, func() bool {
		return strings.Contains(logB.String(), "writing PowerBudget status")
	})
	waitFor(t, "B's first status", 30*time.Second, func() bool {
		st := getBudget(t, c, "rack-two").Status
		return st.MeasuredWatts != nil && *st.MeasuredWatts == 800
	})
	_, logA := startScheduler(t, schedulerConfig(t, ""), "--power-budget-status-interval=1s")

	// 4 pods of 1 core: 50 W each on the rack's curve, placed by A.
	for i := range 4 {
		rackPod(t, c, fmt.Sprintf("two-%d", i), "rack-two", "1")
	}
	for i := range 4 {
		waitScheduled(t, c, fmt.Sprintf("two-%d", i), 30*time.Second)
	}
	waitFor(t, "B's status to count A's pods", 30*time.Second, func() bool {
		st := getBudget(t, c, "rack-two").Status
		return st.ReservedWatts != nil && *st.ReservedWatts == 200 && *st.HeadroomWatts == 1000
	})
	if strings.Contains(logA.String(), "writing PowerBudget status") {
		t.Fatal("replica A writes PowerBudget status while B holds the Lease")
	}

	// B stops (it releases the Lease); the rack's load rises to 600 W a
	// node, and the status must follow it through A.
	_ = cmdB.Process.Signal(os.Interrupt)
	_ = cmdB.Wait()
	for _, n := range nodes {
		if _, err := c.applyStatus(t.Context(), n, rackNode(62, 600)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "A to take the Lease and write the new watts", 45*time.Second, func() bool {
		st := getBudget(t, c, "rack-two").Status
		return strings.Contains(logA.String(), "writing PowerBudget status") && st.MeasuredWatts != nil && *st.MeasuredWatts == 1200
	})
}
