// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	dir := t.TempDir()
	abs, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(abs, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	overlay := fmt.Sprintf("resources:\n  - %s\ncomponents:\n  - %s\n", rel("."), rel("variants/single-scheduler"))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "kustomize"), "build", "--load-restrictor", "LoadRestrictionsNone", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kustomize build of the single-scheduler overlay: %v (run `make test`, which builds bin/kustomize)\n%s", err, out)
	}
	rendered := filepath.Join(dir, "rendered.yaml")
	if err := os.WriteFile(rendered, out, 0o644); err != nil {
		t.Fatal(err)
	}
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
	host, port, err := net.SplitHostPort(freeAddress(t))
	if err != nil {
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
		args = append(args, a)
	}
	args = append(args, "--secure-port="+port)
	schedOut := startProcess(t, filepath.Join(binDir, "telesched-scheduler"), args...)
	waitReady(t, "the single scheduler's /healthz", schedOut, 60*time.Second, func() bool {
		resp, err := insecureClient.Get("https://" + net.JoinHostPort(host, port) + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

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
