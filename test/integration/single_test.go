// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/telesched/telesched/sandbox/controlplane"
)

// TestSingleScheduler runs telesched-scheduler as the cluster's only
// scheduler, as deploy/variants/single-scheduler installs it: the static
// pod's args and configuration, as kubeadm's scheduler identity (user
// system:kube-scheduler, here by impersonation) with the component's RBAC.
// It places pods that name no scheduler (default-scheduler) and pods of
// both telesched profiles, and holds kube-scheduler's own Lease.
func TestSingleScheduler(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	admin := newClients(t)
	binDir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	rendered, _ := buildOverlay(ctx, t, func(rel func(string) string) string {
		return fmt.Sprintf("resources:\n  - %s\ncomponents:\n  - %s\n", rel("."), rel("variants/single-scheduler"))
	})
	dir := t.TempDir()
	applyManifests(ctx, t, admin, rendered)

	// kubeadm's scheduler.conf: user system:kube-scheduler.
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["kube-scheduler"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken, Impersonate: "system:kube-scheduler"}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "kube-scheduler"}
	kc.CurrentContext = "test"
	kubeconfig := filepath.Join(dir, "scheduler.conf")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	const kubeadmKubeconfig = "/etc/kubernetes/scheduler.conf"
	single := filepath.Join(deployDir, "variants", "single-scheduler")
	conf, err := os.ReadFile(filepath.Join(single, "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "scheduler-config.yaml")
	if err := os.WriteFile(config, []byte(strings.ReplaceAll(string(conf), kubeadmKubeconfig, kubeconfig)), 0o644); err != nil {
		t.Fatal(err)
	}
	podYAML, err := os.ReadFile(filepath.Join(single, "kube-scheduler.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var static corev1.Pod
	if err := yaml.Unmarshal(podYAML, &static); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range static.Spec.Containers[0].Args {
		switch {
		case strings.HasPrefix(a, "--config="):
			a = "--config=" + config
		case strings.Contains(a, kubeadmKubeconfig):
			a = strings.ReplaceAll(a, kubeadmKubeconfig, kubeconfig)
		}
		// --bind-address: the test's own free address.
		if !strings.HasPrefix(a, "--bind-address=") {
			args = append(args, a)
		}
	}
	_, schedOut := startSecureScheduler(t, filepath.Join(binDir, "telesched-scheduler"), args...)

	suffix := utilrand.String(5)
	node := "single-" + suffix
	schedNode(ctx, t, admin, node)
	for _, scheduler := range []string{"", "default-scheduler", "telesched", "telesched-energy"} {
		name := "single-" + strings.TrimSuffix("by-"+scheduler, "-") + "-" + suffix
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{
				SchedulerName: scheduler,
				NodeSelector:  map[string]string{"kubernetes.io/hostname": node},
				Containers: []corev1.Container{{Name: "app", Image: "app:test", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				}}},
			},
		}
		if _, err := admin.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.kube.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		})
		waitReady(t, fmt.Sprintf("pod %s (schedulerName %q) placed by the single scheduler", name, scheduler), schedOut, 60*time.Second, func() bool {
			p, err := admin.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Spec.NodeName == node
		})
	}
	lease, err := admin.kube.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kube-system/kube-scheduler: %v; want the single scheduler holding kube-scheduler's Lease", err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
		t.Fatal("kube-system/kube-scheduler has no holder; want the single scheduler")
	}
	t.Logf("default-scheduler, telesched and telesched-energy pods placed by one process, holding kube-system/kube-scheduler (%s)", *lease.Spec.HolderIdentity)
}

// TestOneSchedulerNeverOvercommits: pods of the default profile and of
// telesched's race for one node's CPUs (2 CPUs, ten 500m pods of each).
// The pods wait while the node has none; then one Node update gives it
// its 2 CPUs, and wakes every scheduler at once. Two schedulers, as in the
// second-scheduler install, each place pods against their own cache and
// can both hand out the same CPUs, which the kubelet then refuses
// (OutOfcpu): that is logged, as it depends on timing. One scheduler
// serving both profiles, as the single-scheduler install runs it, places
// four pods and no more, every time.
func TestOneSchedulerNeverOvercommits(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	admin := newClients(t)
	const allocatable, perPod = 2000, 500 // millicores

	setCPU := func(t *testing.T, node string, milli int64) {
		t.Helper()
		n, err := admin.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := *resource.NewMilliQuantity(milli, resource.DecimalSI)
		n.Status.Capacity[corev1.ResourceCPU], n.Status.Allocatable[corev1.ResourceCPU] = q, q
		if _, err := admin.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	race := func(t *testing.T, node string) (bound int, requested int64) {
		t.Helper()
		var pods []string
		for i := range 10 {
			for _, scheduler := range []string{"default-scheduler", "telesched"} {
				p := testPod(fmt.Sprintf("%s-%s-%d", node, strings.TrimSuffix(scheduler, "-scheduler"), i), scheduler)
				p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
				p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(perPod, resource.DecimalSI)}
				if _, err := admin.kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				pods = append(pods, p.Name)
				t.Cleanup(func() {
					_ = admin.kube.CoreV1().Pods("default").Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				})
			}
		}
		count := func() (bound, unschedulable int, requested int64) {
			list, err := admin.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range list.Items {
				if !strings.HasPrefix(p.Name, node+"-") {
					continue
				}
				if p.Spec.NodeName == node {
					bound++
					requested += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
				} else if slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
					return c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable
				}) {
					unschedulable++
				}
			}
			return bound, unschedulable, requested
		}
		// Every pod tried and found not to fit a node without CPUs, and
		// past its first backoff (1s).
		waitFor(t, "every pod found not to fit the node without CPUs", 60*time.Second, func() bool {
			_, u, _ := count()
			return u == len(pods)
		})
		time.Sleep(2 * time.Second)
		setCPU(t, node, allocatable) // one event wakes every scheduler
		last, stable := -1, 0
		waitFor(t, "the bound pods to settle", 60*time.Second, func() bool {
			b, _, _ := count()
			if b == last && b > 0 {
				stable++
			} else {
				stable = 0
			}
			last = b
			return stable >= 40 // 2s unchanged
		})
		bound, _, requested = count()
		return bound, requested
	}
	newNode := func(name string) {
		t.Helper()
		schedNode(ctx, t, admin, name)
		setCPU(t, name, 0)
	}
	suffix := utilrand.String(5)

	t.Run("two schedulers", func(t *testing.T) {
		node := "two-" + suffix
		newNode(node)
		// The cluster's scheduler (kube-scheduler's default profile), and
		// telesched-scheduler beside it.
		defaultOnly := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaderElect: false\nprofiles:\n- schedulerName: default-scheduler\n"
		startScheduler(t, defaultOnly)
		startScheduler(t, schedulerConfig(t, ""))
		bound, requested := race(t, node)
		if requested > allocatable {
			t.Logf("two schedulers over-committed %s: %d pods bound, %dm of CPU requested on %dm allocatable; the kubelet would refuse %d of them (OutOfcpu)",
				node, bound, requested, allocatable, (requested-allocatable)/perPod)
		} else {
			t.Logf("two schedulers did not over-commit %s this time (%d pods, %dm of %dm): it depends on their timing", node, bound, requested, allocatable)
		}
	})

	t.Run("one scheduler", func(t *testing.T) {
		node := "one-" + suffix
		newNode(node)
		data, err := os.ReadFile(filepath.Join(deployDir, "variants", "single-scheduler", "scheduler-config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		conf := strings.Replace(string(data), "clientConnection:\n  kubeconfig: /etc/kubernetes/scheduler.conf\n", "", 1)
		conf = strings.Replace(conf, "  leaderElect: true", "  leaderElect: false", 1)
		startScheduler(t, conf)
		bound, requested := race(t, node)
		if requested > allocatable || bound != allocatable/perPod {
			t.Fatalf("one scheduler serving both profiles bound %d pods, %dm of CPU on %dm allocatable; want %d pods, never more than allocatable",
				bound, requested, allocatable, allocatable/perPod)
		}
		t.Logf("one scheduler serving both profiles bound %d pods, %dm of %dm: no over-commit", bound, requested, allocatable)
	})
}
