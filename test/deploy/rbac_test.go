// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"fmt"
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
)

// TestDeployNamespaces: every namespaced object of every install is in
// telesched-system, so a kustomize `namespace:` overlay (or Helm's
// --namespace) moves the whole install and nothing is left pointing at a
// namespace it no longer uses.
func TestDeployNamespaces(t *testing.T) {
	clusterScoped := map[string]bool{
		"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
		"PriorityClass": true, "ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
		"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
		"FlowSchema": true, "PriorityLevelConfiguration": true,
	}
	for _, set := range manifestSets(t) {
		for _, o := range set.objs {
			if clusterScoped[o.GetKind()] {
				continue
			}
			if o.GetNamespace() != "telesched-system" {
				t.Errorf("%s: %s is in namespace %q, not the install's", set.name, objectID(o), o.GetNamespace())
			}
		}
	}
}

// TestSchedulerRBAC installs deploy/'s RBAC on the real API server and
// asks it (SubjectAccessReview) what the scheduler's ServiceAccount may
// do: everything the bootstrap policy's system:kube-scheduler grants but
// the default scheduler's Lease, and its own Leases and the authentication
// ConfigMap.
func TestSchedulerRBAC(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	a := newManifestApplier(t)
	objs := renderKustomization(t, manifestsRoot)
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding":
			if err := a.apply(ctx, o, false); err != nil {
				t.Fatalf("applying %s: %v", objectID(o), err)
			}
		}
	}
	kube := kubernetes.NewForConfigOrDie(cfg)

	// Coverage: the rules of the cluster's own system:kube-scheduler, less
	// the Lease named kube-scheduler and LeaseCandidates, are all within
	// telesched-scheduler:kube-scheduler's. A Kubernetes upgrade that gives
	// kube-scheduler a new permission fails here until the copy follows.
	system, err := kube.RbacV1().ClusterRoles().Get(ctx, "system:kube-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []rbacv1.PolicyRule
	for _, r := range system.Rules {
		if slices.Contains(r.Resources, "leasecandidates") || slices.Contains(r.ResourceNames, "kube-scheduler") {
			continue
		}
		want = append(want, r)
	}
	// The rules of every ClusterRole the install binds to the scheduler.
	var ours []rbacv1.PolicyRule
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		b := decodeObject[rbacv1.ClusterRoleBinding](t, o)
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Kind == "ServiceAccount" && s.Name == "telesched-scheduler" }) {
			continue
		}
		if i := slices.IndexFunc(objs, func(r *unstructured.Unstructured) bool {
			return r.GetKind() == "ClusterRole" && r.GetName() == b.RoleRef.Name
		}); i >= 0 {
			ours = append(ours, decodeObject[rbacv1.ClusterRole](t, objs[i]).Rules...)
		}
	}
	if ok, missing := rbacvalidation.Covers(ours, want); !ok {
		t.Errorf("the scheduler's ClusterRoles lack these rules of system:kube-scheduler: %v", missing)
	}

	sa := "system:serviceaccount:telesched-system:telesched-scheduler"
	for _, tc := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "telesched-scheduler"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "telesched-powerbudget-status"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "create", Group: "coordination.k8s.io", Resource: "leases"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "get", Resource: "configmaps", Name: "extension-apiserver-authentication"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Resource: "pods", Subresource: "binding", Name: "p"}, true},
		{authorizationv1.ResourceAttributes{Verb: "list", Group: "telemetry.telesched.io", Resource: "nodetelemetries"}, true},
		{authorizationv1.ResourceAttributes{Verb: "patch", Group: "telemetry.telesched.io", Resource: "powerbudgets", Subresource: "status", Name: "rack"}, true},
		// The default scheduler's Lease, and anything else in kube-system.
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "kube-scheduler"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Name: "kube-controller-manager"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "get", Resource: "configmaps", Name: "kubeadm-config"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "get", Resource: "secrets", Name: "bootstrap-token-abcdef"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "telemetry.telesched.io", Resource: "powerbudgets", Name: "rack"}, false},
	} {
		checkAccess(ctx, t, kube, sa, tc.attrs, tc.want)
	}
}

// TestDeployNamespaceOverlay renders deploy/ (and the single-scheduler
// component) through a kustomize `namespace:` overlay, as users move the
// install: nothing may still name telesched-system, or it points at a
// namespace the install left (a Role the scheduler needs, a FlowSchema
// subject, a binding's subject).
func TestDeployNamespaceOverlay(t *testing.T) {
	for _, components := range [][]string{nil, {"single-scheduler"}} {
		for _, o := range renderOverlay(t, "ops-telemetry", components...) {
			var walk func(path string, v any)
			walk = func(path string, v any) {
				switch v := v.(type) {
				case map[string]any:
					for k, x := range v {
						walk(path+"."+k, x)
					}
				case []any:
					for i, x := range v {
						walk(fmt.Sprintf("%s[%d]", path, i), x)
					}
				case string:
					if v == "telesched-system" {
						t.Errorf("%v: %s %s still names telesched-system after the overlay moved the install to ops-telemetry", components, objectID(o), path)
					}
				}
			}
			walk("", o.Object)
		}
	}
}

// checkAccess asks the API server (SubjectAccessReview) whether sa, a
// ServiceAccount of telesched-system, may do attrs, and fails the test
// unless the answer is want.
func checkAccess(ctx context.Context, t *testing.T, kube kubernetes.Interface, sa string, attrs authorizationv1.ResourceAttributes, want bool) {
	t.Helper()
	sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:telesched-system", "system:authenticated"},
		ResourceAttributes: &attrs,
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sar.Status.Allowed != want {
		t.Errorf("%s %+v: allowed %v, want %v (%s)", sa, attrs, sar.Status.Allowed, want, sar.Status.Reason)
	}
}
