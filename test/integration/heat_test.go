// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/telesched/telesched/agent/app"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/sandbox/hosttree"
)

// TestHeatEndToEnd follows two nodes from their sysfs trees to the
// scheduler and the alert rules, with real agents (in process, through the
// real collectors), the real scheduler binary, and promtool over the
// agent's own /metrics:
//   - heat-amd: its CPU sensor is AMD k10temp's Tctl, which reports no limit
//     (Documentation/hwmon/k10temp.rst), at 95°C, beside an NVMe drive at
//     40°C with its crit 84.85°C and coretemp-style sensors with limits. Held
//     against the absolute limit (90°C) its headroom is -5°C: Overheating,
//     rejected by EnergyAware with the numbers, and the heat alert fires.
//   - heat-alarm: cool sensors, one with coretemp's crit_alarm raised, which
//     stays raised until reboot (Documentation/hwmon/coretemp.rst): the
//     alarm is published and counted, and the node takes pods.
func TestHeatEndToEnd(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	ctx := t.Context()
	kubeconfig := adminKubeconfig(t)

	amdURL := startHeatAgent(t, c, kubeconfig, "heat-amd", func(h *hosttree.Host) map[string]string {
		return map[string]string{
			"/sys/class/hwmon/hwmon8/name":        "k10temp\n",
			"/sys/class/hwmon/hwmon8/temp1_label": "Tctl\n",
			"/sys/class/hwmon/hwmon8/temp1_input": "95000\n",
			"/sys/class/hwmon/hwmon9/name":        "nvme\n",
			"/sys/class/hwmon/hwmon9/temp1_label": "Composite\n",
			"/sys/class/hwmon/hwmon9/temp1_input": "40850\n",
			"/sys/class/hwmon/hwmon9/temp1_max":   "81850\n",
			"/sys/class/hwmon/hwmon9/temp1_crit":  "84850\n",
		}
	})
	startHeatAgent(t, c, kubeconfig, "heat-alarm", func(h *hosttree.Host) map[string]string {
		return map[string]string{"/sys/class/hwmon/hwmon0/temp1_crit_alarm": "1\n"}
	})

	// The agents' verdicts, in the NodeTelemetry the scheduler reads.
	var amd, alarm *telemetryv1alpha1.NodeTelemetry
	waitFor(t, "both agents to publish their heat", 60*time.Second, func() bool {
		amd, alarm = getNT(ctx, c, "heat-amd"), getNT(ctx, c, "heat-alarm")
		return overheating(amd) != nil && overheating(alarm) != nil && amd.Status.Thermal != nil && alarm.Status.Thermal != nil
	})
	hot := overheating(amd)
	t.Logf("heat-amd Overheating=%s %s: %s", hot.Status, hot.Reason, hot.Message)
	if hot.Status != metav1.ConditionTrue || !strings.Contains(hot.Message, "k10temp/Tctl at 95.0°C, absolute limit 90.0°C") {
		t.Errorf("heat-amd: Overheating %s %q, want True naming k10temp/Tctl at 95.0°C against the absolute limit", hot.Status, hot.Message)
	}
	if th := amd.Status.Thermal; th.HottestUnlimitedSensor != "k10temp/Tctl" || th.HeadroomSensor != "nvme/Composite" || *th.HeadroomMilliCelsius != 44_000 {
		t.Errorf("heat-amd thermal: unlimited %q, headroom %v on %q; want k10temp/Tctl, 44000 on nvme/Composite", th.HottestUnlimitedSensor, th.HeadroomMilliCelsius, th.HeadroomSensor)
	}
	cool := overheating(alarm)
	t.Logf("heat-alarm Overheating=%s %s: %s", cool.Status, cool.Reason, cool.Message)
	if cool.Status != metav1.ConditionFalse || alarm.Status.Thermal.Alarms != 1 || alarm.Status.Thermal.Throttling || !strings.Contains(cool.Message, "1 sensor alarm(s) raised") {
		t.Errorf("heat-alarm: Overheating %s %q, alarms %d, throttling %v; want False, 1 alarm named in the message, no throttling",
			cool.Status, cool.Message, alarm.Status.Thermal.Alarms, alarm.Status.Thermal.Throttling)
	}

	// The scheduler: a pod pinned to each node.
	startScheduler(t, schedulerConfig(t, ""))
	toAMD := testPod("heat-to-amd", "telesched")
	toAMD.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "heat-amd"}
	createTestPod(t, c, toAMD)
	toAlarm := testPod("heat-to-alarm", "telesched")
	toAlarm.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "heat-alarm"}
	createTestPod(t, c, toAlarm)
	msg := waitFailedScheduling(t, c, toAMD.Name, 60*time.Second)
	t.Logf("FailedScheduling: %s", msg)
	if want := "node thermal headroom -5.0°C <= margin 5.0°C (k10temp/Tctl at 95.0°C, absolute limit 90.0°C as it reports none)"; !strings.Contains(msg, want) {
		t.Errorf("FailedScheduling %q does not contain %q", msg, want)
	}
	if node := waitScheduled(t, c, toAlarm.Name, 60*time.Second); node != "heat-alarm" {
		t.Errorf("%s went to %s, want heat-alarm", toAlarm.Name, node)
	}

	// The alert rules over heat-amd's real series: NearLimit and Critical
	// fire for the sensor without a limit, for nothing else.
	fams := scrape(t, amdURL)
	series := promtoolSeries(t, fams, "heat-amd", "telesched_node_temperature_celsius", "telesched_node_temperature_limit_celsius")
	runPromtoolTest(t, series)
}

// startHeatAgent creates a schedulable Node, a simulated host tree with
// extra files, and runs the agent in process on it, serving /metrics.
func startHeatAgent(t *testing.T, c clients, kubeconfig, name string, extra func(*hosttree.Host) map[string]string) string {
	t.Helper()
	ctx := t.Context()
	schedNode(ctx, t, c, name)
	host, err := hosttree.New(t.TempDir(), hosttree.Spec{
		CPUs: 8, NUMANodes: 1, Packages: 1, MemoryKiB: 16 << 20,
		IdleWatts: 40, FullLoadWatts: 120, CritMilliCelsius: 100_000,
	})
	if err != nil {
		t.Fatal(err)
	}
	host.SetTemperature(42_000)
	for p, content := range extra(host) {
		full := filepath.Join(host.Dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := app.NewOptions()
	opts.Kubeconfig = kubeconfig
	opts.MetricsAddress, opts.HealthAddress = freeAddress(t), ""
	opts.NVML = false
	// The test reads EnergyAware's refusal of the hot node; the overheating
	// taint would refuse it first (TestOverheatingTaint* cover the taint).
	opts.OverheatingTaint = false
	runAgentOn(t, host, name, opts)
	return "http://" + opts.MetricsAddress + "/metrics"
}

// runAgentOn runs the agent in process on a simulated host until the test
// ends: the host's files advance every 100ms, the agent samples every
// 500ms and publishes as node name. opts carries what the caller sets
// (kubeconfig, metrics address, NVML); the rest is set here.
func runAgentOn(t *testing.T, host *hosttree.Host, name string, opts *app.Options) {
	t.Helper()
	stop := make(chan struct{})
	hostDone := make(chan error, 1)
	go func() { hostDone <- host.Run(100*time.Millisecond, stop) }()
	opts.HostRoot = host.Dir
	opts.NodeName = name
	opts.Interval = 500 * time.Millisecond
	opts.PodResources = ""
	opts.Publisher.RateLimitQPS = 10
	opts.Complete()
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	agentCtx, stopAgent := context.WithCancel(klog.NewContext(t.Context(), ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(1)))))
	agentDone := make(chan error, 1)
	go func() { agentDone <- app.Run(agentCtx, opts, io.Discard) }()
	t.Cleanup(func() {
		stopAgent()
		if err := <-agentDone; err != nil {
			t.Errorf("agent %s: %v", name, err)
		}
		close(stop)
		if err := <-hostDone; err != nil {
			t.Errorf("host tree %s: %v", name, err)
		}
	})
}

func getNT(ctx context.Context, c clients, name string) *telemetryv1alpha1.NodeTelemetry {
	u, err := c.dyn.Resource(ntResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var nt telemetryv1alpha1.NodeTelemetry
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nt) != nil {
		return nil
	}
	return &nt
}

func overheating(nt *telemetryv1alpha1.NodeTelemetry) *metav1.Condition {
	if nt == nil {
		return nil
	}
	return meta.FindStatusCondition(nt.Status.Conditions, telemetryv1alpha1.ConditionOverheating)
}

// promtoolSeries renders the named gauges, as scraped, as promtool
// input_series of ten minutes, with the labels Prometheus would add.
func promtoolSeries(t *testing.T, fams map[string]*dto.MetricFamily, node string, names ...string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range names {
		fam := fams[name]
		if fam == nil {
			t.Fatalf("the agent exports no %s", name)
		}
		for _, m := range fam.GetMetric() {
			labels := []string{`job="telesched-agent"`, `instance="10.0.0.1:9102"`, fmt.Sprintf("node=%q", node)}
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			fmt.Fprintf(&b, "      - series: '%s{%s}'\n        values: '%gx10'\n", name, strings.Join(labels, ","), m.GetGauge().GetValue())
		}
	}
	return b.String()
}

// runPromtoolTest runs promtool's rule unit test over series: at 6 minutes
// exactly the k10temp sensor alerts, NearLimit and Critical.
func runPromtoolTest(t *testing.T, series string) {
	t.Helper()
	binDir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "monitoring", "rules", "telesched-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const runbook = "https://github.com/telesched/telesched/blob/main/docs/runbooks.md#"
	labels := `
              job: telesched-agent
              instance: 10.0.0.1:9102
              node: heat-amd
              sensor: k10temp/Tctl`
	test := fmt.Sprintf(`rule_files:
  - %s
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
%s    alert_rule_test:
      - eval_time: 6m
        alertname: TeleschedNodeTemperatureNearLimit
        exp_alerts:
          - exp_labels:
              severity: warning%s
            exp_annotations:
              summary: Node heat-amd runs within 5°C of a temperature limit.
              description: >-
                Sensor k10temp/Tctl on node heat-amd has been -5.0°C or less
                below its effective limit (critical, else max, else the
                vendor's, else the agent's absolute limit) for 5 minutes. The
                node is Overheating: telesched places no new pods on it.
              runbook_url: %steleschednodetemperaturenearlimit
      - eval_time: 6m
        alertname: TeleschedNodeTemperatureCritical
        exp_alerts:
          - exp_labels:
              severity: critical%s
            exp_annotations:
              summary: Node heat-amd is at a temperature limit.
              description: >-
                Sensor k10temp/Tctl on node heat-amd is -5.0°C from its
                effective limit. The hardware throttles or shuts down at the
                limit.
              runbook_url: %steleschednodetemperaturecritical
`, rules, series, labels, runbook, labels, runbook)
	file := filepath.Join(t.TempDir(), "heat-amd_test.yaml")
	if err := os.WriteFile(file, []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(binDir, "promtool"), "test", "rules", file).CombinedOutput()
	t.Logf("promtool test rules over heat-amd's scraped series:\n%s%s", series, out)
	if err != nil {
		t.Errorf("promtool: %v", err)
	}
}
