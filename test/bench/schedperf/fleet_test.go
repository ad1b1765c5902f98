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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/scheduler"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/registry"
	"github.com/telesched/telesched/scheduler/telemetry"
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

// sampleInterval is the samples' IntervalSeconds, the agent's default.
const sampleInterval = 5 * time.Second

// fleets hold the fleet of the workload that runs (workloads run one at a
// time).
type fleets struct {
	writesPerNodeMinute float64
	kubelet             bool

	mu sync.Mutex
	// workload is the workload about to run (the pre-run hook's), cur
	// its fleet once the prepare hook started it.
	workload *perf.Workload
	cur      *fleet
	// shared is what the telesched plugins of the workload that runs
	// share; nil with the default profile.
	shared *registry.Shared
}

func (fs *fleets) setShared(s *registry.Shared) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.shared = s
}

func newFleets(writesPerNodeMinute float64, kubelet bool) *fleets {
	return &fleets{writesPerNodeMinute: writesPerNodeMinute, kubelet: kubelet}
}

// fleet is one workload's nodes as their agents see them.
type fleet struct {
	dyn    dynamic.Interface
	ds     *appsv1.DaemonSet
	shared *registry.Shared

	// jobs are the nodes to set up (a name) or tear down (a name with
	// gone set), from the Node informer.
	jobs chan nodeJob

	mu    sync.Mutex
	nodes []nodeInfo
	// ready are the nodes set up (NodeTelemetry and a Ready agent pod);
	// seq numbers the nodes seen, for their samples' levels.
	ready map[string]bool
	seq   int
	// kubelet stand-in (kubelet_test.go): the nodes' pending sample
	// writes, earliest first.
	due map[string][]time.Time

	start                                    time.Time // the prepare hook's
	setups, deletes, lateSetups, writes      atomic.Int64
	errors, podStarts, startWrites, hookSeen atomic.Int64
	lastErr                                  atomic.Value
	// ctx ends with the workload's fleet (its Cleanup).
	ctx context.Context
}

type nodeJob struct {
	node *corev1.Node
	gone bool
}

type nodeInfo struct {
	name  string
	idx   int // seeds the node's sample levels
	cores int32
	bytes int64
	gpus  int
	busy  bool
}

// preRun is the workloads' pre-run hook: it notes the workload, whose
// parameters the prepare hook reads.
func (fs *fleets) preRun(_ ktesting.TContext, w *perf.Workload) (func(), error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.workload = w
	return nil, nil
}

// prepare is the workloads' prepare hook, run once the workload's API
// server and scheduler are up: the CRDs, then the fleet, which gives every
// node its NodeTelemetry, with a first sample, and a Ready agent pod when
// the node appears (a Node informer), as the shipped DaemonSet's agent
// does in a cluster: the nodes of createNodes ops and those that churn
// ops and others create alike. A deleted node loses both, as the garbage
// collector and the pod GC would see to. The writer then writes samples
// until the workload ends; with -schedperf-kubelet, the kubelet stand-in
// runs the bound pods.
func (fs *fleets) prepare(tCtx ktesting.TContext) error {
	if err := installCRDs(tCtx); err != nil {
		return err
	}
	fs.mu.Lock()
	rate := fs.writesPerNodeMinute
	if fs.workload != nil {
		if v, err := fs.workload.GetParam(writesParam); err == nil {
			rate = float64(v)
		}
	}
	shared := fs.shared
	fs.mu.Unlock()
	dyn, err := dynamic.NewForConfig(tCtx.RESTConfig())
	if err != nil {
		return err
	}
	f := &fleet{dyn: dyn, shared: shared, jobs: make(chan nodeJob, 1024), ready: map[string]bool{}, due: map[string][]time.Time{}, start: time.Now()}
	if err := f.createDaemonSet(tCtx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(tCtx)
	f.ctx = ctx
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { f.setUp(ctx, tCtx) })
	}
	factory := informers.NewSharedInformerFactory(tCtx.Client(), 0)
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				f.enqueue(ctx, nodeJob{node: n})
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				f.enqueue(ctx, nodeJob{node: n, gone: true})
			}
		},
	}); err != nil {
		cancel()
		return err
	}
	if fs.kubelet {
		if err := f.startKubelet(ctx, tCtx, factory, &wg); err != nil {
			cancel()
			return err
		}
	}
	factory.Start(ctx.Done())
	if rate > 0 {
		wg.Go(func() { f.write(ctx, rate) })
	}
	fs.mu.Lock()
	fs.cur = f
	fs.mu.Unlock()
	tCtx.Cleanup(func() {
		cancel()
		factory.Shutdown()
		wg.Wait()
		f.mu.Lock()
		nodes := len(f.nodes)
		f.mu.Unlock()
		held := ""
		if shared != nil {
			held = fmt.Sprintf("; the plugins' cache holds %d nodes' telemetry, %d with a Ready agent", shared.Cache.Len(), shared.Cache.ReadyAgents())
		}
		// On stderr, which scheduler_perf leaves alone, for the make
		// target's log.
		fmt.Fprintf(os.Stderr, "schedperf: %s: %v from the prepare hook to the end; %d nodes at the end, %d set up (%d after the last createNodes op), %d deleted%s; %d NodeTelemetry writes after the first samples, %d failed %v; kubelet stand-in: %d pods started, %d sample writes\n",
			tCtx.Name(), time.Since(f.start).Round(time.Second), nodes, f.setups.Load(), f.lateSetups.Load(), f.deletes.Load(), held,
			f.writes.Load(), f.errors.Load(), f.lastErr.Load(), f.podStarts.Load(), f.startWrites.Load())
		fs.mu.Lock()
		fs.cur, fs.workload = nil, nil
		fs.mu.Unlock()
	})
	return nil
}

func (f *fleet) enqueue(ctx context.Context, j nodeJob) {
	select {
	case f.jobs <- j:
	case <-ctx.Done():
	}
}

// setUp sets up and tears down the informer's nodes until ctx ends.
func (f *fleet) setUp(ctx context.Context, tCtx ktesting.TContext) {
	for {
		var j nodeJob
		select {
		case <-ctx.Done():
			return
		case j = <-f.jobs:
		}
		var err error
		if j.gone {
			err = f.deleteNode(ctx, tCtx, j.node.Name)
		} else {
			err = f.addNode(ctx, tCtx, j.node)
		}
		if err != nil && ctx.Err() == nil {
			f.errors.Add(1)
			f.lastErr.Store(err.Error())
		}
	}
}

func (f *fleet) addNode(ctx context.Context, tCtx ktesting.TContext, n *corev1.Node) error {
	f.mu.Lock()
	info := nodeInfo{name: n.Name, idx: f.seq, cores: int32(n.Status.Capacity.Cpu().Value()), bytes: n.Status.Capacity.Memory().Value(), busy: n.Labels[busyLabel] == "busy"}
	f.seq++
	f.mu.Unlock()
	if q, ok := n.Status.Capacity[gpuResource]; ok {
		info.gpus = int(q.Value())
	}
	if err := f.createNode(ctx, tCtx, n, info); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = append(f.nodes, info)
	f.ready[n.Name] = true
	f.setups.Add(1)
	if f.hookSeen.Load() > 0 {
		f.lateSetups.Add(1)
	}
	return nil
}

// deleteNode drops a deleted node from the writer and deletes its
// NodeTelemetry and agent pod.
func (f *fleet) deleteNode(ctx context.Context, tCtx ktesting.TContext, name string) error {
	f.mu.Lock()
	for i := range f.nodes {
		if f.nodes[i].name == name {
			f.nodes = append(f.nodes[:i], f.nodes[i+1:]...)
			break
		}
	}
	delete(f.ready, name)
	delete(f.due, name)
	f.mu.Unlock()
	f.deletes.Add(1)
	if err := f.dyn.Resource(telemetry.Resource).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NodeTelemetry %s: %w", name, err)
	}
	if err := tCtx.Client().CoreV1().Pods(agentNamespace).Delete(ctx, fixtures.AgentPod(name, f.ds).Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the agent pod of %s: %w", name, err)
	}
	return nil
}

// nodesCreated is the workloads' node hook (perf.WithNodeUpdateFn), called
// after each createNodes op with every node: it waits until the fleet set
// up every one and, with the telesched profile, until the plugins' cache
// holds every node's telemetry with its agent Ready, before pods are
// measured.
func (fs *fleets) nodesCreated(tCtx ktesting.TContext, s *scheduler.Scheduler, _ *perf.Workload, nodes *corev1.NodeList) error {
	fs.mu.Lock()
	f := fs.cur
	fs.mu.Unlock()
	if f == nil {
		return fmt.Errorf("no fleet: the prepare hook did not run")
	}
	start := time.Now()
	missing := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for i := range nodes.Items {
			if !f.ready[nodes.Items[i].Name] {
				n++
			}
		}
		return n
	}
	if err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return missing() == 0, nil
	}); err != nil {
		return fmt.Errorf("%d of %d nodes without NodeTelemetry and a Ready agent pod (last error: %v): %w", missing(), len(nodes.Items), f.lastErr.Load(), err)
	}
	if shared := f.shared; shared != nil {
		want := len(nodes.Items)
		if err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return shared.Cache.Len() >= want && shared.Cache.ReadyAgents() >= want, nil
		}); err != nil {
			return fmt.Errorf("the telesched plugins' cache holds %d of %d nodes' telemetry, %d with a Ready agent: %w", shared.Cache.Len(), want, shared.Cache.ReadyAgents(), err)
		}
	}
	f.hookSeen.Store(f.setups.Load())
	f.lateSetups.Store(0)
	tCtx.Logf("schedperf: NodeTelemetry and a Ready agent pod for all %d nodes, %v after the createNodes op", len(nodes.Items), time.Since(start).Round(time.Millisecond))
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

// createNode creates node n's NodeTelemetry, owned by it, with its first
// sample, and its Ready agent pod.
func (f *fleet) createNode(ctx context.Context, tCtx ktesting.TContext, node *corev1.Node, n nodeInfo) error {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(telemetryv1alpha1.SchemeGroupVersion.String())
	obj.SetKind("NodeTelemetry")
	obj.SetName(n.name)
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}})
	if _, err := f.dyn.Resource(telemetry.Resource).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating NodeTelemetry %s: %w", n.name, err)
	}
	if err := f.apply(ctx, n, 0); err != nil {
		return err
	}
	pods := tCtx.Client().CoreV1().Pods(agentNamespace)
	p, err := pods.Create(ctx, fixtures.AgentPod(n.name, f.ds), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the agent pod of %s: %w", n.name, err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
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
				n := f.nodes[k%len(f.nodes)]
				round := k / len(f.nodes)
				f.mu.Unlock()
				if err := f.apply(ctx, n, round+1); err != nil {
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
	// Writes fall due at perNodePerMinute for each node there is now:
	// the count grows while createNodes runs (and churn ops change it),
	// so the writer owes writes by the tick rather than sleeping one
	// interval worked out for the nodes it saw last (two minutes for
	// the first node at 0.5 a minute, longer than most workloads).
	const tick = 50 * time.Millisecond
	last, owed := time.Now(), 0.0
	for k := 0; ; {
		select {
		case <-ctx.Done():
			return
		case <-time.After(tick):
		}
		now := time.Now()
		f.mu.Lock()
		nodes := len(f.nodes)
		f.mu.Unlock()
		owed += perNodePerMinute / 60 * float64(nodes) * now.Sub(last).Seconds()
		last = now
		for ; owed >= 1; owed-- {
			select {
			case jobs <- k:
				k++
			case <-ctx.Done():
				return
			}
		}
	}
}

// apply writes node n's round-th sample as its agent would (server-side apply
// of the status by the agent's field manager): CPU 10-40 % (88-92 % on a
// busy node) and memory
// 30-50 %, under LoadAware's 80 and 90 % thresholds; the hottest sensor
// 45-65 °C of a 100 °C critical limit, far from EnergyAware's margin; a
// fitted power curve of 100-150 W idle to 300-400 W at full load and a
// thermal model; GPUs cool and idle. Each sample moves by a little
// jitter, so each write is a change.
func (f *fleet) apply(ctx context.Context, n nodeInfo, round int) error {
	i := n.idx
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
		SampleTime: metav1.Now(), IntervalSeconds: int32(sampleInterval / time.Second), AgentVersion: "schedperf",
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
