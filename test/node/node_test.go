// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build node

// Package node runs telesched as users do, on a one-node cluster of real
// parts on this machine (test/node/cluster): the images built here
// (make images-local) imported into containerd, the chart of the previous
// release (testdata/telesched-0.1.0.tgz) installed with Helm, upgraded to
// this checkout's chart by the documented path, removed, and this chart
// installed fresh. Run by make test-node, as root.
package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/test/node/cluster"
)

const (
	namespace    = "telesched-system"
	releaseName  = "telesched"
	chartDir     = "../../deploy/helm/telesched"
	previousTGZ  = "testdata/telesched-0.1.0.tgz"
	agentLabel   = "app.kubernetes.io/name=telesched-agent"
	installWait  = "5m"
	readyTimeout = 5 * time.Minute
)

var ntResource = schema.GroupVersionResource{Group: "telemetry.telesched.io", Version: "v1alpha1", Resource: "nodetelemetries"}

// images are the refs make images-local wrote, by role.
type images struct {
	agent, scheduler, descheduler, pause, workload string
	files                                          []string
}

// env is one run's cluster and clients.
type env struct {
	t      *testing.T
	c      *cluster.Cluster
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	images images
	helm   string
}

func TestRealNode(t *testing.T) {
	binDir, imagesDir := os.Getenv("TELESCHED_BIN_DIR"), os.Getenv("TELESCHED_IMAGES_DIR")
	if binDir == "" || imagesDir == "" {
		t.Fatal("TELESCHED_BIN_DIR and TELESCHED_IMAGES_DIR must be set (make test-node sets both)")
	}
	imgs, err := readImages(imagesDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	e := &env{t: t, images: imgs, helm: filepath.Join(binDir, "helm")}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("telesched-node-%d", os.Getpid()))
	step(t, "start the cluster", func() {
		c, err := cluster.Start(ctx, cluster.Options{Dir: dir, BinDir: binDir, SandboxImage: imgs.pause, Progress: logWriter{t}})
		if err != nil {
			if c != nil {
				_ = cluster.Cleanup(dir, binDir, false, logWriter{t})
			}
			t.Fatal(err)
		}
		e.c = c
	})
	t.Cleanup(func() {
		if t.Failed() {
			e.logReleasePods()
			for _, comp := range cluster.Components {
				if b, err := os.ReadFile(filepath.Join(dir, "logs", comp+".log")); err == nil {
					t.Logf("--- the end of %s's log:\n%s", comp, tailLines(string(b), 25))
				}
			}
		}
		step(t, "stop the cluster", func() {
			if err := e.c.Stop(); err != nil {
				t.Errorf("stopping the cluster: %v", err)
			}
		})
	})
	e.kube = kubernetes.NewForConfigOrDie(e.c.Config)
	e.dyn = dynamic.NewForConfigOrDie(e.c.Config)
	step(t, "import the images", func() {
		for _, f := range imgs.files {
			if err := e.c.ImportImage(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		e.kubectlLog(ctx, "--namespace=default", "get", "nodes", "-o", "wide")
	})

	step(t, "install the previous chart ("+previousTGZ+")", func() {
		e.helmRun(ctx, append([]string{"install", releaseName, previousTGZ, "--namespace", namespace, "--create-namespace",
			"--wait", "--timeout", installWait}, e.overrides()...)...)
		e.waitAgentWrites(ctx, time.Now().Add(-time.Hour))
	})

	var timeline *timeline
	step(t, "upgrade to this chart, CRDs adopted by the documented path", func() {
		timeline = e.watchTelemetry(ctx)
		for _, crd := range []string{"nodetelemetries.telemetry.telesched.io", "powerbudgets.telemetry.telesched.io"} {
			e.kubectl(ctx, "label", "crd", crd, "app.kubernetes.io/managed-by=Helm", "--overwrite")
			e.kubectl(ctx, "annotate", "crd", crd, "meta.helm.sh/release-name="+releaseName, "meta.helm.sh/release-namespace="+namespace, "--overwrite")
		}
		began := time.Now()
		e.helmRun(ctx, append([]string{"upgrade", releaseName, chartDir, "--namespace", namespace,
			"--wait", "--timeout", installWait}, e.overrides()...)...)
		e.waitAgentWrites(ctx, began)
		timeline.stop()
		t.Logf("telemetry timeline across helm upgrade:\n%s", timeline)
		heartbeat := e.chartHeartbeat(chartDir)
		if gap := timeline.longestGap(); gap > heartbeat {
			t.Errorf("the node's telemetry went %s without a write across the upgrade, longer than one heartbeat (%s)", gap, heartbeat)
		} else {
			t.Logf("longest time without a write across the upgrade: %s (heartbeat %s)", gap, heartbeat)
		}
		for _, crd := range []string{"nodetelemetries.telemetry.telesched.io", "powerbudgets.telemetry.telesched.io"} {
			out := e.kubectl(ctx, "get", "crd", crd, "-o", "jsonpath={.metadata.labels.helm\\.sh/chart}")
			if !strings.HasPrefix(out, "telesched-") || out == "telesched-0.1.0" {
				t.Errorf("CRD %s after the upgrade: helm.sh/chart label %q, want this chart's", crd, out)
			}
		}
	})

	step(t, "the agent, the scheduler and a pod with schedulerName telesched run", func() {
		e.kubectlLog(ctx, "get", "pods", "-A", "-o", "wide")
		e.kubectlLog(ctx, "get", "nt", "-o", "wide")
		e.checkLeader(ctx)
		e.runWorkload(ctx, "hello-telesched")
	})

	step(t, "the non-root agent reads the kubelet's pod-resources API through the relay", func() {
		e.checkPodResources(ctx)
	})

	step(t, "the API server refuses the agent's own token a write to another node's NodeTelemetry", func() {
		e.checkNodeBoundWrites(ctx)
	})

	step(t, "helm uninstall keeps the CRDs and the NodeTelemetry", func() {
		e.helmRun(ctx, "uninstall", releaseName, "--namespace", namespace, "--wait", "--timeout", installWait)
		e.kubectlLog(ctx, "get", "crd", "-l", "app.kubernetes.io/part-of=telesched", "-o", "custom-columns=NAME:.metadata.name,KEEP:.metadata.annotations.helm\\.sh/resource-policy")
		for _, crd := range []string{"nodetelemetries.telemetry.telesched.io", "powerbudgets.telemetry.telesched.io"} {
			e.kubectl(ctx, "get", "crd", crd)
		}
		e.kubectlLog(ctx, "get", "nt", "-o", "wide")
		if _, err := e.dyn.Resource(ntResource).Get(ctx, e.c.NodeName, metav1.GetOptions{}); err != nil {
			t.Errorf("the node's NodeTelemetry after helm uninstall: %v", err)
		}
		waitFor(ctx, t, "the agent's pods to be gone", readyTimeout, func(ctx context.Context) bool {
			pods, err := e.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: agentLabel})
			return err == nil && len(pods.Items) == 0
		})
		e.kubectlLog(ctx, "get", "pods", "-A", "-o", "wide")
	})

	var published *published
	step(t, "publish the images and the chart to a registry on this machine (make release-local)", func() {
		published = e.releaseLocal(ctx, binDir, imagesDir)
	})

	step(t, "install this chart from the registry as docs/install.md says, with the descheduler (dry-run)", func() {
		began := time.Now()
		registry := strings.TrimPrefix(strings.TrimSuffix(published.Chart, "/charts/telesched"), "oci://")
		e.helmRun(ctx, "install", releaseName, published.Chart, "--version", published.ChartVersion, "--plain-http",
			"--namespace", namespace, "--create-namespace", "--wait", "--timeout", installWait,
			"--set", "image.registry="+registry, "--set", "descheduler.enabled=true",
			"--set", "agent.podResourcesHostPath="+e.c.KubeletRootDir()+"/pod-resources")
		e.checkPulled(ctx, published)
		e.waitAgentWrites(ctx, began)
		e.checkLeader(ctx)
		e.runWorkload(ctx, "hello-again")
		// helm --wait saw the descheduler's Deployment available; its
		// first cycle ran under the chart's RBAC if it logs one.
		waitFor(ctx, t, "the descheduler's first cycle", readyTimeout, func(ctx context.Context) bool {
			out, err := e.c.Kubectl(ctx, "--namespace="+namespace, "logs", "deploy/telesched-descheduler")
			return err == nil && strings.Contains(out, "Descheduling cycle done")
		})
		logs := e.kubectl(ctx, "--namespace="+namespace, "logs", "deploy/telesched-descheduler")
		if strings.Contains(logs, "forbidden") {
			t.Errorf("the descheduler was refused by the API server under the chart's RBAC:\n%s", tailLines(logs, 20))
		}
		// The kubelet mounted the scheduler's ConfigMap where the chart's
		// --scheduler-config points, and the descheduler leads on its Lease.
		for _, want := range []string{`from="/etc/telesched/scheduler-config.yaml, profile telesched"`, `"Leading: descheduling cycles start" lease="kube-system/telesched-descheduler"`} {
			if !strings.Contains(logs, want) {
				t.Errorf("the descheduler's log lacks %s:\n%s", want, tailLines(logs, 20))
			}
		}
		t.Logf("$ kubectl -n %s logs deploy/telesched-descheduler | tail\n%s", namespace, tailLines(logs, 8))
		e.kubectlLog(ctx, "get", "pods", "-A", "-o", "wide")
	})
}

// checkPodResources waits for the node's NodeTelemetry to report the
// podresources source Available: the agent, uid 48811, lists the real
// kubelet's pod-resources API through the podresources-relay sidecar (uid
// 0, no capabilities), where on its own it reports
// SocketPermissionDenied. The kubelet's socket and the relay's log are
// shown.
func (e *env) checkPodResources(ctx context.Context) {
	t := e.t
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("the podresources source, last seen: %s", last)
		}
	}()
	waitFor(ctx, t, "the podresources source to be Available", readyTimeout, func(ctx context.Context) bool {
		nt, err := e.dyn.Resource(ntResource).Get(ctx, e.c.NodeName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		sources, _, _ := unstructured.NestedSlice(nt.Object, "status", "sources")
		for _, src := range sources {
			m, _ := src.(map[string]any)
			if m["name"] == "podresources" {
				last = fmt.Sprint(m)
				return m["state"] == "Available"
			}
		}
		last = fmt.Sprintf("no podresources source in %v", sources)
		return false
	})
	sock := filepath.Join(e.c.KubeletRootDir(), "pod-resources", "kubelet.sock")
	if fi, err := os.Stat(sock); err == nil {
		t.Logf("the kubelet's socket %s: %v", sock, fi.Mode())
	}
	t.Logf("the podresources source: %s", last)
	t.Logf("$ kubectl -n %s logs ds/telesched-agent -c podresources-relay\n%s", namespace,
		tailLines(e.kubectl(ctx, "--namespace="+namespace, "logs", "ds/telesched-agent", "-c", "podresources-relay"), 5))
}

// step runs f as a named, timed part of the test.
func step(t *testing.T, name string, f func()) {
	t.Helper()
	began := time.Now()
	t.Logf("=== %s", name)
	f()
	t.Logf("=== %s: done in %s", name, time.Since(began).Round(100*time.Millisecond))
}

// overrides are the --set flags both charts are installed with: the images
// built here, which nothing may pull, and the kubelet's pod-resources
// directory under the cluster's kubelet root. Tags go by --set-string: a
// build of a commit whose short hash is all digits (7289112) is tagged
// with it, which --set makes a number the schema refuses.
func (e *env) overrides() []string {
	ar, at := splitRef(e.images.agent)
	sr, st := splitRef(e.images.scheduler)
	return []string{
		"--set", "image.agent.repository=" + ar, "--set-string", "image.agent.tag=" + at, "--set", "image.agent.pullPolicy=Never",
		"--set", "image.scheduler.repository=" + sr, "--set-string", "image.scheduler.tag=" + st, "--set", "image.scheduler.pullPolicy=Never",
		"--set", "agent.podResourcesHostPath=" + e.c.KubeletRootDir() + "/pod-resources",
	}
}

func (e *env) helmRun(ctx context.Context, args ...string) {
	e.t.Helper()
	cmd := exec.CommandContext(ctx, e.helm, append(args, "--kubeconfig", e.c.Kubeconfig)...)
	out, err := cmd.CombinedOutput()
	e.t.Logf("$ helm %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		e.t.Fatalf("helm %s: %v", args[0], err)
	}
}

func (e *env) kubectl(ctx context.Context, args ...string) string {
	e.t.Helper()
	out, err := e.c.Kubectl(ctx, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// kubectlLog runs kubectl and logs the command and its output, for the
// record of what the node showed.
func (e *env) kubectlLog(ctx context.Context, args ...string) {
	e.t.Helper()
	e.t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), e.kubectl(ctx, args...))
}

// waitAgentWrites waits for an agent pod on the node to be Ready and for
// the node's NodeTelemetry to carry a sample taken after since.
func (e *env) waitAgentWrites(ctx context.Context, since time.Time) {
	e.t.Helper()
	waitFor(ctx, e.t, "a Ready agent pod", readyTimeout, func(ctx context.Context) bool {
		pods, err := e.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: agentLabel})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && podReady(&p) && p.Spec.NodeName == e.c.NodeName {
				return true
			}
		}
		return false
	})
	waitFor(ctx, e.t, "a sample taken after "+since.Format(time.RFC3339), readyTimeout, func(ctx context.Context) bool {
		st, ok := e.sampleTime(ctx)
		return ok && st.After(since.Add(-time.Second))
	})
}

// sampleTime is the node's NodeTelemetry's status.sampleTime.
func (e *env) sampleTime(ctx context.Context) (time.Time, bool) {
	u, err := e.dyn.Resource(ntResource).Get(ctx, e.c.NodeName, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, false
	}
	s, ok, _ := unstructured.NestedString(u.Object, "status", "sampleTime")
	if !ok {
		return time.Time{}, false
	}
	ts, err := time.Parse(time.RFC3339, s)
	return ts, err == nil
}

// chartHeartbeat is agent.heartbeat of the chart's values.
func (e *env) chartHeartbeat(chart string) time.Duration {
	e.t.Helper()
	out, err := exec.Command(e.helm, "show", "values", chart).Output()
	if err != nil {
		e.t.Fatalf("helm show values %s: %v", chart, err)
	}
	in := false
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "agent:") {
			in = true
			continue
		}
		if in && len(line) > 0 && line[0] != ' ' && line[0] != '#' {
			break
		}
		if f := strings.Fields(line); in && len(f) == 2 && f[0] == "heartbeat:" && strings.HasPrefix(line, "  h") {
			d, err := time.ParseDuration(f[1])
			if err != nil {
				e.t.Fatalf("agent.heartbeat %q: %v", f[1], err)
			}
			return d
		}
	}
	e.t.Fatalf("no agent.heartbeat in %s's values", chart)
	return 0
}

// checkLeader checks that the telesched scheduler holds its leader
// election lease.
func (e *env) checkLeader(ctx context.Context) {
	e.t.Helper()
	var holder string
	waitFor(ctx, e.t, "the telesched scheduler to hold its lease", readyTimeout, func(ctx context.Context) bool {
		leases, err := e.kube.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, l := range leases.Items {
			if l.Name != "telesched-scheduler" || l.Spec.HolderIdentity == nil {
				continue
			}
			// kube-scheduler's identity is <hostname>_<uuid>; its
			// host name is its pod's name. The holder must be a
			// running scheduler pod, not one the upgrade replaced.
			pod, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
			p, err := e.kube.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
			if err == nil && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				holder = l.Namespace + "/" + l.Name + " held by " + *l.Spec.HolderIdentity
				return true
			}
		}
		return false
	})
	e.t.Logf("leader election: lease %s", holder)
}

// runWorkload creates a pod with schedulerName telesched from the
// workload image and waits for it to be bound to the node and Running.
func (e *env) runWorkload(ctx context.Context, name string) {
	e.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			SchedulerName:                 "telesched",
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{{
				Name: "hello", Image: e.images.workload, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: mustQuantity("50m"), corev1.ResourceMemory: mustQuantity("32Mi"),
				}},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if _, err := e.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	var got *corev1.Pod
	waitFor(ctx, e.t, name+" to run", readyTimeout, func(ctx context.Context) bool {
		p, err := e.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		got = p
		return err == nil && p.Status.Phase == corev1.PodRunning && podReady(p)
	})
	if got.Spec.NodeName != e.c.NodeName {
		e.t.Errorf("%s ran on %q, want %s", name, got.Spec.NodeName, e.c.NodeName)
	}
	events, err := e.kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=Scheduled"})
	if err != nil || len(events.Items) == 0 {
		e.t.Errorf("no Scheduled event for %s (%v)", name, err)
	} else if src := events.Items[0].Source.Component + events.Items[0].ReportingController; !strings.Contains(src, "telesched") {
		e.t.Errorf("%s was scheduled by %q, want telesched", name, src)
	} else {
		e.t.Logf("%s: %s (by %s)", name, events.Items[0].Message, src)
	}
	e.kubectlLog(ctx, "get", "pod", name, "--namespace=default", "-o", "wide")
	logs := e.kubectl(ctx, "logs", name, "--namespace=default")
	e.t.Logf("$ kubectl logs %s\n%s", name, logs)
}

// checkNodeBoundWrites takes the token the kubelet mounted into the agent's
// pod (bound to the pod and its node) and checks that the API server lets
// it write its own node's NodeTelemetry and refuses it another node's.
func (e *env) checkNodeBoundWrites(ctx context.Context) {
	e.t.Helper()
	pods, err := e.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: agentLabel})
	if err != nil || len(pods.Items) == 0 {
		e.t.Fatalf("agent pods: %v (%d)", err, len(pods.Items))
	}
	pod := pods.Items[0]
	tokens, _ := filepath.Glob(filepath.Join(e.c.KubeletRootDir(), "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "*", "token"))
	if len(tokens) != 1 {
		e.t.Fatalf("the agent pod's projected token on the host: %d files (%v)", len(tokens), tokens)
	}
	token, err := os.ReadFile(tokens[0])
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("the agent pod %s's token, as the kubelet mounted it: %s", pod.Name, tokens[0])
	// Another node's NodeTelemetry, made by the administrator, and a
	// status the schema accepts (this node's own), so that only the
	// node-bound policy can refuse the write.
	own, err := e.dyn.Resource(ntResource).Get(ctx, e.c.NodeName, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	other := "another-node"
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "telemetry.telesched.io/v1alpha1", "kind": "NodeTelemetry",
		"metadata": map[string]any{"name": other},
	}}
	if _, err := e.dyn.Resource(ntResource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	// As the agent writes: server-side apply of the status, which its
	// RBAC grants (patch on nodetelemetries/status).
	applied := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "telemetry.telesched.io/v1alpha1", "kind": "NodeTelemetry",
			"metadata": map[string]any{"name": name}, "status": own.Object["status"],
		}}
	}
	opts := metav1.ApplyOptions{FieldManager: "telesched-node-test", Force: true}
	cfg := rest.AnonymousClientConfig(e.c.Config)
	cfg.BearerToken = string(token)
	agent := dynamic.NewForConfigOrDie(cfg)
	_, err = agent.Resource(ntResource).ApplyStatus(ctx, other, applied(other), opts)
	e.t.Logf("the agent's token applying %s's NodeTelemetry status: %v", other, err)
	want := "telesched-agent on node " + e.c.NodeName + " may only write NodeTelemetry " + e.c.NodeName + ", not " + other
	switch {
	case err == nil:
		e.t.Errorf("the API server let the agent on %s write %s's NodeTelemetry", e.c.NodeName, other)
	case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err), !strings.Contains(err.Error(), want):
		e.t.Errorf("want the node-bound policy's refusal (%q), got: %v", want, err)
	}
	// The same token may write its own node's: the refusal above is the
	// policy's, not a token the API server does not take.
	_, err = agent.Resource(ntResource).ApplyStatus(ctx, e.c.NodeName, applied(e.c.NodeName), opts)
	e.t.Logf("the agent's token applying its own node %s's NodeTelemetry status: %v", e.c.NodeName, err)
	if err != nil {
		e.t.Errorf("the agent's own token may not write its own node's NodeTelemetry: %v", err)
	}
}

// timeline records the node's NodeTelemetry sample times and the agent
// pods, polled every 500 ms.
type timeline struct {
	mu      sync.Mutex
	entries []timelineEntry
	done    chan struct{}
	stopped chan struct{}
}

type timelineEntry struct {
	at     time.Time
	sample time.Time
	agents string
}

func (e *env) watchTelemetry(ctx context.Context) *timeline {
	tl := &timeline{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(tl.stopped)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			st, _ := e.sampleTime(ctx)
			var agents []string
			if pods, err := e.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: agentLabel}); err == nil {
				for _, p := range pods.Items {
					state := string(p.Status.Phase)
					if podReady(&p) {
						state += ",Ready"
					}
					if p.DeletionTimestamp != nil {
						state += ",Terminating"
					}
					agents = append(agents, p.Name+"("+state+")")
				}
			}
			sort.Strings(agents)
			tl.mu.Lock()
			tl.entries = append(tl.entries, timelineEntry{at: time.Now(), sample: st, agents: strings.Join(agents, " ")})
			tl.mu.Unlock()
			select {
			case <-tl.done:
				return
			case <-tick.C:
			}
		}
	}()
	return tl
}

func (tl *timeline) stop() {
	close(tl.done)
	<-tl.stopped
}

// longestGap is the longest time between two successive samples seen,
// counting from the start of the window to the first new sample and from
// the last sample to the end of the window.
func (tl *timeline) longestGap() time.Duration {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.entries) == 0 {
		return 0
	}
	var longest time.Duration
	last := tl.entries[0].sample
	for _, en := range tl.entries[1:] {
		if en.sample.After(last) {
			longest = max(longest, en.sample.Sub(last))
			last = en.sample
		}
	}
	return max(longest, tl.entries[len(tl.entries)-1].at.Sub(last))
}

// String prints a line for each change of the sample or of the agent pods.
func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var b strings.Builder
	var prev timelineEntry
	for i, en := range tl.entries {
		if i > 0 && en.sample.Equal(prev.sample) && en.agents == prev.agents {
			continue
		}
		fmt.Fprintf(&b, "%s  sampleTime %s  agents %s\n", en.at.Format("15:04:05.0"), en.sample.Format("15:04:05"), en.agents)
		prev = en
	}
	return b.String()
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitFor(ctx context.Context, t *testing.T, what string, timeout time.Duration, cond func(context.Context) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	})
	if err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

// logReleasePods logs the end of every container's log in the release's
// namespace, previous instances included: a pod that is not Ready says why
// only there.
func (e *env) logReleasePods() {
	if e.kube == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := e.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Logf("listing the pods of %s: %v", namespace, err)
		return
	}
	tail := int64(400)
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			for _, previous := range []bool{false, true} {
				b, err := e.kube.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail, Previous: previous}).DoRaw(ctx)
				if err != nil {
					if !previous {
						e.t.Logf("--- the log of %s/%s: %v", p.Name, c.Name, err)
					}
					continue
				}
				e.t.Logf("--- the end of %s/%s's log (previous instance: %t), repeats folded:\n%s", p.Name, c.Name, previous, tailLines(foldRepeats(string(b)), 40))
			}
		}
	}
}

// foldRepeats keeps the first of the klog lines that say the same after
// their header, and counts the rest, so that one error every retry does
// not hide the lines before it.
func foldRepeats(log string) string {
	type first struct{ line, msg string }
	var kept []first
	count := map[string]int{}
	for _, l := range strings.Split(strings.TrimRight(log, "\n"), "\n") {
		msg := l
		if i := strings.Index(l, "] "); i >= 0 {
			msg = l[i+2:]
		}
		if count[msg]++; count[msg] == 1 {
			kept = append(kept, first{l, msg})
		}
	}
	out := make([]string, len(kept))
	for i, k := range kept {
		out[i] = k.line
		if n := count[k.msg]; n > 1 {
			out[i] = fmt.Sprintf("%s (and %d more)", k.line, n-1)
		}
	}
	return strings.Join(out, "\n")
}

// readImages reads the manifest make images-local wrote into dir.
func readImages(dir string) (images, error) {
	refs, tarballs, err := cluster.Images(dir)
	if err != nil {
		return images{}, err
	}
	imgs := images{agent: refs["telesched-agent"], scheduler: refs["telesched-scheduler"], descheduler: refs["telesched-descheduler"],
		pause: refs["telesched-pause"], workload: refs["telesched-workload"], files: tarballs}
	if imgs.agent == "" || imgs.scheduler == "" || imgs.descheduler == "" || imgs.pause == "" || imgs.workload == "" {
		return imgs, errors.New("images.json lacks one of telesched-agent, telesched-scheduler, telesched-descheduler, telesched-pause, telesched-workload")
	}
	return imgs, nil
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// splitRef splits an image reference into its repository and tag.
func splitRef(ref string) (repo, tag string) {
	i := strings.LastIndex(ref, ":")
	return ref[:i], ref[i+1:]
}

// products are the images a release publishes and the chart runs.
var products = []string{"telesched-agent", "telesched-scheduler", "telesched-descheduler"}

// published is what bin/publish prints once the images and the chart are
// in the registry (hack/release, the JSON of its Published).
type published struct {
	Images map[string]struct {
		Ref    string `json:"ref"`
		Digest string `json:"digest"`
	} `json:"images"`
	Chart        string `json:"chart"`
	ChartVersion string `json:"chartVersion"`
}

// releaseLocal runs make release-local's command, bin/publish -serve: a
// registry of its own on a free port of this machine, the images and the
// chart pushed to it, served until the test ends. A process, as an operator
// runs it, which also keeps go-containerregistry out of telesched's module.
func (e *env) releaseLocal(ctx context.Context, binDir, imagesDir string) *published {
	t := e.t
	cmd := exec.Command(filepath.Join(binDir, "publish"), "-serve", "127.0.0.1:0",
		"-images", imagesDir, "-chart", chartDir, "-helm", e.helm)
	cmd.Stderr = logWriter{t}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v (make test-node builds bin/publish from hack/release)", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	p := &published{}
	done := make(chan error, 1)
	go func() { done <- json.NewDecoder(stdout).Decode(p) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(5 * time.Minute):
		err = errors.New("nothing published after 5 minutes")
	}
	if err != nil {
		t.Fatalf("bin/publish: %v", err)
	}
	return p
}

// checkPulled shows the release's pods and the images the kubelet ran,
// and checks that every telesched container ran an image pulled from the
// registry p was published to, by the digest published: the operator's
// path, with nothing imported.
func (e *env) checkPulled(ctx context.Context, p *published) {
	t := e.t
	e.kubectlLog(ctx, "--namespace="+namespace, "get", "pods", "-o", "wide")
	e.kubectlLog(ctx, "--namespace="+namespace, "get", "pods", "-o",
		`jsonpath={range .items[*]}{.metadata.name}{range .status.initContainerStatuses[*]}{"\n  "}{.name}{" "}{.imageID}{end}{range .status.containerStatuses[*]}{"\n  "}{.name}{" "}{.imageID}{end}{"\n"}{end}`)
	pods, err := e.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, pod := range pods.Items {
		for _, cs := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
			for name, img := range p.Images {
				repo := img.Ref[:strings.LastIndex(img.Ref, ":")]
				if !strings.HasPrefix(cs.Image, repo+":") && !strings.HasPrefix(cs.Image, repo+"@") {
					continue
				}
				seen[name] = true
				if want := repo + "@" + img.Digest; cs.ImageID != want {
					t.Errorf("%s/%s ran image %s, want %s, pulled from the registry", pod.Name, cs.Name, cs.ImageID, want)
				}
			}
		}
	}
	for _, name := range products {
		if !seen[name] {
			t.Errorf("no container of the release ran %s from %s", name, p.Images[name].Ref)
		}
	}
}
