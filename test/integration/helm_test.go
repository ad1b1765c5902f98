// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/sandbox/controlplane"
)

// TestHelmInstallRunsAgentAndScheduler installs the Helm chart's rendered
// objects on the real API server, as `helm install` would, and runs the
// agent and the scheduler from them: each with the args of its DaemonSet
// or Deployment, the scheduler with the configuration of its ConfigMap,
// and each with a token of the chart's own ServiceAccount (the agent's
// bound to a pod on its node, as the kubelet's projected token is), so the
// chart's RBAC, admission policies and configuration are what let them
// work. The agent publishes its node's NodeTelemetry; the scheduler
// places a pod of each of its profiles there.
func TestHelmInstallRunsAgentAndScheduler(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	admin := newClients(t)
	binDir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}

	// helm template, into the namespace the integration suite uses (the
	// chart's objects are the kustomize tree's, which other tests apply).
	rendered := helmTemplate(ctx, t, binDir)
	applyManifests(ctx, t, admin, rendered)
	objs := map[string]*unstructured.Unstructured{}
	for _, o := range readObjects(t, rendered) {
		objs[o.GetKind()+"/"+o.GetName()] = o
	}
	containerArgs := func(id string) []string {
		t.Helper()
		o := objs[id]
		if o == nil {
			t.Fatalf("the chart rendered no %s", id)
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		var args []string
		for _, a := range cs[0].(map[string]any)["args"].([]any) {
			args = append(args, a.(string))
		}
		return args
	}

	suffix := utilrand.String(5)
	node := "helm-" + suffix
	schedNode(ctx, t, admin, node)

	// The agent: the DaemonSet's args, with the host tree, its address and
	// state file moved to this test's, and a faster interval.
	host, _ := startHostTree(t)
	agentPod := createAgentPod(ctx, t, admin, "helm-agent-"+suffix, node)
	agentKubeconfig := tokenKubeconfig(t, agentToken(ctx, t, admin, agentPod))
	var agentArgs []string
	for _, a := range containerArgs("DaemonSet/telesched-agent") {
		switch {
		case strings.HasPrefix(a, "--host-root="):
			a = "--host-root=" + host.Dir
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=" + freeAddress(t)
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=" + freeAddress(t)
		case strings.HasPrefix(a, "--state-file="):
			a = "--state-file=" + filepath.Join(t.TempDir(), "models.json")
		}
		agentArgs = append(agentArgs, a)
	}
	agentArgs = append(agentArgs, "--node-name="+node, "--kubeconfig="+agentKubeconfig, "--interval=500ms")
	agentOut := startProcess(t, filepath.Join(binDir, "telesched-agent"), agentArgs...)
	waitReady(t, "the agent's NodeTelemetry, published with the chart's RBAC and policies", agentOut, 60*time.Second, func() bool {
		nt, err := admin.dyn.Resource(ntResource).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		_, found, _ := unstructured.NestedMap(nt.Object, "status", "cpu")
		return found
	})
	// Its overheating condition on its Node (False: the host tree is
	// cool), written with the chart's node-taint RBAC and policy.
	waitReady(t, "the agent's "+app.OverheatingConditionType+" condition on its Node", agentOut, 30*time.Second, func() bool {
		n, err := admin.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		return slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == app.OverheatingConditionType && c.Status == corev1.ConditionFalse
		})
	})

	// The scheduler: the Deployment's args and the ConfigMap's
	// configuration (leader election on, as installed), serving its secure
	// port with delegated authentication.
	cm := objs["ConfigMap/telesched-scheduler-config"]
	if cm == nil {
		t.Fatal("the chart rendered no ConfigMap telesched-scheduler-config")
	}
	config, _, _ := unstructured.NestedString(cm.Object, "data", "scheduler-config.yaml")
	schedulerKubeconfig := tokenKubeconfig(t, tokenFor(ctx, t, admin, schedulerServiceAccount, nil))
	configPath := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(configPath, []byte(config+"clientConnection:\n  kubeconfig: "+schedulerKubeconfig+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var schedArgs []string
	for _, a := range containerArgs("Deployment/telesched-scheduler") {
		if strings.HasPrefix(a, "--config=") {
			a = "--config=" + configPath
		}
		// As the kubelet expands the Deployment's POD_NAMESPACE (the
		// downward API's metadata.namespace): the release's.
		a = strings.ReplaceAll(a, "$(POD_NAMESPACE)", agentNamespace)
		schedArgs = append(schedArgs, a)
	}
	// /metrics open to the test, as Prometheus's token would be allowed.
	base, schedOut := startSecureScheduler(t, filepath.Join(binDir, "telesched-scheduler"),
		append(schedArgs, "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics")...)

	for _, profile := range []string{"telesched", "telesched-energy"} {
		name := "helm-" + profile + "-" + suffix
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{
				SchedulerName: profile,
				NodeSelector:  map[string]string{"kubernetes.io/hostname": node},
				Containers: []corev1.Container{{Name: "app", Image: "app:test", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				}}},
			},
		}
		if _, err := admin.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.kube.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		})
		waitReady(t, name+" scheduled by the chart's scheduler", schedOut, 60*time.Second, func() bool {
			p, err := admin.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Spec.NodeName == node
		})
	}
	// What the scheduler alerts read from the real binary: its leader
	// election (TeleschedSchedulerNoLeader) and its queue
	// (TeleschedPodsPending).
	fams := scrape(t, base+"/metrics")
	leader := fams["leader_election_master_status"]
	if leader == nil || !slices.ContainsFunc(leader.GetMetric(), func(m *dto.Metric) bool {
		return slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "name" && l.GetValue() == "kube-scheduler" }) &&
			m.GetGauge().GetValue() == 1
	}) {
		t.Errorf("/metrics has no leader_election_master_status{name=\"kube-scheduler\"} 1 on the leader: %v", leader)
	}
	if fams["scheduler_pending_pods"] == nil {
		t.Error("/metrics has no scheduler_pending_pods")
	}
	lease, err := admin.kube.CoordinationV1().Leases("kube-system").Get(ctx, "telesched-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the leader-election Lease of the chart's configuration: %v", err)
	}
	t.Logf("agent published NodeTelemetry %s; scheduler (leader %s) placed a pod of each profile there", node, ptr.Deref(lease.Spec.HolderIdentity, ""))
}

// tokenKubeconfig writes a kubeconfig for the test API server that
// authenticates with token alone.
func tokenKubeconfig(t *testing.T, token string) string {
	t.Helper()
	c := clientcmdapi.NewConfig()
	c.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	c.AuthInfos["token"] = &clientcmdapi.AuthInfo{Token: token}
	c.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "token"}
	c.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// helmTemplate renders the chart with helm template into the namespace the
// integration suite uses, the CRDs and the namespace included, with sets
// (name=value) on top, and returns the file it wrote.
func helmTemplate(ctx context.Context, t *testing.T, binDir string, sets ...string) string {
	t.Helper()
	args := []string{"template", "telesched", filepath.Join(deployDir, "helm", "telesched"), "--namespace", agentNamespace,
		"--include-crds", "--kube-version", "1.37.2", "--set", "namespace.create=true"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "helm"), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template: %v (run `make test`, which builds bin/helm)\n%s", err, stderr.String())
	}
	rendered := filepath.Join(t.TempDir(), "telesched.yaml")
	if err := os.WriteFile(rendered, stdout.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return rendered
}
