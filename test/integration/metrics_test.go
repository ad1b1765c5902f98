// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent"
	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/metrics"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/proc"
	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/sandbox/hosttree"
	"github.com/telesched/telesched/test/fixtures"
)

// repoRoot is the module root, relative to this package.
var repoRoot = filepath.Join("..", "..")

// teleschedPlugins are the plugins the scheduler dashboard breaks down by.
var teleschedPlugins = []string{"LoadAware", "TopologyFit", "EnergyAware", "PowerBudget"}

// prometheusSeries are series Prometheus itself writes for every target and
// for alerting; rules may use them although no exporter does.
var prometheusSeries = map[string]bool{
	"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true,
	"scrape_samples_post_metric_relabeling": true, "scrape_series_added": true,
	"ALERTS": true, "ALERTS_FOR_STATE": true,
}

// TestMetricNames checks that every metric the Grafana dashboards and the
// Prometheus alert rules query is exported by a real component: the
// telesched-agent binary on a simulated host tree (publishing to the test
// API server), the telesched-scheduler binary after it has scheduled pods
// with the telesched profile and rejected one, and — for GPU metrics, which
// need NVML — the agent's metrics collector fed an observation with GPUs.
func TestMetricNames(t *testing.T) {
	needControlPlane(t)
	refs, recorded := referencedMetrics(t)
	if len(refs) == 0 {
		t.Fatal("no metric names found in dashboards/ or deploy/monitoring/rules/")
	}

	c := newClients(t)
	ctx := t.Context()
	binDir, kubeconfig := binDirAndKubeconfig(t)

	// The agent: a real binary, a simulated 2-socket host, publishing.
	agentURL, host := startMetricsAgent(t, c, binDir, kubeconfig)
	checkAgentRuntime(t, agentURL)

	// The scheduler: two cool nodes and a hot one.
	for name, st := range map[string]telemetryv1alpha1.NodeTelemetryStatus{
		"metrics-cool-a": nodeStatus(10, 55, 100),
		"metrics-cool-b": nodeStatus(20, 60, 100),
		"metrics-hot":    nodeStatus(10, 97, 100), // headroom 3°C <= 5°C margin
	} {
		node := schedNode(ctx, t, c, name)
		if _, err := c.applyStatusCreating(ctx, node, st); err != nil {
			t.Fatal(err)
		}
	}
	// A power budget over one of them, far from full: the scheduler
	// exports the telesched_power_budget_ series of budgets that exist.
	if _, err := c.dyn.Resource(pbResource).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "PowerBudget",
		"metadata": map[string]any{"name": "metrics-rack"},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/hostname": "metrics-cool-a"}},
			"budgetWatts":  int64(100_000), "unmeteredNodeWatts": int64(1000),
		},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.dyn.Resource(pbResource).Delete(context.WithoutCancel(ctx), "metrics-rack", metav1.DeleteOptions{})
	})
	schedURL := startMetricsScheduler(t, binDir, kubeconfig)

	// A pod only the hot node could take: EnergyAware rejects it, so
	// scheduler_unschedulable_pods has a series for the plugin.
	hot := testPod("metrics-too-hot", "telesched")
	hot.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "metrics-hot"}
	createTestPod(t, c, hot)
	t.Logf("FailedScheduling: %s", waitFailedScheduling(t, c, hot.Name, 60*time.Second))
	// A NodeTelemetry update that cools the node runs EnergyAware's
	// queueing hint for it (its PreQueueingHint names the pod; one that
	// frees nothing names none), and the pod goes there. Then the node is
	// hot again for the pods below.
	if _, err := c.applyStatus(ctx, "metrics-hot", nodeStatus(10, 60, 100)); err != nil {
		t.Fatal(err)
	}
	waitScheduled(t, c, hot.Name, 60*time.Second)
	if _, err := c.applyStatus(ctx, "metrics-hot", nodeStatus(10, 98, 100)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the scheduler's informer sees it

	// Plugin execution durations are recorded for a 10% sample of
	// scheduling cycles: schedule pods in batches until each telesched
	// plugin has a series (0.9^100 ≈ 3e-5 chance of none after 100 pods).
	scheduled := 0
	for batch := 0; ; batch++ {
		if missing := missingPluginSeries(scrape(t, schedURL)); len(missing) == 0 {
			break
		} else if batch == 10 {
			t.Fatalf("after %d pods, scheduler_plugin_execution_duration_seconds has no series for %v", scheduled, missing)
		}
		var names []string
		for i := range 10 {
			pod := testPod(fmt.Sprintf("metrics-pod-%03d", batch*10+i), "telesched")
			pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
			createTestPod(t, c, pod)
			names = append(names, pod.Name)
		}
		for _, name := range names {
			if node := waitScheduled(t, c, name, 60*time.Second); node == "metrics-hot" {
				t.Errorf("%s went to the hot node", name)
			}
		}
		scheduled += len(names)
		time.Sleep(1500 * time.Millisecond) // the scheduler flushes plugin metrics every second
	}
	t.Logf("scheduled %d pods with the telesched profile", scheduled)

	// A pod only a loaded node could take: LoadAware rejects it. A bound
	// pod's deletion then runs LoadAware's QueueingHint for it (Pod
	// deletions are an event the plugins register with the queue), so
	// scheduler_queueing_hint_execution_duration_seconds has a series.
	bound := testPod("metrics-bound", "telesched")
	createTestPod(t, c, bound)
	waitScheduled(t, c, bound.Name, 60*time.Second)
	busyNode := schedNode(ctx, t, c, "metrics-busy")
	if _, err := c.applyStatusCreating(ctx, busyNode, nodeStatus(95, 55, 100)); err != nil {
		t.Fatal(err)
	}
	loaded := testPod("metrics-too-loaded", "telesched")
	loaded.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "metrics-busy"}
	createTestPod(t, c, loaded)
	t.Logf("FailedScheduling: %s", waitFailedScheduling(t, c, loaded.Name, 60*time.Second))
	if err := c.kube.CoreV1().Pods("default").Delete(ctx, bound.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The agent: make it overheat (an event) while the power model fills.
	host.SetTemperature(97_000)

	// Scrape until every referenced name is seen or the deadline passes;
	// some agent series (the power model, events) appear after a few
	// samples.
	gpu := gpuMetricNames(t)
	// The descheduler, in its default dry-run, with a pod on a hot node
	// to report: its eviction counter has a series once it has one.
	deschedNames := deschedulerMetricNames(t, c)
	var agentNames, schedNames map[string]bool
	deadline := time.Now().Add(30 * time.Second)
	for {
		agentNames = familyNames(scrape(t, agentURL))
		schedNames = familyNames(scrape(t, schedURL))
		for name := range deschedNames {
			schedNames[name] = true
		}
		if len(unknownNames(refs, recorded, agentNames, schedNames, gpu)) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	t.Logf("agent exports %d metric names, scheduler and descheduler %d, GPU collector %d; dashboards and rules reference %d",
		len(agentNames), len(schedNames), len(gpu), len(refs))

	if missing := unknownNames(refs, recorded, agentNames, schedNames, gpu); len(missing) > 0 {
		var b strings.Builder
		for _, name := range missing {
			fmt.Fprintf(&b, "\n  %s (in %s)", name, strings.Join(refs[name], "; "))
		}
		t.Errorf("%d metric names referenced but exported by no component:%s", len(missing), b.String())
	}
	if missing := missingPluginSeries(scrape(t, schedURL)); len(missing) > 0 {
		t.Errorf("scheduler_plugin_execution_duration_seconds has no series for plugins %v", missing)
	}
}

// unknownNames returns, sorted, the referenced names no source exports.
// GPU names may come from the collector check; every other name must come
// from a running binary, a recording rule or Prometheus itself.
func unknownNames(refs map[string][]string, recorded, agentNames, schedNames, gpu map[string]bool) []string {
	var missing []string
	for name := range refs {
		switch {
		case agentNames[name], schedNames[name], prometheusSeries[name], recorded[name]:
		case strings.HasPrefix(name, "telesched_gpu_") && gpu[name]:
		default:
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return missing
}

// missingPluginSeries returns the telesched plugins without a
// scheduler_plugin_execution_duration_seconds series.
func missingPluginSeries(fams map[string]*dto.MetricFamily) []string {
	seen := map[string]bool{}
	if f := fams["scheduler_plugin_execution_duration_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "plugin" {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	var missing []string
	for _, p := range teleschedPlugins {
		if !seen[p] {
			missing = append(missing, p)
		}
	}
	return missing
}

func createTestPod(t *testing.T, c clients, pod *corev1.Pod) {
	t.Helper()
	if _, err := c.kube.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
}

// freeAddress returns a loopback address with a port free a moment ago.
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// binDirAndKubeconfig is the directory of the binaries the tests run
// (TELESCHED_BIN_DIR, else bin/) and a kubeconfig file of the test API
// server's admin.
func binDirAndKubeconfig(t *testing.T) (string, string) {
	t.Helper()
	binDir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	return binDir, adminKubeconfig(t)
}

// adminKubeconfig writes a kubeconfig file of the test API server's admin
// and returns its path.
func adminKubeconfig(t *testing.T) string {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// startProcess starts a binary and stops it at the end of the test.
func startProcess(t *testing.T, bin string, args ...string) *syncBuffer {
	t.Helper()
	out, _ := startStoppable(t, bin, args...)
	return out
}

// startStoppable starts a binary; stop interrupts it and waits (killing it
// after proc.DefaultGrace), and runs at the end of the test if not called
// before.
func startStoppable(t *testing.T, bin string, args ...string) (*syncBuffer, func()) {
	t.Helper()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (run `make build`)", bin, err)
	}
	out := &syncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	p, err := proc.Start(cmd, proc.DefaultGrace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return out, p.Stop
}

// waitReady polls ready every 100ms until it holds, and fails the test with
// the tail of the process's output after timeout.
func waitReady(t *testing.T, what string, out *syncBuffer, timeout time.Duration, ready func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !ready(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; output (tail):\n%s", timeout, what, tail(out.String(), 30))
		}
	}
}

// checkAgentRuntime: the agent binary runs with its runtime
// settings' defaults (--max-procs 1, --gc-percent 100), as the Go collector's
// go_sched_gomaxprocs_threads and go_gc_gogc_percent say, unless this
// test's environment sets GOMAXPROCS or GOGC, which the agent inherits and
// which win.
func checkAgentRuntime(t *testing.T, url string) {
	t.Helper()
	fams, err := tryScrape(http.DefaultClient, url)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		env  string
		want float64
	}{
		"go_sched_gomaxprocs_threads": {"GOMAXPROCS", app.DefaultMaxProcs},
		"go_gc_gogc_percent":          {"GOGC", app.DefaultGCPercent},
	} {
		if _, set := os.LookupEnv(c.env); set {
			continue
		}
		f := fams[name]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Errorf("the agent's /metrics has no %s", name)
			continue
		}
		if got := f.GetMetric()[0].GetGauge().GetValue(); got != c.want {
			t.Errorf("%s = %v, want the agent's default %v", name, got, c.want)
		}
	}
}

// startMetricsAgent runs bin/telesched-agent on a simulated host tree for a
// new Node, publishing to the test API server, and returns its /metrics
// URL once it serves samples.
func startMetricsAgent(t *testing.T, c clients, binDir, kubeconfig string) (string, *hosttree.Host) {
	t.Helper()
	ctx := t.Context()
	const nodeName = "metrics-agent-node"
	if _, err := c.kube.CoreV1().Nodes().Create(ctx, fixtures.Node(nodeName), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = c.kube.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{})
		_ = c.dyn.Resource(ntResource).Delete(ctx, nodeName, metav1.DeleteOptions{})
	})
	host, stop := startHostTree(t)
	// Swing the load so the power model sees a spread of utilizations.
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(700 * time.Millisecond):
				host.SetUtilization([]float64{0.1, 0.9}[i%2])
			}
		}
	}()

	addr := freeAddress(t)
	out := startProcess(t, filepath.Join(binDir, "telesched-agent"),
		"--host-root="+host.Dir, "--node-name="+nodeName, "--kubeconfig="+kubeconfig,
		"--interval=500ms", "--metrics-bind-address="+addr, "--health-probe-bind-address="+freeAddress(t), "--heartbeat=5s", "--publish-qps=5",
		"--power-model-min-samples=4", "--power-model-min-spread-percent=20", "-v=2")
	url := "http://" + addr + "/metrics"
	waitReady(t, "the agent's first sample on /metrics", out, 30*time.Second, func() bool {
		fams, err := tryScrape(http.DefaultClient, url)
		return err == nil && fams["telesched_node_cpu_utilization_ratio"] != nil
	})
	return url, host
}

// startMetricsScheduler runs bin/telesched-scheduler with the deployed
// config, serving https on a free port with /metrics open to anyone, and
// returns its /metrics URL once it is healthy. The feature gates are the
// Deployment's unless extraArgs sets them.
func startMetricsScheduler(t *testing.T, binDir, kubeconfig string, extraArgs ...string) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	cfgYAML := schedulerConfig(t, "") + "clientConnection:\n  kubeconfig: " + kubeconfig + "\n"
	if err := os.WriteFile(config, []byte(cfgYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--config=" + config, "--cert-dir=" + t.TempDir(),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics", "-v=2"}, deployedFeatureGates(t)...)
	args = append(args, extraArgs...)
	base, _ := startSecureScheduler(t, filepath.Join(binDir, "telesched-scheduler"), args...)
	return base + "/metrics"
}

// startSecureScheduler starts the scheduler binary with args and its
// secure port on a free local address, waits for its /healthz, and
// returns the port's base URL and the process's output.
func startSecureScheduler(t *testing.T, bin string, args ...string) (string, *syncBuffer) {
	t.Helper()
	host, port, err := net.SplitHostPort(freeAddress(t))
	if err != nil {
		t.Fatal(err)
	}
	out := startProcess(t, bin, append(args, "--bind-address="+host, "--secure-port="+port)...)
	base := "https://" + net.JoinHostPort(host, port)
	waitReady(t, "the scheduler's /healthz", out, 60*time.Second, func() bool {
		resp, err := insecureClient.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base, out
}

// insecureClient fetches from the scheduler's self-signed serving cert.
var insecureClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // a test server's self-signed cert
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	client := http.DefaultClient
	if strings.HasPrefix(url, "https://") {
		client = insecureClient
	}
	fams, err := tryScrape(client, url)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func tryScrape(client *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", url, err)
	}
	return fams, nil
}

// familyNames returns the names a query can use for the families' series:
// the family name, and for histograms and summaries the _bucket, _sum and
// _count series.
func familyNames(fams map[string]*dto.MetricFamily) map[string]bool {
	names := map[string]bool{}
	for name, f := range fams {
		if len(f.GetMetric()) == 0 {
			continue
		}
		names[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	return names
}

// gpuMetricNames gathers the agent's metrics collector fed an observation
// of a node with 8 GPUs: GPU series need NVML, which the test host lacks.
func gpuMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "test")
	st := fixtures.FullStatus(time.Now(), 2, 8)
	m.Observe(&agent.Observation{Sample: &collector.Sample{Sources: st.Sources}, Status: st})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		fams[mf.GetName()] = mf
	}
	return familyNames(fams)
}

// referencedMetrics returns each metric name the dashboards and alert
// rules query, with where it is used, and the names the rules record.
func referencedMetrics(t *testing.T) (refs map[string][]string, recorded map[string]bool) {
	t.Helper()
	refs, recorded = map[string][]string{}, map[string]bool{}
	add := func(where, expr string) {
		for _, name := range promQLMetricNames(expr) {
			if !slices.Contains(refs[name], where) {
				refs[name] = append(refs[name], where)
			}
		}
	}
	dashboards, err := filepath.Glob(filepath.Join(repoRoot, "dashboards", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dashboards) == 0 {
		t.Fatal("no dashboards in dashboards/")
	}
	for _, path := range dashboards {
		n := 0
		for _, q := range dashboardQueries(t, path) {
			add(filepath.Base(path)+": "+q.where, q.expr)
			n += len(promQLMetricNames(q.expr))
		}
		if n == 0 {
			t.Errorf("%s: no metric names found in its queries", path)
		}
	}
	rules, err := filepath.Glob(filepath.Join(repoRoot, "deploy", "monitoring", "rules", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Log("no deploy/monitoring/rules/*.yaml; checking the dashboards only")
	}
	for _, path := range rules {
		exprs, records := ruleExpressions(t, path)
		for _, q := range exprs {
			add(filepath.Base(path)+": "+q.where, q.expr)
		}
		// A rule may use a series another rule of the files records.
		for _, r := range records {
			recorded[r] = true
		}
		if len(exprs) > 0 {
			t.Logf("%s: %d rule expressions", path, len(exprs))
		}
	}
	return refs, recorded
}

type query struct{ where, expr string }

// dashboardQueries returns a dashboard's PromQL: every "expr" field (panel
// targets) and the queries of its query variables.
func dashboardQueries(t *testing.T, path string) []query {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []query
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch v := v.(type) {
		case map[string]any:
			if title, ok := v["title"].(string); ok && title != "" {
				where = "panel " + strconvQuote(title)
			}
			if expr, ok := v["expr"].(string); ok && strings.TrimSpace(expr) != "" {
				out = append(out, query{where, expr})
			}
			for k, child := range v {
				if k != "templating" {
					walk(child, where)
				}
			}
		case []any:
			for _, child := range v {
				walk(child, where)
			}
		}
	}
	walk(doc, "dashboard")
	if tmpl, ok := doc["templating"].(map[string]any); ok {
		list, _ := tmpl["list"].([]any)
		for _, item := range list {
			v, _ := item.(map[string]any)
			if v["type"] != "query" {
				continue
			}
			q := v["query"]
			if m, ok := q.(map[string]any); ok {
				q = m["query"]
			}
			if s, ok := q.(string); ok {
				out = append(out, query{"variable " + fmt.Sprint(v["name"]), grafanaVariableQuery(s)})
			}
		}
	}
	return out
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

var (
	labelValuesRE = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
	queryResultRE = regexp.MustCompile(`^\s*query_result\(\s*(.*)\)\s*$`)
)

// grafanaVariableQuery returns the PromQL inside a Grafana Prometheus
// variable query: label_values(selector, label) or query_result(expr);
// label_names(), metrics() and label_values(label) query no metric.
func grafanaVariableQuery(q string) string {
	if m := labelValuesRE.FindStringSubmatch(q); m != nil {
		return m[1]
	}
	if m := queryResultRE.FindStringSubmatch(q); m != nil {
		return m[1]
	}
	return ""
}

// ruleExpressions returns the expressions of a rule file — a Prometheus
// rule file or a PrometheusRule object, one or more YAML documents — and
// the names its recording rules record.
func ruleExpressions(t *testing.T, path string) ([]query, []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type rule struct {
		Alert  string `json:"alert"`
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	type groups struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	var exprs []query
	var records []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc struct {
			groups
			Spec groups `json:"spec"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, g := range append(doc.Groups, doc.Spec.Groups...) {
			for _, r := range g.Rules {
				name := r.Alert
				if name == "" {
					name = r.Record
				}
				if r.Record != "" {
					records = append(records, r.Record)
				}
				exprs = append(exprs, query{"rule " + name, r.Expr})
			}
		}
	}
	return exprs, records
}

var (
	// Removed before tokenising, in this order.
	promStringRE   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promCommentRE  = regexp.MustCompile(`#[^\n]*`)
	grafanaVarRE   = regexp.MustCompile(`\$\{[^}]*\}|\$[a-zA-Z0-9_]+|\[\[[a-zA-Z0-9_]+\]\]`)
	promMatchersRE = regexp.MustCompile(`\{[^{}]*\}`)
	promRangeRE    = regexp.MustCompile(`\[[^\[\]]*\]`)
	promGroupingRE = regexp.MustCompile(`(?i)\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)

	// {__name__="x"} names a metric inside a string.
	promNameMatcherRE = regexp.MustCompile(`__name__\s*=\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"`)
	// A number or duration (skipped), or an identifier and whether a call
	// follows it.
	promTokenRE = regexp.MustCompile(`[0-9][0-9a-zA-Z_.]*|([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\(?)`)

	promKeywords = map[string]bool{
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"bool": true, "and": true, "or": true, "unless": true, "atan2": true, "offset": true,
		"inf": true, "nan": true,
	}
)

// promQLMetricNames returns, sorted, the metric names a PromQL expression
// selects: identifiers that are not function or aggregation calls,
// keywords, label names (inside {} or a grouping clause), strings,
// numbers or durations. Grafana variables ($node, ${datasource},
// $__rate_interval) are dropped first.
func promQLMetricNames(expr string) []string {
	set := map[string]bool{}
	for _, m := range promNameMatcherRE.FindAllStringSubmatch(expr, -1) {
		set[m[1]] = true
	}
	s := promStringRE.ReplaceAllString(expr, `""`)
	s = promCommentRE.ReplaceAllString(s, "")
	s = grafanaVarRE.ReplaceAllString(s, "")
	s = promMatchersRE.ReplaceAllString(s, " ")
	s = promRangeRE.ReplaceAllString(s, " ")
	s = promGroupingRE.ReplaceAllString(s, " ")
	for _, m := range promTokenRE.FindAllStringSubmatch(s, -1) {
		ident, call := m[1], m[2]
		if ident == "" || call != "" || promKeywords[strings.ToLower(ident)] {
			continue
		}
		set[ident] = true
	}
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func TestPromQLMetricNames(t *testing.T) {
	for _, tc := range []struct {
		name, expr string
		want       []string
	}{
		{"selector", `telesched_node_power_watts{node="$node"}`, []string{"telesched_node_power_watts"}},
		{"functions and ranges", `sum(rate(telesched_agent_publish_total{result="error"}[$__rate_interval]))`, []string{"telesched_agent_publish_total"}},
		{"grouping before", `sum by (node, sensor) (telesched_node_temperature_celsius)`, []string{"telesched_node_temperature_celsius"}},
		{"grouping after", `max(telesched_node_temperature_celsius) without (sensor)`, []string{"telesched_node_temperature_celsius"}},
		{"histogram quantile", `histogram_quantile(0.99, sum by (le, plugin) (rate(scheduler_plugin_execution_duration_seconds_bucket{plugin=~"LoadAware|EnergyAware"}[5m])))`,
			[]string{"scheduler_plugin_execution_duration_seconds_bucket"}},
		{"binary with matching", `telesched_gpu_temperature_celsius - on (node, gpu) group_left(model) telesched_gpu_slowdown_temperature_celsius > bool 3`,
			[]string{"telesched_gpu_slowdown_temperature_celsius", "telesched_gpu_temperature_celsius"}},
		{"set operators and keywords", `a unless b AND c or d offset 5m atan2 e`, []string{"a", "b", "c", "d", "e"}},
		{"numbers and durations", `x > 1e3 and y < 0x1F and z offset 1h30m`, []string{"x", "y", "z"}},
		{"strings and label_replace", `label_replace(up, "dst", "$1", "src", "(.*)")`, []string{"up"}},
		{"name matcher", `count({__name__="telesched_agent_build_info", version!=""})`, []string{"telesched_agent_build_info"}},
		{"subquery and at", `max_over_time(deriv(x[5m])[1h:1m]) @ end()`, []string{"x"}},
		{"recording rule name", `job:telesched_node_power_watts:sum > 0 # fleet power`, []string{"job:telesched_node_power_watts:sum"}},
		{"aggregation parameter", `topk(5, sum by (node) (telesched_node_power_watts))`, []string{"telesched_node_power_watts"}},
		{"variable only", `${datasource}`, []string{}},
		{"variable query", grafanaVariableQuery(`label_values(telesched_agent_build_info, node)`), []string{"telesched_agent_build_info"}},
		{"variable query without metric", grafanaVariableQuery(`label_values(node)`), []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, promQLMetricNames(tc.expr)); diff != "" {
				t.Errorf("promQLMetricNames(%q) (-want +got):\n%s", tc.expr, diff)
			}
		})
	}
}

// TestDashboardsWellFormed: every dashboard is importable anywhere: a uid, a
// prometheus datasource variable, and every panel and target pointing at
// it rather than at one Grafana's datasource uid.
func TestDashboardsWellFormed(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(repoRoot, "dashboards", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no dashboards in dashboards/")
	}
	uids := map[string]string{}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var d struct {
				UID           string `json:"uid"`
				Title         string `json:"title"`
				SchemaVersion int    `json:"schemaVersion"`
				Templating    struct {
					List []struct {
						Name  string `json:"name"`
						Type  string `json:"type"`
						Query any    `json:"query"`
					} `json:"list"`
				} `json:"templating"`
				Panels []json.RawMessage `json:"panels"`
			}
			if err := json.Unmarshal(data, &d); err != nil {
				t.Fatal(err)
			}
			if d.UID == "" || d.Title == "" {
				t.Errorf("uid %q, title %q: both must be set", d.UID, d.Title)
			}
			if other, ok := uids[d.UID]; ok {
				t.Errorf("uid %q also used by %s", d.UID, other)
			}
			uids[d.UID] = path
			if d.SchemaVersion < 36 {
				t.Errorf("schemaVersion %d, want >= 36", d.SchemaVersion)
			}
			hasDS := false
			for _, v := range d.Templating.List {
				if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
					hasDS = true
				}
			}
			if !hasDS {
				t.Error(`no "datasource" variable of type datasource querying prometheus`)
			}
			if len(d.Panels) == 0 {
				t.Error("no panels")
			}
			var doc any
			_ = json.Unmarshal(data, &doc)
			checkDatasources(t, doc, "")
			checkClusterVariable(t, data)
			names := map[string]bool{}
			for _, q := range dashboardQueries(t, path) {
				for _, name := range promQLMetricNames(q.expr) {
					names[name] = true
				}
				if q.where != "variable cluster" {
					checkClusterSelected(t, q)
				}
			}
			t.Logf("%s: %d metrics: %s", filepath.Base(path), len(names), strings.Join(slices.Sorted(maps.Keys(names)), " "))
		})
	}
}

// clusterMatcher is what every selector of a dashboard carries, so that one
// Grafana over several clusters' series (Thanos, Mimir, a federating
// Prometheus with a cluster external label) shows one cluster at a time.
const clusterMatcher = `cluster=~"$cluster"`

// checkClusterVariable: a "cluster" variable listing the cluster label's
// values, whose All is the regexp .*, which also matches series without
// the label: a single cluster needs no label at all.
func checkClusterVariable(t *testing.T, data []byte) {
	t.Helper()
	var d struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				IncludeAll bool   `json:"includeAll"`
				AllValue   string `json:"allValue"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	for i, v := range d.Templating.List {
		if v.Name != "cluster" {
			continue
		}
		if !v.IncludeAll || v.AllValue != ".*" || !strings.HasSuffix(v.Definition, ", cluster)") {
			t.Errorf("cluster variable: includeAll %v, allValue %q, definition %q; want All as .* over label_values(…, cluster)", v.IncludeAll, v.AllValue, v.Definition)
		}
		// Before the variables it filters.
		for _, other := range d.Templating.List[:i] {
			if other.Name != "datasource" {
				t.Errorf("cluster variable after %q, which it filters", other.Name)
			}
		}
		return
	}
	t.Error(`no "cluster" variable`)
}

// checkClusterSelected: every series the query names is selected by the
// cluster variable, and every vector matching (on) keeps clusters apart.
func checkClusterSelected(t *testing.T, q query) {
	t.Helper()
	for _, name := range promQLMetricNames(q.expr) {
		re := regexp.MustCompile(`(^|[^A-Za-z0-9_:])` + regexp.QuoteMeta(name) + `($|[^A-Za-z0-9_:])`)
		for _, loc := range re.FindAllStringIndex(q.expr, -1) {
			rest := q.expr[loc[0]:]
			if i := strings.Index(rest, name); !strings.HasPrefix(rest[i+len(name):], "{"+clusterMatcher) {
				t.Errorf("%s: %s is not selected by %s: %s", q.where, name, clusterMatcher, q.expr)
			}
		}
	}
	for _, m := range promOnRE.FindAllStringSubmatch(q.expr, -1) {
		if !slices.Contains(strings.Fields(strings.ReplaceAll(m[1], ",", " ")), "cluster") {
			t.Errorf("%s: %s matches series of several clusters as one: %s", q.where, m[0], q.expr)
		}
	}
}

// promOnRE is a vector matching's label list: on (a, b) or ignoring (c).
var promOnRE = regexp.MustCompile(`\bon\s*\(([^)]*)\)`)

// checkDatasources reports datasource references that are not the
// dashboard's ${datasource} variable (or Grafana's built-in one, used by
// the annotations list).
func checkDatasources(t *testing.T, v any, path string) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if k == "datasource" {
				switch ds := child.(type) {
				case map[string]any:
					uid, _ := ds["uid"].(string)
					if uid != "${datasource}" && uid != "-- Grafana --" && uid != "grafana" {
						t.Errorf("%s.datasource uid %q: use ${datasource}", path, uid)
					}
				case string:
					if ds != "${datasource}" {
						t.Errorf("%s.datasource %q: use ${datasource}", path, ds)
					}
				}
			}
			checkDatasources(t, child, path+"."+k)
		}
	case []any:
		for i, child := range v {
			checkDatasources(t, child, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// startHostTree runs a simulated 8-CPU, two-NUMA, two-package node's /proc
// and /sys (60 W idle, 200 W at full load, critical at 100 °C), advancing
// every 50ms until the test ends; stop is closed then, for goroutines that
// drive it.
func startHostTree(t *testing.T) (host *hosttree.Host, stop <-chan struct{}) {
	t.Helper()
	host, err := hosttree.New(t.TempDir(), hosttree.Spec{
		CPUs: 8, NUMANodes: 2, Packages: 2, MemoryKiB: 32 << 20,
		IdleWatts: 60, FullLoadWatts: 200, CritMilliCelsius: 100_000,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	hostDone := make(chan error, 1)
	go func() { hostDone <- host.Run(50*time.Millisecond, done) }()
	t.Cleanup(func() {
		close(done)
		if err := <-hostDone; err != nil {
			t.Errorf("host tree: %v", err)
		}
	})
	return host, done
}

// deschedulerMetricNames is the metric names bin/telesched-descheduler
// exports once it has reported a pod on a hot node (runDeschedulerBinary).
func deschedulerMetricNames(t *testing.T, c clients) map[string]bool {
	t.Helper()
	return familyNames(runDeschedulerBinary(t, c, "metrics-ds"))
}
