// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/descheduler/app"
)

// The destination of an eviction is what the scheduler's own profile
// would accept (descheduler.Simulator): every plugin it enables, on a
// snapshot holding every pod the cycle already plans to move.

// withCPU makes a pod request cpu CPUs.
func withCPU(cpu string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
}

// setAllocatableCPU gives node cpu allocatable CPUs.
func setAllocatableCPU(ctx context.Context, t *testing.T, c clients, name, cpu string) {
	t.Helper()
	node, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Capacity[corev1.ResourceCPU] = resource.MustParse(cpu)
	node.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(cpu)
	if _, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// notes are the Events of reason on pods whose names start with prefix.
func notes(t *testing.T, c clients, prefix, reason string) map[string]string {
	t.Helper()
	evs, err := c.kube.EventsV1().Events("default").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range evs.Items {
		if strings.HasPrefix(e.Regarding.Name, prefix) && e.Reason == reason {
			out[e.Regarding.Name] = e.Note
		}
	}
	return out
}

// oneMovedOneKept runs one dry-run cycle with pods prefix-p1 and prefix-p2
// on two hot nodes and wants exactly one reported as evicted and the other
// kept, its Event naming wantWhy.
func oneMovedOneKept(t *testing.T, c clients, prefix, wantWhy string) {
	t.Helper()
	would := evictions(t, descheduler.ResultWouldEvict)
	kept := evictions(t, descheduler.ResultNoDestination)
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = true })
	cycle(t, d)
	if got := evictions(t, descheduler.ResultWouldEvict) - would; got != 1 {
		t.Errorf("would_evict rose by %v, want 1: the second pod has no room left where the first goes", got)
	}
	if got := evictions(t, descheduler.ResultNoDestination) - kept; got != 1 {
		t.Errorf("no_destination rose by %v, want 1", got)
	}
	var moved, held map[string]string
	waitFor(t, "one TeleschedWouldEvict and one TeleschedNoDestination event", 20*time.Second, func() bool {
		moved = notes(t, c, prefix+"-p", descheduler.ReasonWouldEvict)
		held = notes(t, c, prefix+"-p", descheduler.ReasonNoDestination)
		return len(moved) == 1 && len(held) == 1
	})
	for pod, n := range held {
		if !strings.Contains(n, wantWhy) {
			t.Errorf("%s kept, Event %q: want the refusal %q", pod, n, wantWhy)
		}
	}
	for pod, n := range moved {
		if !strings.Contains(n, "destination "+prefix+"-dest (checked)") {
			t.Errorf("%s moved, Event %q: want destination %s-dest", pod, n, prefix)
		}
	}
}

// TestDeschedulerCountsTheCyclesMovesAtTheirDestination: two hot nodes,
// each with a 3-CPU pod, and one cool node with room for one of them. The
// first pod is planned there; the second finds it full and stays.
func TestDeschedulerCountsTheCyclesMovesAtTheirDestination(t *testing.T) {
	needControlPlane(t)
	for _, tc := range []struct {
		name, prefix string
		setup        func(ctx context.Context, t *testing.T, c clients, dest string)
		why          string
	}{{
		name: "requests: 4 allocatable CPUs, two 3-CPU pods", prefix: "dsroom",
		setup: func(ctx context.Context, t *testing.T, c clients, dest string) {
			setAllocatableCPU(ctx, t, c, dest, "4")
		},
		why: "NodeResourcesFit: Insufficient cpu",
	}, {
		// 16 cores at 50 %: the first pod takes it to 68.75 %, the
		// second would to 87.5 %, past LoadAware's 80 %.
		name: "LoadAware: 16 cores at 50 %, two 3-CPU pods", prefix: "dsload",
		setup: func(ctx context.Context, t *testing.T, c clients, dest string) {
			if _, err := c.applyStatus(ctx, dest, nodeStatus(50, 50, 100)); err != nil {
				t.Fatal(err)
			}
		},
		why: "LoadAware",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c := t.Context(), newClients(t)
			deschedNode(ctx, t, c, tc.prefix+"-hot1", tc.prefix, true)
			deschedNode(ctx, t, c, tc.prefix+"-hot2", tc.prefix, true)
			deschedNode(ctx, t, c, tc.prefix+"-dest", tc.prefix, false)
			tc.setup(ctx, t, c, tc.prefix+"-dest")
			deschedPodWith(ctx, t, c, tc.prefix+"-p1", tc.prefix+"-hot1", tc.prefix, withCPU("3"))
			deschedPodWith(ctx, t, c, tc.prefix+"-p2", tc.prefix+"-hot2", tc.prefix, withCPU("3"))
			oneMovedOneKept(t, c, tc.prefix, tc.why)
		})
	}
}

// TestDeschedulerKeepsOtherBudgetsUnder: the only cool node draws 500 W
// in a rack of 510 W, under budget; a 500m pod adds ~25 W there, so the
// scheduler's PowerBudget would refuse it, and the descheduler does not
// send it.
func TestDeschedulerKeepsOtherBudgetsUnder(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dsintob-hot", "dsintob", true)
	deschedNode(ctx, t, c, "dsintob-b1", "dsintob", false)
	deschedPod(ctx, t, c, "dsintob-pod", "dsintob-hot", "dsintob")
	budgetRack(ctx, t, c, "dsintob", 510, "dsintob-b1")
	keptBefore := evictions(t, descheduler.ResultNoDestination)
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = true })
	cycle(t, d)
	note := podEvent(t, c, "dsintob-pod", descheduler.ReasonNoDestination)
	if !strings.Contains(note, "PowerBudget") {
		t.Errorf("Event %q: want PowerBudget's refusal of dsintob-b1", note)
	}
	if got := evictions(t, descheduler.ResultNoDestination) - keptBefore; got != 1 {
		t.Errorf("no_destination rose by %v, want 1", got)
	}
}

// TestDeschedulerKeepsPodsWhereOnlyTheirNodeTakesThem: filters of the
// scheduler's profile that the descheduler's own check lacked: a pod on a
// local PersistentVolume (VolumeBinding: the volume's node affinity) and a
// pod with a host port the other node has taken (NodePorts).
func TestDeschedulerKeepsPodsWhereOnlyTheirNodeTakesThem(t *testing.T) {
	needControlPlane(t)
	for _, tc := range []struct {
		name, prefix string
		setup        func(ctx context.Context, t *testing.T, c clients, prefix string) func(*corev1.Pod)
		why          string
	}{{
		name: "local PersistentVolume", prefix: "dslocal", why: "VolumeBinding",
		setup: func(ctx context.Context, t *testing.T, c clients, prefix string) func(*corev1.Pod) {
			localVolume(ctx, t, c, prefix, prefix+"-hot")
			return func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: prefix + "-pvc"}}}}
			}
		},
	}, {
		name: "host port", prefix: "dsport", why: "NodePorts",
		setup: func(ctx context.Context, t *testing.T, c clients, prefix string) func(*corev1.Pod) {
			hostPort := func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
			}
			deschedPodWith(ctx, t, c, prefix+"-other", prefix+"-cool", prefix, hostPort)
			return hostPort
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c := t.Context(), newClients(t)
			deschedNode(ctx, t, c, tc.prefix+"-hot", tc.prefix, true)
			deschedNode(ctx, t, c, tc.prefix+"-cool", tc.prefix, false)
			deschedPodWith(ctx, t, c, tc.prefix+"-pod", tc.prefix+"-hot", tc.prefix, tc.setup(ctx, t, c, tc.prefix))
			would := evictions(t, descheduler.ResultWouldEvict)
			// Upstream's DefaultEvictor defaults, which let pods with
			// PVCs go: the destination check alone keeps it.
			policy := policyFile(t, evictorOnly("{}"))
			d := startDescheduler(t, func(o *app.Options) { o.DryRun, o.Policy = true, policy })
			cycle(t, d)
			note := podEvent(t, c, tc.prefix+"-pod", descheduler.ReasonNoDestination)
			if !strings.Contains(note, tc.why) {
				t.Errorf("Event %q: want %s's refusal of %s-cool", note, tc.why, tc.prefix)
			}
			if got := evictions(t, descheduler.ResultWouldEvict) - would; got != 0 {
				t.Errorf("would_evict rose by %v, want 0", got)
			}
		})
	}
}

// localVolume creates a local PersistentVolume on node and a claim bound
// to it (prefix-pv, prefix-pvc), as the PV controller leaves them.
func localVolume(ctx context.Context, t *testing.T, c clients, prefix, node string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: prefix + "-pv"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "local-storage",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + prefix}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: prefix + "-pvc"},
		},
	}
	created, err := c.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.CoreV1().PersistentVolumes().Delete(context.WithoutCancel(ctx), pv.Name, metav1.DeleteOptions{})
	})
	created.Status.Phase = corev1.VolumeBound
	if _, err := c.kube.CoreV1().PersistentVolumes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sc := "local-storage"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: prefix + "-pvc", Namespace: "default",
			Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	claim, err := c.kube.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.CoreV1().PersistentVolumeClaims("default").Delete(context.WithoutCancel(ctx), pvc.Name, metav1.DeleteOptions{})
	})
	claim.Status.Phase = corev1.ClaimBound
	if _, err := c.kube.CoreV1().PersistentVolumeClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// policyFile writes a descheduler policy file.
func policyFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// evictorOnly is a policy of DefaultEvictor's args (JSON) and both plugins
// at their defaults.
func evictorOnly(args string) string {
	return `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: telesched
  pluginConfig:
  - name: DefaultEvictor
    args: ` + args + `
  plugins:
    deschedule:
      enabled: [TeleschedThermal, TeleschedPowerBudget]
`
}

// TestDeschedulerPolicy: what an operator who turns eviction on decides
// in the policy, and its defaults: a pod with a PersistentVolumeClaim is
// protected by default; a pod of another scheduler is not chosen by
// default (only telesched's profiles place its replacement by telesched's
// filters); a namespace excluded is left alone; each is moved when the
// policy allows it.
func TestDeschedulerPolicy(t *testing.T) {
	needControlPlane(t)
	pvc := func(prefix string) func(ctx context.Context, t *testing.T, c clients) func(*corev1.Pod) {
		return func(ctx context.Context, t *testing.T, c clients) func(*corev1.Pod) {
			// A PVC with no volume node affinity: any node may take it.
			localVolume(ctx, t, c, prefix, prefix+"-cool")
			return func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: prefix + "-pvc"}}}}
			}
		}
	}
	for _, tc := range []struct {
		name, prefix, policy string
		pod                  func(ctx context.Context, t *testing.T, c clients) func(*corev1.Pod)
		want                 float64
	}{
		{name: "PVC pod, default policy: protected", prefix: "dspolpvc", pod: pvc("dspolpvc"), want: 0},
		{name: "PVC pod, upstream's defaults: moved", prefix: "dspolpvc2", pod: pvc("dspolpvc2"), policy: evictorOnly("{}"), want: 1},
		{name: "default-scheduler pod, default policy: not chosen", prefix: "dspolsched", want: 0,
			pod: func(context.Context, *testing.T, clients) func(*corev1.Pod) {
				return func(p *corev1.Pod) { p.Spec.SchedulerName = corev1.DefaultSchedulerName }
			}},
		{name: "default-scheduler pod, named in the policy: moved", prefix: "dspolsched2", want: 1,
			pod: func(context.Context, *testing.T, clients) func(*corev1.Pod) {
				return func(p *corev1.Pod) { p.Spec.SchedulerName = corev1.DefaultSchedulerName }
			},
			policy: `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: telesched
  pluginConfig:
  - name: TeleschedThermal
    args:
      schedulerNames: [default-scheduler, telesched]
  plugins:
    deschedule:
      enabled: [TeleschedThermal]
`},
		{name: "namespace excluded: left alone", prefix: "dspolns", want: 0,
			policy: `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: telesched
  pluginConfig:
  - name: TeleschedThermal
    args:
      namespaces:
        exclude: [default]
  plugins:
    deschedule:
      enabled: [TeleschedThermal]
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c := t.Context(), newClients(t)
			deschedNode(ctx, t, c, tc.prefix+"-hot", tc.prefix, true)
			deschedNode(ctx, t, c, tc.prefix+"-cool", tc.prefix, false)
			var mutate func(*corev1.Pod)
			if tc.pod != nil {
				mutate = tc.pod(ctx, t, c)
			}
			deschedPodWith(ctx, t, c, tc.prefix+"-pod", tc.prefix+"-hot", tc.prefix, mutate)
			var policy string
			if tc.policy != "" {
				policy = policyFile(t, tc.policy)
			}
			would := evictions(t, descheduler.ResultWouldEvict)
			d := startDescheduler(t, func(o *app.Options) { o.DryRun, o.Policy = true, policy })
			cycle(t, d)
			if got := evictions(t, descheduler.ResultWouldEvict) - would; got != tc.want {
				t.Errorf("would_evict rose by %v, want %v", got, tc.want)
			}
		})
	}
}
