// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNodeTaintPolicyNames keeps deploy/policy/node-taint.yaml, which lets
// the agent's ServiceAccount write one taint and one condition of its
// Node, in step with the names the agent writes: a name changed here and
// not there would be refused by the API server in every cluster with the
// policy.
func TestNodeTaintPolicyNames(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "policy", "node-taint.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	variable := func(name string) string {
		m := regexp.MustCompile(`(?m)^\s*- name: ` + name + `\n\s*expression: "'([^']*)'"`).FindSubmatch(data)
		if m == nil {
			t.Fatalf("node-taint.yaml has no variable %s", name)
		}
		return string(m[1])
	}
	want := map[string]string{"taintKey": OverheatingTaintKey, "conditionType": OverheatingConditionType}
	got := map[string]string{"taintKey": variable("taintKey"), "conditionType": variable("conditionType")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node-taint.yaml's names (-agent +policy):\n%s", diff)
	}
	if !regexp.MustCompile(`t\.effect == '` + OverheatingTaintEffect + `'`).Match(data) {
		t.Errorf("node-taint.yaml does not allow the effect %s", OverheatingTaintEffect)
	}
}
