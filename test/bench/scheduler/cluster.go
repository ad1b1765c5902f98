// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/powerbudget"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/bench/internal/parallel"
	"github.com/telesched/telesched/test/fixtures"
)

// The cluster mode's fleet, by node index i:
//
//	i%10 == 0   GPU node: 8 GPUs (nvidia.com/gpu allocatable), CPU 20-49%
//	i%10 == 1   loaded: CPU 88-92%, over LoadAware's 80% threshold
//	i%50 == 2   hot: 97 °C of a 100 °C limit, within EnergyAware's 5 °C margin
//	i%100 == 3  flapping: CPU 75% and 85% by turns, crossing the threshold
//	otherwise   CPU 10-69%
//
// Loaded and hot nodes are labelled poolLabel=busy: the telesched profile's
// backlog pods select them, so they stay pending, rejected by LoadAware and
// EnergyAware, and the plugins judge them on every telemetry update (pick).
const (
	poolLabel = "bench.telesched.io/pool"
	gpuLabel  = "bench.telesched.io/gpu"
)

type nodeKind int

const (
	kindNormal nodeKind = iota
	kindGPU
	kindLoaded
	kindHot
	kindFlapping
)

func kindOf(i int) nodeKind {
	switch {
	case i%10 == 0:
		return kindGPU
	case i%10 == 1:
		return kindLoaded
	case i%50 == 2:
		return kindHot
	case i%100 == 3:
		return kindFlapping
	}
	return kindNormal
}

// composition counts the fleet's kinds.
func composition(nodes int) map[nodeKind]int {
	c := map[nodeKind]int{}
	for i := range nodes {
		c[kindOf(i)]++
	}
	return c
}

func createClusterNode(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, i int) error {
	name := nodeName(i)
	kind := kindOf(i)
	labels := map[string]string{"kubernetes.io/hostname": name, poolLabel: "normal"}
	if rackSize > 0 {
		labels[rackLabel] = rackName(i)
	}
	if kind == kindLoaded || kind == kindHot {
		labels[poolLabel] = "busy"
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")}
	if kind == kindGPU {
		labels[gpuLabel] = "true"
		res["nvidia.com/gpu"] = resource.MustParse("8")
	}
	node, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	node.Spec.Taints = nil // the admission's not-ready taint; no node controller runs here
	if node, err = kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return err
	}
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
	if agentPods {
		if err := createAgentPod(ctx, kube, name); err != nil {
			return err
		}
	}
	return clusterSample(ctx, dyn, i, 0)
}

// agentNamespace holds the agent pods (-agent-pods).
const agentNamespace = "telesched-bench-agents"

// agentDaemonSet is the agent's DaemonSet in agentNamespace, created
// (with its UID) before the nodes; the scheduler runs with
// --telemetry-agent-namespace=agentNamespace.
var agentDaemonSet *appsv1.DaemonSet

// createAgentPod creates the node's agent pod, bound to it and Ready, as
// the DaemonSet's pod and its kubelet would leave it (fixtures.AgentPod).
func createAgentPod(ctx context.Context, kube kubernetes.Interface, node string) error {
	p, err := kube.CoreV1().Pods(agentNamespace).Create(ctx, fixtures.AgentPod(node, agentDaemonSet), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	_, err = kube.CoreV1().Pods(agentNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// rackSize nodes share a rack (-rack-size), each rack a PowerBudget of
// rackWatts a node: nodes draw 200-400 W, so every rack keeps more than
// half its budget free and every node passes the filter.
var rackSize int

const (
	rackLabel = "bench.telesched.io/rack"
	rackWatts = 1000
)

func rackName(i int) string { return fmt.Sprintf("rack-%04d", i/rackSize) }

// createBudgets creates a PowerBudget per rack; it returns how many.
func createBudgets(ctx context.Context, dyn dynamic.Interface, nodes int) (int, error) {
	racks := (nodes + rackSize - 1) / rackSize
	for r := range racks {
		name := rackName(r * rackSize)
		if _, err := dyn.Resource(powerbudget.Resource).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "PowerBudget", "metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"nodeSelector": map[string]any{"matchLabels": map[string]any{rackLabel: name}},
				"budgetWatts":  int64(rackSize * rackWatts),
			},
		}}, metav1.CreateOptions{}); err != nil {
			return r, err
		}
	}
	return racks, nil
}

// clusterSample applies node i's n-th sample, taken now, as its agent
// would: the node's kind's load with a little jitter.
func clusterSample(ctx context.Context, dyn dynamic.Interface, i, n int) error {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(n)))
	jitter := func(spread int) int { return rng.IntN(2*spread+1) - spread }
	cpu := 10 + i%60 + jitter(2)
	hottest := int64(50_000 + 100*(i%300) + 100*jitter(5))
	switch kindOf(i) {
	case kindGPU:
		cpu = 20 + i%30 + jitter(2)
	case kindLoaded:
		cpu = 90 + jitter(2)
	case kindHot:
		hottest = 97_000 + int64(100*jitter(3))
	case kindFlapping:
		cpu = 75 + 10*(n%2)
	}
	cpu = max(0, min(100, cpu))
	st := telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime: metav1.Now(), IntervalSeconds: 1, AgentVersion: "bench",
		CPU:    &telemetryv1alpha1.CPUStatus{LogicalCores: 64, OnlineCores: 64, UtilizationPercent: int32(cpu)},
		Memory: &telemetryv1alpha1.MemoryStatus{TotalBytes: 256 << 30, AvailableBytes: 128 << 30, UtilizationPercent: int32(50 + jitter(2))},
		Thermal: &telemetryv1alpha1.ThermalStatus{HottestSensor: "coretemp.0/Package id 0", HottestMilliCelsius: hottest,
			LimitMilliCelsius: ptr.To[int64](100_000), LimitType: telemetryv1alpha1.ThermalLimitCritical,
			HeadroomMilliCelsius: ptr.To(100_000 - hottest), HeadroomSensor: "coretemp.0/Package id 0", Alarms: 0},
		Power: &telemetryv1alpha1.PowerStatus{Watts: int32(200 + i%200 + jitter(10)), Sources: []telemetryv1alpha1.PowerSource{telemetryv1alpha1.PowerSourceRAPL}, EnergyJoules: 1,
			Model: benchPowerModel(i)},
	}
	if kindOf(i) == kindGPU {
		st.Sources = []telemetryv1alpha1.SourceStatus{{Name: telemetryv1alpha1.SourceGPU, State: telemetryv1alpha1.SourceAvailable}}
		for g := range 8 {
			st.GPUs = append(st.GPUs, telemetryv1alpha1.GPUStatus{
				Index: int32(g), UUID: fmt.Sprintf("GPU-%05d-%d", i, g), Model: "NVIDIA H100 80GB HBM3", NUMANode: ptr.To(int32(g / 4)),
				MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 1 << 30, Health: telemetryv1alpha1.GPUHealth{Healthy: true},
				TemperatureMilliCelsius: ptr.To(int64(45_000 + 1000*jitter(3))), SlowdownMilliCelsius: ptr.To[int64](90_000),
			})
		}
	}
	data, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	_, err = dyn.Resource(ntResource).ApplyStatus(ctx, nodeName(i), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "NodeTelemetry", "metadata": map[string]any{"name": nodeName(i)}, "status": data,
	}}, metav1.ApplyOptions{FieldManager: telemetry.AgentFieldManager, Force: true})
	return err
}

// writer applies every node's samples at perNodePerMinute, spread evenly
// over time (node i's k-th write is due at i/(nodes*rate) + k/rate
// minutes), as a fleet of agents writing heartbeats and changes would.
type writer struct {
	writes, errors atomic.Int64
	lastErr        atomic.Value
}

func (w *writer) run(ctx context.Context, dyn dynamic.Interface, nodes int, perNodePerMinute float64) {
	gap := time.Duration(float64(time.Minute) / (perNodePerMinute * float64(nodes)))
	work := make(chan [2]int, 1024)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for job := range work {
				if err := clusterSample(ctx, dyn, job[0], job[1]); err != nil {
					if ctx.Err() == nil {
						w.errors.Add(1)
						w.lastErr.Store(err.Error())
					}
					continue
				}
				w.writes.Add(1)
			}
		})
	}
	defer func() { close(work); wg.Wait() }()
	start := time.Now()
	counts := make([]int, nodes)
	for k := 0; ; k++ {
		due := start.Add(time.Duration(k) * gap)
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		i := k % nodes
		counts[i]++
		select {
		case work <- [2]int{i, counts[i]}:
		case <-ctx.Done():
			return
		}
	}
}

// backlog creates n pods for profile that stay pending for the whole run:
// the telesched profile's select the busy nodes (rejected there by
// LoadAware and EnergyAware), the default profile's a pool no node is in.
// It waits until every one has been tried and found unschedulable, or
// placed: on a machine too loaded to keep every node's telemetry fresh, a
// busy node whose samples stop arriving in time is no longer rejected, and
// the count of backlog pods placed says so.
func backlog(ctx context.Context, kube kubernetes.Interface, profile string, round, n int) (ns string, placed int, err error) {
	ns = fmt.Sprintf("backlog-%s-%d", shortName(profile), round)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return ns, placed, err
	}
	pool := "busy"
	if profile != "telesched" {
		pool = "none"
	}
	if err := parallel.Run(n, 16, func(i int) error {
		p := benchPod(fmt.Sprintf("b-%05d", i), profile)
		p.Spec.NodeSelector = map[string]string{poolLabel: pool}
		_, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		return ns, placed, err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return ns, placed, err
		}
		unschedulable := 0
		placed = 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				placed++
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		if unschedulable+placed == n {
			return ns, placed, nil
		}
		if time.Now().After(deadline) {
			return ns, placed, fmt.Errorf("%d of %d backlog pods marked unschedulable (%d placed) after 5 minutes", unschedulable, n, placed)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// pendingIn counts the pods of ns that are still not bound.
func pendingIn(ctx context.Context, kube kubernetes.Interface, ns string) (int, error) {
	list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if p.Spec.NodeName == "" {
			n++
		}
	}
	return n, nil
}

func deleteNamespace(ctx context.Context, kube kubernetes.Interface, ns string) error {
	if err := deletePods(ctx, kube, ns); err != nil {
		return err
	}
	zero := int64(0)
	return kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// deletePods deletes every pod of ns outright. An API server busy with
// 5000 nodes' telemetry may end a collection delete of 1000 pods part way
// (a stream error); what is left is deleted by the next try, up to 5.
func deletePods(ctx context.Context, kube kubernetes.Interface, ns string) error {
	zero := int64(0)
	var err error
	for try := range 5 {
		if err = kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err == nil {
			return nil
		}
		fmt.Printf("  deleting the pods of %s: %v (try %d of 5)\n", ns, err, try+1)
		time.Sleep(time.Duration(try+1) * 5 * time.Second)
	}
	return err
}

func shortName(profile string) string {
	if profile == "default-scheduler" {
		return "default"
	}
	return profile
}

// benchPowerModel is node i's power model as an agent publishes a ready
// one: fitted, idle and full-load watts, and the 11-point curve between
// them (straight), with its uncertainty.
func benchPowerModel(i int) *telemetryv1alpha1.PowerModel {
	idle, full := 100+int32(i%50), 400+int32(i%100)
	curve, unc := make([]int32, 11), make([]int32, 11)
	for k := range curve {
		curve[k], unc[k] = idle+(full-idle)*int32(k)/10, 5
	}
	return &telemetryv1alpha1.PowerModel{Ready: true, Basis: telemetryv1alpha1.PowerModelFitted, Samples: 100, UtilizationSpreadPercent: 60,
		IdleWatts: ptr.To(idle), FullLoadWatts: ptr.To(full), CurveWatts: curve, CurveUncertaintyWatts: unc}
}
