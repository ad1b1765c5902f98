// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/telesched/telesched/agent/speed"
)

// speedTableValues is an operator's agent.speedTable: one CPU row and one
// GPU row, in the chart's values.
const speedTableValues = `agent:
  gpu:
    enabled: true
  speedTable:
    cpus:
    - match: "EPYC 7313"
      milli: 1210
      basis: "our SPECrate 2017 int per core, 2025-03"
    gpus:
    - match: "L40S"
      milli: 1350
      basis: "our own training benchmark"
      source: https://wiki.example.com/gpu-bench
`

// TestHelmSpeedTable: agent.speedTable reaches both agent DaemonSets as a
// ConfigMap mounted where --speed-table reads it, in a form the agent's own
// parser takes row for row; a new table changes the pods' checksum (so the
// agents, which read it at start, roll); without one the chart renders no
// ConfigMap, flag or volume.
func TestHelmSpeedTable(t *testing.T) {
	render := func(values string) []*unstructured.Unstructured {
		t.Helper()
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := runHelm(t, append(helmTemplateArgs(), "-f", f)...)
		if err != nil {
			t.Fatal(err)
		}
		return decodeManifests(t, "helm template", out)
	}
	objs := render(speedTableValues)
	cm := findObject(t, objs, "ConfigMap", "telesched-agent-speed-table")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "speed-table.yaml")
	table, err := speed.Parse([]byte(data))
	if err != nil {
		t.Fatalf("the agent's parser refuses the rendered table: %v\n%s", err, data)
	}
	if len(table.CPUs) != 1 || table.CPUs[0].Match != "EPYC 7313" || table.CPUs[0].Milli != 1210 ||
		len(table.GPUs) != 1 || table.GPUs[0].Match != "L40S" || table.GPUs[0].Milli != 1350 || table.GPUs[0].Source == "" {
		t.Errorf("rendered table = %+v, want the values' rows", table)
	}
	checksum := map[string]string{}
	for _, name := range []string{"telesched-agent", "telesched-agent-gpu"} {
		ds := findObject(t, objs, "DaemonSet", name)
		spec, _, _ := unstructured.NestedMap(ds.Object, "spec", "template", "spec")
		c := spec["containers"].([]any)[0].(map[string]any)
		var args []string
		for _, a := range c["args"].([]any) {
			args = append(args, a.(string))
		}
		flag := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--speed-table=") })
		if flag < 0 {
			t.Errorf("DaemonSet %s: args %v, want --speed-table", name, args)
			continue
		}
		path := strings.TrimPrefix(args[flag], "--speed-table=")
		mounted := false
		for _, m := range c["volumeMounts"].([]any) {
			m := m.(map[string]any)
			if m["name"] == "speed-table" && filepath.Join(m["mountPath"].(string), "speed-table.yaml") == path {
				mounted = true
			}
		}
		fromCM := false
		for _, v := range spec["volumes"].([]any) {
			v := v.(map[string]any)
			if cmv, ok := v["configMap"].(map[string]any); ok && v["name"] == "speed-table" && cmv["name"] == cm.GetName() {
				fromCM = true
			}
		}
		if !mounted || !fromCM {
			t.Errorf("DaemonSet %s: --speed-table=%s, mounted there %v, from ConfigMap %s %v", name, path, mounted, cm.GetName(), fromCM)
		}
		checksum[name], _, _ = unstructured.NestedString(ds.Object, "spec", "template", "metadata", "annotations", "checksum/speed-table")
		if checksum[name] == "" {
			t.Errorf("DaemonSet %s: no checksum/speed-table annotation; a new table would not roll the agents", name)
		}
	}

	changed := render(strings.Replace(speedTableValues, "milli: 1210", "milli: 1200", 1))
	for _, name := range []string{"telesched-agent", "telesched-agent-gpu"} {
		got, _, _ := unstructured.NestedString(findObject(t, changed, "DaemonSet", name).Object, "spec", "template", "metadata", "annotations", "checksum/speed-table")
		if got == checksum[name] {
			t.Errorf("DaemonSet %s: the checksum did not change with the table (%s)", name, got)
		}
	}

	for _, o := range renderHelm(t) {
		if o.GetName() == "telesched-agent-speed-table" {
			t.Errorf("no agent.speedTable, yet the chart renders %s %s", o.GetKind(), o.GetName())
		}
		if o.GetKind() == "DaemonSet" && strings.Contains(strings.Join(mustArgs(o), " "), "--speed-table") {
			t.Errorf("no agent.speedTable, yet DaemonSet %s has --speed-table", o.GetName())
		}
	}
}

func mustArgs(ds *unstructured.Unstructured) []string {
	cs, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	var out []string
	for _, a := range cs[0].(map[string]any)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}
