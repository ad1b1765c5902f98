// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestAgentEventReasons keeps deploy/policy/agent-events.yaml, which lets
// the agent's ServiceAccount record only the Events the agent records, in
// step with the agent: a reason added here and not there would be refused
// by the API server in every cluster with the policy.
func TestAgentEventReasons(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "policy", "agent-events.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*- name: reasons\n\s*expression: "\[(.*)\]"`).FindSubmatch(data)
	if m == nil {
		t.Fatal("agent-events.yaml has no reasons variable")
	}
	var policy []string
	for _, q := range regexp.MustCompile(`'([^']*)'`).FindAllSubmatch(m[1], -1) {
		policy = append(policy, string(q[1]))
	}
	agent := []string{EventNodeOverheating, EventNodeTemperatureNormal, EventGPUThermalThrottling, EventOverheatingTaintAdded, EventOverheatingTaintRemoved}
	slices.Sort(policy)
	slices.Sort(agent)
	if !slices.Equal(policy, agent) {
		t.Errorf("agent-events.yaml allows reasons %q; the agent records %q", policy, agent)
	}
}
