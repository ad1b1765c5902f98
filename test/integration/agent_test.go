// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/agent/speed"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/test/fixtures"
)

// fakeHost is a host tree whose /proc/stat advances with wall-clock time at
// a chosen utilization, as a kernel's does (USER_HZ 100), and whose one
// hwmon sensor reads a chosen temperature. Files are replaced by rename, as
// the agent must never see a half-written one.
type fakeHost struct {
	dir string

	mu          sync.Mutex
	busyPercent float64
	last        time.Time
	user, idle  float64 // cumulative ticks of each of the 2 CPUs
}

func newFakeHost(t *testing.T) *fakeHost {
	h := &fakeHost{dir: t.TempDir(), busyPercent: 10, last: time.Now()}
	h.write(t, "/proc/meminfo", "MemTotal:       16000000 kB\nMemFree:        8000000 kB\nMemAvailable:   12000000 kB\n")
	h.write(t, "/proc/loadavg", "0.50 0.40 0.30 1/100 4242\n")
	h.write(t, "/sys/class/hwmon/hwmon0/name", "coretemp\n")
	h.write(t, "/sys/class/hwmon/hwmon0/temp1_label", "Package id 0\n")
	h.write(t, "/sys/class/hwmon/hwmon0/temp1_crit", "100000\n")
	h.setTemperature(t, 60_000)
	h.tick(t)
	return h
}

func (h *fakeHost) write(t *testing.T, hostPath, content string) {
	t.Helper()
	full := filepath.Join(h.dir, hostPath)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Error(err)
		return
	}
	tmp := full + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, full); err != nil {
		t.Error(err)
	}
}

func (h *fakeHost) setLoad(percent float64) {
	h.mu.Lock()
	h.busyPercent = percent
	h.mu.Unlock()
}

func (h *fakeHost) setTemperature(t *testing.T, milliCelsius int64) {
	h.write(t, "/sys/class/hwmon/hwmon0/temp1_input", fmt.Sprintf("%d\n", milliCelsius))
}

// tick advances both CPUs by the time since the last tick, at the current
// utilization.
func (h *fakeHost) tick(t *testing.T) {
	h.mu.Lock()
	now := time.Now()
	ticks := now.Sub(h.last).Seconds() * 100
	h.last = now
	h.user += ticks * h.busyPercent / 100
	h.idle += ticks * (100 - h.busyPercent) / 100
	line := fmt.Sprintf("%d 0 0 %d 0 0 0 0 0 0", uint64(h.user), uint64(h.idle))
	h.mu.Unlock()
	h.write(t, "/proc/stat", fmt.Sprintf("cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 %s\ncpu1 %s\nintr 1\n", line, line))
}

// run advances /proc/stat every 50ms until ctx ends.
func (h *fakeHost) run(ctx context.Context, t *testing.T) {
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			h.tick(t)
		}
	}
}

// waitFor polls cond every 50ms until it holds or timeout passes, and
// returns how long it took.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// TestAgentPublishes runs the agent in-process against the real API server
// on a fake host tree and checks the publisher's behaviour end to end.
func TestAgentPublishes(t *testing.T) {
	needControlPlane(t)
	const (
		interval  = time.Second
		heartbeat = 6 * time.Second
	)
	c := newClients(t)
	ctx := t.Context()
	// The operator's speed for this node's cores, by its label, above
	// the DaemonSet-wide --cpu-core-speed-milli.
	labelled := fixtures.Node("agent-node")
	if labelled.Labels == nil {
		labelled.Labels = map[string]string{}
	}
	labelled.Labels[speed.NodeLabel] = "1234"
	node, err := c.kube.CoreV1().Nodes().Create(ctx, labelled, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := adminKubeconfig(t)

	host := newFakeHost(t)
	// The host's writer must be gone before t.TempDir's cleanup removes
	// its tree (as in TestAgentRestartKeepsModels).
	hostCtx, stopHost := context.WithCancel(ctx)
	ran := make(chan struct{})
	defer func() { stopHost(); <-ran }()
	go func() { defer close(ran); host.run(hostCtx, t) }()

	opts := app.NewOptions()
	opts.HostRoot = host.dir
	opts.NodeName = node.Name
	opts.Kubeconfig = kubeconfig
	opts.Interval = interval
	opts.MetricsAddress, opts.HealthAddress = "", ""
	opts.NVML = false
	opts.PodResources = ""
	opts.Publisher.Heartbeat = heartbeat
	opts.Publisher.RateLimitQPS = 10
	opts.Publisher.BackoffInitial = 100 * time.Millisecond
	opts.Publisher.BackoffMax = time.Second
	opts.CPUCoreSpeedMilli = 900
	opts.Complete()
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	agentCtx, stopAgent := context.WithCancel(klog.NewContext(ctx, ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))))
	agentDone := make(chan error, 1)
	go func() { agentDone <- app.Run(agentCtx, opts, io.Discard) }()
	defer func() {
		stopAgent()
		select {
		case err := <-agentDone:
			if err != nil {
				t.Errorf("agent stopped with %v, want a clean stop", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("agent did not stop within 10s of its context ending")
		}
	}()

	get := func() *telemetryv1alpha1.NodeTelemetry {
		u, err := c.dyn.Resource(ntResource).Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		nt := &telemetryv1alpha1.NodeTelemetry{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, nt); err != nil {
			t.Fatal(err)
		}
		return nt
	}

	// 1. The agent creates its object, owned by the Node, and publishes.
	took := waitFor(t, "the first publish", 20*time.Second, func() bool {
		nt := get()
		return nt != nil && nt.Status.CPU != nil
	})
	nt := get()
	t.Logf("first publish after %v: cpu %d%%, hottest %s", took.Round(10*time.Millisecond), nt.Status.CPU.UtilizationPercent, nt.Status.Summary.Temperature)
	wantOwner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	if len(nt.OwnerReferences) != 1 || nt.OwnerReferences[0] != wantOwner {
		t.Errorf("owner references = %+v, want [%+v]", nt.OwnerReferences, wantOwner)
	}
	if got := nt.Status.CPU.UtilizationPercent; got < 5 || got > 15 {
		t.Errorf("cpu utilization = %d%%, want about 10%%", got)
	}
	if nt.Status.Thermal == nil || nt.Status.Thermal.HottestMilliCelsius != 60_000 {
		t.Fatalf("thermal = %+v, want the hwmon sensor at 60°C", nt.Status.Thermal)
	}
	if sp := nt.Status.Speed; sp == nil || sp.CPUCoreMilli != 1234 || sp.CPUSource != telemetryv1alpha1.SpeedSourceOperator || sp.CPUBasis != "Node label "+speed.NodeLabel {
		t.Errorf("status.speed = %+v, want 1234 from the operator, the Node label %s (above --cpu-core-speed-milli=900)", sp, speed.NodeLabel)
	}

	// 2. A change shows up at the next sample, not at the heartbeat.
	host.setLoad(90)
	took = waitFor(t, "the load change", heartbeat, func() bool {
		nt := get()
		return nt != nil && nt.Status.CPU.UtilizationPercent >= 15
	})
	t.Logf("cpu change 10%% -> 90%% visible in the API after %v (interval %v, heartbeat %v)", took.Round(10*time.Millisecond), interval, heartbeat)
	waitFor(t, "utilization to settle at 90%", 5*time.Second, func() bool {
		nt := get()
		return nt != nil && nt.Status.CPU.UtilizationPercent >= 85
	})

	// 3. Idle steady state writes no more often than the heartbeat.
	time.Sleep(2 * interval)
	w, err := c.dyn.Resource(ntResource).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", node.Name).String(),
		ResourceVersion: get().ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	window := 3 * heartbeat
	writes := 0
	deadline := time.After(window)
count:
	for {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Modified {
				writes++
			}
		case <-deadline:
			break count
		}
	}
	w.Stop()
	t.Logf("steady state: %d writes in %v with heartbeat %v (%.1f per node per minute)", writes, window, heartbeat, float64(writes)/window.Minutes())
	if maxWrites := int(window/heartbeat) + 1; writes > maxWrites || writes < 1 {
		t.Errorf("steady state wrote %d times in %v, want 1..%d (the heartbeat is %v)", writes, window, maxWrites, heartbeat)
	}

	// 4. Heat: a sensor 4°C from its critical limit makes the node
	// Overheating with a Warning event; cooling makes a Normal one.
	host.setTemperature(t, 96_000)
	waitFor(t, "Overheating=True", 3*heartbeat, func() bool {
		nt := get()
		return nt != nil && meta.IsStatusConditionTrue(nt.Status.Conditions, telemetryv1alpha1.ConditionOverheating)
	})
	waitForEvent(t, c, node.Name, corev1.EventTypeWarning, app.EventNodeOverheating)
	host.setTemperature(t, 80_000)
	waitFor(t, "Overheating=False", 3*heartbeat, func() bool {
		nt := get()
		return nt != nil && meta.IsStatusConditionFalse(nt.Status.Conditions, telemetryv1alpha1.ConditionOverheating)
	})
	waitForEvent(t, c, node.Name, corev1.EventTypeNormal, app.EventNodeTemperatureNormal)

	// 5. A deleted object is recreated, with its owner reference.
	oldUID := get().UID
	if err := c.dyn.Resource(ntResource).Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, "the object to be recreated", 3*heartbeat, func() bool {
		nt := get()
		return nt != nil && nt.UID != oldUID && nt.Status.CPU != nil
	})
	t.Logf("deleted object recreated after %v", took.Round(10*time.Millisecond))
	if got := get().OwnerReferences; len(got) != 1 || got[0] != wantOwner {
		t.Errorf("recreated object's owner references = %+v", got)
	}

	// 6. The API server goes away and comes back; the agent, never
	// restarted, resumes publishing.
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the agent fails and backs off meanwhile
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	took = waitFor(t, "publishing to resume", 3*heartbeat+opts.Publisher.BackoffMax, func() bool {
		nt := get()
		return nt != nil && nt.Status.SampleTime.After(restarted.Add(-time.Second))
	})
	t.Logf("publishing resumed %v after the API server came back", took.Round(10*time.Millisecond))
	select {
	case err := <-agentDone:
		t.Fatalf("the agent exited during the outage: %v", err)
	default:
	}
}

func waitForEvent(t *testing.T, c clients, node, eventType, reason string) {
	t.Helper()
	waitFor(t, reason+" event", 10*time.Second, func() bool {
		list, err := c.kube.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node, "reason": reason}.String(),
		})
		if err != nil {
			return false
		}
		for _, ev := range list.Items {
			if ev.Type == eventType && ev.InvolvedObject.UID == types.UID(node) {
				t.Logf("event %s %s: %s", ev.Type, ev.Reason, ev.Message)
				return true
			}
		}
		return false
	})
}
