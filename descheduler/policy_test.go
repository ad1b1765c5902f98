// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/defaultevictor"
)

const policyHead = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"

// TestPolicyDefaultsAndFile: without a file, PVC and ResourceClaim pods
// are protected and pods of the scheduler's profiles only are chosen; a
// file in upstream's format sets the evictor's args and each plugin's
// pods, and what it leaves out keeps the defaults.
func TestPolicyDefaultsAndFile(t *testing.T) {
	names := []string{"telesched", "telesched-energy"}
	def := DefaultPolicy(1000, names)
	if got := def.Evictor.PodProtections.ExtraEnabled; !slices.Contains(got, defaultevictor.PodsWithPVC) || !slices.Contains(got, defaultevictor.PodsWithResourceClaims) {
		t.Errorf("default protections %v: want PodsWithPVC and PodsWithResourceClaims", got)
	}
	pod := func(ns, sched string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: v1.PodSpec{SchedulerName: sched}}
	}
	if sel := def.Plugins[ThermalPluginName]; !sel.Chooses(pod("a", "telesched-energy")) || sel.Chooses(pod("a", "")) || sel.Chooses(pod("a", "volcano")) {
		t.Errorf("default selection: want pods of %v only", names)
	}
	p, err := parsePolicy([]byte(policyHead+`profiles:
- name: telesched
  pluginConfig:
  - name: DefaultEvictor
    args:
      minPodAge: 10m
      labelSelector: {matchLabels: {movable: "true"}}
      podProtections: {extraEnabled: [PodsWithPVC]}
  - name: TeleschedPowerBudget
    args:
      namespaces: {include: [batch]}
  plugins:
    deschedule:
      enabled: [TeleschedPowerBudget]
`), 1000, names)
	if err != nil {
		t.Fatal(err)
	}
	if _, on := p.Plugins[ThermalPluginName]; on {
		t.Errorf("TeleschedThermal runs; the file enables TeleschedPowerBudget alone")
	}
	if p.Evictor.MinPodAge == nil || p.Evictor.MinPodAge.Duration != 10*time.Minute || *p.Evictor.PriorityThreshold.Value != 1000 {
		t.Errorf("evictor args %+v: want minPodAge 10m and the flag's priority threshold", p.Evictor)
	}
	if sel := p.Plugins[BudgetPluginName]; !sel.Chooses(pod("batch", "telesched")) || sel.Chooses(pod("web", "telesched")) {
		t.Errorf("budget selection %+v: want namespace batch only, of the scheduler's profiles", sel)
	}
	for _, tc := range []struct{ name, policy, want string }{
		{"kind", "apiVersion: v1\nkind: ConfigMap\n", "want descheduler/v1alpha2 DeschedulerPolicy"},
		{"two profiles", policyHead + "profiles: [{name: a}, {name: b}]\n", "want exactly one"},
		{"unknown plugin", policyHead + "profiles: [{name: a, plugins: {deschedule: {enabled: [RemoveDuplicates]}}}]\n", `"RemoveDuplicates" is no plugin`},
		{"unknown arg", policyHead + "profiles: [{name: a, pluginConfig: [{name: TeleschedThermal, args: {namespace: [x]}}]}]\n", `unknown field "namespace"`},
		{"include and exclude", policyHead + "profiles: [{name: a, pluginConfig: [{name: TeleschedThermal, args: {namespaces: {include: [a], exclude: [b]}}}]}]\n", "only one of include and exclude"},
		{"evictor invalid", policyHead + "profiles: [{name: a, pluginConfig: [{name: DefaultEvictor, args: {podProtections: {extraEnabled: [Nope]}}}]}]\n", "pluginConfig[0] (DefaultEvictor).args"},
		{"limits", policyHead + "maxNoOfPodsToEvictTotal: 3\nprofiles: [{name: a}]\n", "--max-evictions-per-cycle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parsePolicy([]byte(tc.policy), 1000, names); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want it to say %q", err, tc.want)
			}
		})
	}
}
