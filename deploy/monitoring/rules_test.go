// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package monitoring holds telesched's Prometheus alert rules: the plain
// rule file and its promtool unit tests under rules/, and the same groups as
// a Prometheus Operator PrometheusRule. These tests keep them valid, tested,
// in step with each other and with the metrics the agent really exports.
package monitoring

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/legacyregistry"
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/telesched/telesched/agent"
	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/metrics"
	"github.com/telesched/telesched/agent/publisher"
	"github.com/telesched/telesched/agent/status"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/powerbudget"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/fixtures"
)

const (
	ruleFile       = "rules/telesched-alerts.yaml"
	ruleTestFile   = "rules/telesched-alerts_test.yaml"
	prometheusRule = "prometheusrule.yaml"
	runbooks       = "docs/runbooks.md" // from the repository root
	runbookBaseURL = "https://github.com/telesched/telesched/blob/main/docs/runbooks.md#"

	// binDirEnv overrides bin/ of the checkout (the Makefile sets it).
	binDirEnv = "TELESCHED_BIN_DIR"
)

// targetLabels are the labels the scrape configuration gives every series
// of the agent's targets; the rules may use them with any metric.
var targetLabels = []string{"job", "instance", "node"}

type rules struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTests []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `json:"exp_labels"`
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// repoRoot walks up from the working directory to the directory holding
// go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// promtool returns the path of bin/promtool, built by `make promtool`.
func promtool(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(binDirEnv)
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "bin")
	}
	path := filepath.Join(dir, "promtool")
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.Fatalf("%s not found: run `make promtool` to build it from hack/promtool", path)
	case err != nil:
		t.Fatal(err)
	case info.IsDir() || info.Mode()&0o111 == 0:
		t.Fatalf("%s is not an executable file: run `make promtool`", path)
	}
	return path
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func alerts(t *testing.T) []rule {
	t.Helper()
	var rf rules
	readYAML(t, ruleFile, &rf)
	var out []rule
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no alerts", ruleFile)
	}
	return out
}

func TestPromtoolCheckRules(t *testing.T) {
	t.Parallel()
	runPromtool(t, "check", "rules", ruleFile)
}

func TestPromtoolTestRules(t *testing.T) {
	t.Parallel()
	runPromtool(t, "test", "rules", ruleTestFile)
}

// TestEveryAlertTested: every alert has a unit test where it fires, with its
// labels and annotations, and one where it must not fire.
func TestEveryAlertTested(t *testing.T) {
	t.Parallel()
	var rt ruleTests
	readYAML(t, ruleTestFile, &rt)
	if !slices.Contains(rt.RuleFiles, filepath.Base(ruleFile)) {
		t.Errorf("%s: rule_files %v does not load %s", ruleTestFile, rt.RuleFiles, filepath.Base(ruleFile))
	}

	byName := map[string]rule{}
	for _, r := range alerts(t) {
		byName[r.Alert] = r
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, tc := range rt.Tests {
		for _, at := range tc.AlertRuleTests {
			r, ok := byName[at.Alertname]
			if !ok {
				t.Errorf("%s: test at %s names unknown alert %q", ruleTestFile, at.EvalTime, at.Alertname)
				continue
			}
			if len(at.ExpAlerts) == 0 {
				quiet[at.Alertname]++
				continue
			}
			fires[at.Alertname]++
			for _, exp := range at.ExpAlerts {
				if got, want := exp.ExpLabels["severity"], r.Labels["severity"]; got != want {
					t.Errorf("%s: %s at %s: exp_labels severity %q, want %q", ruleTestFile, at.Alertname, at.EvalTime, got, want)
				}
				for _, key := range []string{"summary", "description", "runbook_url"} {
					if exp.ExpAnnotations[key] == "" {
						t.Errorf("%s: %s at %s: exp_annotations has no %s", ruleTestFile, at.Alertname, at.EvalTime, key)
					}
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		if fires[name] == 0 {
			t.Errorf("%s: no test case where %s fires", ruleTestFile, name)
		}
		if quiet[name] == 0 {
			t.Errorf("%s: no test case where %s must not fire (exp_alerts: [])", ruleTestFile, name)
		}
	}
}

// TestAlertsComplete: every alert waits (for), has a severity, a summary, a
// description and a runbook section that exists.
func TestAlertsComplete(t *testing.T) {
	t.Parallel()
	book, err := os.ReadFile(filepath.Join(repoRoot(t), runbooks))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for line := range strings.Lines(string(book)) {
		if h, ok := strings.CutPrefix(strings.TrimSpace(line), "## "); ok {
			headings[h] = true
		}
	}
	seen := map[string]bool{}
	for _, r := range alerts(t) {
		if seen[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if !strings.HasPrefix(r.Alert, "Telesched") {
			t.Errorf("alert %s: name must start with Telesched", r.Alert)
		}
		if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
			t.Errorf("alert %s: for %q: want a positive duration", r.Alert, r.For)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
		}
		for _, key := range []string{"summary", "description"} {
			if r.Annotations[key] == "" {
				t.Errorf("alert %s: no %s annotation", r.Alert, key)
			}
		}
		// GitHub's anchor of the heading "## TeleschedX" is #teleschedx.
		if got, want := r.Annotations["runbook_url"], runbookBaseURL+strings.ToLower(r.Alert); got != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, got, want)
		}
		if !headings[r.Alert] {
			t.Errorf("alert %s: %s has no section \"## %s\"", r.Alert, runbooks, r.Alert)
		}
	}
}

// TestPrometheusRuleMatchesRuleFile: the PrometheusRule carries exactly the
// groups of the rule file.
func TestPrometheusRuleMatchesRuleFile(t *testing.T) {
	t.Parallel()
	var file map[string]any
	readYAML(t, ruleFile, &file)
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	readYAML(t, prometheusRule, &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("%s is %s %s, want monitoring.coreos.com/v1 PrometheusRule", prometheusRule, pr.APIVersion, pr.Kind)
	}
	if pr.Metadata.Namespace != "telesched-system" || pr.Metadata.Name != "telesched-alerts" {
		t.Errorf("%s is %s/%s, want telesched-system/telesched-alerts", prometheusRule, pr.Metadata.Namespace, pr.Metadata.Name)
	}
	if diff := cmp.Diff(file, pr.Spec); diff != "" {
		t.Errorf("%s spec differs from %s (-%s +%s):\n%s", prometheusRule, ruleFile, ruleFile, prometheusRule, diff)
	}
}

// exportedLabels runs the agent's metrics on an observation with every
// signal present and returns each telesched_ metric's label names.
func exportedLabels(t *testing.T) map[string][]string {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "test")
	st := fixtures.FullStatus(time.Now(), 2, 8)
	m.Observe(&agent.Observation{
		Sample: &collector.Sample{
			CPUBusy: 0.45,
			Thermal: &collector.Thermal{Sensors: []collector.TempSensor{
				{Name: "coretemp.0/Package id 0", MilliCelsius: 71_000, MaxMilliCelsius: ptr.To[int64](84_000), CritMilliCelsius: ptr.To[int64](100_000)},
			}},
			Power: &collector.Power{Watts: 2150, EnergyJoules: 1e6, Zones: []collector.PowerZone{
				{Name: "package-0", Source: telemetryv1alpha1.PowerSourceRAPL, Watts: 750},
			}},
			Sources: st.Sources,
		},
		Results: []collector.Result{{Name: telemetryv1alpha1.SourceCPU, Duration: time.Millisecond}},
		Status:  st,
		Heat:    status.HeatState{Known: true},
	})
	m.Published(publisher.Outcome{Published: true, Reason: "first"}, time.Now())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler's: the power budgets' metrics, for one budget.
	powerbudget.RegisterMetrics()
	cache := telemetry.NewCache()
	domains := powerbudget.NewDomains(cache, estimate.NewBook(cache, estimate.DefaultOptions()), nil)
	if err := domains.SetBudget(&telemetryv1alpha1.PowerBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "rack-a"},
		Spec: telemetryv1alpha1.PowerBudgetSpec{
			NodeSelector: telemetryv1alpha1.NodeSelector{MatchLabels: map[string]telemetryv1alpha1.LabelValue{"example.com/rack": "a"}},
			BudgetWatts:  10_000,
		},
	}); err != nil {
		t.Fatal(err)
	}
	domains.ExportMetrics(time.Now(), time.Minute)
	schedMFs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	mfs = append(mfs, schedMFs...)
	// The descheduler's: its evictions by plugin and result, one pod
	// reported without a destination.
	descheduler.RegisterMetrics()
	gate := descheduler.NewGate(events.NewFakeRecorder(1), time.Minute, true, time.Now)
	gate.NoDestination(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}, "TeleschedThermal", "too hot", "none")
	deschedMFs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	mfs = append(mfs, deschedMFs...)
	// kube-scheduler's own, which telesched-scheduler is: its queues, by
	// queue, from the scheduler's registry.
	schedulermetrics.Register()
	schedulermetrics.UnschedulablePods().Set(0)
	kubeMFs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	mfs = append(mfs, kubeMFs...)
	out := map[string][]string{}
	for _, mf := range mfs {
		if n := mf.GetName(); !strings.HasPrefix(n, "telesched_") && n != "scheduler_pending_pods" && n != "leader_election_master_status" {
			continue
		}
		names := map[string]bool{}
		for _, series := range mf.GetMetric() {
			for _, l := range series.GetLabel() {
				names[l.GetName()] = true
			}
		}
		out[mf.GetName()] = slices.Sorted(maps.Keys(names))
	}
	// Leader election's gauge, which component-base registers when
	// imported, as kube-scheduler's main and cmd/telesched-scheduler do
	// (k8s.io/component-base/metrics/prometheus/clientgo/leaderelection):
	// unexported, so set only by a running elector.
	// TestHelmInstallRunsAgentAndScheduler scrapes it from the real binary.
	out["leader_election_master_status"] = []string{"name"}
	return out
}

var (
	selectorRE = regexp.MustCompile(`\b(telesched_[a-zA-Z0-9_]+|scheduler_[a-zA-Z0-9_]+|leader_election_[a-zA-Z0-9_]+|up)\b(\{[^}]*\})?`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	groupingRE = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	templateRE = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// knownValues are the label values the agent can export, from the API's
// enums.
var knownValues = map[string]map[string][]string{
	"telesched_gpu_throttle_reason": {"reason": {
		string(telemetryv1alpha1.GPUThrottleIdle), string(telemetryv1alpha1.GPUThrottleApplicationsClocks),
		string(telemetryv1alpha1.GPUThrottleSwPowerCap), string(telemetryv1alpha1.GPUThrottleHwSlowdown),
		string(telemetryv1alpha1.GPUThrottleSyncBoost), string(telemetryv1alpha1.GPUThrottleSwThermalSlowdown),
		string(telemetryv1alpha1.GPUThrottleHwThermalSlowdown), string(telemetryv1alpha1.GPUThrottleHwPowerBrakeSlowdown),
		string(telemetryv1alpha1.GPUThrottleDisplayClockSetting),
	}},
	"telesched_descheduler_evictions_total": {"result": {
		descheduler.ResultEvicted, descheduler.ResultWouldEvict, descheduler.ResultRefusedPDB,
		descheduler.ResultNoDestination, descheduler.ResultRateLimited, descheduler.ResultError,
	}},
	"telesched_agent_source_info": {
		"state": {string(telemetryv1alpha1.SourceAvailable), string(telemetryv1alpha1.SourceUnavailable), string(telemetryv1alpha1.SourceFailed)},
		"source": {
			string(telemetryv1alpha1.SourceCPU), string(telemetryv1alpha1.SourceMemory), string(telemetryv1alpha1.SourceThermal),
			string(telemetryv1alpha1.SourcePower), string(telemetryv1alpha1.SourceNUMA), string(telemetryv1alpha1.SourceGPU),
			string(telemetryv1alpha1.SourcePodResources),
		},
	},
}

// TestRulesUseExportedMetrics: every metric an alert reads is one the agent
// exports (or `up`), with the label names and values it really has, and the
// annotations only name labels the alert carries.
func TestRulesUseExportedMetrics(t *testing.T) {
	t.Parallel()
	exported := exportedLabels(t)
	exported["up"] = nil // target labels only
	for _, r := range alerts(t) {
		// Labels of the alert's series: those of the metrics it reads, less
		// those aggregated away; absent() keeps only its equality matchers.
		carried := map[string]bool{}
		for _, l := range targetLabels {
			carried[l] = true
		}
		for _, m := range selectorRE.FindAllStringSubmatch(r.Expr, -1) {
			name, selector := m[1], m[2]
			labels, ok := exported[name]
			if !ok {
				t.Errorf("alert %s reads %s, which the agent does not export", r.Alert, name)
				continue
			}
			for _, l := range labels {
				carried[l] = true
			}
			for _, mm := range matcherRE.FindAllStringSubmatch(selector, -1) {
				label, op, value := mm[1], mm[2], mm[3]
				if !slices.Contains(labels, label) && !slices.Contains(targetLabels, label) {
					t.Errorf("alert %s: %s has no label %q (it has %v)", r.Alert, name, label, labels)
				}
				known := knownValues[name][label]
				if known == nil || (op != "=" && op != "=~") {
					continue
				}
				for v := range strings.SplitSeq(value, "|") {
					if !slices.Contains(known, v) {
						t.Errorf("alert %s: %s{%s%s%q}: the agent never exports %s=%q (known: %v)", r.Alert, name, label, op, value, label, v, known)
					}
				}
			}
		}
		var dropped []string
		for _, g := range groupingRE.FindAllStringSubmatch(r.Expr, -1) {
			for l := range strings.SplitSeq(g[2], ",") {
				if l = strings.TrimSpace(l); l != "" && !carried[l] {
					t.Errorf("alert %s: %s (%s): no metric it reads has label %q", r.Alert, g[1], g[2], l)
				}
				if g[1] == "without" {
					dropped = append(dropped, l)
				}
			}
		}
		for _, l := range dropped {
			delete(carried, l)
		}
		if strings.Contains(r.Expr, "absent(") {
			carried = map[string]bool{}
			for _, mm := range matcherRE.FindAllStringSubmatch(r.Expr, -1) {
				if mm[2] == "=" {
					carried[mm[1]] = true
				}
			}
		}
		for _, key := range slices.Sorted(maps.Keys(r.Annotations)) {
			for _, m := range templateRE.FindAllStringSubmatch(r.Annotations[key], -1) {
				if !carried[m[1]] {
					t.Errorf("alert %s: annotation %s uses $labels.%s, which the alert does not carry (it has %v)", r.Alert, key, m[1], slices.Sorted(maps.Keys(carried)))
				}
			}
		}
	}
}
