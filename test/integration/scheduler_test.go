// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/apis/config"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/fixtures"
)

// schedulerConfig is deploy/scheduler/scheduler-config.yaml without leader
// election, with LoadAware's cpuThresholdPercent line replaced.
func schedulerConfig(t *testing.T, loadAwareArgs string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "scheduler", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(data), "  leaderElect: true", "  leaderElect: false", 1)
	if loadAwareArgs != "" {
		cfg = strings.Replace(cfg, "      cpuThresholdPercent: 80\n", loadAwareArgs, 1)
	}
	return cfg
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startScheduler runs bin/telesched-scheduler with the config YAML and the
// Deployment's feature gates against the test API server and stops it at
// the end of the test. With --config,
// kube-scheduler takes its kubeconfig from clientConnection, not the flag.
func startScheduler(t *testing.T, configYAML string, extraArgs ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	dir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "telesched-scheduler")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (run `make build`)", bin, err)
	}
	kubeconfig := adminKubeconfig(t)
	config := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(config, []byte(configYAML+"clientConnection:\n  kubeconfig: "+kubeconfig+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	args := append([]string{"--config=" + config, "--secure-port=0", "-v=4"}, deployedFeatureGates(t)...)
	cmd := exec.Command(bin, append(args, extraArgs...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() {
			// A test that waits for the scheduler itself has called
			// Wait already; this one then returns at once, so wait for
			// the process to be gone: a scheduler still running would
			// bind the next test's pods.
			_ = cmd.Wait()
			for syscall.Kill(cmd.Process.Pid, 0) == nil {
				time.Sleep(20 * time.Millisecond)
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("scheduler output:\n%s", grepLog(out.String(), "waits-for-cool", "nodetelemetries", "telemetry", "cooled", "EnergyAware"))
		}
	})
	return cmd, out
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestSchedulerRejectsInvalidConfig: a bad arg stops the scheduler at start
// and names the field.
func TestSchedulerRejectsInvalidConfig(t *testing.T) {
	needControlPlane(t)
	cmd, out := startScheduler(t, schedulerConfig(t, "      cpuThresholdPercent: 150\n"))
	waitRefused(t, cmd, "with cpuThresholdPercent 150")
	if got := out.String(); !strings.Contains(got, "pluginConfig[LoadAware].args.cpuThresholdPercent") || !strings.Contains(got, "150") {
		t.Errorf("output does not name the field and value:\n%s", tail(got, 20))
	}
}

// waitRefused waits for the scheduler started as cmd to exit non-zero at
// start, and fails the test when it exits 0 or keeps running a minute;
// with says with what config.
func waitRefused(t *testing.T, cmd *exec.Cmd, with string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the scheduler exited 0 %s", with)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the scheduler kept running %s", with)
	}
}

// TestSchedulerRefusesProfilesThatCountPodsApart: one reservation book
// counts every pod for every profile, so profiles whose plugins count a
// pod's GPUs by different resources stop the scheduler at start, naming
// both.
func TestSchedulerRefusesProfilesThatCountPodsApart(t *testing.T) {
	needControlPlane(t)
	cfg := schedulerConfig(t, "")
	const energyGPU = "      gpuResourceName: nvidia.com/gpu\n      powerWeight: 90\n"
	if !strings.Contains(cfg, energyGPU) {
		t.Fatalf("the deployed config lacks the telesched-energy profile's EnergyAware gpuResourceName (%q)", energyGPU)
	}
	cmd, out := startScheduler(t, strings.Replace(cfg, energyGPU, strings.Replace(energyGPU, "nvidia.com/gpu", "amd.com/gpu", 1), 1))
	waitRefused(t, cmd, "with profiles counting GPUs as nvidia.com/gpu and amd.com/gpu")
	t.Logf("refused: %s", grepLog(out.String(), "GPU resource name"))
	for _, want := range []string{"GPU resource name", "nvidia.com/gpu", "profile telesched-energy's EnergyAware (gpuResourceName) sets amd.com/gpu"} {
		if got := out.String(); !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, tail(got, 20))
		}
	}
}

// schedNode creates a Node that can take pods: allocatable CPU, memory and
// pods, and no taints.
func schedNode(ctx context.Context, t *testing.T, c clients, name string) *corev1.Node {
	t.Helper()
	return readyNode(ctx, t, c, name, map[string]string{"kubernetes.io/hostname": name, "telesched-test": "scheduler"})
}

// readyNode creates a Node with labels that can take pods: allocatable
// CPU, memory and pods, Ready, and no taints; it is deleted, with its
// NodeTelemetry, when the test ends.
func readyNode(ctx context.Context, t *testing.T, c clients, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	node, err := c.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: labels,
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = c.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		_ = c.dyn.Resource(ntResource).Delete(ctx, name, metav1.DeleteOptions{})
	})
	// Admission taints new Nodes not-ready; with no node lifecycle
	// controller here, lift it as a kubelet turning Ready would.
	node.Spec.Taints = nil
	if node, err = c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	node.Status = corev1.NodeStatus{
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}},
	}
	if node, err = c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return node
}

// nodeStatus is a fresh telemetry status: cpu percent, hottest sensor and
// its critical limit in °C.
func nodeStatus(cpuPercent int32, hottestC, limitC int64) telemetryv1alpha1.NodeTelemetryStatus {
	return telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime: metav1.NewTime(time.Now()), IntervalSeconds: 5, AgentVersion: "test",
		CPU:    &telemetryv1alpha1.CPUStatus{LogicalCores: 16, OnlineCores: 16, UtilizationPercent: cpuPercent},
		Memory: &telemetryv1alpha1.MemoryStatus{TotalBytes: 64 << 30, AvailableBytes: 48 << 30, UtilizationPercent: 25},
		Thermal: &telemetryv1alpha1.ThermalStatus{
			HottestSensor: "coretemp.0/Package id 0", HottestMilliCelsius: hottestC * 1000,
			LimitMilliCelsius: ptr.To(limitC * 1000), LimitType: telemetryv1alpha1.ThermalLimitCritical,
			HeadroomMilliCelsius: ptr.To((limitC - hottestC) * 1000),
		},
	}
}

// createPod creates a test pod and deletes it at the end of the test.
func createPod(t *testing.T, c clients, name, scheduler string) {
	t.Helper()
	if _, err := c.kube.CoreV1().Pods("default").Create(t.Context(), testPod(name, scheduler), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.kube.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
}

func testPod(name, scheduler string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			SchedulerName: scheduler,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			}}},
			// Only the nodes of this test.
			NodeSelector: map[string]string{"telesched-test": "scheduler"},
		},
	}
}

// TestSchedulerPlacesByTelemetry runs the telesched-scheduler binary on
// three nodes: one hot, one busy, one cool.
func TestSchedulerPlacesByTelemetry(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)
	for name, st := range map[string]telemetryv1alpha1.NodeTelemetryStatus{
		"sched-hot":  nodeStatus(10, 97, 100), // headroom 3°C <= 5°C margin
		"sched-busy": nodeStatus(95, 60, 100), // cpu over 80%
		"sched-cool": nodeStatus(10, 55, 100),
	} {
		node := schedNode(ctx, t, c, name)
		if _, err := c.applyStatusCreating(ctx, node, st); err != nil {
			t.Fatal(err)
		}
	}
	startScheduler(t, schedulerConfig(t, ""))

	// Pods opting in go to the cool node; the hot and busy ones are filtered.
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		createPod(t, c, name, "telesched")
	}
	// A pod of another scheduler (none runs here) is left alone.
	createPod(t, c, "other-scheduler", "default-scheduler")
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		node := waitScheduled(t, c, name, 60*time.Second)
		if node != "sched-cool" {
			t.Errorf("%s went to %s, want sched-cool", name, node)
		}
	}
	if p, _ := c.kube.CoreV1().Pods("default").Get(ctx, "other-scheduler", metav1.GetOptions{}); p.Spec.NodeName != "" {
		t.Errorf("a pod of another scheduler was bound to %s", p.Spec.NodeName)
	}

	// Every node hot: the pod waits, and its event says why with numbers.
	if _, err := c.applyStatus(ctx, "sched-cool", nodeStatus(10, 98, 100)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // let the scheduler's informer see it
	createPod(t, c, "waits-for-cool", "telesched")
	msg := waitFailedScheduling(t, c, "waits-for-cool", 30*time.Second)
	t.Logf("FailedScheduling: %s", msg)
	for _, want := range []string{"node thermal headroom 2.0°C <= margin 5.0°C", "node thermal headroom 3.0°C <= margin 5.0°C", "node cpu 98.12 percent > threshold 80 percent"} {
		if !strings.Contains(msg, want) {
			t.Errorf("FailedScheduling message lacks %q", want)
		}
	}
	// One node cools: the NodeTelemetry update requeues the pod through
	// EnergyAware's hint, without waiting for the periodic flush (5 min).
	cooled := time.Now()
	if _, err := c.applyStatus(ctx, "sched-cool", nodeStatus(10, 60, 100)); err != nil {
		t.Fatal(err)
	}
	if node := waitScheduled(t, c, "waits-for-cool", 60*time.Second); node != "sched-cool" {
		t.Errorf("waits-for-cool went to %s, want sched-cool", node)
	}
	t.Logf("pod scheduled %v after its node cooled", time.Since(cooled).Round(10*time.Millisecond))
}

// applyStatusCreating creates the node's NodeTelemetry and applies st.
func (c clients) applyStatusCreating(ctx context.Context, node *corev1.Node, st telemetryv1alpha1.NodeTelemetryStatus) (any, error) {
	obj := map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "NodeTelemetry",
		"metadata": map[string]any{"name": node.Name},
	}
	if _, err := c.dyn.Resource(ntResource).Create(ctx, unstructuredOf(obj), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	return c.applyStatus(ctx, node.Name, st)
}

func waitScheduled(t *testing.T, c clients, pod string, timeout time.Duration) string {
	t.Helper()
	var node string
	waitFor(t, pod+" to be scheduled", timeout, func() bool {
		p, err := c.kube.CoreV1().Pods("default").Get(t.Context(), pod, metav1.GetOptions{})
		node = p.Spec.NodeName
		return err == nil && node != ""
	})
	return node
}

func waitFailedScheduling(t *testing.T, c clients, pod string, timeout time.Duration) string {
	t.Helper()
	var msg string
	waitFor(t, pod+" FailedScheduling event", timeout, func() bool {
		var ok bool
		msg, ok = lastFailedScheduling(t, c, pod)
		return ok
	})
	return msg
}

// lastFailedScheduling is the message of the pod's latest FailedScheduling
// event; false when it has none yet.
func lastFailedScheduling(t *testing.T, c clients, pod string) (string, bool) {
	list, err := c.kube.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": pod, "reason": "FailedScheduling"}.String(),
	})
	if err != nil || len(list.Items) == 0 {
		return "", false
	}
	return list.Items[len(list.Items)-1].Message, true
}

func unstructuredOf(obj map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: obj}
}

// grepLog keeps the log lines that mention any of words.
func grepLog(s string, words ...string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(line, w) {
				out = append(out, line)
				break
			}
		}
	}
	return tail(strings.Join(out, "\n"), 60)
}

// TestSchedulerBurst: 50 pods arrive before any node publishes a new
// sample. One node looks idle (5% CPU), three look busier (40%). With the
// pods placed since the sample counted (the default), the burst spreads;
// counting almost nothing of them (podCPUScalingPercent 1) shows the pile-up
// the reservations prevent. Both distributions are printed.
func TestSchedulerBurst(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)
	nodes := []string{"burst-idle", "burst-b", "burst-c", "burst-d"}
	for _, name := range nodes {
		node := schedNode(ctx, t, c, name)
		cpu := int32(40)
		if name == "burst-idle" {
			cpu = 5
		}
		if _, err := c.applyStatusCreating(ctx, node, nodeStatus(cpu, 50, 100)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(label, cpuScaling string) map[string]int {
		cfg := schedulerConfig(t, "")
		cfg = strings.Replace(cfg, "      scoringStrategy: Spread\n", "      scoringStrategy: Spread\n      podCPUScalingPercent: "+cpuScaling+"\n", 1)
		cmd, _ := startScheduler(t, cfg)
		var pods []string
		for i := range 50 {
			name := fmt.Sprintf("burst-%s-%02d", label, i)
			pod := testPod(name, "telesched")
			pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
			if _, err := c.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pods = append(pods, name)
		}
		counts := map[string]int{}
		for _, p := range pods {
			counts[waitScheduled(t, c, p, 60*time.Second)]++
		}
		for _, p := range pods {
			zero := int64(0)
			_ = c.kube.CoreV1().Pods("default").Delete(context.WithoutCancel(ctx), p, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		t.Logf("burst of 50 x 250m, podCPUScalingPercent %s: burst-idle %d, burst-b %d, burst-c %d, burst-d %d",
			cpuScaling, counts["burst-idle"], counts["burst-b"], counts["burst-c"], counts["burst-d"])
		return counts
	}
	spread := run("default", "100")
	piled := run("noreserve", "1")
	// 16 cores: each pod is 250m/16000m = 1.5625 points. The idle node stays
	// ahead of the 40% ones until 5 + 1.5625k ~ 40 + 1.5625m, so it takes
	// about 22 more pods than each other node: about 29 of 50, not all.
	if spread["burst-idle"] >= 40 {
		t.Errorf("with reservations the idle node took %d of 50 pods", spread["burst-idle"])
	}
	if spread["burst-idle"] >= piled["burst-idle"] {
		t.Errorf("reservations did not reduce the pile-up: %d with, %d without", spread["burst-idle"], piled["burst-idle"])
	}
}

// gpuStatus is a fresh 2-NUMA, 8-GPU status (GPUs 0-3 on NUMA node 0, 4-7
// on 1), cool and healthy but for the GPUs listed as unhealthy.
func gpuStatus(unhealthy ...int) telemetryv1alpha1.NodeTelemetryStatus {
	st := fixtures.FullStatus(time.Now(), 2, 8)
	st.Thermal.Throttling = false
	st.CPU.ThermalThrottle.Throttling = false
	st.Conditions = nil
	for i := range st.GPUs {
		st.GPUs[i].Health = telemetryv1alpha1.GPUHealth{Healthy: true}
		st.GPUs[i].ThrottleReasons = nil
		// Whole GPUs, none allocated: the fixture's GPUs are in MIG
		// mode, whose devices would let a 4-GPU request fit 3 GPUs.
		st.GPUs[i].MIGEnabled = ptr.To(false)
		st.GPUs[i].MIG = nil
		st.GPUs[i].Allocated = ptr.To(false)
	}
	for _, i := range unhealthy {
		st.GPUs[i].Health = telemetryv1alpha1.GPUHealth{Healthy: false, XIDCriticalEvents: 1}
	}
	return st
}

// TestSchedulerGPUSingleNUMA: a 4-GPU single-numa-node pod goes to the node
// with 4 healthy GPUs on one NUMA node, not to the one whose healthy GPUs
// are split 3 + 3; held to the split node alone, it is rejected there with
// each NUMA node's free GPUs.
func TestSchedulerGPUSingleNUMA(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)
	for name, st := range map[string]telemetryv1alpha1.NodeTelemetryStatus{
		"gpu-split":   gpuStatus(0, 4), // 3 healthy GPUs on each NUMA node
		"gpu-aligned": gpuStatus(5),    // 4 healthy on NUMA node 0
	} {
		node := schedNode(ctx, t, c, name)
		node.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("8")
		node.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("8")
		if _, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.applyStatusCreating(ctx, node, st); err != nil {
			t.Fatal(err)
		}
	}
	startScheduler(t, schedulerConfig(t, ""))
	gpuPod := func(name, node string) {
		pod := testPod(name, "telesched")
		pod.Annotations = map[string]string{"telesched.io/numa-policy": "single-numa-node"}
		pod.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("4")
		pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
		if node != "" {
			pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		}
		if _, err := c.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = c.kube.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
	}
	gpuPod("train-4gpu-split", "gpu-split")
	msg := waitFailedScheduling(t, c, "train-4gpu-split", 60*time.Second)
	t.Logf("FailedScheduling: %s", msg)
	if want := "no NUMA node has 0.5 free CPUs, 512Mi free memory and 4 free GPUs: node 0 has 48 CPUs, 383.0Gi, 3 GPUs; node 1 has 48 CPUs, 383.0Gi, 3 GPUs"; !strings.Contains(msg, want) {
		t.Errorf("the split node's rejection lacks %q: %s", want, msg)
	}
	gpuPod("train-4gpu", "")
	if node := waitScheduled(t, c, "train-4gpu", 60*time.Second); node != "gpu-aligned" {
		t.Errorf("4-GPU single-numa-node pod went to %s, want gpu-aligned", node)
	}
}

// TestSchedulerStaleTelemetry: a node whose last sample, which says it is
// busy, was written longer than telemetryMaxAge (5 s here) ago is not
// rejected under the default policy (Ignore: stale data is not trusted
// either way) and is rejected, with the age, under Reject. The age is the
// scheduler's: since the API server wrote the sample, for a scheduler that
// started after it. A node whose last sample says it is too hot stays
// rejected under Ignore too: silence is no sign that it cooled.
func TestSchedulerStaleTelemetry(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)
	node := schedNode(ctx, t, c, "stale-node")
	if _, err := c.applyStatusCreating(ctx, node, nodeStatus(95, 50, 100)); err != nil {
		t.Fatal(err)
	}
	hot := schedNode(ctx, t, c, "stale-hot")
	if _, err := c.applyStatusCreating(ctx, hot, nodeStatus(10, 99, 100)); err != nil {
		t.Fatal(err)
	}
	quiet := schedNode(ctx, t, c, "stale-quiet")
	if _, err := c.applyStatusCreating(ctx, quiet, nodeStatus(10, 50, 100)); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	base := strings.ReplaceAll(schedulerConfig(t, ""), "telemetryMaxAge: 60s", "telemetryMaxAge: 5s")
	time.Sleep(time.Until(written.Add(7 * time.Second)))

	cmd, _ := startScheduler(t, base)
	hostPod(t, c, "stale-ignore", "stale-node", "500m")
	if got := waitScheduled(t, c, "stale-ignore", 60*time.Second); got != "stale-node" {
		t.Errorf("stale-ignore went to %q", got)
	}
	hostPod(t, c, "stale-hot-ignore", "stale-hot", "500m")
	msg := waitRejected(t, c, "stale-hot-ignore", 30*time.Second)
	t.Logf("FailedScheduling: %s", msg)
	if !strings.Contains(msg, "node thermal headroom 1.0°C <= margin 5.0°C") || !strings.Contains(msg, "as last seen") {
		t.Errorf("the stale hot node's rejection does not say it was last seen too hot: %s", msg)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()

	reject := strings.ReplaceAll(base, "staleTelemetryPolicy: Ignore", "staleTelemetryPolicy: Reject")
	_, out := startScheduler(t, reject)
	hostPod(t, c, "stale-reject", "stale-node", "500m")
	msg = waitFailedScheduling(t, c, "stale-reject", 30*time.Second)
	t.Logf("FailedScheduling: %s", msg)
	if !strings.Contains(msg, "old > telemetryMaxAge 5s (no new sample seen by the scheduler since, and no Ready agent pod seen on the node; staleTelemetryPolicy Reject)") {
		t.Errorf("FailedScheduling message does not give the age and policy: %s", msg)
	}

	// A Ready agent pod on the node vouches for its last write for
	// --telemetry-max-age-ready-agent (6m by default): the same sample is
	// fresh again. Once the pod is not Ready, it is stale again. A pod
	// that only looks like the agent's (its labels, its DaemonSet's name
	// as owner, in a tenant's namespace) vouches for nothing.
	hostPod(t, c, "stale-no-agent", "stale-quiet", "500m")
	if msg := waitFailedScheduling(t, c, "stale-no-agent", 30*time.Second); !strings.Contains(msg, "no Ready agent pod seen on the node") {
		t.Errorf("without an agent pod, the quiet node's stale sample was not refused for it: %s", msg)
	}
	tenant := tenantAgentPod(t, c, "stale-quiet")
	setPodReady(t, c, tenant, corev1.ConditionTrue)
	hostPod(t, c, "stale-tenant-agent", "stale-quiet", "500m")
	if msg := waitFailedScheduling(t, c, "stale-tenant-agent", 30*time.Second); !strings.Contains(msg, "no Ready agent pod seen on the node") {
		t.Errorf("a tenant's Ready pod with the agent's labels made the quiet node's stale sample fresh: %s", msg)
	}
	agent := agentPod(t, c, "stale-quiet")
	setPodReady(t, c, agent, corev1.ConditionTrue)
	waitLog(t, out, `"node agent readiness" node="stale-quiet" ready=true`, 30*time.Second)
	hostPod(t, c, "stale-agent-ready", "stale-quiet", "500m")
	if got := waitScheduled(t, c, "stale-agent-ready", 60*time.Second); got != "stale-quiet" {
		t.Errorf("with its agent pod Ready, the node of a %s-old sample was refused: the pod went to %q", time.Since(written).Round(time.Second), got)
	}
	setPodReady(t, c, agent, corev1.ConditionFalse)
	waitLog(t, out, `"node agent readiness" node="stale-quiet" ready=false`, 30*time.Second)
	hostPod(t, c, "stale-agent-not-ready", "stale-quiet", "500m")
	msg = waitFailedScheduling(t, c, "stale-agent-not-ready", 30*time.Second)
	if !strings.Contains(msg, "old > telemetryMaxAge 5s (no new sample seen by the scheduler since, and no Ready agent pod seen on the node") {
		t.Errorf("with its agent pod not Ready, the node of a stale sample was not refused for it: %s", msg)
	}
}

// agentPod creates a pod of the agent's DaemonSet (telesched-agent in
// telesched-system, as the scheduler's defaults name it, created if
// missing), controlled by it and labelled as --telemetry-agent-pod-selector
// finds it, bound to node; no kubelet runs it, so its status is the test's
// to set.
func agentPod(t *testing.T, c clients, node string) *corev1.Pod {
	t.Helper()
	ctx := t.Context()
	ns := telemetry.DefaultAgentNamespace
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ds, err := c.kube.AppsV1().DaemonSets(ns).Create(ctx, fixtures.AgentDaemonSet(ns, "telesched-agent"), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		ds, err = c.kube.AppsV1().DaemonSets(ns).Get(ctx, "telesched-agent", metav1.GetOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return createPodCleaned(t, c, fixtures.AgentPod(node, ds))
}

// tenantAgentPod creates a pod in namespace default that carries the
// agent's labels and names the agent's DaemonSet as its controller with a
// made-up UID, as any tenant allowed to create pods could, bound to node.
func tenantAgentPod(t *testing.T, c clients, node string) *corev1.Pod {
	t.Helper()
	ds := fixtures.AgentDaemonSet("default", "telesched-agent")
	ds.UID = "00000000-0000-0000-0000-000000000001"
	p := fixtures.AgentPod(node, ds)
	p.Name = "tenant-agent-" + node
	return createPodCleaned(t, c, p)
}

func createPodCleaned(t *testing.T, c clients, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	p, err := c.kube.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.kube.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	return p
}

// setPodReady sets a pod's Ready condition as its kubelet would.
func setPodReady(t *testing.T, c clients, p *corev1.Pod, ready corev1.ConditionStatus) {
	t.Helper()
	cur, err := c.kube.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase = corev1.PodRunning
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()}}
	if _, err := c.kube.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitLog waits until the process's output holds want.
func waitLog(t *testing.T, out *syncBuffer, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the scheduler's log within %v", want, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSchedulerThresholdAnnotation: while every node is far below the
// default thresholds, LoadAware skips its filter, unless a node's
// annotation lowers its threshold. Here the least loaded node (40% CPU) has
// cpu-threshold-percent 30: pods go to the other node (50%) until the
// annotation is removed.
func TestSchedulerThresholdAnnotation(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)
	for name, cpu := range map[string]int32{"ann-lowered": 40, "ann-default": 50} {
		node := schedNode(ctx, t, c, name)
		if _, err := c.applyStatusCreating(ctx, node, nodeStatus(cpu, 50, 100)); err != nil {
			t.Fatal(err)
		}
	}
	setAnnotation := func(value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, config.NodeAnnotationCPUThresholdPercent, value)
		if _, err := c.kube.CoreV1().Nodes().Patch(ctx, "ann-lowered", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setAnnotation(`"30"`)
	startScheduler(t, schedulerConfig(t, ""))

	for _, name := range []string{"ann-1", "ann-2", "ann-3"} {
		createPod(t, c, name, "telesched")
		if node := waitScheduled(t, c, name, 60*time.Second); node != "ann-default" {
			t.Errorf("%s went to %s, want ann-default (ann-lowered: 40%% CPU > its threshold 30%%)", name, node)
		}
	}
	// Without the annotation the less loaded node takes the next pod:
	// 40% + 3.125% against 50% + 3 x 3.125%.
	setAnnotation("null")
	time.Sleep(time.Second) // let the scheduler's informer see it
	createPod(t, c, "ann-4", "telesched")
	if node := waitScheduled(t, c, "ann-4", 60*time.Second); node != "ann-lowered" {
		t.Errorf("ann-4 went to %s, want ann-lowered once its annotation is gone", node)
	}
}
