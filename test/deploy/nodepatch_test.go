// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// nodeTaintPolicy is deploy/policy/node-taint.yaml's policy, which holds
// the agent's patch on Nodes to its overheating taint and condition.
const nodeTaintPolicy = "telesched-agent-node-taint"

// TestDeployNodePatchCarriesItsPolicy: every tree an operator may apply
// on its own (each kustomization under deploy/, the full install with
// its variants, the chart) that grants the agent patch on Nodes also
// carries the admission policy and binding that narrow it to the agent's
// own Node's taint and condition.
func TestDeployNodePatchCarriesItsPolicy(t *testing.T) {
	trees := map[string][]*unstructured.Unstructured{}
	for _, part := range []string{"agent", "scheduler", "policy", "descheduler", "monitoring"} {
		trees["deploy/"+part] = renderKustomization(t, filepath.Join(manifestsRoot, part))
	}
	for _, set := range manifestSets(t) {
		trees[set.name] = set.objs
	}
	granted := 0
	for name, objs := range trees {
		if !grantsAgentNodePatch(t, objs) {
			continue
		}
		granted++
		var policy, binding bool
		for _, o := range objs {
			policy = policy || (o.GetKind() == "ValidatingAdmissionPolicy" && o.GetName() == nodeTaintPolicy)
			binding = binding || (o.GetKind() == "ValidatingAdmissionPolicyBinding" && o.GetName() == nodeTaintPolicy)
		}
		if !policy || !binding {
			t.Errorf("%s grants telesched-agent patch on Nodes without the ValidatingAdmissionPolicy %s (found: policy %v, binding %v)", name, nodeTaintPolicy, policy, binding)
		}
	}
	if granted == 0 {
		t.Errorf("no tree grants the agent patch on Nodes: the overheating taint cannot be written anywhere")
	}
}

// grantsAgentNodePatch reports whether objs bind the agent's
// ServiceAccount to a ClusterRole of objs with patch on nodes.
func grantsAgentNodePatch(t *testing.T, objs []*unstructured.Unstructured) bool {
	t.Helper()
	patchers := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		for _, r := range decodeObject[rbacv1.ClusterRole](t, o).Rules {
			if slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, "nodes") && slices.Contains(r.Verbs, "patch") {
				patchers[o.GetName()] = true
			}
		}
	}
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		b := decodeObject[rbacv1.ClusterRoleBinding](t, o)
		if !patchers[b.RoleRef.Name] {
			continue
		}
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == "telesched-agent" {
				return true
			}
		}
	}
	return false
}
