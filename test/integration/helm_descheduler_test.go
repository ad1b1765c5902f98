// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/descheduler/plugins/thermal"
	"github.com/telesched/telesched/sandbox/controlplane"
)

// deschedulerServiceAccount is the chart's (and deploy/descheduler's).
const deschedulerServiceAccount = "telesched-descheduler"

// TestHelmDeschedulerRunsWithChartRBAC installs the chart with
// descheduler.enabled on the real API server, as `helm install` would, and
// runs bin/telesched-descheduler with its Deployment's args and a token of
// the chart's ServiceAccount telesched-descheduler, so the chart's RBAC is
// all it has: its informers must list and watch what they need, and in the
// chart's default dry-run it must report a pod on a hot node (Event
// TeleschedWouldEvict, through events.k8s.io, and the eviction sent as a
// server-side dry run, which needs create on pods/eviction) and evict
// nothing.
func TestHelmDeschedulerRunsWithChartRBAC(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)
	binDir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}

	rendered := helmTemplate(ctx, t, binDir, "descheduler.enabled=true")
	applyManifests(ctx, t, c, rendered)
	var args []string
	// The scheduler's configuration, which the chart mounts into the pod
	// at /etc/telesched: here in a directory of the test's.
	configDir := t.TempDir()
	for _, o := range readObjects(t, rendered) {
		if o.GetKind() == "ConfigMap" && o.GetName() == "telesched-scheduler-config" {
			data, _, _ := unstructured.NestedString(o.Object, "data", "scheduler-config.yaml")
			if err := os.WriteFile(filepath.Join(configDir, "scheduler-config.yaml"), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if o.GetKind() != "Deployment" || o.GetName() != "telesched-descheduler" {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, a := range cs[0].(map[string]any)["args"].([]any) {
			// As the kubelet expands it from the downward API.
			a := strings.ReplaceAll(a.(string), "$(POD_NAMESPACE)", agentNamespace)
			args = append(args, strings.ReplaceAll(a, "=/etc/telesched/", "="+configDir+"/"))
		}
	}
	if !strings.Contains(strings.Join(args, " "), "--dry-run=true") {
		t.Fatalf("the chart's descheduler args %v: want --dry-run=true by default", args)
	}

	deschedNode(ctx, t, c, "dshelm-hot", "dshelm", true)
	deschedNode(ctx, t, c, "dshelm-cool", "dshelm", false)
	deschedPod(ctx, t, c, "dshelm-pod", "dshelm-hot", "dshelm")

	// The chart's args, then this test's: a later flag wins. Act at the
	// first cycle, every second.
	kubeconfig := tokenKubeconfig(t, tokenFor(ctx, t, c, deschedulerServiceAccount, nil))
	addr := freeAddress(t)
	args = append(args, "--kubeconfig="+kubeconfig, "--metrics-bind-address="+addr, "--interval=1s", "--thermal-sustain=0s")
	out := startProcess(t, filepath.Join(binDir, "telesched-descheduler"), args...)

	waitReady(t, "TeleschedWouldEvict on dshelm-pod from the descheduler under the chart's ServiceAccount", out, 60*time.Second, func() bool {
		evs, err := c.kube.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "dshelm-pod" && e.Reason == descheduler.ReasonWouldEvict {
				return true
			}
		}
		return false
	})
	if evicted(t, c, "dshelm-pod") {
		t.Error("the chart's descheduler evicted dshelm-pod in its default dry-run")
	}
	fams := scrape(t, "http://"+addr+"/metrics")
	var wouldEvict float64
	for _, m := range fams["telesched_descheduler_evictions_total"].GetMetric() {
		if labelsAre(m, thermal.Name, descheduler.ResultWouldEvict) {
			wouldEvict = m.GetCounter().GetValue()
		}
	}
	if wouldEvict < 1 {
		t.Errorf("telesched_descheduler_evictions_total{result=%q} = %v, want >= 1", descheduler.ResultWouldEvict, wouldEvict)
	}
	// A second of cycles more, then nothing the API server refused.
	time.Sleep(2 * time.Second)
	if log := out.String(); !strings.Contains(log, `from="`+configDir+`/scheduler-config.yaml, profile telesched"`) {
		t.Errorf("the descheduler did not say it judges nodes by the chart's scheduler configuration:\n%s", tail(log, 30))
	}
	if log := out.String(); strings.Contains(strings.ToLower(log), "forbidden") {
		t.Errorf("the descheduler was refused something under the chart's RBAC:\n%s", tail(log, 30))
	}
}
