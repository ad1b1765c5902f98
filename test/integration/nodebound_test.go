// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/agent/kube"
	"github.com/telesched/telesched/agent/publisher"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/test/fixtures"
)

// The agent's identity and the node-bound-writes policy, as deploy/ names them.
const (
	agentNamespace      = "telesched-system"
	agentServiceAccount = "telesched-agent"
	// The scheduler's ServiceAccount, in the same namespace.
	schedulerServiceAccount = "telesched-scheduler"
	nodeBoundPolicy         = "telesched-agent-node-bound-writes"
	agentEventsPolicy       = "telesched-agent-events"
	nodeNameExtra           = "authentication.kubernetes.io/node-name"
)

// deployDir is deploy/ of this checkout, seen from test/integration.
var deployDir = filepath.Join("..", "..", "deploy")

// TestNodeBoundWrites installs the agent's real RBAC and the node-bound-writes
// ValidatingAdmissionPolicy from deploy/, creates two nodes and an agent pod
// bound to each, and checks with real pod-bound ServiceAccount tokens that the
// agent on node A may write NodeTelemetry A and nothing else.
func TestNodeBoundWrites(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	admin := newClients(t)

	applyManifests(ctx, t, admin,
		filepath.Join(deployDir, "namespace.yaml"),
		filepath.Join(deployDir, "agent", "rbac.yaml"),
		filepath.Join(deployDir, "policy", "node-bound-writes.yaml"),
		filepath.Join(deployDir, "policy", "agent-events.yaml"),
	)

	// Unique names: the control plane is shared by the package's tests and
	// Nodes are cluster-scoped.
	suffix := utilrand.String(5)
	nodeA, nodeB := "nodebound-a-"+suffix, "nodebound-b-"+suffix
	for _, n := range []string{nodeA, nodeB} {
		admin.createNodeAndTelemetry(ctx, t, n)
		if _, err := admin.applyStatus(ctx, n, fixtures.FullStatus(time.Now(), 1, 0)); err != nil {
			t.Fatalf("applying status to %s: %v", n, err)
		}
		t.Cleanup(func() {
			// No garbage collector runs here: delete the NodeTelemetry too.
			_ = admin.dyn.Resource(ntResource).Delete(context.Background(), n, metav1.DeleteOptions{})
			_ = admin.kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		})
	}
	podA := createAgentPod(ctx, t, admin, "agent-a-"+suffix, nodeA)
	podB := createAgentPod(ctx, t, admin, "agent-b-"+suffix, nodeB)
	podPending := createAgentPod(ctx, t, admin, "agent-pending-"+suffix, "")

	agentA := agentClients(t, agentToken(ctx, t, admin, podA))
	agentB := agentClients(t, agentToken(ctx, t, admin, podB))
	unbound := agentClients(t, agentToken(ctx, t, admin, nil))
	pending := agentClients(t, agentToken(ctx, t, admin, podPending))

	// The API server wrote each pod's node into its token, and hands it to
	// admission as user info.
	for _, tc := range []struct {
		name string
		c    tokenClients
		want []string
	}{
		{"pod on A", agentA, []string{nodeA}},
		{"pod on B", agentB, []string{nodeB}},
		{"no bound object", unbound, nil},
		{"pod on no node", pending, nil},
	} {
		review, err := tc.c.kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: SelfSubjectReview: %v", tc.name, err)
		}
		u := review.Status.UserInfo
		if want := "system:serviceaccount:" + agentNamespace + ":" + agentServiceAccount; u.Username != want {
			t.Errorf("%s: username %q, want %q", tc.name, u.Username, want)
		}
		if diff := cmp.Diff(tc.want, []string(u.Extra[nodeNameExtra]), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: user extra %s (-want +got):\n%s", tc.name, nodeNameExtra, diff)
		}
	}

	// Bindings take effect asynchronously, and so do RBAC grants: probe with
	// a dry-run write by the unbound token until the policy answers.
	waitFor(t, "the node-bound-writes policy to deny a write", 30*time.Second, func() bool {
		_, err := unbound.dyn.Resource(ntResource).Patch(ctx, nodeB, types.MergePatchType, []byte(`{"metadata":{"labels":{"probe":"x"}}}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return isPolicyDenial(err)
	})
	waitFor(t, "the agent-events policy to deny an Event", 30*time.Second, func() bool {
		_, err := unbound.kube.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "probe-", Namespace: metav1.NamespaceDefault},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: nodeA},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return isPolicyDenial(err)
	})

	t.Run("agent code path with the real RBAC", func(t *testing.T) {
		// The agent recreates a missing object: remove A's, as an admin.
		if err := admin.dyn.Resource(ntResource).Delete(ctx, nodeA, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting NodeTelemetry %s: %v", nodeA, err)
		}
		kc, err := kube.New(agentA.cfg)
		if err != nil {
			t.Fatal(err)
		}
		st := fixtures.FullStatus(time.Now(), 1, 0)

		// The agent on A publishes for A: get Node, apply (creating) the
		// object, apply status.
		own := newPublisher(t, kc, nodeA)
		if out := own.Offer(ctx, &st); !out.Published || out.Err != nil {
			t.Fatalf("agent on %s publishing its own NodeTelemetry: %+v", nodeA, out)
		}
		got := admin.get(ctx, t, nodeA)
		if got.Status.SampleTime != st.SampleTime || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].Name != nodeA {
			t.Errorf("NodeTelemetry %s after the agent published: sampleTime %v, owners %+v", nodeA, got.Status.SampleTime, got.OwnerReferences)
		}

		// The agent on A told to publish for B (a compromised or
		// misconfigured agent) is stopped by the policy.
		before := admin.get(ctx, t, nodeB).ResourceVersion
		other := newPublisher(t, kc, nodeB)
		out := other.Offer(ctx, &st)
		if out.Published {
			t.Fatalf("agent on %s published NodeTelemetry %s", nodeA, nodeB)
		}
		t.Logf("agent on %s publishing for %s: %v", nodeA, nodeB, out.Err)
		wantPolicyDenial(t, out.Err, fmt.Sprintf("telesched-agent on node %s may only write NodeTelemetry %s, not %s", nodeA, nodeA, nodeB))
		if after := admin.get(ctx, t, nodeB).ResourceVersion; after != before {
			t.Errorf("NodeTelemetry %s changed (resourceVersion %s -> %s)", nodeB, before, after)
		}

		// Events: the ones the agent records, on its own Node; nothing else.
		event := func(node, reason string) kube.Event {
			return kube.Event{Node: node, Type: corev1.EventTypeWarning, Reason: reason, Message: "test", Component: "telesched-agent"}
		}
		for _, reason := range []string{app.EventNodeOverheating, app.EventNodeTemperatureNormal, app.EventGPUThermalThrottling} {
			if err := kc.CreateEvent(ctx, event(nodeA, reason), time.Now()); err != nil {
				t.Errorf("agent on %s recording %s on its Node: %v", nodeA, reason, err)
			}
		}
		wantPolicyDenial(t, kc.CreateEvent(ctx, event(nodeB, app.EventNodeOverheating), time.Now()),
			fmt.Sprintf("telesched-agent on node %s may only record Events about Node %s, not Node %s", nodeA, nodeA, nodeB))
		wantPolicyDenial(t, kc.CreateEvent(ctx, event(nodeA, "Killing"), time.Now()),
			"telesched-agent records only NodeOverheating, NodeTemperatureNormal, GPUThermalThrottling, OverheatingTaintAdded, OverheatingTaintRemoved Events, not Killing")
		podEvent := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "forged-", Namespace: agentNamespace},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: agentNamespace, Name: podB.Name},
			Reason:         app.EventNodeOverheating, Message: "test", Type: corev1.EventTypeWarning,
		}
		_, err = agentA.kube.CoreV1().Events(agentNamespace).Create(ctx, podEvent, metav1.CreateOptions{})
		wantPolicyDenial(t, err, fmt.Sprintf("may only record Events about Node %s, not Pod %s", nodeA, podB.Name))

		// Least privilege: RBAC alone refuses what the agent never does,
		// before the policy is consulted.
		for _, op := range []struct {
			verb, resource string
			do             func() error
		}{
			{"delete", "nodetelemetries", func() error { return agentA.dyn.Resource(ntResource).Delete(ctx, nodeA, metav1.DeleteOptions{}) }},
			{"update", "nodetelemetries", func() error {
				_, err := agentA.dyn.Resource(ntResource).Update(ctx, adminObject(ctx, t, admin, nodeA), metav1.UpdateOptions{})
				return err
			}},
			{"list", "nodetelemetries", func() error { _, err := agentA.dyn.Resource(ntResource).List(ctx, metav1.ListOptions{}); return err }},
			{"list", "nodes", func() error { _, err := agentA.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); return err }},
		} {
			err := op.do()
			want := fmt.Sprintf("cannot %s resource %q", op.verb, op.resource)
			if !apierrors.IsForbidden(err) || isPolicyDenial(err) || !strings.Contains(err.Error(), want) {
				t.Errorf("agent: %s %s with the real RBAC: got %v, want an RBAC denial (%s)", op.verb, op.resource, err, want)
			}
		}
	})

	// Where the overheating taint's RBAC is installed
	// (deploy/policy/node-taint-rbac.yaml, which other tests of this API
	// server apply) the agent may patch Nodes, and the node-taint policy
	// refuses it anything but that taint and condition, such as a label on
	// its own Node; without it, RBAC refuses. Either way: refused.
	t.Run("agent patching its own Node's labels", func(t *testing.T) {
		_, err := agentA.kube.CoreV1().Nodes().Patch(ctx, nodeA, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
		byRBAC := apierrors.IsForbidden(err) && !isPolicyDenial(err) && strings.Contains(err.Error(), `cannot patch resource "nodes"`)
		byPolicy := isNodeTaintDenial(err)
		if !byRBAC && !byPolicy {
			t.Errorf("agent: patch its Node's labels: got %v, want RBAC's or the node-taint policy's denial", err)
		}
	})

	// The policy must hold whatever RBAC grants: widen the agent's RBAC,
	// for this test only, to every write verb so that each reaches the policy.
	grantAllWrites(ctx, t, admin, suffix)
	waitFor(t, "the test-only RBAC grant", 30*time.Second, func() bool {
		err := agentA.dyn.Resource(ntResource).Delete(ctx, nodeA, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})

	t.Run("agent on A writing B is denied", func(t *testing.T) {
		want := fmt.Sprintf("telesched-agent on node %s may only write NodeTelemetry %s, not %s", nodeA, nodeA, nodeB)
		before := admin.get(ctx, t, nodeB).ResourceVersion
		for _, op := range writeOps(admin) {
			t.Run(op.name, func(t *testing.T) {
				wantPolicyDenial(t, op.do(ctx, t, agentA.clients, nodeB), want)
			})
		}
		if after := admin.get(ctx, t, nodeB).ResourceVersion; after != before {
			t.Errorf("NodeTelemetry %s changed (resourceVersion %s -> %s)", nodeB, before, after)
		}
	})

	t.Run("agent on A hanging A on Node B is denied", func(t *testing.T) {
		err := applyMeta(ctx, t, admin, agentA.clients, nodeA, nodeB)
		wantPolicyDenial(t, err, fmt.Sprintf("telesched-agent on node %s may only set an owner reference to Node %s on NodeTelemetry %s", nodeA, nodeA, nodeA))
	})

	for _, tc := range []struct {
		name string
		c    tokenClients
	}{
		{"token with no bound object", unbound},
		{"token bound to a pod on no node", pending},
	} {
		t.Run(tc.name+" is denied", func(t *testing.T) {
			for _, target := range []string{nodeA, nodeB} {
				for _, op := range writeOps(admin) {
					t.Run(op.name+" "+target, func(t *testing.T) {
						err := op.do(ctx, t, tc.c.clients, target)
						wantPolicyDenial(t, err, "the agent's token is not bound to a pod on a node")
						wantPolicyDenial(t, err, "may not write NodeTelemetry "+target)
					})
				}
			}
		})
	}

	t.Run("admin is unaffected", func(t *testing.T) {
		if err := mergePatch(ctx, admin, nodeB, ""); err != nil {
			t.Errorf("admin merge patch of %s: %v", nodeB, err)
		}
		if _, err := admin.applyStatus(ctx, nodeB, fixtures.FullStatus(time.Now(), 1, 0)); err != nil {
			t.Errorf("admin status apply to %s: %v", nodeB, err)
		}
	})

	// The scheduler's token is bound to its pod on a node as well; it
	// patches status.calibration of every node's NodeTelemetry (the
	// PowerBudget status writer), and the agent's next apply keeps it.
	t.Run("scheduler writes status.calibration, the agent keeps it", func(t *testing.T) {
		applyManifests(ctx, t, admin, filepath.Join(deployDir, "scheduler", "rbac.yaml"))
		schedPod := createPodAs(ctx, t, admin, "scheduler-"+suffix, nodeA, schedulerServiceAccount)
		sched := agentClients(t, tokenFor(ctx, t, admin, schedulerServiceAccount, schedPod))
		patch := []byte(`{"status":{"calibration":{"measuredPercentOfPredicted":130,"measurements":3,"updateTime":"2026-11-25T10:00:00Z"}}}`)
		var err error
		waitFor(t, "the scheduler's RBAC to allow patching NodeTelemetry status", 30*time.Second, func() bool {
			_, err = sched.dyn.Resource(ntResource).Patch(ctx, nodeB, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "telesched-scheduler"}, "status")
			return err == nil || isPolicyDenial(err)
		})
		if err != nil {
			t.Fatalf("scheduler (pod on %s) patching NodeTelemetry %s status.calibration: %v", nodeA, nodeB, err)
		}
		kc, err := kube.New(agentB.cfg)
		if err != nil {
			t.Fatal(err)
		}
		st := fixtures.FullStatus(time.Now().Add(time.Second), 1, 0)
		if out := newPublisher(t, kc, nodeB).Offer(ctx, &st); !out.Published || out.Err != nil {
			t.Fatalf("agent on %s publishing: %+v", nodeB, out)
		}
		got := admin.get(ctx, t, nodeB)
		if c := got.Status.Calibration; c == nil || c.MeasuredPercentOfPredicted != 130 || c.Measurements != 3 {
			t.Errorf("status.calibration after the agent's apply: %+v, want 130%% over 3", c)
		}
		if !got.Status.SampleTime.Equal(&st.SampleTime) {
			t.Errorf("sampleTime %v, want the agent's %v", got.Status.SampleTime, st.SampleTime)
		}
		// Status only: the object itself stays the agent's.
		_, err = sched.dyn.Resource(ntResource).Patch(ctx, nodeB, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
		if !apierrors.IsForbidden(err) || isPolicyDenial(err) {
			t.Errorf("scheduler patching NodeTelemetry %s itself: %v, want RBAC's Forbidden", nodeB, err)
		}
	})

	// Last, as it deletes the object and creates it again.
	t.Run("agent on A writing A is allowed", func(t *testing.T) {
		for _, op := range writeOps(admin) {
			if err := op.do(ctx, t, agentA.clients, nodeA); err != nil {
				t.Errorf("%s: %v", op.name, err)
			}
		}
		got := admin.get(ctx, t, nodeA)
		if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].Name != nodeA {
			t.Errorf("NodeTelemetry %s created by the agent has owners %+v, want Node %s", nodeA, got.OwnerReferences, nodeA)
		}
	})
}

// writeOp is one way to write a NodeTelemetry, done as the client c to the
// object named after node.
type writeOp struct {
	name string
	do   func(ctx context.Context, t *testing.T, c clients, node string) error
}

// writeOps returns every write to a NodeTelemetry and its status: create,
// update, JSON and merge patch, server-side apply, and delete, in an order in
// which all succeed on an existing object (delete, then create, last).
// admin reads the objects that an update sends back.
func writeOps(admin clients) []writeOp {
	return []writeOp{
		{"update", func(ctx context.Context, t *testing.T, c clients, node string) error {
			obj := adminObject(ctx, t, admin, node)
			obj.SetLabels(map[string]string{"telesched.io/test": "update"})
			_, err := c.dyn.Resource(ntResource).Update(ctx, obj, metav1.UpdateOptions{})
			return err
		}},
		{"merge patch", func(ctx context.Context, t *testing.T, c clients, node string) error {
			return mergePatch(ctx, c, node, "")
		}},
		{"json patch", func(ctx context.Context, t *testing.T, c clients, node string) error {
			_, err := c.dyn.Resource(ntResource).Patch(ctx, node, types.JSONPatchType,
				[]byte(`[{"op":"add","path":"/metadata/annotations","value":{"telesched.io/test":"json-patch"}}]`), metav1.PatchOptions{})
			return err
		}},
		{"apply", func(ctx context.Context, t *testing.T, c clients, node string) error {
			return applyMeta(ctx, t, admin, c, node, node)
		}},
		{"update status", func(ctx context.Context, t *testing.T, c clients, node string) error {
			obj := adminObject(ctx, t, admin, node)
			st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ptr.To(fixtures.FullStatus(time.Now(), 1, 0)))
			if err != nil {
				t.Fatal(err)
			}
			obj.Object["status"] = st
			_, err = c.dyn.Resource(ntResource).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
			return err
		}},
		{"merge patch status", func(ctx context.Context, t *testing.T, c clients, node string) error {
			return mergePatch(ctx, c, node, "status")
		}},
		{"apply status", func(ctx context.Context, t *testing.T, c clients, node string) error {
			_, err := c.applyStatus(ctx, node, fixtures.FullStatus(time.Now(), 1, 0))
			return err
		}},
		{"delete", func(ctx context.Context, t *testing.T, c clients, node string) error {
			return c.dyn.Resource(ntResource).Delete(ctx, node, metav1.DeleteOptions{})
		}},
		{"create", func(ctx context.Context, t *testing.T, c clients, node string) error {
			n, err := admin.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{}
			obj.SetAPIVersion(telemetryv1alpha1.SchemeGroupVersion.String())
			obj.SetKind("NodeTelemetry")
			obj.SetName(node)
			obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}})
			_, err = c.dyn.Resource(ntResource).Create(ctx, obj, metav1.CreateOptions{})
			return err
		}},
	}
}

// adminObject reads a NodeTelemetry as the administrator, for an update.
func adminObject(ctx context.Context, t *testing.T, admin clients, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := admin.dyn.Resource(ntResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting NodeTelemetry %s: %v", name, err)
	}
	return obj
}

func mergePatch(ctx context.Context, c clients, name, subresource string) error {
	patch := []byte(`{"metadata":{"labels":{"telesched.io/test":"merge-patch"}}}`)
	if subresource == "status" {
		patch = []byte(`{"status":{"intervalSeconds":7}}`)
	}
	var sub []string
	if subresource != "" {
		sub = append(sub, subresource)
	}
	_, err := c.dyn.Resource(ntResource).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, sub...)
	return err
}

// applyMeta server-side applies, as c, the NodeTelemetry's name and an owner
// reference to the Node owner, as the agent's publisher does.
func applyMeta(ctx context.Context, t *testing.T, admin, c clients, name, owner string) error {
	t.Helper()
	n, err := admin.kube.CoreV1().Nodes().Get(ctx, owner, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(telemetryv1alpha1.SchemeGroupVersion.String())
	obj.SetKind("NodeTelemetry")
	obj.SetName(name)
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}})
	_, err = c.dyn.Resource(ntResource).Apply(ctx, name, obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	return err
}

func newPublisher(t *testing.T, kc *kube.Client, node string) *publisher.Publisher {
	t.Helper()
	p, err := publisher.New(publisher.Config{
		NodeName:       node,
		FieldManager:   publisher.DefaultFieldManager,
		Heartbeat:      publisher.DefaultHeartbeat,
		RateLimitQPS:   10,
		RateLimitBurst: 10,
		BackoffInitial: time.Second,
		BackoffMax:     time.Second,
		Deadbands:      publisher.DefaultDeadbands(),
	}, kc, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// isPolicyDenial reports whether err is the node-bound-writes policy's
// denial, as opposed to RBAC's or any other.
func isPolicyDenial(err error) bool {
	return apierrors.IsForbidden(err) && (strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+nodeBoundPolicy+"'") ||
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+agentEventsPolicy+"'"))
}

func wantPolicyDenial(t *testing.T, err error, wantMessage string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("allowed, want a denial by %s saying %q", nodeBoundPolicy, wantMessage)
	case !isPolicyDenial(err):
		t.Errorf("got %v, want a denial by %s", err, nodeBoundPolicy)
	case !strings.Contains(err.Error(), wantMessage):
		t.Errorf("got %v, want it to say %q", err, wantMessage)
	}
}

// applyManifests server-side applies every object in the YAML files, as
// `kubectl apply --server-side` would.
func applyManifests(ctx context.Context, t *testing.T, admin clients, files ...string) {
	t.Helper()
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	for _, file := range files {
		for _, obj := range readObjects(t, file) {
			gvk := obj.GroupVersionKind()
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: mapping %s: %v", file, gvk, err)
			}
			// kustomize sets a namespace overlay's namespace on kinds it does
			// not know to be cluster-scoped (ValidatingAdmissionPolicy, in
			// v5.8); kubectl ignores it there, and so does this.
			if mapping.Scope.Name() == meta.RESTScopeNameRoot {
				obj.SetNamespace("")
			}
			_, err = admin.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace()).
				Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "telesched-integration", Force: true})
			if err != nil {
				t.Fatalf("%s: applying %s %s: %v", file, gvk.Kind, obj.GetName(), err)
			}
		}
	}
}

// readObjects decodes every object of a multi-document YAML file.
func readObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("decoding %s: %v", file, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// createAgentPod creates a pod of the agent's ServiceAccount assigned to
// node ("" for none). No kubelet runs it; the token binds to it all the same.
func createAgentPod(ctx context.Context, t *testing.T, admin clients, name, node string) *corev1.Pod {
	t.Helper()
	return createPodAs(ctx, t, admin, name, node, agentServiceAccount)
}

// createPodAs creates a pod of the ServiceAccount sa in agentNamespace
// bound to node ("" for none).
func createPodAs(ctx context.Context, t *testing.T, admin clients, name, node, sa string) *corev1.Pod {
	t.Helper()
	pod, err := admin.kube.CoreV1().Pods(agentNamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: agentNamespace},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			NodeName:           node,
			Containers:         []corev1.Container{{Name: "agent", Image: "telesched-agent:test"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = admin.kube.CoreV1().Pods(agentNamespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	return pod
}

// agentToken requests a token of the agent's ServiceAccount bound to pod,
// as the kubelet does for the pod's projected token volume; with a nil pod,
// a token bound to nothing.
func agentToken(ctx context.Context, t *testing.T, admin clients, pod *corev1.Pod) string {
	t.Helper()
	return tokenFor(ctx, t, admin, agentServiceAccount, pod)
}

// tokenFor requests a token of the ServiceAccount sa in agentNamespace
// bound to pod (nil: to nothing).
func tokenFor(ctx context.Context, t *testing.T, admin clients, sa string, pod *corev1.Pod) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if pod != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := admin.kube.CoreV1().ServiceAccounts(agentNamespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token: %v", err)
	}
	return tr.Status.Token
}

// tokenClients authenticate with a bearer token and nothing else.
type tokenClients struct {
	clients
	cfg *rest.Config
}

// agentClients returns clients that authenticate with token: cfg's address
// and CA, without its client certificate.
func agentClients(t *testing.T, token string) tokenClients {
	t.Helper()
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = token
	// As the agent names itself (agent/app/run.go): its field manager.
	c.UserAgent = "telesched-agent/test"
	return tokenClients{
		clients: clients{kube: kubernetes.NewForConfigOrDie(c), dyn: dynamic.NewForConfigOrDie(c)},
		cfg:     c,
	}
}

// grantAllWrites grants the agent's ServiceAccount every write verb on
// NodeTelemetry, until the test ends.
func grantAllWrites(ctx context.Context, t *testing.T, admin clients, suffix string) {
	t.Helper()
	name := "telesched-agent-nodebound-test-" + suffix
	rbac := admin.kube.RbacV1()
	_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{telemetryv1alpha1.GroupName},
			Resources: []string{"nodetelemetries", "nodetelemetries/status"},
			Verbs:     []string{"create", "update", "patch", "delete"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: agentNamespace, Name: agentServiceAccount}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
