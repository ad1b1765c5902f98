// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command fleetbench runs many real telesched agents in one process, each
// on a simulated host tree (sandbox/hosttree), against one local API server
// at the agent's defaults (sample every 1 s, publish a settled change at
// once or within 5 s) and the shipped DaemonSet's heartbeat (5 m;
// -heartbeat), and measures what the fleet costs
// the control plane: API writes per second, kube-apiserver and etcd CPU,
// the etcd database size, and the informer lag from a NodeTelemetry write
// to its delivery by an informer like the scheduler's cache.
//
//	go run ./test/bench/fleet -agents 500 -duration 10m
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/sandbox/hosttree"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/bench/internal/parallel"
	"github.com/telesched/telesched/test/bench/internal/proc"
)

func main() {
	agents := flag.Int("agents", 500, "agents (and simulated nodes)")
	duration := flag.Duration("duration", 10*time.Minute, "measured time, after every agent has started and written")
	warmup := flag.Duration("warmup", time.Minute, "time after the last agent started before measuring")
	heartbeat := flag.Duration("heartbeat", 5*time.Minute, "the agents' --heartbeat: the shipped DaemonSet's 5m (the binary's default is 30s)")
	changing := flag.Float64("changing", 0.1, "fraction of nodes whose CPU load moves between 20% and 70% every minute; the rest hold steady")
	markdown := flag.String("markdown", "", "if set, write the summary as a Markdown table to this file")
	logFile := flag.String("log", "", "agents' and control plane's log file (default: a file in the work directory)")
	verbosity := flag.String("v", "2", "klog -v of this process (the agents and the informer; the control plane keeps its own): at 2 each agent logs why it wrote, which the summary counts")
	cpuProfile := flag.String("cpuprofile", "", "if set, write a CPU profile of this process (the agents, the host trees and the informer) over the measured time to this file (go tool pprof -top FILE)")
	flag.Parse()
	if *agents < 1 || *duration <= 0 || *changing < 0 || *changing > 1 {
		fmt.Fprintln(os.Stderr, "fleetbench: -agents >= 1, -duration > 0 and -changing in [0, 1]")
		os.Exit(2)
	}
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	if err := klogFlags.Set("v", *verbosity); err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench: -v:", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := run(ctx, *agents, *duration, *warmup, *heartbeat, *changing, *markdown, *logFile, *cpuProfile); err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
}

// The simulated hosts are small (8 CPUs, one package and NUMA node) so that
// the agents' own sampling, which shares this machine, costs as little as
// it can; what the control plane sees of an agent does not depend on the
// host's size.
var hostSpec = hosttree.Spec{CPUs: 8, NUMANodes: 1, Packages: 1, MemoryKiB: 32 << 20, IdleWatts: 60, FullLoadWatts: 200, CritMilliCelsius: 100_000}

func run(ctx context.Context, n int, duration, warmup, heartbeat time.Duration, changing float64, markdown, logPath, cpuProfile string) error {
	base := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm" // the trees are rewritten every second: keep them in memory
	}
	dir, err := os.MkdirTemp(base, "fleetbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if logPath == "" {
		logPath = filepath.Join(os.TempDir(), fmt.Sprintf("fleetbench-%d.log", os.Getpid()))
	}
	logOut, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logOut.Close()
	klog.LogToStderr(false)
	klog.SetOutput(logOut)
	fmt.Printf("logs: %s\n", logPath)

	fmt.Println("starting the local control plane")
	cp, err := controlplane.Start(controlplane.Options{Output: logOut})
	if err != nil {
		return err
	}
	defer cp.Stop()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	cfg := *cp.Config
	cfg.QPS, cfg.Burst = 1000, 1000
	kube := kubernetes.NewForConfigOrDie(&cfg)
	dyn := dynamic.NewForConfigOrDie(&cfg)
	apiserverPID, etcdPID, err := proc.ControlPlane()
	if err != nil {
		return err
	}

	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("fleet-%04d", i)
	}
	start := time.Now()
	if err := parallel.Run(n, 16, func(i int) error { return createNode(ctx, kube, names[i]) }); err != nil {
		return err
	}
	fmt.Printf("%d nodes created in %v\n", n, time.Since(start).Round(time.Millisecond))

	hosts := make([]*hosttree.Host, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		if hosts[i], err = hosttree.New(filepath.Join(dir, names[i]), hostSpec); err != nil {
			return err
		}
		hosts[i].SetUtilization(0.1 + 0.5*rng.Float64())
		hosts[i].SetTemperature(int64(45_000 + rng.IntN(20_000)))
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var background sync.WaitGroup
	defer background.Wait()
	defer stop()
	// A tree advances when its agent reads a rate counter (BeforeRead), as
	// the sandbox's nodes do: its counters are as of the read, as a real
	// host's are, and a host nobody reads costs nothing. (Advanced every
	// 250 ms by one loop over 500 trees instead, the counters lagged the
	// reads by a varying number of steps on this loaded machine, steady
	// hosts read as watts jumping past the 10 % deadband, and those writes
	// overloaded the API server.) A tenth of the nodes change load every
	// minute.
	background.Go(func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		high := false
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				high = !high
				for i := range int(float64(n) * changing) {
					u := 0.2
					if high {
						u = 0.7
					}
					hosts[i*n/max(1, int(float64(n)*changing))].SetUtilization(u)
				}
			}
		}
	})

	rec := newRecorder()
	informer, err := watchTelemetry(runCtx, dyn, rec)
	if err != nil {
		return err
	}
	_ = informer

	fmt.Printf("starting %d agents at their defaults, --heartbeat=%v\n", n, heartbeat)
	var agents sync.WaitGroup
	defer agents.Wait()
	for i := range n {
		o := app.NewOptions()
		o.NodeName, o.HostRoot, o.Kubeconfig = names[i], hosts[i].Dir, kubeconfig
		o.MetricsAddress, o.HealthAddress, o.NVML = "", "", false
		o.Publisher.Heartbeat = heartbeat
		o.WrapTransport = rec.wrap
		h := hosts[i]
		o.BeforeHostRead = func(hostPath string) {
			if err := h.BeforeRead(hostPath); err != nil {
				klog.ErrorS(err, "advancing a host tree", "node", o.NodeName)
			}
		}
		o.Complete()
		if err := o.Validate(); err != nil {
			return fmt.Errorf("agent %s: %w", names[i], err)
		}
		agents.Go(func() {
			logger := klog.NewKlogr().WithValues("node", o.NodeName)
			if err := app.Run(klog.NewContext(runCtx, logger), o, io.Discard); err != nil && runCtx.Err() == nil {
				logger.Error(err, "agent stopped")
			}
		})
		// A DaemonSet's pods start over some seconds, not at once.
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("all agents started; warming up for %v\n", warmup)
	if err := sleep(ctx, warmup); err != nil {
		return err
	}

	etcdURL := cp.EtcdURL()
	before, err := snapshot(ctx, kube, etcdURL, apiserverPID, etcdPID)
	if err != nil {
		return err
	}
	rec.reset()
	klog.Flush()
	logStart, err := logOut.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for time.Since(t0) < duration {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		now, err := snapshot(ctx, kube, etcdURL, apiserverPID, etcdPID)
		if err != nil {
			return err
		}
		s := summarize(before, now, rec, n)
		fmt.Printf("  %v: %.1f writes/s (%.2f per node per minute), kube-apiserver %.2f cores, etcd %.2f cores, lag p50 %v p99 %v\n",
			time.Since(t0).Round(time.Second), s.writesPerSec, s.writesPerNodeMin, s.apiserverCores, s.etcdCores, s.lagP50, s.lagP99)
	}
	after, err := snapshot(ctx, kube, etcdURL, apiserverPID, etcdPID)
	if err != nil {
		return err
	}
	s := summarize(before, after, rec, n)
	stop()
	fmt.Printf("\n%d agents, %v measured:\n", n, after.at.Sub(before.at).Round(time.Second))
	fmt.Printf("  NodeTelemetry writes: %.1f/s (%.2f per node per minute); API server counted %.1f/s\n", s.writesPerSec, s.writesPerNodeMin, s.serverWritesPerSec)
	fmt.Printf("  kube-apiserver: %.2f cores, RSS %.0f MiB; etcd: %.2f cores, RSS %.0f MiB; agents (this process): %.2f cores\n",
		s.apiserverCores, after.apiserverRSS, s.etcdCores, after.etcdRSS, s.selfCores)
	fmt.Printf("  etcd database: %.1f MiB at start, %.1f MiB at end (etcd_mvcc_db_total_size_in_bytes); %d NodeTelemetry objects, %.1f KiB each as written\n",
		before.dbBytes/(1<<20), after.dbBytes/(1<<20), n, s.objectBytes/1024)
	fmt.Printf("  informer lag, write sent -> delivered: p50 %v, p99 %v, max %v over %d writes (%d unmatched)\n", s.lagP50, s.lagP99, s.lagMax, s.lagCount, s.unmatched)
	klog.Flush()
	if reasons, err := writeReasons(logPath, logStart); err != nil {
		fmt.Printf("  why the agents wrote: %v\n", err)
	} else if len(reasons) == 0 {
		fmt.Printf("  why the agents wrote: not logged (run with -v=2)\n")
	} else {
		fmt.Printf("  why the agents wrote (their log, digits as N):\n")
		for _, r := range reasons {
			fmt.Printf("    %7d  %s\n", r.n, r.reason)
		}
	}
	if markdown != "" {
		var b strings.Builder
		fmt.Fprintf(&b, "| agents | measured | writes/s | writes/node/min | kube-apiserver cores | etcd cores | agents' cores | etcd DB start → end | lag p50 | lag p99 | lag max |\n")
		fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		fmt.Fprintf(&b, "| %d | %v | %.1f | %.2f | %.2f | %.2f | %.2f | %.1f → %.1f MiB | %v | %v | %v |\n",
			n, after.at.Sub(before.at).Round(time.Second), s.writesPerSec, s.writesPerNodeMin, s.apiserverCores, s.etcdCores, s.selfCores,
			before.dbBytes/(1<<20), after.dbBytes/(1<<20), s.lagP50, s.lagP99, s.lagMax)
		if err := os.WriteFile(markdown, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// reasonCount is how many writes the agents logged for one reason.
type reasonCount struct {
	reason string
	n      int
}

var (
	publishedRE = regexp.MustCompile(`"published NodeTelemetry" .*?\breason="([^"]*)"`)
	digitsRE    = regexp.MustCompile(`[0-9]+`)
)

// writeReasons counts the agents' "published NodeTelemetry" log lines
// from offset on by reason, the numbers in a reason written as N, most
// frequent first.
func writeReasons(logPath string, offset int64) ([]reasonCount, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m := publishedRE.FindSubmatch(sc.Bytes()); m != nil {
			counts[digitsRE.ReplaceAllString(string(m[1]), "N")]++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]reasonCount, 0, len(counts))
	for r, n := range counts {
		out = append(out, reasonCount{r, n})
	}
	slices.SortFunc(out, func(a, b reasonCount) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.reason, b.reason)
	})
	return out, nil
}

func createNode(ctx context.Context, kube kubernetes.Interface, name string) error {
	node, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status = corev1.NodeStatus{Capacity: res, Allocatable: res}
	_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// recorder times every NodeTelemetry status write the agents send (by
// wrapping their transport) and every update an informer delivers, and
// pairs them by node and resource version.
type recorder struct {
	writes atomic.Int64

	mu        sync.Mutex
	sent      map[string]time.Time // node/rv -> request sent, awaiting delivery
	delivered map[string]time.Time // node/rv -> delivered, awaiting the response
	lags      []time.Duration
	bytes     int64 // request bodies written
	unmatched int
}

func newRecorder() *recorder {
	return &recorder{sent: map[string]time.Time{}, delivered: map[string]time.Time{}}
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes.Store(0)
	r.lags, r.bytes, r.unmatched = nil, 0, 0
}

func (r *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		isWrite := req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/nodetelemetries/") && strings.HasSuffix(req.URL.Path, "/status")
		sentAt := time.Now()
		resp, err := rt.RoundTrip(req)
		if !isWrite || err != nil || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if rerr != nil {
			return resp, nil
		}
		var obj struct {
			Metadata struct {
				Name            string `json:"name"`
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if json.Unmarshal(body, &obj) != nil {
			return resp, nil
		}
		r.writes.Add(1)
		key := obj.Metadata.Name + "/" + obj.Metadata.ResourceVersion
		r.mu.Lock()
		r.bytes += req.ContentLength
		if at, ok := r.delivered[key]; ok {
			delete(r.delivered, key)
			r.lags = append(r.lags, at.Sub(sentAt))
		} else {
			r.sent[key] = sentAt
		}
		r.mu.Unlock()
		return resp, nil
	})
}

func (r *recorder) seen(u *unstructured.Unstructured) {
	at := time.Now()
	key := u.GetName() + "/" + u.GetResourceVersion()
	r.mu.Lock()
	defer r.mu.Unlock()
	if sentAt, ok := r.sent[key]; ok {
		delete(r.sent, key)
		r.lags = append(r.lags, at.Sub(sentAt))
		return
	}
	r.delivered[key] = at
	// An update the agents did not write (the object's creation, a
	// metadata apply) never matches; forget such entries after a while.
	if len(r.delivered) > 100_000 {
		r.unmatched += len(r.delivered)
		clear(r.delivered)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// watchTelemetry runs the scheduler cache's informer on NodeTelemetry
// (telemetry.NewInformer) and tells rec of every delivery.
func watchTelemetry(ctx context.Context, dyn dynamic.Interface, rec *recorder) (toolscache.SharedIndexInformer, error) {
	informer, err := telemetry.NewInformer(dyn)
	if err != nil {
		return nil, err
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seenObj(rec, obj) },
		UpdateFunc: func(_, obj any) { seenObj(rec, obj) },
	}); err != nil {
		return nil, err
	}
	go informer.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil, errors.New("NodeTelemetry informer did not sync")
	}
	return informer, nil
}

func seenObj(rec *recorder, obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		rec.seen(u)
	}
}

// state is what the bench reads of the control plane at one moment.
type state struct {
	at                    time.Time
	apiserverCPU, etcdCPU float64 // seconds
	selfCPU               float64
	apiserverRSS, etcdRSS float64 // MiB
	dbBytes               float64
	serverWrites          float64 // apiserver_request_total for nodetelemetries writes
}

func snapshot(ctx context.Context, kube kubernetes.Interface, etcdURL string, apiserverPID, etcdPID int) (state, error) {
	s := state{at: time.Now()}
	var err error
	if s.apiserverCPU, s.apiserverRSS, err = proc.CPU(apiserverPID); err != nil {
		return s, err
	}
	if s.etcdCPU, s.etcdRSS, err = proc.CPU(etcdPID); err != nil {
		return s, err
	}
	if s.selfCPU, _, err = proc.CPU(os.Getpid()); err != nil {
		return s, err
	}
	data, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return s, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `resource="nodetelemetries"`) &&
			strings.Contains(line, `subresource="status"`) && (strings.Contains(line, `verb="PATCH"`) || strings.Contains(line, `verb="APPLY"`)) &&
			strings.Contains(line, `code="200"`):
			s.serverWrites += lastValue(line)
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	// etcd's own figure for its database file (apiserver_storage_size_bytes
	// is refreshed only now and then).
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, etcdURL+"/metrics", nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("etcd /metrics: %w", err)
	}
	defer resp.Body.Close()
	sc = bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "etcd_mvcc_db_total_size_in_bytes ") {
			s.dbBytes = lastValue(line)
		}
	}
	return s, sc.Err()
}

func lastValue(line string) float64 {
	f := strings.Fields(line)
	v, _ := strconv.ParseFloat(f[len(f)-1], 64)
	return v
}

type summary struct {
	writesPerSec, writesPerNodeMin, serverWritesPerSec float64
	apiserverCores, etcdCores, selfCores               float64
	objectBytes                                        float64
	lagP50, lagP99, lagMax                             time.Duration
	lagCount, unmatched                                int
}

func summarize(before, after state, rec *recorder, nodes int) summary {
	secs := after.at.Sub(before.at).Seconds()
	var s summary
	w := float64(rec.writes.Load())
	s.writesPerSec = w / secs
	s.writesPerNodeMin = s.writesPerSec * 60 / float64(nodes)
	s.serverWritesPerSec = (after.serverWrites - before.serverWrites) / secs
	s.apiserverCores = (after.apiserverCPU - before.apiserverCPU) / secs
	s.etcdCores = (after.etcdCPU - before.etcdCPU) / secs
	s.selfCores = (after.selfCPU - before.selfCPU) / secs
	rec.mu.Lock()
	lags := slices.Clone(rec.lags)
	if w > 0 {
		s.objectBytes = float64(rec.bytes) / w
	}
	s.unmatched = rec.unmatched + len(rec.sent)
	rec.mu.Unlock()
	slices.Sort(lags)
	s.lagCount = len(lags)
	if len(lags) > 0 {
		s.lagP50 = lags[len(lags)/2].Round(100 * time.Microsecond)
		s.lagP99 = lags[len(lags)*99/100].Round(100 * time.Microsecond)
		s.lagMax = lags[len(lags)-1].Round(100 * time.Microsecond)
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
