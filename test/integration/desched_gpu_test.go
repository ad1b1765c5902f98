// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/descheduler/app"
	"github.com/telesched/telesched/test/fixtures"
)

// deschedGPUNode creates a Ready node of group with 2 whole GPUs
// (allocatable nvidia.com/gpu 2) and fresh telemetry: CPU cool (12°C of
// headroom against the margin's 5), GPU i at tempsC[i] of slowdown 90°C,
// allocated as allocated[i] says, each drawing 400 W.
func deschedGPUNode(ctx context.Context, t *testing.T, c clients, name, group string, tempsC [2]int64, allocated [2]bool) {
	t.Helper()
	node := readyNode(ctx, t, c, name, map[string]string{"kubernetes.io/hostname": name, "telesched-desched": group})
	node.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("2")
	node.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("2")
	node, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := fixtures.FullStatus(time.Now(), 1, 2)
	st.Thermal.Throttling = false
	st.CPU.ThermalThrottle.Throttling = false
	st.Conditions = nil
	for i := range st.GPUs {
		g := &st.GPUs[i]
		g.Health = telemetryv1alpha1.GPUHealth{Healthy: true}
		g.ThrottleReasons = nil
		g.MIGEnabled, g.MIG = ptr.To(false), nil
		g.Allocated = ptr.To(allocated[i])
		g.TemperatureMilliCelsius, g.SlowdownMilliCelsius = ptr.To(tempsC[i]*1000), ptr.To[int64](90_000)
		g.PowerWatts = ptr.To[int32](400)
	}
	if _, err := c.applyStatusCreating(ctx, node, st); err != nil {
		t.Fatal(err)
	}
}

// withGPU asks for one nvidia.com/gpu.
func withGPU(p *corev1.Pod) {
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
}

// TestDeschedulerMovesAPodOffItsHotGPU: a GPU at or past its slowdown
// temperature less EnergyAware's gpuSlowdownMarginCelsius (3°C) loses the
// pod known to hold it, to a node with a cool free GPU, while its node's
// CPU is cool and its CPU pod stays; where the agent's allocations cannot
// tell which of two GPU pods holds the hot GPU, neither is evicted.
func TestDeschedulerMovesAPodOffItsHotGPU(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedGPUNode(ctx, t, c, "dsgpu-hot", "dsgpu", [2]int64{88, 50}, [2]bool{true, false})
	deschedGPUNode(ctx, t, c, "dsgpu-cool", "dsgpu", [2]int64{50, 50}, [2]bool{false, false})
	deschedPodWith(ctx, t, c, "dsgpu-train", "dsgpu-hot", "dsgpu", withGPU)
	deschedPod(ctx, t, c, "dsgpu-web", "dsgpu-hot", "dsgpu")

	deschedGPUNode(ctx, t, c, "dsgpuamb-hot", "dsgpuamb", [2]int64{88, 50}, [2]bool{true, true})
	deschedGPUNode(ctx, t, c, "dsgpuamb-cool", "dsgpuamb", [2]int64{50, 50}, [2]bool{false, false})
	deschedPodWith(ctx, t, c, "dsgpuamb-a", "dsgpuamb-hot", "dsgpuamb", withGPU)
	deschedPodWith(ctx, t, c, "dsgpuamb-b", "dsgpuamb-hot", "dsgpuamb", withGPU)

	d := startDescheduler(t, func(o *app.Options) { o.DryRun = false })
	cycle(t, d)
	note := podEvent(t, c, "dsgpu-train", descheduler.ReasonEvicted)
	for _, want := range []string{
		"GPU 0 (GPU-5ab4f5d1-8c3e-0000-b1f0-6a2e9c4d7e00) of node dsgpu-hot at or past slowdown - margin",
		"GPU 0 at 88.0°C >= slowdown 90.0°C - margin 3.0°C",
		"default/dsgpu-train (device plugin: the node's only pod of its resource, and the GPU is allocated)",
		"destination dsgpu-cool (checked)",
	} {
		if !strings.Contains(note, want) {
			t.Errorf("Event %q lacks %q", note, want)
		}
	}
	if !evicted(t, c, "dsgpu-train") {
		t.Errorf("dsgpu-train, on the hot GPU, was not evicted")
	}
	for _, pod := range []string{"dsgpu-web", "dsgpuamb-a", "dsgpuamb-b"} {
		if evicted(t, c, pod) {
			t.Errorf("%s was evicted", pod)
		}
	}
}

// migStatus is a fresh status of a node with one H100 in MIG mode at tempC
// (slowdown 90°C, 400 W): two 3g.40gb devices, alloc3 of them allocated,
// and one 1g.10gb, alloc1 allocated.
func migStatus(tempC int64, alloc3, alloc1 int32) telemetryv1alpha1.NodeTelemetryStatus {
	st := fixtures.FullStatus(time.Now(), 1, 1)
	st.Thermal.Throttling = false
	st.CPU.ThermalThrottle.Throttling = false
	st.Conditions = nil
	g := &st.GPUs[0]
	g.Health = telemetryv1alpha1.GPUHealth{Healthy: true}
	g.ThrottleReasons = nil
	g.Allocated = nil
	g.MIGEnabled = ptr.To(true)
	g.MIG = &telemetryv1alpha1.GPUMIG{ComputeSlicesTotal: 7, Profiles: []telemetryv1alpha1.MIGProfile{
		{Profile: "3g.40gb", Count: 2, MemoryBytes: 40 << 30, Allocated: ptr.To(alloc3)},
		{Profile: "1g.10gb", Count: 1, MemoryBytes: 10 << 30, Allocated: ptr.To(alloc1)},
	}}
	g.TemperatureMilliCelsius, g.SlowdownMilliCelsius = ptr.To(tempC*1000), ptr.To[int64](90_000)
	g.PowerWatts = ptr.To[int32](400)
	return st
}

// deschedMIGNode creates a Ready node of group whose device plugin
// serves the MIG devices of migStatus (mixed strategy), with that
// telemetry.
func deschedMIGNode(ctx context.Context, t *testing.T, c clients, name, group string, st telemetryv1alpha1.NodeTelemetryStatus) {
	t.Helper()
	node := readyNode(ctx, t, c, name, map[string]string{"kubernetes.io/hostname": name, "telesched-desched": group})
	for r, q := range map[corev1.ResourceName]string{"nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": "1"} {
		node.Status.Allocatable[r] = resource.MustParse(q)
		node.Status.Capacity[r] = resource.MustParse(q)
	}
	node, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.applyStatusCreating(ctx, node, st); err != nil {
		t.Fatal(err)
	}
}

// withMIG asks for one device of the MIG profile.
func withMIG(profile string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		r := corev1.ResourceName("nvidia.com/mig-" + profile)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{r: resource.MustParse("1")}
		p.Spec.Containers[0].Resources.Requests[r] = resource.MustParse("1")
	}
}

// TestDeschedulerJudgesAHotGPUAgainAfterItsPodLeft: a hot MIG GPU loses
// one pod a window, the one holding most of its slices (3g.40gb: 3 of the
// 4 allocated, ~300 W of its 400), and loses the next only on a sample
// taken after the first left that shows it still hot.
func TestDeschedulerJudgesAHotGPUAgainAfterItsPodLeft(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedMIGNode(ctx, t, c, "dsmig-hot", "dsmig", migStatus(88, 1, 1))
	deschedMIGNode(ctx, t, c, "dsmig-cool", "dsmig", migStatus(50, 0, 0))
	deschedPodWith(ctx, t, c, "dsmig-3g", "dsmig-hot", "dsmig", withMIG("3g.40gb"))
	deschedPodWith(ctx, t, c, "dsmig-1g", "dsmig-hot", "dsmig", withMIG("1g.10gb"))
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = false })
	cycle(t, d)
	note := podEvent(t, c, "dsmig-3g", descheduler.ReasonEvicted)
	for _, want := range []string{"GPU 0 (", "of node dsmig-hot at or past slowdown - margin", "destination dsmig-cool (checked)"} {
		if !strings.Contains(note, want) {
			t.Errorf("Event %q lacks %q", note, want)
		}
	}
	if !evicted(t, c, "dsmig-3g") || evicted(t, c, "dsmig-1g") {
		t.Fatalf("first cycle: dsmig-3g evicted %v, dsmig-1g evicted %v; want only dsmig-3g", evicted(t, c, "dsmig-3g"), evicted(t, c, "dsmig-1g"))
	}
	// The GPU's sample is the one taken before dsmig-3g left.
	cycle(t, d)
	if evicted(t, c, "dsmig-1g") {
		t.Fatalf("dsmig-1g evicted on the sample taken before dsmig-3g left")
	}
	// A sample taken after it, still hot.
	time.Sleep(1100 * time.Millisecond)
	if _, err := c.applyStatus(ctx, "dsmig-hot", migStatus(88, 0, 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the descheduler's cache sees it
	cycle(t, d)
	podEvent(t, c, "dsmig-1g", descheduler.ReasonEvicted)
	if !evicted(t, c, "dsmig-1g") {
		t.Errorf("dsmig-1g not evicted on a fresh sample of the GPU still hot")
	}
}

// TestSchedulerKeepsGPUPodsOffAFreeHotGPU: the kubelet hands a
// device-plugin pod any free GPU, so a node with a free GPU too hot
// (88°C against slowdown 90°C less the 3°C margin) takes no GPU pod,
// though 7 cool ones are free, and the Event says which GPU; once that GPU
// is taken, the pod is queued again and placed. Without it, a pod moved
// off a hot GPU could be handed the same GPU on its way back.
func TestSchedulerKeepsGPUPodsOffAFreeHotGPU(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	node := schedNode(ctx, t, c, "gpu-hotfree")
	node.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("8")
	node.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("8")
	node, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := gpuStatus()
	st.GPUs[0].TemperatureMilliCelsius, st.GPUs[0].SlowdownMilliCelsius = ptr.To[int64](88_000), ptr.To[int64](90_000)
	if _, err := c.applyStatusCreating(ctx, node, st); err != nil {
		t.Fatal(err)
	}
	startScheduler(t, schedulerConfig(t, ""))
	pod := testPod("gpu-hotfree-pod", "telesched")
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "gpu-hotfree"}
	withGPU(pod)
	if _, err := c.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	msg := waitFailedScheduling(t, c, pod.Name, 60*time.Second)
	if want := "1 free GPU(s) too hot (GPU 0 at 88.0°C >= slowdown 90.0°C - margin 3.0°C): the kubelet may give one to the pod"; !strings.Contains(msg, want) {
		t.Fatalf("FailedScheduling %q lacks %q", msg, want)
	}
	// Another pod takes the hot GPU.
	st.SampleTime = metav1.NewTime(time.Now())
	st.GPUs[0].Allocated = ptr.To(true)
	if _, err := c.applyStatus(ctx, "gpu-hotfree", st); err != nil {
		t.Fatal(err)
	}
	if got := waitScheduled(t, c, pod.Name, 60*time.Second); got != "gpu-hotfree" {
		t.Errorf("placed on %s, want gpu-hotfree", got)
	}
}
