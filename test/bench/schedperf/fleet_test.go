//go:build schedperf

// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package schedperf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/kubernetes/pkg/scheduler"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/registry"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/bench/internal/parallel"
	"github.com/telesched/telesched/test/fixtures"
)

// gpuResource is the GPUs' extended resource: a node that has it gets that
// many GPUs in its NodeTelemetry.
const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// agentNamespace and agentDaemonSetName are where the scheduler looks for
// the agent's pods by default (--telemetry-agent-namespace,
// --telemetry-agent-daemonsets): each node gets a Ready agent pod, so its
// NodeTelemetry counts as fresh for --telemetry-max-age-ready-agent (6 m)
// after each write, as in a cluster running the shipped DaemonSet.
const (
	agentNamespace     = telemetry.DefaultAgentNamespace
	agentDaemonSetName = "telesched-agent"
)

// busyLabel on a node (value busy) has its telemetry show CPU 88-92 %,
// over LoadAware's 80 % threshold.
const busyLabel = "schedperf.telesched.io/load"

// writesParam is a workload's parameter that sets its NodeTelemetry writes
// per node per minute, in place of -schedperf-writes-per-node-minute.
const writesParam = "telemetryWritesPerNodeMinute"

// workers bound the concurrent API calls of the fleet's setup and writes.
const workers = 16

// fleets hold each workload's fleet, by the workload's scheduler.
type fleets struct {
	writesPerNodeMinute float64

	mu sync.Mutex
	m  map[*scheduler.Scheduler]*fleet
	// shared is what the telesched plugins of the workload that runs
	// share; nil with the default profile.
	shared *registry.Shared
}

func (fs *fleets) setShared(s *registry.Shared) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.shared = s
}

func newFleets(writesPerNodeMinute float64) *fleets {
	return &fleets{writesPerNodeMinute: writesPerNodeMinute, m: map[*scheduler.Scheduler]*fleet{}}
}

// fleet is one workload's nodes as their agents see them.
type fleet struct {
	dyn dynamic.Interface
	ds  *appsv1.DaemonSet

	mu    sync.Mutex
	nodes []nodeInfo
	known map[string]bool

	start          time.Time // the first nodes' hook
	writes, errors atomic.Int64
	lastErr        atomic.Value
}

type nodeInfo struct {
	name  string
	cores int32
	bytes int64
	gpus  int
	busy  bool
}

// nodesCreated is the workloads' node hook (perf.WithNodeUpdateFn), called
// after each createNodes op with every node: each new node gets its
// NodeTelemetry, with a first sample, and a Ready agent pod. On the
// first call it starts the writer, which runs until the workload ends.
func (fs *fleets) nodesCreated(tCtx ktesting.TContext, s *scheduler.Scheduler, w *perf.Workload, nodes *corev1.NodeList) error {
	rate := fs.writesPerNodeMinute
	if v, err := w.GetParam(writesParam); err == nil {
		rate = float64(v)
	}
	fs.mu.Lock()
	shared := fs.shared
	f, ok := fs.m[s]
	if !ok {
		dyn, err := dynamic.NewForConfig(tCtx.RESTConfig())
		if err != nil {
			fs.mu.Unlock()
			return err
		}
		f = &fleet{dyn: dyn, known: map[string]bool{}}
		fs.m[s] = f
	}
	fs.mu.Unlock()
	if !ok {
		if err := f.createDaemonSet(tCtx); err != nil {
			return err
		}
	}
	var added []nodeInfo
	f.mu.Lock()
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if f.known[n.Name] {
			continue
		}
		f.known[n.Name] = true
		info := nodeInfo{name: n.Name, cores: int32(n.Status.Capacity.Cpu().Value()), bytes: n.Status.Capacity.Memory().Value(), busy: n.Labels[busyLabel] == "busy"}
		if q, ok := n.Status.Capacity[gpuResource]; ok {
			info.gpus = int(q.Value())
		}
		added = append(added, info)
	}
	first := len(f.nodes)
	f.nodes = append(f.nodes, added...)
	f.mu.Unlock()
	start := time.Now()
	if err := parallel.Run(len(added), workers, func(i int) error { return f.createNode(tCtx, first+i, added[i]) }); err != nil {
		return err
	}
	// The telesched plugins must see every node's telemetry, and every
	// node's agent Ready, before pods are measured.
	if shared != nil {
		f.mu.Lock()
		want := len(f.nodes)
		f.mu.Unlock()
		if err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return shared.Cache.Len() >= want && shared.Cache.ReadyAgents() >= want, nil
		}); err != nil {
			return fmt.Errorf("the telesched plugins' cache holds %d of %d nodes' telemetry, %d with a Ready agent: %w", shared.Cache.Len(), want, shared.Cache.ReadyAgents(), err)
		}
	}
	tCtx.Logf("schedperf: NodeTelemetry and a Ready agent pod for %d nodes in %v", len(added), time.Since(start).Round(time.Millisecond))
	if !ok {
		f.start = start
		ctx, cancel := context.WithCancel(tCtx)
		var wg sync.WaitGroup
		if rate > 0 {
			wg.Go(func() { f.write(ctx, rate) })
		}
		tCtx.Cleanup(func() {
			cancel()
			wg.Wait()
			f.mu.Lock()
			nodes := len(f.nodes)
			f.mu.Unlock()
			// On stderr, which scheduler_perf leaves alone, for the
			// make target's log: how long the workload took from its
			// first nodes.
			fmt.Fprintf(os.Stderr, "schedperf: %s: %v from the first nodes to the end; %d nodes; %d NodeTelemetry writes after the first samples, %d failed %v\n",
				tCtx.Name(), time.Since(f.start).Round(time.Second), nodes, f.writes.Load(), f.errors.Load(), f.lastErr.Load())
			fs.mu.Lock()
			delete(fs.m, s)
			fs.mu.Unlock()
		})
	}
	return nil
}

// createDaemonSet creates the agent's namespace and DaemonSet, whose pods
// the scheduler's cache trusts.
func (f *fleet) createDaemonSet(tCtx ktesting.TContext) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}}
	if _, err := tCtx.Client().CoreV1().Namespaces().Create(tCtx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", agentNamespace, err)
	}
	ds, err := tCtx.Client().AppsV1().DaemonSets(agentNamespace).Create(tCtx, fixtures.AgentDaemonSet(agentNamespace, agentDaemonSetName), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the agent's DaemonSet: %w", err)
	}
	f.ds = ds
	return nil
}

// createNode creates node i's NodeTelemetry, owned by it, with its first
// sample, and its Ready agent pod.
func (f *fleet) createNode(tCtx ktesting.TContext, i int, n nodeInfo) error {
	node, err := tCtx.Client().CoreV1().Nodes().Get(tCtx, n.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(telemetryv1alpha1.SchemeGroupVersion.String())
	obj.SetKind("NodeTelemetry")
	obj.SetName(n.name)
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}})
	if _, err := f.dyn.Resource(telemetry.Resource).Create(tCtx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating NodeTelemetry %s: %w", n.name, err)
	}
	if err := f.apply(tCtx, i, n, 0); err != nil {
		return err
	}
	pods := tCtx.Client().CoreV1().Pods(agentNamespace)
	p, err := pods.Create(tCtx, fixtures.AgentPod(n.name, f.ds), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the agent pod of %s: %w", n.name, err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := pods.UpdateStatus(tCtx, p, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("the agent pod of %s Ready: %w", n.name, err)
	}
	return nil
}

// write applies samples at perNodePerMinute per node, spread evenly over
// time and over the nodes in turn, until ctx ends.
func (f *fleet) write(ctx context.Context, perNodePerMinute float64) {
	jobs := make(chan int, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range jobs {
				f.mu.Lock()
				if len(f.nodes) == 0 {
					f.mu.Unlock()
					continue
				}
				i := k % len(f.nodes)
				n := f.nodes[i]
				round := k / len(f.nodes)
				f.mu.Unlock()
				if err := f.apply(ctx, i, n, round+1); err != nil {
					if ctx.Err() == nil {
						f.errors.Add(1)
						f.lastErr.Store(err.Error())
					}
					continue
				}
				f.writes.Add(1)
			}
		})
	}
	defer func() { close(jobs); wg.Wait() }()
	next := time.Now()
	for k := 0; ; k++ {
		f.mu.Lock()
		nodes := max(1, len(f.nodes))
		f.mu.Unlock()
		next = next.Add(time.Duration(float64(time.Minute) / (perNodePerMinute * float64(nodes))))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		select {
		case jobs <- k:
		case <-ctx.Done():
			return
		}
	}
}

// apply writes node i's n-th sample as its agent would (server-side apply
// of the status by the agent's field manager): CPU 10-40 % (88-92 % on a
// busy node) and memory
// 30-50 %, under LoadAware's 80 and 90 % thresholds; the hottest sensor
// 45-65 °C of a 100 °C critical limit, far from EnergyAware's margin; a
// fitted power curve of 100-150 W idle to 300-400 W at full load and a
// thermal model; GPUs cool and idle. Each sample moves by a little
// jitter, so each write is a change.
func (f *fleet) apply(ctx context.Context, i int, n nodeInfo, round int) error {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(round)))
	jitter := func(spread int) int { return rng.IntN(2*spread+1) - spread }
	cpu := int32(10 + i%31 + jitter(2))
	if n.busy {
		cpu = int32(90 + jitter(2))
	}
	cpu = max(0, cpu)
	hottest := int64(45_000 + 100*(i%200) + 100*jitter(5))
	idle, full := 100+int32(i%50), 300+int32(i%100)
	curve, unc := make([]int32, 11), make([]int32, 11)
	for k := range curve {
		curve[k], unc[k] = idle+(full-idle)*int32(k)/10, 5
	}
	sensor := "coretemp.0/Package id 0"
	st := telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime: metav1.Now(), IntervalSeconds: 5, AgentVersion: "schedperf",
		CPU:    &telemetryv1alpha1.CPUStatus{LogicalCores: n.cores, OnlineCores: n.cores, UtilizationPercent: cpu},
		Memory: &telemetryv1alpha1.MemoryStatus{TotalBytes: n.bytes, AvailableBytes: n.bytes / 2, UtilizationPercent: int32(40 + jitter(10))},
		Thermal: &telemetryv1alpha1.ThermalStatus{HottestSensor: sensor, HottestMilliCelsius: hottest,
			LimitMilliCelsius: ptr.To[int64](100_000), LimitType: telemetryv1alpha1.ThermalLimitCritical,
			HeadroomMilliCelsius: ptr.To(100_000 - hottest), HeadroomSensor: sensor,
			Model: &telemetryv1alpha1.ThermalModel{Sensor: sensor, LimitMilliCelsius: 100_000, AmbientMilliCelsius: 30_000,
				MilliCelsiusPerWatt: 80, TimeConstantSeconds: 120, Samples: 500}},
		Power: &telemetryv1alpha1.PowerStatus{Watts: idle + (full-idle)*cpu/100 + int32(jitter(5)), Sources: []telemetryv1alpha1.PowerSource{telemetryv1alpha1.PowerSourceRAPL}, EnergyJoules: 1,
			Model: &telemetryv1alpha1.PowerModel{Ready: true, Basis: telemetryv1alpha1.PowerModelFitted, Samples: 100, UtilizationSpreadPercent: 60,
				IdleWatts: ptr.To(idle), FullLoadWatts: ptr.To(full), CurveWatts: curve, CurveUncertaintyWatts: unc}},
	}
	if n.gpus > 0 {
		st.Sources = []telemetryv1alpha1.SourceStatus{{Name: telemetryv1alpha1.SourceGPU, State: telemetryv1alpha1.SourceAvailable}}
		for g := range n.gpus {
			st.GPUs = append(st.GPUs, telemetryv1alpha1.GPUStatus{
				Index: int32(g), UUID: fmt.Sprintf("GPU-%s-%d", n.name, g), Model: "NVIDIA H100 80GB HBM3", NUMANode: ptr.To(int32(0)),
				MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 1 << 30, Health: telemetryv1alpha1.GPUHealth{Healthy: true},
				TemperatureMilliCelsius: ptr.To(int64(40_000 + 1000*jitter(3))), SlowdownMilliCelsius: ptr.To[int64](90_000),
			})
		}
	}
	data, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	_, err = f.dyn.Resource(telemetry.Resource).ApplyStatus(ctx, n.name, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "NodeTelemetry", "metadata": map[string]any{"name": n.name}, "status": data,
	}}, metav1.ApplyOptions{FieldManager: telemetry.AgentFieldManager, Force: true})
	return err
}
