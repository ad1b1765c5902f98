// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command schedbench measures scheduling throughput: one telesched-scheduler
// process with two profiles, the default one (default-scheduler) and
// telesched's, on one local API server with N nodes that all have
// NodeTelemetry. In each round, M pods are scheduled by one profile and
// deleted, then M pods by the other, the first profile alternating between
// rounds; it prints pods/s and scheduler CPU per pod of each, the ratios per
// round and the medians.
//
// The two runs of a round must hold the same flush: kube-scheduler moves
// pods left unschedulable for 5 minutes back to the queue
// (podMaxInUnschedulablePodsDuration), which costs a run that holds it. By
// default each run's backlog is created just before the run and deleted
// after it, so that no run reaches the 5-minute mark; -flush-in-run instead
// starts each run at its backlog's first flush. Either way the pods
// flushed over each backlog's life are read from the scheduler's metrics
// and printed per run, and a round whose two runs were not alike (see
// alike) is flagged and left out of the medians.
//
// -mode cluster (the default) runs where production lives: NodeTelemetry
// updates flow during the run at the agents' rate (-writes-per-node-min),
// every node has a Ready agent pod as the DaemonSet's (-agent-pods), so
// the scheduler judges freshness as it does in a cluster, the fleet has loaded, hot, flapping and GPU nodes so telesched's filters
// run (see cluster.go), and each profile's run has a backlog of pods that
// stay pending (-backlog) so QueueingHints run on every update. -mode
// quiet is the earlier measurement: every node fresh and idle enough that
// no telesched filter runs, no update during the run, no backlog.
//
//	go run ./test/bench/scheduler -nodes 1000 -pods 1000 -rounds 5
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/bench/internal/parallel"
	"github.com/telesched/telesched/test/bench/internal/proc"
	"github.com/telesched/telesched/test/fixtures"
	"github.com/telesched/telesched/test/internal/metricfam"
)

func main() {
	scheduler := flag.String("scheduler", "bin/telesched-scheduler", "telesched-scheduler binary")
	config := flag.String("config", "deploy/scheduler/scheduler-config.yaml", "the telesched profile's configuration")
	nodes := flag.Int("nodes", 1000, "nodes, each with NodeTelemetry")
	pods := flag.Int("pods", 1000, "pods per profile and round")
	rounds := flag.Int("rounds", 3, "rounds; each schedules the pods once per profile, the first profile alternating")
	flag.StringVar(&mode, "mode", "cluster", "cluster (telemetry flowing, busy/hot/GPU nodes, a backlog of pending pods) or quiet (no updates, no backlog, no filter runs)")
	flag.IntVar(&backlogPods, "backlog", 1000, "cluster mode: pending pods kept in the queue during each profile's run")
	flag.Float64Var(&writesPerNodeMin, "writes-per-node-min", 0.5, "cluster mode: NodeTelemetry writes per node per minute during the run: the shipped agents' 5 m heartbeat (0.22 a minute, at 80-100 % of it) and a settled move past a deadband every 3.6 minutes (0.28); 2 is the binary's 30 s heartbeat with changes")
	flag.BoolVar(&agentPods, "agent-pods", true, "cluster mode: a Ready agent pod on every node, as the DaemonSet runs them, so the scheduler takes a node's last write as current for --telemetry-max-age-ready-agent; false: none, and telemetry older than telemetryMaxAge is stale")
	flag.StringVar(&schedulerVerbosity, "v", "2", "the scheduler's -v; its log is kept (the path is printed) to explain a pod left pending")
	flag.IntVar(&rackSize, "rack-size", 40, "cluster mode: nodes per rack, each rack with a PowerBudget (room to spare: the PowerBudget plugin's filter and score run for every pod on every node); 0: no PowerBudgets")
	flag.StringVar(&markdown, "markdown", "", "if set, write the rounds as a Markdown table to this file")
	flag.DurationVar(&settle, "settle", 3*time.Second, "pause after each run's pods are deleted, before the next run starts")
	flag.StringVar(&cpuProfileDir, "cpuprofile", "", "if set, write a CPU profile of the scheduler for each profile's run into this directory")
	flag.DurationVar(&cpuProfileFor, "cpuprofile-duration", 5*time.Second, "how long each CPU profile samples, from the first pod created; the run's pods are deleted meanwhile, and the next run waits for it")
	flag.StringVar(&featureGates, "feature-gates", "", "the scheduler's --feature-gates (default none, as the shipped Deployment; e.g. SchedulerPreQueueingHints=true)")
	flag.BoolVar(&flushInRun, "flush-in-run", false, "cluster mode: start each measured run at kube-scheduler's first flush of its backlog's pods, left unschedulable for 5 minutes (podMaxInUnschedulablePodsDuration), so that the flush falls inside every profile's run (each run then lasts over 5 minutes); false: each run's backlog is created just before it, so that no run holds a flush. Either way a round whose two runs did not hold the same flush is flagged and left out of the medians")
	flag.Parse()
	if *nodes < 1 || *pods < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "schedbench: -nodes, -pods and -rounds must be at least 1")
		os.Exit(2)
	}
	if mode != "cluster" && mode != "quiet" {
		fmt.Fprintf(os.Stderr, "schedbench: -mode %q: want cluster or quiet\n", mode)
		os.Exit(2)
	}
	if mode == "cluster" && (backlogPods < 0 || writesPerNodeMin <= 0) {
		fmt.Fprintln(os.Stderr, "schedbench: -backlog must not be negative and -writes-per-node-min must be above 0")
		os.Exit(2)
	}
	if err := run(*scheduler, *config, *nodes, *pods, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
}

var (
	mode               string
	backlogPods        int
	writesPerNodeMin   float64
	agentPods          bool
	schedulerVerbosity string
	markdown           string
	settle             time.Duration
	cpuProfileDir      string
	cpuProfileFor      time.Duration
	pprofAddr          string // host:port of the scheduler's secure port
	featureGates       string
	flushInRun         bool
)

// flushLead is how long before the backlog's 5-minute mark -flush-in-run
// starts watching for the flush: kube-scheduler checks for pods to flush
// every 30 s, and the measured run starts at the first check that moves
// backlog pods, so that the flush falls inside a run however short it is
// (20 s at 50 pods/s) and however long the backlog took to create.
const flushLead = 15 * time.Second

// flushMark is kube-scheduler's podMaxInUnschedulablePodsDuration: a pod
// left unschedulable that long is flushed back to the queue.
const flushMark = 5 * time.Minute

// flushedPods is how many pods the scheduler has flushed at the 5-minute
// mark so far (scheduler_queue_incoming_pods_total, event
// UnschedulableTimeout); -1 when /metrics cannot be read.
func flushedPods() float64 {
	fams, err := schedulerMetrics()
	if err != nil {
		return -1
	}
	return metricfam.CounterSum(fams, "scheduler_queue_incoming_pods_total", map[string]string{"event": "UnschedulableTimeout"})
}

// alike reports whether the two runs of a round held the same flush, by
// the pods each flushed over its backlog's life (-1: unknown, never
// alike): by default the same count, none as a rule; with -flush-in-run,
// some in each.
func alike(a, b float64) bool {
	if a < 0 || b < 0 {
		return false
	}
	if flushInRun {
		return a > 0 && b > 0
	}
	return a == b
}

// alikeRule says what alike requires.
func alikeRule() string {
	if flushInRun {
		return "with -flush-in-run, each run flushes some pods"
	}
	return "each run flushes the same count, none as a rule"
}

// awaitFlush waits until the scheduler has flushed pods left unschedulable
// for 5 minutes (scheduler_queue_incoming_pods_total, event
// UnschedulableTimeout, rose), at most timeout; it says whether it saw it.
func awaitFlush(timeout time.Duration) bool {
	flushed := func() (float64, bool) {
		n := flushedPods()
		return n, n >= 0
	}
	before, known := flushed()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		now, ok := flushed()
		switch {
		case ok && !known:
			before, known = now, true
		case ok && now > before:
			return true
		}
	}
	return false
}

func run(bin, configPath string, nodes, pods, rounds int) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: %w (run `make build`)", bin, err)
	}
	base, err := os.ReadFile(configPath)
	if err != nil {
		return err
	}
	fmt.Printf("starting the local control plane\n")
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		return err
	}
	defer cp.Stop()
	cfg := *cp.Config
	cfg.QPS, cfg.Burst = 5000, 5000
	kube := kubernetes.NewForConfigOrDie(&cfg)
	dyn := dynamic.NewForConfigOrDie(&cfg)
	ctx := context.Background()

	if mode == "cluster" && agentPods {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		if agentDaemonSet, err = kube.AppsV1().DaemonSets(agentNamespace).Create(ctx, fixtures.AgentDaemonSet(agentNamespace, "telesched-agent"), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	start := time.Now()
	var created atomic.Int64
	stopProgress := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
				fmt.Printf("  %d of %d nodes created\n", created.Load(), nodes)
			}
		}
	}()
	create := func(i int) error {
		defer created.Add(1)
		if mode == "cluster" {
			return createClusterNode(ctx, kube, dyn, i)
		}
		return createNode(ctx, kube, dyn, nodeName(i), i)
	}
	err = parallel.Run(nodes, 16, create)
	close(stopProgress)
	if err != nil {
		return err
	}
	fmt.Printf("%d nodes with NodeTelemetry created in %v\n", nodes, time.Since(start).Round(time.Millisecond))
	if mode == "cluster" && rackSize > 0 {
		n, err := createBudgets(ctx, dyn, nodes)
		if err != nil {
			return err
		}
		fmt.Printf("%d PowerBudgets of %d nodes each (%d W a rack)\n", n, rackSize, rackSize*rackWatts)
	}
	var w *writer
	if mode == "cluster" {
		c := composition(nodes)
		fmt.Printf("fleet: %d GPU nodes (8 GPUs), %d loaded (CPU ~90%% > 80%%), %d hot (97 of 100 °C), %d flapping (75/85%% CPU), %d others (10-69%% CPU)\n",
			c[kindGPU], c[kindLoaded], c[kindHot], c[kindFlapping], c[kindNormal])
		fmt.Printf("telemetry: %.2f writes per node per minute (%.1f/s), a Ready agent pod on every node: %v, backlog %d pending pods per profile's run\n",
			writesPerNodeMin, writesPerNodeMin*float64(nodes)/60, agentPods, backlogPods)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w = &writer{}
		go w.run(wctx, dyn, nodes, writesPerNodeMin)
	}

	dir, err := os.MkdirTemp("", "schedbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	// The telesched profile as deployed, plus a default profile, in one
	// process; no leader election; a client fast enough not to be the limit
	// (the default 50 QPS would cap both profiles alike); telemetry kept
	// fresh for the run.
	conf := strings.Replace(string(base), "  leaderElect: true", "  leaderElect: false", 1)
	if mode == "quiet" {
		conf = strings.ReplaceAll(conf, "telemetryMaxAge: 60s", "telemetryMaxAge: 1h")
	}
	conf = strings.Replace(conf, "profiles:\n", "profiles:\n- schedulerName: default-scheduler\n", 1)
	conf += "clientConnection:\n  kubeconfig: " + kubeconfig + "\n  qps: 5000\n  burst: 5000\n"
	confPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return err
	}
	// The secure port serves /metrics (queue, batching and hint counts
	// per run) and, with -cpuprofile, /debug/pprof.
	port, err := freePort()
	if err != nil {
		return err
	}
	pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"--config=" + confPath, "-v=" + schedulerVerbosity, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*", "--telemetry-agent-namespace=" + agentNamespace}
	if featureGates != "" {
		args = append(args, "--feature-gates="+featureGates)
	}
	fmt.Printf("scheduler: --feature-gates=%s\n", featureGates)
	if cpuProfileDir != "" {
		if err := os.MkdirAll(cpuProfileDir, 0o755); err != nil {
			return err
		}
	}
	apiserverPID, etcdPID, err := proc.ControlPlane()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	// The log outlives the run: a pod left pending is explained there.
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("schedbench-%d-scheduler.log", os.Getpid()))
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Printf("scheduler log (-v=%s): %s\n", schedulerVerbosity, logPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	time.Sleep(3 * time.Second) // informers sync

	// Rounds alternate which profile goes first: the second run of a round
	// meets an API server and etcd that hold the first run's deleted pods.
	results := map[string][]float64{}
	cpus := map[string][]float64{}
	flushes := map[string][]float64{}
	var ratios, cpuRatios, writeRates, cpCores []float64
	var alikeRounds []bool
	for round := 1; round <= rounds; round++ {
		order := []string{"default-scheduler", "telesched"}
		if round%2 == 0 {
			order[0], order[1] = order[1], order[0]
		}
		for _, profile := range order {
			var backlogNS string
			// The pods flushed over this run's backlog's life, from before
			// it is created until it is deleted: no other backlog is
			// pending meanwhile.
			flushed0 := flushedPods()
			backlogAt := time.Now()
			if mode == "quiet" {
				// Every node reports a new sample before each run, as agents
				// would: it retires the previous run's reservations, so each
				// run starts from the same telemetry.
				if err := parallel.Run(nodes, 16, func(i int) error { return sample(ctx, dyn, nodeName(i), i) }); err != nil {
					return fmt.Errorf("re-sampling telemetry: %w", err)
				}
			} else if backlogPods > 0 {
				t0 := time.Now()
				var placed int
				if backlogNS, placed, err = backlog(ctx, kube, profile, round, backlogPods); err != nil {
					return fmt.Errorf("%s backlog: %w", profile, err)
				}
				fmt.Printf("round %d  %-18s backlog of %d pods pending (unschedulable) after %v", round, profile, backlogPods-placed, time.Since(t0).Round(100*time.Millisecond))
				if placed > 0 {
					fmt.Printf("; %d more were placed, on busy nodes whose telemetry went stale", placed)
				}
				fmt.Println()
				if flushInRun {
					wait := time.Until(backlogAt.Add(flushMark - flushLead))
					fmt.Printf("round %d  %-18s waiting %v for the backlog to near kube-scheduler's 5-minute flush, then for the flush\n", round, profile, wait.Round(time.Second))
					time.Sleep(wait)
					if !awaitFlush(2 * time.Minute) {
						fmt.Printf("round %d  %-18s no flush seen within 2 minutes of the backlog's 5-minute mark; measuring anyway\n", round, profile)
					}
				}
			}
			if !flushInRun {
				time.Sleep(settle)
			}
			m0, metricsErr := schedulerMetrics()
			cp0 := controlPlaneCPU(apiserverPID, etcdPID)
			cpu0, _, cpuErr := proc.CPU(cmd.Process.Pid)
			var writes0 int64
			if w != nil {
				writes0 = w.writes.Load()
			}
			t0 := time.Now()
			rate, err := measure(ctx, kube, profile, round, pods)
			if err != nil {
				data, _ := os.ReadFile(logPath)
				return fmt.Errorf("%s: %w\nscheduler log tail:\n%s", profile, err, lastLines(string(data), 20))
			}
			results[profile] = append(results[profile], rate)
			// The scheduler's CPU time per pod, counted from this run's first
			// pod to the end of its settle pause: less noisy than pods/s on a
			// machine the API server and etcd share.
			cpuMS := -1.0
			if cpu1, _, err := proc.CPU(cmd.Process.Pid); err == nil && cpuErr == nil {
				cpuMS = (cpu1 - cpu0) * 1000 / float64(pods)
			}
			cpus[profile] = append(cpus[profile], cpuMS)
			elapsed := time.Since(t0).Seconds()
			cores := (controlPlaneCPU(apiserverPID, etcdPID) - cp0) / elapsed
			cpCores = append(cpCores, cores)
			extra := fmt.Sprintf(", kube-apiserver + etcd %.2f cores", cores)
			if m1, err := schedulerMetrics(); err == nil && metricsErr == nil {
				d := func(name string, labels map[string]string) float64 {
					return metricfam.CounterSum(m1, name, labels) - metricfam.CounterSum(m0, name, labels)
				}
				if n := d("scheduler_batch_attempts_total", map[string]string{"profile": profile, "result": "hint_used"}); n > 0 {
					extra += fmt.Sprintf(", %.0f batched", n)
				}
			}
			if w != nil {
				wr := float64(w.writes.Load()-writes0) / time.Since(t0).Seconds()
				writeRates = append(writeRates, wr)
				extra += fmt.Sprintf(", telemetry %.1f writes/s (%.2f per node per minute)", wr, wr*60/float64(nodes))
				if n := w.errors.Load(); n > 0 {
					extra += fmt.Sprintf(", %d write errors (last: %v)", n, w.lastErr.Load())
				}
			}
			if backlogNS != "" {
				left, err := pendingIn(ctx, kube, backlogNS)
				if err != nil {
					return err
				}
				extra += fmt.Sprintf(", backlog still pending %d", left)
				if err := deleteNamespace(ctx, kube, backlogNS); err != nil {
					return err
				}
			}
			flushed := -1.0
			if f1 := flushedPods(); f1 >= 0 && flushed0 >= 0 {
				flushed = f1 - flushed0
			}
			flushes[profile] = append(flushes[profile], flushed)
			extra += fmt.Sprintf(", flushed at 5 min %s pods in the %v from its backlog's creation", count(flushed), time.Since(backlogAt).Round(time.Second))
			fmt.Printf("round %d  %-18s %d pods on %d nodes: %.1f pods/s, scheduler CPU %.2f ms per pod%s\n", round, profile, pods, nodes, rate, cpuMS, extra)
		}
		ratios = append(ratios, results["telesched"][round-1]/results["default-scheduler"][round-1])
		cpuRatios = append(cpuRatios, cpus["telesched"][round-1]/cpus["default-scheduler"][round-1])
		fd, ft := flushes["default-scheduler"][round-1], flushes["telesched"][round-1]
		alikeRounds = append(alikeRounds, alike(fd, ft))
		fmt.Printf("round %d  default-scheduler %.1f pods/s %.2f ms/pod, telesched %.1f pods/s %.2f ms/pod; ratio telesched/default: throughput %.2f, CPU per pod %.2f; flushed at 5 min: default %s, telesched %s pods\n",
			round, results["default-scheduler"][round-1], cpus["default-scheduler"][round-1], results["telesched"][round-1], cpus["telesched"][round-1],
			ratios[round-1], cpuRatios[round-1], count(fd), count(ft))
		if !alikeRounds[round-1] {
			fmt.Printf("round %d  NOT ALIKE: its two runs did not hold the same flush (%s); left out of the medians\n", round, alikeRule())
		}
		if markdown != "" {
			if err := writeMarkdown(results, cpus, flushes, ratios, cpuRatios, writeRates, cpCores, alikeRounds); err != nil {
				return err
			}
		}
	}
	kept := 0
	for _, a := range alikeRounds {
		if a {
			kept++
		}
	}
	if kept == 0 {
		return fmt.Errorf("no median: in none of %d rounds did the two runs hold the same flush (%s)", rounds, alikeRule())
	}
	fmt.Printf("median of %d alike rounds of %d (%s mode, %d nodes): default-scheduler %.1f pods/s %.2f ms/pod, telesched %.1f pods/s %.2f ms/pod; throughput ratio %.2f (goal >= 0.95), CPU per pod ratio %.2f (goal <= 1.10)\n",
		kept, rounds, mode, nodes, median(results["default-scheduler"], alikeRounds), median(cpus["default-scheduler"], alikeRounds),
		median(results["telesched"], alikeRounds), median(cpus["telesched"], alikeRounds), median(ratios, alikeRounds), median(cpuRatios, alikeRounds))
	return nil
}

// count prints a count read from the scheduler's metrics; "?" if unknown.
func count(v float64) string {
	if v < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f", v)
}

// median is the median of the values of v of the rounds keep holds true:
// v holds len(v)/len(keep) values per round, in order. NaN for none.
func median(v []float64, keep []bool) float64 {
	var s []float64
	if per := len(v) / max(len(keep), 1); per > 0 {
		for i, x := range v {
			if i/per < len(keep) && keep[i/per] {
				s = append(s, x)
			}
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// measure creates pods for a profile and returns pods bound per second,
// from the first create to the last binding; it deletes them afterwards.
func measure(ctx context.Context, kube kubernetes.Interface, profile string, round, n int) (float64, error) {
	ns := fmt.Sprintf("bench-%s-%d", shortName(profile), round)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	// An informer, not a bare watch: it lists and watches again if the
	// server ends the watch, so no binding goes uncounted.
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().Pods().Informer()
	var mu sync.Mutex
	seen := map[string]bool{}
	var bound atomic.Int64
	done := make(chan struct{})
	count := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[p.Name] {
			return
		}
		seen[p.Name] = true
		if bound.Add(1) == int64(n) {
			close(done)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    count,
		UpdateFunc: func(_, obj any) { count(obj) },
	}); err != nil {
		return 0, err
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	profiled := make(chan error, 1)
	if cpuProfileDir != "" {
		go func() {
			profiled <- cpuProfile(filepath.Join(cpuProfileDir, fmt.Sprintf("%s-%d.pprof", profile, round)))
		}()
	} else {
		profiled <- nil
	}
	start := time.Now()
	if err := parallel.Run(n, 16, func(i int) error {
		_, err := kube.CoreV1().Pods(ns).Create(ctx, benchPod(fmt.Sprintf("p-%05d", i), profile), metav1.CreateOptions{})
		return err
	}); err != nil {
		return 0, err
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		return 0, fmt.Errorf("%d of %d pods bound after 10 minutes", bound.Load(), n)
	}
	rate := float64(n) / time.Since(start).Seconds()
	zero := int64(0)
	if err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return 0, err
	}
	// Without a kubelet nothing terminates the pods: delete them outright so
	// the next profile starts on empty nodes, then let the scheduler digest
	// the deletions before the next run is timed.
	if err := deletePods(ctx, kube, ns); err != nil {
		return 0, err
	}
	for deadline := time.Now().Add(5 * time.Minute); len(informer.GetStore().ListKeys()) > 0; {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d pods still listed 5 minutes after deleting them", len(informer.GetStore().ListKeys()))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(settle)
	// The profile samples from the first pod created on, deletions
	// included, as the CPU per pod counts them: awaited only now.
	if err := <-profiled; err != nil {
		return 0, fmt.Errorf("cpu profile: %w", err)
	}
	return rate, nil
}

// writeMarkdown writes the rounds done so far as a Markdown table; it runs
// after every round, so a run stopped early keeps its table.
func writeMarkdown(results, cpus, flushes map[string][]float64, ratios, cpuRatios, writeRates, cpCores []float64, alikeRounds []bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| round | default pods/s | telesched pods/s | ratio | default CPU ms/pod | telesched CPU ms/pod | CPU ratio |")
	b.WriteString(" kube-apiserver + etcd cores (1st / 2nd run) | pods flushed at 5 min (default / telesched) |")
	if len(writeRates) > 0 {
		b.WriteString(" telemetry writes/s (1st / 2nd run) |")
	}
	b.WriteString("\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	if len(writeRates) > 0 {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for r := range len(ratios) {
		flushed := count(flushes["default-scheduler"][r]) + " / " + count(flushes["telesched"][r])
		if !alikeRounds[r] {
			flushed += " (not alike: left out of the medians)"
		}
		fmt.Fprintf(&b, "| %d | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f | %s |", r+1, results["default-scheduler"][r], results["telesched"][r], ratios[r], cpus["default-scheduler"][r], cpus["telesched"][r], cpuRatios[r], cpCores[2*r], cpCores[2*r+1], flushed)
		if len(writeRates) > 0 {
			fmt.Fprintf(&b, " %.0f / %.0f |", writeRates[2*r], writeRates[2*r+1])
		}
		b.WriteString("\n")
	}
	k := alikeRounds
	fmt.Fprintf(&b, "| median of the alike rounds | %.1f | %.1f | **%.2f** | %.2f | %.2f | **%.2f** | %.2f | |", median(results["default-scheduler"], k), median(results["telesched"], k), median(ratios, k),
		median(cpus["default-scheduler"], k), median(cpus["telesched"], k), median(cpuRatios, k), median(cpCores, k))
	if len(writeRates) > 0 {
		fmt.Fprintf(&b, " %.0f |", median(writeRates, k))
	}
	b.WriteString("\n")
	if err := os.WriteFile(markdown, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return nil
}

// controlPlaneCPU is kube-apiserver's and etcd's CPU seconds so far; -1 if
// either cannot be read.
func controlPlaneCPU(apiserverPID, etcdPID int) float64 {
	a, e, err := proc.ControlPlaneCPU(apiserverPID, etcdPID)
	if err != nil {
		return -1
	}
	return a + e
}

// schedulerMetrics scrapes the scheduler's /metrics.
func schedulerMetrics() (map[string]*dto.MetricFamily, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the scheduler's self-signed serving cert
	resp, err := client.Get("https://" + pprofAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// cpuProfile samples the scheduler's CPU for cpuProfileFor through its
// /debug/pprof endpoint and writes the profile to path.
func cpuProfile(path string) error {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the scheduler's self-signed serving cert
	url := fmt.Sprintf("https://%s/debug/pprof/profile?seconds=%d", pprofAddr, int(cpuProfileFor.Seconds()))
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	fmt.Printf("cpu profile written to %s\n", path)
	return f.Close()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func benchPod(name, scheduler string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: scheduler,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			}}},
		},
	}
}

var ntResource = telemetryv1alpha1.SchemeGroupVersion.WithResource("nodetelemetries")

func createNode(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, name string, i int) error {
	node, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	node.Spec.Taints = nil // the admission's not-ready taint; no node controller runs here
	if node, err = kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return err
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status = corev1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady",
	}}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if _, err := dyn.Resource(ntResource).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "NodeTelemetry", "metadata": map[string]any{"name": name},
	}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	return sample(ctx, dyn, name, i)
}

// sample applies node i's telemetry, sampled now, as its agent would.
func sample(ctx context.Context, dyn dynamic.Interface, name string, i int) error {
	st := telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime: metav1.Now(), IntervalSeconds: 5, AgentVersion: "bench",
		CPU:    &telemetryv1alpha1.CPUStatus{LogicalCores: 64, OnlineCores: 64, UtilizationPercent: int32(10 + i%60)},
		Memory: &telemetryv1alpha1.MemoryStatus{TotalBytes: 256 << 30, AvailableBytes: 128 << 30, UtilizationPercent: 50},
		Thermal: &telemetryv1alpha1.ThermalStatus{HottestSensor: "coretemp.0/Package id 0", HottestMilliCelsius: int64(50_000 + 100*(i%300)),
			LimitMilliCelsius: ptr.To[int64](100_000), LimitType: telemetryv1alpha1.ThermalLimitCritical, HeadroomMilliCelsius: ptr.To(int64(50_000 - 100*(i%300)))},
		Power: &telemetryv1alpha1.PowerStatus{Watts: int32(200 + i%200), Sources: []telemetryv1alpha1.PowerSource{telemetryv1alpha1.PowerSourceRAPL}, EnergyJoules: 1,
			Model: benchPowerModel(i)},
	}
	data, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	_, err = dyn.Resource(ntResource).ApplyStatus(ctx, name, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "NodeTelemetry", "metadata": map[string]any{"name": name}, "status": data,
	}}, metav1.ApplyOptions{FieldManager: telemetry.AgentFieldManager, Force: true})
	return err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
