// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/test/fixtures"
)

// draDriver is NVIDIA's DRA driver's name, and the DeviceClass of its
// whole GPUs: TopologyFitArgs' gpuDriverNames and gpuDeviceClassNames
// default to it.
const draDriver = "gpu.nvidia.com"

// draRoleLabel says which of TestDRA's nodes a node is: dra (GPUs by
// ResourceSlice only), dp (by device plugin only) or both.
const draRoleLabel = "telesched-test/dra-role"

// draGPUStatus is a fresh 1-NUMA, 4-GPU status: cool, healthy, idle GPUs
// (70 W each, 700 W limit) that neither MIG nor the kubelet holds.
func draGPUStatus() telemetryv1alpha1.NodeTelemetryStatus {
	st := fixtures.FullStatus(time.Now(), 1, 4)
	st.Thermal.Throttling = false
	st.CPU.ThermalThrottle.Throttling = false
	st.Conditions = nil
	st.Power.GPUWatts = ptr.To[int32](4 * 70)
	st.Power.Watts = 750 + 4*70
	for i := range st.GPUs {
		g := &st.GPUs[i]
		g.Health = telemetryv1alpha1.GPUHealth{Healthy: true}
		g.ThrottleReasons = nil
		g.MIGEnabled, g.MIG = ptr.To(false), nil
		g.Allocated = ptr.To(false)
		g.UtilizationPercent, g.PowerWatts, g.PowerLimitWatts = ptr.To[int32](0), ptr.To[int32](70), ptr.To[int32](700)
		g.MemoryUsedBytes = 0
	}
	return st
}

// draNode creates a schedulable node of role with draGPUStatus telemetry,
// allocatable nvidia.com/gpu 4 when devicePlugin, and a ResourceSlice of
// draDriver publishing its 4 GPUs, their "uuid" attributes the
// telemetry's, when slice.
func draNode(t *testing.T, c clients, name, role string, devicePlugin, slice bool) {
	t.Helper()
	ctx := t.Context()
	node := schedNode(ctx, t, c, name)
	node.Labels[draRoleLabel] = role
	node.Labels["telesched-test"] = "dra"
	node, err := c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if devicePlugin {
		node.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("4")
		node.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("4")
		if node, err = c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	st := draGPUStatus()
	if _, err := c.applyStatusCreating(ctx, node, st); err != nil {
		t.Fatal(err)
	}
	if !slice {
		return
	}
	rs := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   draDriver,
			Pool:     resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(name),
		},
	}
	for i := range st.GPUs {
		rs.Spec.Devices = append(rs.Spec.Devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"uuid":  {StringValue: ptr.To(st.GPUs[i].UUID)},
				"index": {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(st.GPUs[i].MemoryTotalBytes, resource.BinarySI)},
			},
		})
	}
	if _, err := c.kube.ResourceV1().ResourceSlices().Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.ResourceV1().ResourceSlices().Delete(context.WithoutCancel(ctx), rs.Name, metav1.DeleteOptions{})
	})
}

// claimPod creates a ResourceClaim of gpus devices of DeviceClass
// draDriver and a pod using it, with no CPU request (its watts are its
// GPUs'), on a node of one of roles; both are deleted at the end.
func claimPod(t *testing.T, c clients, name string, gpus int64, roles ...string) {
	t.Helper()
	ctx := t.Context()
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpus",
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: draDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: gpus,
			},
		}}}},
	}
	if _, err := c.kube.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.ResourceV1().ResourceClaims("default").Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	})
	pod := draPod(name, roles...)
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		Claims:   []corev1.ResourceClaim{{Name: "gpus"}},
	}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(name)}}
	createPodCleaned(t, c, pod)
}

// gpuPod creates a pod requesting gpus nvidia.com/gpu (the device
// plugin's extended resource) on a node of one of roles.
func gpuPod(t *testing.T, c clients, name string, gpus int64, roles ...string) {
	t.Helper()
	pod := draPod(name, roles...)
	n := *resource.NewQuantity(gpus, resource.DecimalSI)
	pod.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = n
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": n}
	createPodCleaned(t, c, pod)
}

// draPod is a telesched pod on TestDRA's nodes of one of roles.
func draPod(name string, roles ...string) *corev1.Pod {
	pod := testPod(name, "telesched")
	pod.Spec.NodeSelector = map[string]string{"telesched-test": "dra"}
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: draRoleLabel, Operator: corev1.NodeSelectorOpIn, Values: roles}},
		}}},
	}}
	return pod
}

// gaugeFor is the value of the gauge family name's series for node, and
// whether there is one.
func gaugeFor(fams map[string]*dto.MetricFamily, name, node string) (float64, bool) {
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "node" && l.GetValue() == node {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestDRA runs the telesched-scheduler binary, with the deployed config,
// on three GPU nodes of 4 idle H100s each: dra-0, whose GPUs a
// ResourceSlice of gpu.nvidia.com publishes (no device plugin); dp-0,
// whose device plugin publishes allocatable nvidia.com/gpu 4; and both-0,
// which publishes them both ways (the node where a GPU both a claim and
// an extended resource can take must be counted once, by TopologyFit).
//
//   - A pod whose ResourceClaim asks for exactly 2 devices of DeviceClass
//     gpu.nvidia.com, allowed on dra-0 and dp-0, is allocated 2 of dra-0's
//     devices by DynamicResources and bound there.
//   - Its 2 GPUs are the book's: telesched_scheduler_reserved_gpus{node=dra-0}
//     is 2, and telesched_scheduler_reserved_watts 2 GPUs' busy less idle
//     watts (700 W limit as busy, 70 W idle: 1260 W; the pod asks no CPU,
//     and the default CPU request it is charged costs under a watt).
//   - Once a claim holds 2 of both-0's GPUs, TopologyFit refuses a pod
//     requesting nvidia.com/gpu 3 there, naming the held GPUs, although
//     NodeResourcesFit sees 4 allocatable and none requested; a pod
//     requesting 3 on any node goes to dp-0; one requesting 2 fits both-0.
func TestDRA(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)
	if _, err := c.kube.Discovery().ServerResourcesForGroupVersion(resourceapi.SchemeGroupVersion.String()); err != nil {
		t.Fatalf("the API server does not serve %s: %v", resourceapi.SchemeGroupVersion, err)
	}
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: draDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", draDriver)},
		}}},
	}
	if _, err := c.kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.ResourceV1().DeviceClasses().Delete(context.WithoutCancel(ctx), class.Name, metav1.DeleteOptions{})
	})
	draNode(t, c, "dra-0", "dra", false, true)
	draNode(t, c, "dp-0", "dp", true, false)
	draNode(t, c, "both-0", "both", true, true)

	binDir, kubeconfig := binDirAndKubeconfig(t)
	metrics := startMetricsScheduler(t, binDir, kubeconfig)

	// b. The claim pod: only DRA can place it, on dra-0.
	claimPod(t, c, "dra-claim", 2, "dra", "dp")
	if node := waitScheduled(t, c, "dra-claim", 60*time.Second); node != "dra-0" {
		t.Fatalf("dra-claim went to %s, want dra-0", node)
	}
	claim, err := c.kube.ResourceV1().ResourceClaims("default").Get(ctx, "dra-claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil {
		t.Fatal("dra-claim's pod is bound but the claim has no allocation")
	}
	var devices []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != draDriver || r.Pool != "dra-0" {
			t.Errorf("dra-claim allocated %s/%s/%s, want a device of %s in pool dra-0", r.Driver, r.Pool, r.Device, draDriver)
		}
		devices = append(devices, r.Device)
	}
	if len(devices) != 2 {
		t.Errorf("dra-claim allocated %d devices (%v), want 2", len(devices), devices)
	}
	t.Logf("dra-claim: bound to dra-0, allocated %v", devices)

	// d. The book prices the claim's 2 GPUs on dra-0: 2 x (700 - 70) W,
	// and the CPU side of the pod's default CPU request (it asks none),
	// under a watt on dra-0's 64 cores.
	const wantWatts = 2 * (700 - 70)
	var gpus, watts float64
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fams, err := tryScrape(insecureClient, metrics); err == nil {
			gpus, _ = gaugeFor(fams, "telesched_scheduler_reserved_gpus", "dra-0")
			watts, _ = gaugeFor(fams, "telesched_scheduler_reserved_watts", "dra-0")
		}
		if gpus == 2 && watts >= wantWatts && watts < wantWatts+5 {
			t.Logf("dra-0: reserved_gpus %g, reserved_watts %g", gpus, watts)
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("dra-0: reserved_gpus %g, reserved_watts %g; want 2 GPUs and %d W (and under 5 W for the CPU)", gpus, watts, wantWatts)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// c. TopologyFit counts claimed GPUs: both-0 has 2 left for the
	// device plugin's pods, whatever its allocatable says.
	claimPod(t, c, "both-claim", 2, "both")
	if node := waitScheduled(t, c, "both-claim", 60*time.Second); node != "both-0" {
		t.Fatalf("both-claim went to %s, want both-0", node)
	}
	waitFor(t, "both-claim's allocation", 30*time.Second, func() bool {
		cl, err := c.kube.ResourceV1().ResourceClaims("default").Get(ctx, "both-claim", metav1.GetOptions{})
		return err == nil && cl.Status.Allocation != nil
	})
	// TopologyFit reads allocations from the scheduler's ResourceClaim
	// informer, not DynamicResources' assumed claims: let it see this one.
	time.Sleep(time.Second)
	gpuPod(t, c, "dp-any-3", 3, "dra", "dp", "both")
	if node := waitScheduled(t, c, "dp-any-3", 60*time.Second); node != "dp-0" {
		t.Errorf("dp-any-3 went to %s, want dp-0 (both-0 has 2 GPUs unclaimed, dra-0 no allocatable nvidia.com/gpu)", node)
	}
	gpuPod(t, c, "both-3", 3, "both")
	msg := waitRejected(t, c, "both-3", 30*time.Second)
	t.Logf("both-3 FailedScheduling: %s", msg)
	for _, want := range []string{"node has 2 healthy unallocated GPUs, pod needs 3", "2 held by ResourceClaims"} {
		if !strings.Contains(msg, want) {
			t.Errorf("both-3's FailedScheduling message lacks %q", want)
		}
	}
	gpuPod(t, c, "both-2", 2, "both")
	if node := waitScheduled(t, c, "both-2", 60*time.Second); node != "both-0" {
		t.Errorf("both-2 went to %s, want both-0", node)
	}
}
