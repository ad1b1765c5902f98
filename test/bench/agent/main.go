// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command agentbench measures the telesched agent's cost beside
// node_exporter's on the same simulated host tree, in one run: CPU time per
// collection cycle (agent) and per scrape (node_exporter) of the equivalent
// collectors, and resident memory of each. Then both run side by side at
// their shipped settings over one window: the agent on its own sampling
// schedule with the DaemonSet's flags, node_exporter scraped every 15s,
// both scraped the same; it reports their continuous CPU, resident memory
// (anonymous and file-backed) and the ratios. With -api it also starts the
// local control plane (the continuous agent then publishes to it) and
// measures the agent's API writes per minute at idle and under a changing
// load, and how long a change on the host takes to reach the API server.
//
//	go run ./test/bench/agent -agent bin/telesched-agent -node-exporter bin/node_exporter
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/sandbox/hosttree"
)

// nodeExporterCollectors are node_exporter's equivalents of the agent's
// sources (cpu includes thermal_throttle).
var nodeExporterCollectors = []string{"cpu", "meminfo", "pressure", "thermal_zone", "hwmon", "rapl"}

func main() {
	agentBin := flag.String("agent", "bin/telesched-agent", "telesched-agent binary")
	neBin := flag.String("node-exporter", "bin/node_exporter", "node_exporter binary (v1.12.1, go install)")
	duration := flag.Duration("duration", 30*time.Second, "measurement window of each program")
	cycle := flag.Duration("cycle", 100*time.Millisecond, "agent sampling interval and node_exporter scrape period")
	api := flag.Bool("api", true, "also measure API writes on the local control plane (needs bin/etcd and bin/kube-apiserver)")
	apiWindow := flag.Duration("api-window", 2*time.Minute, "window of each API measurement (idle, changing load)")
	var cont continuous
	flag.DurationVar(&cont.window, "continuous-window", 90*time.Second, "window of the side-by-side run at shipped settings (0 skips it)")
	flag.DurationVar(&cont.scrape, "scrape-period", 15*time.Second, "in the side-by-side run, how often node_exporter (and, with -scrape-agent, the agent) is scraped")
	flag.BoolVar(&cont.scrapeAgent, "scrape-agent", true, "in the side-by-side run, scrape the agent's /metrics every -scrape-period too, as the shipped PodMonitor does")
	flag.StringVar(&cont.baseline, "baseline-agent", "", "in the side-by-side run, also run this agent binary beside -agent, as a node of its own at the same settings, and report the two's ratio (a before and after in one run)")
	flag.Parse()
	if err := run(*agentBin, *neBin, *duration, *cycle, *api, *apiWindow, cont); err != nil {
		fmt.Fprintln(os.Stderr, "agentbench:", err)
		os.Exit(1)
	}
}

func run(agentBin, neBin string, duration, cycle time.Duration, api bool, apiWindow time.Duration, cont continuous) error {
	for _, b := range []string{agentBin, neBin} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s: %w (run `make build node-exporter`)", b, err)
		}
	}
	dir, err := os.MkdirTemp("", "agentbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	host, err := hosttree.New(dir, hosttree.Large)
	if err != nil {
		return err
	}
	host.SetUtilization(0.4)
	host.SetTemperature(62_000)
	stop := make(chan struct{})
	defer close(stop)
	go func() { _ = host.Run(50*time.Millisecond, stop) }()
	fmt.Printf("host tree: %s (%d CPUs, %d NUMA nodes, %d packages, hwmon, thermal zones, RAPL), advanced every 50ms\n",
		dir, hosttree.Large.CPUs, hosttree.Large.NUMANodes, hosttree.Large.Packages)

	ne, err := measureNodeExporter(neBin, dir, duration, cycle)
	if err != nil {
		return fmt.Errorf("node_exporter: %w", err)
	}
	ag, err := measureAgent(agentBin, dir, duration, cycle)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	fmt.Printf("\nper cycle, forced every %v:\n", cycle)
	fmt.Printf("%-34s %14s %10s %10s %8s\n", "", "CPU per cycle", "RSS", "peak RSS", "cycles")
	fmt.Printf("%-34s %14s %10s %10s %8d\n", "node_exporter v1.12.1 (scrape)", ne.perCycle.Round(time.Microsecond), mib(ne.rss), mib(ne.hwm), ne.cycles)
	fmt.Printf("%-34s %14s %10s %10s %8d\n", "telesched-agent (collection cycle)", ag.perCycle.Round(time.Microsecond), mib(ag.rss), mib(ag.hwm), ag.cycles)
	fmt.Printf("agent/node_exporter CPU ratio: %.2f (goal <= 0.50); agent RSS %s (goal <= 25 MiB)\n",
		float64(ag.perCycle)/float64(ne.perCycle), mib(ag.rss))

	size, err := objectSize(agentBin, dir)
	if err != nil {
		return err
	}
	fmt.Printf("published object on this host (no GPUs): %d bytes of JSON\n", size)

	var cp *controlplane.ControlPlane
	if api {
		fmt.Printf("\nstarting the local control plane\n")
		if cp, err = controlplane.Start(controlplane.Options{}); err != nil {
			return err
		}
		defer cp.Stop()
	}
	// The API measurements first: the control plane's start-up work
	// (bootstrap controllers, RBAC) is over before the side-by-side
	// window, where it would load the machine under both programs.
	if api {
		if err := measureAPI(agentBin, host, cp, apiWindow); err != nil {
			return err
		}
	}
	if cont.window > 0 {
		if err := cont.measure(agentBin, neBin, host, cp); err != nil {
			return fmt.Errorf("side by side: %w", err)
		}
	}
	return nil
}

type cost struct {
	perCycle time.Duration
	cycles   int
	rss, hwm int64
}

func measureNodeExporter(bin, root string, duration, period time.Duration) (cost, error) {
	addr, err := freeAddr()
	if err != nil {
		return cost{}, err
	}
	args := []string{
		"--path.procfs=" + filepath.Join(root, "proc"), "--path.sysfs=" + filepath.Join(root, "sys"), "--path.rootfs=" + root,
		"--collector.disable-defaults", "--web.listen-address=" + addr, "--log.level=error",
	}
	for _, c := range nodeExporterCollectors {
		args = append(args, "--collector."+c)
	}
	cmd, err := start(bin, args...)
	if err != nil {
		return cost{}, err
	}
	defer stopProcess(cmd)
	url := "http://" + addr + "/metrics"
	body, err := waitScrape(url)
	if err != nil {
		return cost{}, err
	}
	// Every equivalent collector must work on the tree, or the comparison
	// is meaningless.
	for _, c := range nodeExporterCollectors {
		if !strings.Contains(body, fmt.Sprintf(`node_scrape_collector_success{collector=%q} 1`, c)) {
			return cost{}, fmt.Errorf("collector %s did not succeed on the tree:\n%s", c, grepLines(body, "node_scrape_collector"))
		}
	}
	for range 5 { // warm up
		if _, err := scrape(url); err != nil {
			return cost{}, err
		}
	}
	cpu0, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return cost{}, err
	}
	n := int(duration / period)
	ticker := time.NewTicker(period)
	for range n {
		<-ticker.C
		if _, err := scrape(url); err != nil {
			return cost{}, err
		}
	}
	ticker.Stop()
	cpu1, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return cost{}, err
	}
	rss, hwm, err := memory(cmd.Process.Pid)
	return cost{perCycle: (cpu1 - cpu0) / time.Duration(n), cycles: n, rss: rss, hwm: hwm}, err
}

func measureAgent(bin, root string, duration, interval time.Duration) (cost, error) {
	addr, err := freeAddr()
	if err != nil {
		return cost{}, err
	}
	cmd, err := start(bin, "--publish=false", "--nvml=false", "--podresources-socket=", "--host-root="+root,
		"--interval="+interval.String(), "--metrics-bind-address="+addr, "--health-probe-bind-address=", "-v=0")
	if err != nil {
		return cost{}, err
	}
	defer stopProcess(cmd)
	url := "http://" + addr + "/metrics"
	var body string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if body, err = scrape(url); err == nil && counter(body, "telesched_agent_samples_total") >= 5 {
			break
		}
		if time.Now().After(deadline) {
			return cost{}, fmt.Errorf("no samples within 20s: %v", err)
		}
	}
	for _, src := range []string{"cpu", "memory", "numa", "thermal", "power"} {
		if !strings.Contains(body, fmt.Sprintf(`telesched_agent_collector_success{collector=%q} 1`, src)) {
			return cost{}, fmt.Errorf("source %s not read on the tree:\n%s", src, grepLines(body, "telesched_agent_source_info"))
		}
	}
	s0 := counter(body, "telesched_agent_samples_total")
	cpu0, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return cost{}, err
	}
	time.Sleep(duration)
	cpu1, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return cost{}, err
	}
	if body, err = scrape(url); err != nil {
		return cost{}, err
	}
	cycles := int(counter(body, "telesched_agent_samples_total") - s0)
	if cycles < 1 {
		return cost{}, errors.New("no cycles during the window")
	}
	rss, hwm, err := memory(cmd.Process.Pid)
	return cost{perCycle: (cpu1 - cpu0) / time.Duration(cycles), cycles: cycles, rss: rss, hwm: hwm}, err
}

func objectSize(bin, root string) (int, error) {
	out, err := exec.Command(bin, "--once", "--nvml=false", "--podresources-socket=", "--host-root="+root, "--node-name=bench-node-1.example.internal").Output()
	if err != nil {
		return 0, fmt.Errorf("%s --once: %w", bin, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, out); err != nil {
		return 0, err
	}
	return compact.Len(), nil
}

// measureAPI runs the agent with its default interval and heartbeat against
// the local control plane and counts its writes.
func measureAPI(bin string, host *hosttree.Host, cp *controlplane.ControlPlane, window time.Duration) error {
	fmt.Printf("\nAPI writes (agent defaults):\n")
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	const node = "bench-node"
	kubeconfig, err := benchNode(cp, host, node)
	if err != nil {
		return err
	}
	host.SetUtilization(0.3)
	cmd, err := start(bin, "--kubeconfig="+kubeconfig, "--node-name="+node, "--host-root="+host.Dir,
		"--nvml=false", "--podresources-socket=", "--metrics-bind-address=", "--health-probe-bind-address=", "-v=0")
	if err != nil {
		return err
	}
	defer stopProcess(cmd)
	gvr := telemetryv1alpha1.SchemeGroupVersion.WithResource("nodetelemetries")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := dyn.Resource(gvr).Get(ctx, node, metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the agent did not publish within 30s")
		}
	}
	w, err := dyn.Resource(gvr).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	if err != nil {
		return err
	}
	defer w.Stop()
	events := w.ResultChan()
	drain(events, 2*time.Second) // the initial ADDED event

	pid := cmd.Process.Pid
	cpu0, err := cpuTime(pid)
	if err != nil {
		return err
	}
	idle := countWrites(events, window, nil)
	cpu1, err := cpuTime(pid)
	if err != nil {
		return err
	}
	fmt.Printf("idle (30%% CPU, steady):        %d writes in %v = %.1f writes/node/minute; agent CPU %s\n",
		idle.writes, window, float64(idle.writes)/window.Minutes(), cpuShare(cpu1-cpu0, window))

	// Changing load: every 15s the utilization jumps between 20% and 70%.
	util := []float64{0.7, 0.2}
	i := 0
	changing := countWrites(events, window, func(elapsed time.Duration) (float64, bool) {
		if elapsed < time.Duration(i)*15*time.Second {
			return 0, false
		}
		u := util[i%2]
		i++
		host.SetUtilization(u)
		return u, true
	})
	cpu2, err := cpuTime(pid)
	if err != nil {
		return err
	}
	fmt.Printf("changing (20%% <-> 70%% every 15s): %d writes in %v = %.1f writes/node/minute; agent CPU %s\n",
		changing.writes, window, float64(changing.writes)/window.Minutes(), cpuShare(cpu2-cpu1, window))
	if len(changing.freshness) > 0 {
		all := make([]string, len(changing.freshness))
		for i, f := range changing.freshness {
			all[i] = f.Round(10 * time.Millisecond).String()
		}
		slices.Sort(changing.freshness)
		fmt.Printf("freshness, host change -> NodeTelemetry in the API server (agent defaults): median %v, max %v over %d changes (%s)\n",
			changing.freshness[len(changing.freshness)/2].Round(10*time.Millisecond), changing.freshness[len(changing.freshness)-1].Round(10*time.Millisecond),
			len(changing.freshness), strings.Join(all, " "))
	}
	return nil
}

// benchNode creates a Node named node and writes a kubeconfig for cp under
// the host tree.
func benchNode(cp *controlplane.ControlPlane, host *hosttree.Host, node string) (string, error) {
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := kube.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	kubeconfig := filepath.Join(host.Dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return "", err
	}
	return kubeconfig, nil
}

// cpuShare formats CPU time used over a window as milliseconds per second,
// which is also thousandths of one core.
func cpuShare(cpu, window time.Duration) string {
	return fmt.Sprintf("%.1f ms/s (%.2f%% of a core)", float64(cpu.Milliseconds())/window.Seconds(), 100*cpu.Seconds()/window.Seconds())
}

type writeCount struct {
	writes    int
	freshness []time.Duration
}

// countWrites counts MODIFIED events for window. change, if set, is called
// every 100ms with the elapsed time and may change the host; the time from
// a change to the first write that shows utilization near it is recorded.
func countWrites(events <-chan watch.Event, window time.Duration, change func(time.Duration) (float64, bool)) writeCount {
	var out writeCount
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var pendingSince time.Time
	var target float64
	for time.Since(start) < window {
		select {
		case ev := <-events:
			if ev.Type != watch.Modified {
				continue
			}
			out.writes++
			if pendingSince.IsZero() {
				continue
			}
			u, ok := ev.Object.(runtime.Unstructured)
			if !ok {
				continue
			}
			nt := &telemetryv1alpha1.NodeTelemetry{}
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), nt) == nil && nt.Status.CPU != nil &&
				abs(float64(nt.Status.CPU.UtilizationPercent)-100*target) <= 10 {
				out.freshness = append(out.freshness, time.Since(pendingSince))
				pendingSince = time.Time{}
			}
		case <-tick.C:
			if change != nil {
				if u, changed := change(time.Since(start)); changed {
					target, pendingSince = u, time.Now()
				}
			}
		}
	}
	return out
}

func drain(events <-chan watch.Event, d time.Duration) {
	deadline := time.After(d)
	for {
		select {
		case <-events:
		case <-deadline:
			return
		}
	}
}

func start(bin string, args ...string) (*exec.Cmd, error) { return startEnv(bin, nil, args...) }

// startEnv starts bin with env added to the bench's environment.
func startEnv(bin string, env []string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = io.Discard
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		if err := cmd.Wait(); err != nil && cmd.ProcessState != nil && !cmd.ProcessState.Success() && stderr.Len() > 0 {
			fmt.Fprintf(os.Stderr, "%s exited: %v\n%s", filepath.Base(bin), err, lastLines(stderr.String(), 10))
		}
	}()
	return cmd, nil
}

func stopProcess(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _, _ = cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
	}
}

// cpuTime is the CPU time of every thread of pid, from schedstat (ns).
func cpuTime(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no schedstat for pid %d: %v", pid, err)
	}
	var total time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that exited
		}
		fields := strings.Fields(string(data))
		if len(fields) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, err
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// memory returns VmRSS and VmHWM of pid, in bytes.
func memory(pid int) (rss, hwm int64, err error) {
	kb, err := kibFields(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:", "VmHWM:")
	return kb[0], kb[1], err
}

// rollup returns the anonymous and file-backed resident memory of pid from
// /proc/<pid>/smaps_rollup, in bytes.
func rollup(pid int) (anon, file int64, err error) {
	kb, err := kibFields(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Rss:", "Anonymous:")
	return kb[1], kb[0] - kb[1], err
}

// kibFields reads the "Key: N kB" lines of a procfs file and returns the
// values of keys, in bytes, in their order (0 for a key it lacks).
func kibFields(path string, keys ...string) ([]int64, error) {
	out := make([]int64, len(keys))
	data, err := os.ReadFile(path)
	if err != nil {
		return out, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		if k := slices.Index(keys, fields[0]); k >= 0 {
			v, _ := strconv.ParseInt(fields[1], 10, 64)
			out[k] = v << 10
		}
	}
	return out, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func scrape(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(body), err
}

func waitScrape(url string) (string, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		body, err := scrape(url)
		if err == nil {
			return body, nil
		}
		if time.Now().After(deadline) {
			return "", err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// counter returns the value of an unlabelled series in a scrape.
func counter(body, name string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return -1
}

func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
