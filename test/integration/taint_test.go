// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/agent/kube"
	"github.com/telesched/telesched/agent/status"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/sandbox/controlplane"
)

// nodeTaintPolicy is deploy/policy/node-taint.yaml's policy.
const nodeTaintPolicy = "telesched-agent-node-taint"

// installNodeTaint applies the agent's RBAC with the taint's grant and the
// node-taint policy from deploy/, and removes the grant when the test ends
// (the control plane is shared; other tests expect the agent without it).
func installNodeTaint(ctx context.Context, t *testing.T, admin clients) {
	t.Helper()
	applyManifests(ctx, t, admin,
		filepath.Join(deployDir, "namespace.yaml"),
		filepath.Join(deployDir, "agent", "rbac.yaml"),
		filepath.Join(deployDir, "policy", "node-taint-rbac.yaml"),
		filepath.Join(deployDir, "policy", "node-taint.yaml"),
		filepath.Join(deployDir, "policy", "agent-events.yaml"),
	)
	t.Cleanup(func() {
		ctx := context.Background()
		_ = admin.kube.RbacV1().ClusterRoleBindings().Delete(ctx, "telesched-agent-node-taint", metav1.DeleteOptions{})
		_ = admin.kube.RbacV1().ClusterRoles().Delete(ctx, "telesched-agent-node-taint", metav1.DeleteOptions{})
	})
}

// taintNodes creates schedulable Nodes for the test, each labelled
// telesched-test=<label> for a pod's node selector.
func taintNodes(ctx context.Context, t *testing.T, admin clients, label string, names ...string) {
	t.Helper()
	for _, n := range names {
		schedNode(ctx, t, admin, n)
		if _, err := admin.kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"telesched-test":"`+label+`"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// taintingAgent installs the taint's grant and policy, creates node
// (labelled telesched-test=node) with an agent pod on it, and returns the
// agent's client on that pod's bound token once the policy is in force.
func taintingAgent(ctx context.Context, t *testing.T, admin clients, node, pod string) *kube.Client {
	t.Helper()
	installNodeTaint(ctx, t, admin)
	taintNodes(ctx, t, admin, node, node)
	agent := agentClients(t, agentToken(ctx, t, admin, createAgentPod(ctx, t, admin, pod, node)))
	kc, err := kube.New(agent.cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent's patch on Nodes", 30*time.Second, func() bool {
		_, err := agent.kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"metadata":{"labels":{"probe":"x"}}}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return isNodeTaintDenial(err)
	})
	return kc
}

func isNodeTaintDenial(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+nodeTaintPolicy+"'")
}

// TestNodeTaintPolicy installs the agent's real RBAC and
// deploy/policy/node-taint.yaml and checks, with real pod-bound tokens,
// that the agent on node A may set and remove the taint
// telesched.io/overheating:NoSchedule and the condition TeleschedOverheating
// of Node A, and nothing else of any Node.
func TestNodeTaintPolicy(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	admin := newClients(t)
	installNodeTaint(ctx, t, admin)

	suffix := utilrand.String(5)
	nodeA, nodeB := "taint-policy-a-"+suffix, "taint-policy-b-"+suffix
	taintNodes(ctx, t, admin, "taint-policy", nodeA, nodeB)
	// Another party's taint on A, which the agent must leave alone.
	if _, err := admin.kube.CoreV1().Nodes().Patch(ctx, nodeA, types.MergePatchType,
		[]byte(`{"spec":{"taints":[{"key":"example.com/maintenance","effect":"NoSchedule"}]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	agentA := agentClients(t, agentToken(ctx, t, admin, createAgentPod(ctx, t, admin, "taint-agent-a-"+suffix, nodeA)))
	unbound := agentClients(t, agentToken(ctx, t, admin, nil))
	kc, err := kube.New(agentA.cfg)
	if err != nil {
		t.Fatal(err)
	}

	// Bindings and RBAC grants take effect asynchronously.
	waitFor(t, "the node-taint policy to deny a label", 30*time.Second, func() bool {
		_, err := agentA.kube.CoreV1().Nodes().Patch(ctx, nodeA, types.MergePatchType, []byte(`{"metadata":{"labels":{"probe":"x"}}}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return isNodeTaintDenial(err)
	})

	ours := `{"key":"telesched.io/overheating","effect":"NoSchedule"}`
	theirs := `{"key":"example.com/maintenance","effect":"NoSchedule"}`
	taints := func(list ...string) []byte {
		return []byte(`{"spec":{"taints":[` + strings.Join(list, ",") + `]}}`)
	}
	condition := func(typ string) []byte {
		return []byte(fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"True","reason":"NearThermalLimit","message":"test","lastHeartbeatTime":"2026-11-27T12:00:00Z","lastTransitionTime":"2026-11-27T12:00:00Z"}]}}`, typ))
	}
	type patch struct {
		node, sub string
		pt        types.PatchType
		body      []byte
	}
	do := func(c tokenClients, p patch) error {
		var sub []string
		if p.sub != "" {
			sub = []string{p.sub}
		}
		_, err := c.kube.CoreV1().Nodes().Patch(ctx, p.node, p.pt, p.body, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, sub...)
		return err
	}
	for _, tc := range []struct {
		name string
		c    tokenClients
		p    patch
		want string // "" allowed, else the policy's denial
	}{
		{"own taint on its Node", agentA, patch{nodeA, "", types.MergePatchType, taints(theirs, ours)}, ""},
		{"own condition on its Node", agentA, patch{nodeA, "status", types.StrategicMergePatchType, condition(app.OverheatingConditionType)}, ""},
		{"own taint on another Node", agentA, patch{nodeB, "", types.MergePatchType, taints(ours)},
			fmt.Sprintf("telesched-agent on node %s may only write Node %s, not %s", nodeA, nodeA, nodeB)},
		{"own condition on another Node", agentA, patch{nodeB, "status", types.StrategicMergePatchType, condition(app.OverheatingConditionType)},
			fmt.Sprintf("telesched-agent on node %s may only write Node %s, not %s", nodeA, nodeA, nodeB)},
		{"another taint key", agentA, patch{nodeA, "", types.MergePatchType, taints(theirs, ours, `{"key":"example.com/other","effect":"NoSchedule"}`)},
			"may set only the taint telesched.io/overheating on Node " + nodeA + ", and must leave its other taints as they are"},
		{"removing another party's taint", agentA, patch{nodeA, "", types.MergePatchType, taints(ours)},
			"must leave its other taints as they are"},
		{"own key with NoExecute", agentA, patch{nodeA, "", types.MergePatchType, taints(theirs, `{"key":"telesched.io/overheating","effect":"NoExecute"}`)},
			"only with effect NoSchedule and no value"},
		{"a label", agentA, patch{nodeA, "", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`)}, "not its metadata"},
		{"another manager's managedFields entry", agentA, patch{nodeA, "", types.MergePatchType, []byte(`{"metadata":{"managedFields":[` +
			`{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{}}}}]},` +
			`"spec":{"taints":[` + theirs + `,` + ours + `]}}`)}, "may not write the managedFields of other managers"},
		{"resetting managedFields", agentA, patch{nodeA, "", types.MergePatchType, []byte(`{"metadata":{"managedFields":[{}]},` +
			`"spec":{"taints":[` + theirs + `,` + ours + `]}}`)}, "may not write the managedFields of other managers"},
		{"an annotation through status", agentA, patch{nodeA, "status", types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`)}, "not its metadata"},
		{"cordoning", agentA, patch{nodeA, "", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`)}, "not the rest of its spec"},
		{"the Ready condition", agentA, patch{nodeA, "status", types.StrategicMergePatchType, condition(string(corev1.NodeReady))},
			"may set only the condition TeleschedOverheating on Node " + nodeA + ", and must leave its other conditions as they are"},
		{"capacity", agentA, patch{nodeA, "status", types.MergePatchType, []byte(`{"status":{"capacity":{"cpu":"1000"}}}`)}, "not the rest of its status"},
		{"a token bound to no pod", unbound, patch{nodeA, "", types.MergePatchType, taints(theirs, ours)}, "the agent's token is not bound to a pod on one node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := do(tc.c, tc.p)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("denied: %v", err)
			case tc.want == "":
			case !isNodeTaintDenial(err):
				t.Errorf("got %v, want a denial by %s", err, nodeTaintPolicy)
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("got %v, want it to say %q", err, tc.want)
			}
		})
	}

	// Another manager owning only the taints (an atomic list): the agent's
	// write takes them over, and the API server drops that manager's
	// entry, which the policy allows.
	if _, err := admin.kube.CoreV1().Nodes().Patch(ctx, nodeA, types.MergePatchType, taints(theirs), metav1.PatchOptions{FieldManager: "taint-only"}); err != nil {
		t.Fatal(err)
	}

	// The agent's own calls, for real: set, read back, remove.
	n, err := kc.GetNode(ctx, nodeA)
	if err != nil {
		t.Fatal(err)
	}
	if err := kc.SetNodeTaints(ctx, nodeA, n.ResourceVersion, append(n.Taints, []byte(ours))); err != nil {
		t.Fatalf("agent on %s setting its taint: %v", nodeA, err)
	}
	// A write on a stale read is a Conflict, never an overwrite.
	if err := kc.SetNodeTaints(ctx, nodeA, n.ResourceVersion, n.Taints); !apierrors.IsConflict(err) {
		t.Errorf("taint write at a stale resourceVersion: %v, want a Conflict", err)
	}
	got, err := admin.kube.CoreV1().Nodes().Get(ctx, nodeA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}, {Key: app.OverheatingTaintKey, Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(want, got.Spec.Taints); diff != "" {
		t.Errorf("Node %s taints (-want +got):\n%s", nodeA, diff)
	}
	for _, m := range got.ManagedFields {
		if m.Manager == "taint-only" {
			t.Errorf("Node %s still has the managedFields entry of taint-only (%s): the agent's write was to take its taints over", nodeA, m.FieldsV1)
		}
	}

	// Admins and the kubelet's own writes are not evaluated.
	if _, err := admin.kube.CoreV1().Nodes().Patch(ctx, nodeB, types.MergePatchType, taints(ours, theirs), metav1.PatchOptions{}); err != nil {
		t.Errorf("admin tainting %s: %v", nodeB, err)
	}
}

// TestOverheatingTaintHysteresisAndDefaultScheduler runs the agent's taint
// controller (app.NodeTaint, as telesched-agent wires it) with a real
// pod-bound token against the real API server, under the real RBAC and
// policy, on samples that go hot, dip back briefly and stay cool, and runs
// the real kube-scheduler (its default profile) beside it: a pod with the
// default schedulerName stays Pending on the tainted node for its
// untolerated taint, and is bound once the taint is removed.
func TestOverheatingTaintHysteresisAndDefaultScheduler(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	admin := newClients(t)
	suffix := utilrand.String(5)
	node := "taint-hot-" + suffix
	kc := taintingAgent(ctx, t, admin, node, "taint-agent-"+suffix)

	startKubeScheduler(t)

	const hold = time.Minute // on the samples' clock, not the test's
	cfg := status.DefaultHeatConfig()
	heat := status.NewHeatTracker(cfg)
	var events []kube.Event
	evCh := make(chan kube.Event, 16)
	nt := app.NewNodeTaint(ctx, kc, node, cfg, hold, time.Second, time.Second, 0, clock.RealClock{}, func(ev kube.Event) {
		ev.Node, ev.Component = node, "telesched-agent"
		if err := kc.CreateEvent(context.WithoutCancel(ctx), ev, time.Now()); err != nil {
			t.Errorf("recording %s: %v", ev.Reason, err)
		}
		evCh <- ev
	})
	defer nt.Shutdown()

	start := time.Now()
	// sample feeds one sample whose headroom is headroomC, taken at offset
	// on the samples' clock, through the heat and taint trackers.
	sample := func(offset time.Duration, headroomC int64) status.TaintState {
		th := &telemetryv1alpha1.ThermalStatus{HottestSensor: "coretemp.0/Package id 0", HottestMilliCelsius: (100 - headroomC) * 1000,
			HeadroomSensor: "coretemp.0/Package id 0", HeadroomMilliCelsius: ptr.To(headroomC * 1000)}
		return nt.Update(start.Add(offset), heat.Update(th, nil))
	}
	nodeTaints := func() (tainted bool, cond *corev1.NodeCondition) {
		n, err := admin.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tainted = slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool {
			return tt.Key == app.OverheatingTaintKey && tt.Effect == corev1.TaintEffectNoSchedule
		})
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == app.OverheatingConditionType {
				cond = &n.Status.Conditions[i]
			}
		}
		return tainted, cond
	}
	waitEvent := func(reason string) {
		t.Helper()
		select {
		case ev := <-evCh:
			events = append(events, ev)
			if ev.Reason != reason {
				t.Errorf("event %s (%s), want %s", ev.Reason, ev.Message, reason)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s event", reason)
		}
	}

	// A cool node is not tainted; its condition says False.
	sample(0, 30)
	waitFor(t, "the condition False on a cool node", 10*time.Second, func() bool {
		_, c := nodeTaints()
		return c != nil && c.Status == corev1.ConditionFalse
	})

	// Too hot: headroom 4°C <= the 5°C margin.
	if st := sample(10*time.Second, 4); !st.Tainted || !st.Changed {
		t.Fatalf("hot sample: %+v, want the taint set", st)
	}
	waitFor(t, "the taint on the hot node", 10*time.Second, func() bool { tainted, _ := nodeTaints(); return tainted })
	waitEvent(app.EventOverheatingTaintAdded)
	if _, c := nodeTaints(); c == nil || c.Status != corev1.ConditionTrue || c.Reason != status.ReasonNearThermalLimit ||
		!strings.Contains(c.Message, "headroom 4.0°C") {
		t.Errorf("condition %s on the hot node: %+v, want True, %s, with the headroom", app.OverheatingConditionType, c, status.ReasonNearThermalLimit)
	}

	// A pod of the default scheduler stays Pending for the taint.
	pod := testPod("taint-pod-"+suffix, corev1.DefaultSchedulerName)
	pod.Spec.NodeSelector = map[string]string{"telesched-test": "taint-hot-" + suffix}
	if _, err := admin.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.kube.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	msg := waitFailedScheduling(t, admin, pod.Name, 30*time.Second)
	// kube-scheduler 1.37 names no key ("untolerated taint(s)"), and its
	// TaintToleration filter runs before NodeAffinity, so other tests'
	// nodes in this API server (not-ready taints) count there too: the
	// count is not this node's alone. The pod binding once the taint is
	// cleared, below, shows it was this node's taint that held it.
	if want := "node(s) had untolerated taint"; !strings.Contains(msg, want) {
		t.Errorf("FailedScheduling %q, want it to say %q", msg, want)
	}

	// Cool again (9°C >= 5 + 3°C hysteresis) at 20s, a brief dip into the
	// band (7°C) at 40s restarts the hold, cool from 50s on: the taint stays
	// until 50s + 1m.
	for _, s := range []struct {
		at   time.Duration
		c    int64
		want bool
	}{{20 * time.Second, 9, true}, {40 * time.Second, 7, true}, {50 * time.Second, 9, true}, {90 * time.Second, 12, true}, {109 * time.Second, 12, true}} {
		if st := sample(s.at, s.c); st.Tainted != s.want || st.Changed {
			t.Fatalf("sample at %v, headroom %d°C: %+v, want tainted %v, unchanged", s.at, s.c, st, s.want)
		}
	}
	time.Sleep(2 * time.Second) // time for a wrong write to land
	if tainted, c := nodeTaints(); !tainted || c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("through the dip and the hold: tainted %v, condition %+v; want the taint and True", tainted, c)
	}
	if p, err := admin.kube.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("pod during the hold: node %q, err %v; want Pending", p.Spec.NodeName, err)
	}

	// The hold is over: removed, the condition False, and the pod placed.
	if st := sample(110*time.Second, 12); st.Tainted || !st.Changed {
		t.Fatalf("after the hold: %+v, want the taint removed", st)
	}
	waitFor(t, "the taint removed", 10*time.Second, func() bool { tainted, _ := nodeTaints(); return !tainted })
	waitEvent(app.EventOverheatingTaintRemoved)
	if _, c := nodeTaints(); c == nil || c.Status != corev1.ConditionFalse || c.Reason != status.ReasonCooledDown {
		t.Errorf("condition after the hold: %+v, want False, %s", c, status.ReasonCooledDown)
	}
	if got := waitScheduled(t, admin, pod.Name, 30*time.Second); got != node {
		t.Errorf("pod scheduled to %q, want %q", got, node)
	}
	for _, ev := range events {
		t.Logf("event %s %s: %s", ev.Type, ev.Reason, ev.Message)
	}
}

// startKubeScheduler runs the real kube-scheduler (bin/kube-scheduler, its
// default profile) against the test API server until the test ends.
func startKubeScheduler(t *testing.T) {
	t.Helper()
	dir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kube-scheduler")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s: %v (build it: make %s)", bin, err, bin)
	}
	kubeconfig := adminKubeconfig(t)
	out := &syncBuffer{}
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0", "-v=2")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("kube-scheduler output:\n%s", tail(out.String(), 40))
		}
	})
}

// TestOverheatingConditionHeartbeatAndTurnOff: the agent writes its
// condition's heartbeat while nothing changes, so a condition nobody keeps
// can be told from a live one; and an agent run with
// --overheating-taint=false removes the taint and sets the condition
// False (TaintTurnedOff) that an earlier agent left, under the real RBAC
// and node-taint policy with a real pod-bound token.
func TestOverheatingConditionHeartbeatAndTurnOff(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	admin := newClients(t)
	suffix := utilrand.String(5)
	node := "taint-beat-" + suffix
	kc := taintingAgent(ctx, t, admin, node, "taint-beat-agent-"+suffix)
	condition := func() (bool, *corev1.NodeCondition) {
		n, err := admin.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tainted := slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == app.OverheatingTaintKey })
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == app.OverheatingConditionType {
				return tainted, &n.Status.Conditions[i]
			}
		}
		return tainted, nil
	}

	// The samples' and the writer's clock: a fake one, stepped.
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	cfg := status.DefaultHeatConfig()
	heat := status.NewHeatTracker(cfg)
	nt := app.NewNodeTaint(ctx, kc, node, cfg, time.Minute, time.Second, time.Second, 5*time.Minute, clk, nil)
	hot := func(headroomC int64) status.TaintState {
		th := &telemetryv1alpha1.ThermalStatus{HottestSensor: "coretemp.0/Package id 0", HottestMilliCelsius: (100 - headroomC) * 1000,
			HeadroomSensor: "coretemp.0/Package id 0", HeadroomMilliCelsius: ptr.To(headroomC * 1000)}
		return nt.Update(clk.Now(), heat.Update(th, nil))
	}
	hot(4)
	var first metav1.Time
	waitFor(t, "the taint and the condition True", 10*time.Second, func() bool {
		tainted, c := condition()
		if c != nil {
			first = c.LastHeartbeatTime
		}
		return tainted && c != nil && c.Status == corev1.ConditionTrue
	})
	// Six minutes of hot samples later (past the 5m heartbeat), nothing
	// changed but the condition's heartbeat.
	for range 6 {
		clk.Step(time.Minute)
		hot(4)
	}
	waitFor(t, "the condition's heartbeat written again", 10*time.Second, func() bool {
		_, c := condition()
		return c != nil && c.LastHeartbeatTime.After(first.Time)
	})
	if _, c := condition(); c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Equal(&first) {
		t.Errorf("after a heartbeat: condition %+v; want True, its transition time kept at %v", c, first)
	}
	nt.Shutdown()

	// The agent comes back with --overheating-taint=false: the taint and
	// the condition an earlier agent left do not outlive it.
	if err := app.ClearOverheatingTaint(ctx, kc, node, time.Now()); err != nil {
		t.Fatal(err)
	}
	tainted, c := condition()
	if tainted || c == nil || c.Status != corev1.ConditionFalse || c.Reason != app.ReasonTaintTurnedOff {
		t.Errorf("after --overheating-taint=false: tainted %v, condition %+v; want no taint and False, %s", tainted, c, app.ReasonTaintTurnedOff)
	}
}
