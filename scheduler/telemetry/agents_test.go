// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestAgentReadyKeepsTelemetryFresh: a node's sample stays fresh past the
// plugins' telemetryMaxAge while one of its agent pods is Ready, up to the
// cache's agent max age; not once every agent pod is NotReady or gone. A
// new sample of the node keeps what the cache knows of its agent, and each
// change of a node's readiness moves AgentEpoch and the count of nodes with
// a Ready agent.
func TestAgentReadyKeepsTelemetryFresh(t *testing.T) {
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	now := start
	c := NewCacheWithClock(func() time.Time { return now })
	if err := c.SetAgents(DefaultAgentSelector, 6*time.Minute); err != nil {
		t.Fatal(err)
	}
	c.Set(&Node{Name: "a", SampleTime: start, resourceVersion: 1})
	const maxAge = time.Minute
	fresh := func(at time.Duration) bool {
		t.Helper()
		n, ok := c.Get("a")
		if !ok {
			t.Fatal("no view of a")
		}
		return n.Fresh(start.Add(at), maxAge)
	}
	if !fresh(maxAge) || fresh(maxAge+time.Second) {
		t.Errorf("without an agent pod: fresh at %v %v, at %v %v; want true, false", maxAge, fresh(maxAge), maxAge+time.Second, fresh(maxAge+time.Second))
	}

	epoch := c.AgentEpoch()
	c.SetAgentPod("a", "old", true, false)
	c.SetAgentPod("a", "new", false, false) // a rolling update's second pod, not yet Ready
	if got := c.ReadyAgents(); got != 1 || c.AgentEpoch() != epoch+1 {
		t.Errorf("one node with a Ready agent pod: ReadyAgents %d, AgentEpoch moved by %d; want 1, 1", got, c.AgentEpoch()-epoch)
	}
	if !fresh(5*time.Minute) || !fresh(6*time.Minute) || fresh(6*time.Minute+time.Second) {
		t.Errorf("with a Ready agent pod: fresh at 5m %v, at 6m %v, at 6m1s %v; want true, true, false", fresh(5*time.Minute), fresh(6*time.Minute), fresh(6*time.Minute+time.Second))
	}
	if n, _ := c.Get("a"); !n.AgentReady || n.MaxAge(maxAge) != 6*time.Minute || n.MaxAge(10*time.Minute) != 10*time.Minute {
		t.Errorf("view: AgentReady %v, MaxAge(1m) %v, MaxAge(10m) %v; want true, 6m, 10m", n.AgentReady, n.MaxAge(maxAge), n.MaxAge(10*time.Minute))
	}

	// A new sample keeps the agent's readiness.
	now = start.Add(2 * time.Minute)
	c.Set(&Node{Name: "a", SampleTime: now, resourceVersion: 2})
	if n, _ := c.Get("a"); !n.AgentReady || !n.Fresh(now.Add(5*time.Minute), maxAge) {
		t.Errorf("a new sample lost the agent's readiness: %+v", n)
	}

	// The old pod goes, the new one is not Ready: back to telemetryMaxAge.
	c.SetAgentPod("a", "old", false, true)
	if n, _ := c.Get("a"); n.AgentReady || n.Fresh(now.Add(2*time.Minute), maxAge) || !n.Fresh(now.Add(maxAge), maxAge) {
		t.Errorf("with no Ready agent pod: AgentReady %v, fresh at 2m %v; want false, false", n.AgentReady, n.Fresh(now.Add(2*time.Minute), maxAge))
	}
	if got := c.ReadyAgents(); got != 0 || c.AgentEpoch() != epoch+2 {
		t.Errorf("no node with a Ready agent pod: ReadyAgents %d, AgentEpoch moved by %d; want 0, 2", got, c.AgentEpoch()-epoch)
	}
	// A pod that stays NotReady changes nothing.
	c.SetAgentPod("a", "new", false, false)
	if c.AgentEpoch() != epoch+2 {
		t.Error("an agent pod that stayed NotReady moved AgentEpoch")
	}
}

// TestAgentPodEvents: the informer's pods are read the way the kubelet and
// the node lifecycle controller report them: Ready only with condition
// Ready True and no deletion under way; a pod not yet bound to a node is
// no node's agent.
func TestAgentPodEvents(t *testing.T) {
	c := NewCache()
	c.Set(&Node{Name: "a", resourceVersion: 1})
	ds := agentDaemonSet("telesched-agent", "ds-1")
	c.agentDaemonSet(ds, false)
	pod := func(uid types.UID, node string, ready corev1.ConditionStatus, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(uid), Namespace: DefaultAgentNamespace, UID: uid, OwnerReferences: controlledBy(ds)}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: ready}}}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return p
	}
	for _, step := range []struct {
		name    string
		obj     any
		deleted bool
		want    bool
	}{
		{"unbound", pod("p", "", corev1.ConditionTrue, false), false, false},
		{"ready", pod("p", "a", corev1.ConditionTrue, false), false, true},
		{"node unreachable: the node lifecycle controller set Ready False", pod("p", "a", corev1.ConditionFalse, false), false, false},
		{"ready again", pod("p", "a", corev1.ConditionTrue, false), false, true},
		{"terminating", pod("p", "a", corev1.ConditionTrue, true), false, false},
		{"ready again", pod("p", "a", corev1.ConditionTrue, false), false, true},
		{"deleted, final state unknown", toolscache.DeletedFinalStateUnknown{Key: "p", Obj: pod("p", "a", corev1.ConditionTrue, false)}, true, false},
	} {
		c.agentPod(step.obj, step.deleted)
		if n, _ := c.Get("a"); n.AgentReady != step.want {
			t.Errorf("%s: AgentReady %v, want %v", step.name, n.AgentReady, step.want)
		}
	}
	if len(c.agents) != 0 || len(c.agentPods) != 0 {
		t.Errorf("agents after the pod's deletion: %v, %v", c.agents, c.agentPods)
	}
}

func agentDaemonSet(name string, uid types.UID) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultAgentNamespace, UID: uid}}
}

// controlledBy is the owner references the DaemonSet controller writes.
func controlledBy(ds *appsv1.DaemonSet) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}
}

// TestAgentPodOutsideTheAgentDaemonSetIgnored: only a pod that one of the
// agent's DaemonSets controls, by name and UID, in the agent's namespace,
// keeps its node fresh; any other pod with the agent's labels (a tenant's,
// one naming the DaemonSet with another UID, one of a ReplicaSet of that
// name) is ignored and counted. A pod seen before its DaemonSet counts once
// the DaemonSet is listed, and no longer once it is gone or recreated.
func TestAgentPodOutsideTheAgentDaemonSetIgnored(t *testing.T) {
	ds := agentDaemonSet("telesched-agent", "ds-1")
	gpu := agentDaemonSet("telesched-agent-gpu", "ds-gpu")
	ready := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	pod := func(namespace string, owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: namespace, UID: "p", OwnerReferences: owners,
			Labels: map[string]string{"app.kubernetes.io/name": "telesched-agent"}}, Spec: corev1.PodSpec{NodeName: "a"}, Status: ready}
	}
	other := agentDaemonSet("telesched-agent", "ds-other")
	rs := controlledBy(ds)
	rs[0].Kind = "ReplicaSet"
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"the agent's DaemonSet's pod", pod(DefaultAgentNamespace, controlledBy(ds)), true},
		{"the GPU variant's pod", pod(DefaultAgentNamespace, controlledBy(gpu)), true},
		{"a tenant's pod, no controller", pod("tenant", nil), false},
		{"a pod in the agent's namespace, no controller", pod(DefaultAgentNamespace, nil), false},
		{"the DaemonSet's name, another UID", pod(DefaultAgentNamespace, controlledBy(other)), false},
		{"a ReplicaSet of the DaemonSet's name and UID", pod(DefaultAgentNamespace, rs), false},
		{"the DaemonSet's pod in another namespace", pod("tenant", controlledBy(ds)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCache()
			c.Set(&Node{Name: "a", resourceVersion: 1})
			c.agentDaemonSet(ds, false)
			c.agentDaemonSet(gpu, false)
			c.agentPod(tc.pod, false)
			n, _ := c.Get("a")
			if n.AgentReady != tc.want || c.IgnoredAgentPods() != map[bool]int{false: 1}[tc.want] {
				t.Errorf("AgentReady %v, MaxAge(1m) %v, ignored pods %d; want %v, ignored %d", n.AgentReady, n.MaxAge(time.Minute), c.IgnoredAgentPods(), tc.want, map[bool]int{false: 1}[tc.want])
			}
			c.agentPod(tc.pod, true)
			if c.IgnoredAgentPods() != 0 {
				t.Errorf("a deleted pod is still counted as ignored")
			}
		})
	}

	// The DaemonSet listed after its pod, then recreated.
	c := NewCache()
	c.Set(&Node{Name: "a", resourceVersion: 1})
	c.agentPod(pod(DefaultAgentNamespace, controlledBy(ds)), false)
	for _, step := range []struct {
		name string
		ds   *appsv1.DaemonSet
		gone bool
		want bool
	}{
		{"the DaemonSet listed", ds, false, true},
		{"the DaemonSet deleted", ds, true, false},
		{"the DaemonSet recreated: the old pod is an orphan", other, false, false},
	} {
		c.agentDaemonSet(step.ds, step.gone)
		if n, _ := c.Get("a"); n.AgentReady != step.want {
			t.Errorf("%s: AgentReady %v, want %v", step.name, n.AgentReady, step.want)
		}
	}
}

func TestSetAgentsRefuses(t *testing.T) {
	c := NewCache()
	if err := c.SetAgents("app in (", time.Minute); err == nil {
		t.Error("a malformed selector was accepted")
	}
	if err := c.SetAgents(DefaultAgentSelector, -time.Second); err == nil {
		t.Error("a negative max age was accepted")
	}
	if err := c.SetAgents("", 0); err != nil {
		t.Errorf("turning it off: %v", err)
	}
	for _, tc := range []struct {
		namespace string
		sets      []string
	}{
		{"", DefaultAgentDaemonSets},
		{"Telesched", DefaultAgentDaemonSets},
		{DefaultAgentNamespace, nil},
		{DefaultAgentNamespace, []string{"telesched_agent"}},
	} {
		if err := c.SetAgentOwners(tc.namespace, tc.sets); err == nil {
			t.Errorf("agent namespace %q, DaemonSets %q accepted", tc.namespace, tc.sets)
		}
	}
}
