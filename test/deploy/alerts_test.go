// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/telesched/telesched/sandbox/controlplane"
)

// ruleDir holds the alert rules and their promtool unit tests.
var ruleDir = filepath.Join(manifestsRoot, "monitoring", "rules")

// alertRule is one alerting rule as the tests read it.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroups struct {
	Groups []struct {
		Name  string      `json:"name"`
		Rules []alertRule `json:"rules"`
	} `json:"groups"`
}

func (g ruleGroups) alerts() map[string]alertRule {
	out := map[string]alertRule{}
	for _, grp := range g.Groups {
		for _, r := range grp.Rules {
			out[r.Alert] = r
		}
	}
	return out
}

// renderedRules renders the chart's PrometheusRule with values and writes
// its groups to dir/telesched-alerts.yaml, a Prometheus rule file.
func renderedRules(t *testing.T, dir string, values ...string) ruleGroups {
	t.Helper()
	objs := renderHelm(t, append([]string{"monitoring.prometheusRule.enabled=true"}, values...)...)
	spec, _, _ := unstructured.NestedMap(findObject(t, objs, "PrometheusRule", "telesched-alerts").Object, "spec")
	data, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "telesched-alerts.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := yaml.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// promtoolIn runs bin/promtool in dir.
func promtoolIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	bin, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "promtool"), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func readRuleFile(t *testing.T) ruleGroups {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ruleDir, "telesched-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := yaml.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestHelmAlertsAreTheRuleFile: at the chart's defaults its PrometheusRule
// holds the rule file's groups as they are, and the rule file's promtool
// unit tests pass on the rendered rules.
func TestHelmAlertsAreTheRuleFile(t *testing.T) {
	dir := t.TempDir()
	got := renderedRules(t, dir)
	if diff := cmp.Diff(readRuleFile(t), got); diff != "" {
		t.Errorf("the chart's default alerts differ from %s (-file +chart):\n%s", filepath.Join(ruleDir, "telesched-alerts.yaml"), diff)
	}
	tests, err := os.ReadFile(filepath.Join(ruleDir, "telesched-alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "telesched-alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	promtoolIn(t, dir, "check", "rules", "telesched-alerts.yaml")
	promtoolIn(t, dir, "test", "rules", "telesched-alerts_test.yaml")
}

// TestHelmAlertsFollowTheValues: the alerts whose thresholds are settings
// of the chart fire at those settings (thermal margin 8°C, GPU margin 5°C,
// telemetry stale after 10m), a disabled alert is left out, every alert
// carries the extra labels and annotations beside its own, and its
// runbook_url points into runbookUrl. A node 6°C from its limit, which
// the rule file's tests hold below the default 5, fires at 8 (promtool).
func TestHelmAlertsFollowTheValues(t *testing.T) {
	dir := t.TempDir()
	got := renderedRules(t, dir,
		"shared.thermalMarginCelsius=8", "scheduler.energyAware.gpuSlowdownMarginCelsius=5", "shared.telemetryMaxAgeReadyAgent=10m",
		"monitoring.prometheusRule.disabled.TeleschedPodsPending=true",
		"monitoring.prometheusRule.additionalRuleLabels.team=platform",
		"monitoring.prometheusRule.additionalRuleAnnotations.dashboard=https://grafana.example.com/d/telesched",
		"monitoring.prometheusRule.runbookUrl=https://wiki.example.com/telesched/")
	file := readRuleFile(t).alerts()
	alerts := got.alerts()
	for _, tc := range []struct{ alert, exprEnd, summary string }{
		{"TeleschedNodeTemperatureNearLimit", "<= 8\n", "Node {{ $labels.node }} runs within 8°C of a temperature limit."},
		{"TeleschedGPUTemperatureNearSlowdown", "<= 5\n", file["TeleschedGPUTemperatureNearSlowdown"].Annotations["summary"]},
		{"TeleschedTelemetryStale", "> 600\n", file["TeleschedTelemetryStale"].Annotations["summary"]},
	} {
		r := alerts[tc.alert]
		if !strings.HasSuffix(r.Expr, tc.exprEnd) {
			t.Errorf("%s: expr %q does not end with %q", tc.alert, r.Expr, tc.exprEnd)
		}
		if r.Annotations["summary"] != tc.summary {
			t.Errorf("%s: summary %q, want %q", tc.alert, r.Annotations["summary"], tc.summary)
		}
	}
	if _, ok := alerts["TeleschedPodsPending"]; ok {
		t.Error("TeleschedPodsPending is installed though disabled")
	}
	if len(alerts) != len(file)-1 {
		t.Errorf("%d alerts rendered, want the file's %d less the one disabled", len(alerts), len(file))
	}
	anchor := regexp.MustCompile(`#[a-z]+$`)
	for name, r := range alerts {
		want := file[name]
		if r.Labels["team"] != "platform" || r.Labels["severity"] != want.Labels["severity"] {
			t.Errorf("%s: labels %v, want its severity %q and team=platform", name, r.Labels, want.Labels["severity"])
		}
		if r.Annotations["dashboard"] != "https://grafana.example.com/d/telesched" || r.Annotations["description"] != want.Annotations["description"] {
			t.Errorf("%s: annotations lack the extra dashboard or changed its description", name)
		}
		if u := r.Annotations["runbook_url"]; u != "https://wiki.example.com/telesched"+anchor.FindString(want.Annotations["runbook_url"]) || !anchor.MatchString(u) {
			t.Errorf("%s: runbook_url %q, want https://wiki.example.com/telesched and its section %s", name, u, anchor.FindString(want.Annotations["runbook_url"]))
		}
	}

	// promtool: node-c of the rule file's own tests, 6°C below its
	// critical limit, fires at 8.
	unit := map[string]any{
		"rule_files":          []string{"telesched-alerts.yaml"},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval": "1m",
			"input_series": []any{
				map[string]string{"series": `telesched_node_temperature_celsius{job="telesched-agent",instance="10.0.0.3:9102",node="node-c",sensor="coretemp.0/Package id 0"}`, "values": "94x10"},
				map[string]string{"series": `telesched_node_temperature_limit_celsius{job="telesched-agent",instance="10.0.0.3:9102",node="node-c",sensor="coretemp.0/Package id 0",type="Critical"}`, "values": "100x10"},
			},
			"alert_rule_test": []any{map[string]any{
				"eval_time": "6m", "alertname": "TeleschedNodeTemperatureNearLimit",
				"exp_alerts": []any{map[string]any{
					"exp_labels": map[string]string{"severity": "warning", "team": "platform", "job": "telesched-agent", "instance": "10.0.0.3:9102", "node": "node-c", "sensor": "coretemp.0/Package id 0"},
					"exp_annotations": map[string]string{
						"summary": "Node node-c runs within 8°C of a temperature limit.",
						"description": "Sensor coretemp.0/Package id 0 on node node-c has been 6.0°C or less below its effective limit " +
							"(critical, else max, else the vendor's, else the agent's absolute limit) for 5 minutes. " +
							"The node is Overheating: telesched places no new pods on it.",
						"runbook_url": "https://wiki.example.com/telesched#teleschednodetemperaturenearlimit",
						"dashboard":   "https://grafana.example.com/d/telesched",
					},
				}},
			}},
		}},
	}
	data, err := json.Marshal(unit)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "at-8.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	promtoolIn(t, dir, "test", "rules", "at-8.yaml")
}

// TestHelmAlertsRefuseAnUnknownName: disabling an alert by a name the rule
// file does not have stops the render, naming the field; the schema's
// list is the rule file's alerts.
func TestHelmAlertsRefuseAnUnknownName(t *testing.T) {
	_, err := runHelm(t, helmTemplateArgs("monitoring.prometheusRule.enabled=true", "monitoring.prometheusRule.disabled.TeleschedPodPending=true")...)
	if err == nil || !strings.Contains(err.Error(), "disabled") || !strings.Contains(err.Error(), "TeleschedPodPending") {
		t.Errorf("a misspelt alert name: err %v, want the schema to refuse it by name", err)
	}
	schema := map[string]any{}
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	var enum []string
	p, _, _ := unstructured.NestedSlice(schema, "properties", "monitoring", "properties", "prometheusRule", "properties", "disabled", "propertyNames", "enum")
	for _, v := range p {
		enum = append(enum, v.(string))
	}
	var names []string
	for name := range readRuleFile(t).alerts() {
		names = append(names, name)
	}
	slices.Sort(enum)
	slices.Sort(names)
	if diff := cmp.Diff(names, enum); diff != "" {
		t.Errorf("values.schema.json's alert names are not the rule file's (-file +schema):\n%s", diff)
	}
}
