// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/agent/kube"
	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/test/fixtures"
)

// TestPolicyFollowsANamespaceOverlay installs the agent and the policies
// through a kustomize overlay that moves them into another namespace, as
// users do, and checks with real pod-bound tokens of the agent's
// ServiceAccount there that the agent is still held to its own node's
// NodeTelemetry and Events. A policy that named the namespace literally
// matched nobody after the move, and let the agent write every node.
func TestPolicyFollowsANamespaceOverlay(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	admin := newClients(t)
	const ns = "ops-telemetry"

	manifest, rendered := buildOverlay(ctx, t, func(rel func(string) string) string {
		return fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
  - %s
  - %s
  - %s
`, ns, rel("namespace.yaml"), rel("agent"), rel("policy"))
	})
	if !strings.Contains(string(rendered), "namespace: "+ns) || strings.Contains(string(rendered), "namespace: telesched-system") {
		t.Fatalf("the overlay did not move the install into %s:\n%s", ns, rendered)
	}
	applyManifests(ctx, t, admin, manifest)

	suffix := utilrand.String(5)
	nodeA, nodeB := "overlay-a-"+suffix, "overlay-b-"+suffix
	for _, n := range []string{nodeA, nodeB} {
		admin.createNodeAndTelemetry(ctx, t, n)
		if _, err := admin.applyStatus(ctx, n, fixtures.FullStatus(time.Now(), 1, 0)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.dyn.Resource(ntResource).Delete(context.Background(), n, metav1.DeleteOptions{})
			_ = admin.kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		})
	}
	pod, err := admin.kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-" + suffix, Namespace: ns},
		Spec:       corev1.PodSpec{ServiceAccountName: agentServiceAccount, NodeName: nodeA, Containers: []corev1.Container{{Name: "agent", Image: "telesched-agent:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.kube.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	tr, err := admin.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, agentServiceAccount, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agent := agentClients(t, tr.Status.Token)

	// RBAC and policy bindings take effect asynchronously: wait until the
	// agent may write its own node's object.
	waitFor(t, "the overlay's RBAC to let the agent write its NodeTelemetry", 30*time.Second, func() bool {
		_, err := agent.dyn.Resource(ntResource).Patch(ctx, nodeA, types.MergePatchType, []byte(`{"metadata":{"labels":{"probe":"x"}}}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})
	// and until the policy binding denies its write of another node's.
	waitFor(t, "the overlay's node-bound-writes policy to deny a write", 30*time.Second, func() bool {
		_, err := agent.dyn.Resource(ntResource).Patch(ctx, nodeB, types.MergePatchType, []byte(`{"metadata":{"labels":{"probe":"x"}}}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return isPolicyDenial(err)
	})
	kc, err := kube.New(agent.cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := fixtures.FullStatus(time.Now(), 1, 0)
	if out := newPublisher(t, kc, nodeA).Offer(ctx, &st); !out.Published || out.Err != nil {
		t.Fatalf("agent in %s on %s publishing its own NodeTelemetry: %+v", ns, nodeA, out)
	}
	before := admin.get(ctx, t, nodeB).ResourceVersion
	denied := newPublisher(t, kc, nodeB).Offer(ctx, &st)
	if denied.Published {
		t.Errorf("agent in %s on %s published NodeTelemetry %s", ns, nodeA, nodeB)
	}
	wantPolicyDenial(t, denied.Err, fmt.Sprintf("telesched-agent on node %s may only write NodeTelemetry %s, not %s", nodeA, nodeA, nodeB))
	if after := admin.get(ctx, t, nodeB).ResourceVersion; after != before {
		t.Errorf("NodeTelemetry %s changed (resourceVersion %s -> %s)", nodeB, before, after)
	}

	// Events: its own Node, its reasons only (RBAC from the overlay's
	// ClusterRoleBinding, whose subject kustomize moved to ops-telemetry).
	event := func(node, reason string) kube.Event {
		return kube.Event{Node: node, Type: corev1.EventTypeWarning, Reason: reason, Message: "test", Component: "telesched-agent"}
	}
	if err := kc.CreateEvent(ctx, event(nodeA, app.EventNodeOverheating), time.Now()); err != nil {
		t.Errorf("agent in %s recording NodeOverheating on its Node: %v", ns, err)
	}
	wantPolicyDenial(t, kc.CreateEvent(ctx, event(nodeB, app.EventNodeOverheating), time.Now()),
		fmt.Sprintf("may only record Events about Node %s, not Node %s", nodeA, nodeB))
	wantPolicyDenial(t, kc.CreateEvent(ctx, event(nodeA, "Scheduled"), time.Now()), "not Scheduled")
}

// buildOverlay writes the kustomization that overlay returns (given rel,
// which turns a path under deploy/ into one relative to the overlay's
// directory) and builds it with bin/kustomize, as users install; it
// returns the rendered file and its contents. bin/kustomize, not the
// kustomize API: linked into this test binary, kustomize's plugin support
// would make every symbol of go-nvml, which is resolved only when NVML is
// opened, be resolved at start.
func buildOverlay(ctx context.Context, t *testing.T, overlay func(rel func(string) string) string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	// kustomize takes directories by relative path only.
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(abs, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay(rel)), 0o644); err != nil {
		t.Fatal(err)
	}
	binDir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	kustomize := filepath.Join(binDir, "kustomize")
	// The overlay names deploy/ outside its own directory.
	out, err := exec.CommandContext(ctx, kustomize, "build", "--load-restrictor", "LoadRestrictionsNone", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%s build of the overlay: %v (run `make test`, which builds it)\n%s", kustomize, err, out)
	}
	manifest := filepath.Join(dir, "rendered.yaml")
	if err := os.WriteFile(manifest, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return manifest, out
}
