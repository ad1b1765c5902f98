// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/scheduler/compat"
)

// previousChart is the chart users upgrade from: 0.1.0, `helm package` of
// deploy/helm/telesched at 09b3ce5 (test/node/testdata/README.md).
var previousChart = filepath.Join("..", "node", "testdata", "telesched-0.1.0.tgz")

// chartMeta returns the chart's Chart.yaml.
func chartMeta(t *testing.T) map[string]any {
	t.Helper()
	return readYAMLMap(t, filepath.Join(chartDir, "Chart.yaml"))
}

// allOn are values that render every object the chart can make.
var allOn = []string{"namespace.create=true", "agent.gpu.enabled=true", "scheduler.serveDefaultScheduler=true",
	"monitoring.podMonitor.enabled=true", "monitoring.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true",
	"dashboards.enabled=true", "descheduler.enabled=true"}

// renderRelease renders the chart as release name, with the values set.
func renderRelease(t *testing.T, chart, name string, values ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", name, chart, "--namespace", "telesched-system", "--kube-version", helmKubeVersion}
	for _, v := range values {
		args = append(args, "--set", v)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifests(t, "helm template "+chart, out)
}

// TestHelmStandardLabels: every object the chart renders carries the
// standard labels, with the release's name as its instance, and
// commonLabels; every pod template its workload's selector labels,
// commonLabels and its podLabels.
func TestHelmStandardLabels(t *testing.T) {
	meta := chartMeta(t)
	objs := renderRelease(t, chartDir, "edge", append(slices.Clone(allOn),
		"commonLabels.team=platform", "agent.podLabels.tier=node", "scheduler.podLabels.tier=control",
		"descheduler.podLabels.tier=control")...)
	want := map[string]string{
		"helm.sh/chart":                fmt.Sprintf("telesched-%v", meta["version"]),
		"app.kubernetes.io/instance":   "edge",
		"app.kubernetes.io/version":    fmt.Sprint(meta["appVersion"]),
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/part-of":    "telesched",
		"team":                         "platform",
	}
	for _, o := range objs {
		labels := o.GetLabels()
		for k, v := range want {
			if labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", objectID(o), k, labels[k], v)
			}
		}
		for _, k := range []string{"app.kubernetes.io/name", "app.kubernetes.io/component"} {
			if labels[k] == "" && o.GetKind() != "Namespace" {
				t.Errorf("%s: no label %s", objectID(o), k)
			}
		}
		if o.GetKind() != "DaemonSet" && o.GetKind() != "Deployment" {
			continue
		}
		pod, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		for k, v := range sel {
			if pod[k] != v {
				t.Errorf("%s: pod label %s=%q, its selector's is %q", objectID(o), k, pod[k], v)
			}
		}
		tier := map[string]string{"DaemonSet": "node", "Deployment": "control"}[o.GetKind()]
		if pod["team"] != "platform" || pod["tier"] != tier {
			t.Errorf("%s: pod labels %v, want team=platform (commonLabels) and tier=%s (podLabels)", objectID(o), pod, tier)
		}
	}
}

// selectors returns each DaemonSet's and Deployment's spec.selector, by
// object.
func selectors(objs []*unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" || o.GetKind() == "Deployment" {
			out[objectID(o)], _, _ = unstructured.NestedFieldCopy(o.Object, "spec", "selector")
		}
	}
	return out
}

// TestHelmSelectorsMatchPreviousChart: the workloads' selectors are
// 0.1.0's. They are immutable: `helm upgrade` from 0.1.0 would fail with
// "field is immutable" if one changed, and a label added to them never
// matches the running pods.
func TestHelmSelectorsMatchPreviousChart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// values of 0.1.0 and of this chart.
		old, values []string
	}{
		{"defaults", nil, nil},
		{"gpu", []string{"agent.gpu.enabled=true"}, []string{"agent.gpu.enabled=true"}},
		{"with labels", []string{"agent.gpu.enabled=true"},
			[]string{"agent.gpu.enabled=true", "commonLabels.team=a", "agent.podLabels.x=y", "scheduler.podLabels.x=y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := selectors(renderRelease(t, previousChart, "telesched", tc.old...))
			got := selectors(renderRelease(t, chartDir, "telesched", tc.values...))
			if len(old) == 0 {
				t.Fatal("0.1.0 renders no workloads")
			}
			if diff := cmp.Diff(old, got); diff != "" {
				t.Errorf("selectors differ from 0.1.0's (-0.1.0 +now):\n%s", diff)
			}
		})
	}
}

// TestHelmCRDs: the chart renders deploy/crds' CRDs, spec for spec (they
// are read from it; nothing is copied by hand), as templates of the
// release: crds.enabled=false renders none, crds.keep (the default)
// annotates them helm.sh/resource-policy: keep, and the chart has no
// crds/ directory, which Helm would install once and never upgrade.
func TestHelmCRDs(t *testing.T) {
	if _, err := os.Stat(filepath.Join(chartDir, "crds")); err == nil {
		t.Errorf("%s/crds exists: Helm installs crds/ once and never upgrades it; the CRDs are templates (templates/crds.yaml)", chartDir)
	}
	files, err := filepath.Glob(filepath.Join(manifestsRoot, "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in deploy/crds: %v", err)
	}
	want := map[string]*unstructured.Unstructured{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		for _, o := range readManifests(t, f) {
			want[o.GetName()] = o
		}
	}
	crdsOf := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		out := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				out[o.GetName()] = o
			}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		values   []string
		wantCRDs bool
		wantKeep bool
	}{
		{"defaults", nil, true, true},
		{"crds.keep=false", []string{"crds.keep=false"}, true, false},
		{"crds.enabled=false", []string{"crds.enabled=false"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := crdsOf(renderRelease(t, chartDir, "telesched", tc.values...))
			if !tc.wantCRDs {
				if len(got) != 0 {
					t.Errorf("rendered %d CRDs, want none", len(got))
				}
				return
			}
			var wantNames, gotNames []string
			for n := range want {
				wantNames = append(wantNames, n)
			}
			for n := range got {
				gotNames = append(gotNames, n)
			}
			sort.Strings(wantNames)
			sort.Strings(gotNames)
			if diff := cmp.Diff(wantNames, gotNames); diff != "" {
				t.Fatalf("CRDs (-deploy/crds +chart):\n%s", diff)
			}
			for name, w := range want {
				g := got[name]
				if diff := cmp.Diff(w.Object["spec"], g.Object["spec"]); diff != "" {
					t.Errorf("CRD %s spec differs from deploy/crds' (-deploy/crds +chart):\n%s", name, diff)
				}
				for k, v := range w.GetAnnotations() {
					if g.GetAnnotations()[k] != v {
						t.Errorf("CRD %s: annotation %s=%q, deploy/crds has %q", name, k, g.GetAnnotations()[k], v)
					}
				}
				keep := g.GetAnnotations()["helm.sh/resource-policy"]
				if (keep == "keep") != tc.wantKeep || (!tc.wantKeep && keep != "") {
					t.Errorf("CRD %s: helm.sh/resource-policy %q, want keep: %t", name, keep, tc.wantKeep)
				}
			}
		})
	}
}

// TestHelmChartVersionAndPrevious: the chart is newer than the recorded
// previous chart, so `helm upgrade` from it is an upgrade.
func TestHelmChartVersionAndPrevious(t *testing.T) {
	out, err := runHelm(t, "show", "chart", previousChart)
	if err != nil {
		t.Fatal(err)
	}
	var prev map[string]any
	if err := yaml.Unmarshal(out, &prev); err != nil {
		t.Fatal(err)
	}
	meta := chartMeta(t)
	if prev["version"] != "0.1.0" {
		t.Errorf("%s is chart %v, want 0.1.0", previousChart, prev["version"])
	}
	if meta["version"] == prev["version"] {
		t.Errorf("chart version %v is the previous chart's", meta["version"])
	}
	if want := "v" + fmt.Sprint(meta["version"]); meta["appVersion"] != want {
		t.Errorf("appVersion %v, want %s (the images of this version)", meta["appVersion"], want)
	}
}

// adoption matches the README's adoption commands, one CRD each.
var adoption = regexp.MustCompile(`kubectl (label|annotate) --overwrite crd ([a-z.]+) (.+)`)

// TestHelmReadmeAdoptsEveryCRD: the README's "Upgrading from 0.1.0" labels
// and annotates every CRD the chart renders with the ownership Helm checks
// before it takes an object into a release (managed-by=Helm, the release's
// name and namespace), and then runs helm upgrade.
func TestHelmReadmeAdoptsEveryCRD(t *testing.T) {
	readme := readChartReadme(t)
	i := strings.Index(readme, "## Upgrading from 0.1.0")
	if i < 0 {
		t.Fatal(`README.md has no "## Upgrading from 0.1.0"`)
	}
	section := readme[i:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	labelled, annotated := map[string]string{}, map[string]string{}
	for _, m := range adoption.FindAllStringSubmatch(section, -1) {
		if m[1] == "label" {
			labelled[m[2]] = m[3]
		} else {
			annotated[m[2]] = m[3]
		}
	}
	for _, o := range renderHelm(t) {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if l := labelled[o.GetName()]; !strings.Contains(l, "app.kubernetes.io/managed-by=Helm") {
			t.Errorf("README does not label CRD %s app.kubernetes.io/managed-by=Helm (got %q)", o.GetName(), l)
		}
		a := annotated[o.GetName()]
		for _, want := range []string{"meta.helm.sh/release-name=", "meta.helm.sh/release-namespace="} {
			if !strings.Contains(a, want) {
				t.Errorf("README does not annotate CRD %s %s (got %q)", o.GetName(), want, a)
			}
		}
	}
	if !strings.Contains(section, "helm upgrade") {
		t.Error(`"Upgrading from 0.1.0" has no helm upgrade`)
	}
}

// readChartReadme returns the chart's README.md, which `helm show readme`
// prints.
func readChartReadme(t *testing.T) string {
	t.Helper()
	out, err := runHelm(t, "show", "readme", chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(out)) == 0 {
		t.Fatal("helm show readme prints nothing")
	}
	return string(out)
}

// valuePaths returns the dotted path of every value in values.yaml, down
// to the leaves: a scalar, a list, an empty map, or a map the chart
// passes on whole (passedWhole).
func valuePaths(prefix string, m map[string]any, out *[]string) {
	for k, v := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !passedWhole[p] {
			valuePaths(p, sub, out)
			continue
		}
		*out = append(*out, p)
	}
}

// passedWhole are the maps of values.yaml the chart passes to Kubernetes
// as they are; the README lists the map, not its keys.
var passedWhole = map[string]bool{
	"agent.nodeSelector": true, "agent.resources": true, "agent.gpu.resources": true, "agent.podResources.relay.resources": true,
	"scheduler.resources": true, "scheduler.affinity": true, "scheduler.featureGates": true,
	"descheduler.resources": true, "dashboards.labels": true,
}

// TestHelmReadmeListsEveryValue: the README's values table has a row for
// every value in values.yaml, and no row for a value that is not there.
func TestHelmReadmeListsEveryValue(t *testing.T) {
	values := readYAMLMap(t, filepath.Join(chartDir, "values.yaml"))
	var paths []string
	valuePaths("", values, &paths)
	sort.Strings(paths)
	rows := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `([A-Za-z0-9_.]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(readChartReadme(t), -1) {
		rows[m[1]] = true
	}
	for _, p := range paths {
		if !rows[p] {
			t.Errorf("values.yaml has %s; the README's values table has no row \"| `%s` |\"", p, p)
		}
		delete(rows, p)
	}
	for p := range rows {
		t.Errorf("the README's values table has a row for %s, which values.yaml does not have", p)
	}
}

// TestHelmNotesNeedNoCheckout: NOTES.txt names no path of this
// repository (users install from a chart repository) and says how to see
// the telemetry, the pods, and how a pod opts in.
func TestHelmNotesNeedNoCheckout(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	notes := string(data)
	for _, path := range []string{"deploy/", "docs/", "crds/", "README.md"} {
		if strings.Contains(notes, path) {
			t.Errorf("NOTES.txt names %q, which a chart repository's user does not have", path)
		}
	}
	for _, want := range []string{"kubectl get nodetelemetry -o wide", "app.kubernetes.io/name=telesched-agent",
		"app.kubernetes.io/name=telesched-scheduler", "schedulerName: telesched", "helm show readme"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt does not say %q", want)
		}
	}
}

// TestHelmDashboards: dashboards.enabled renders one ConfigMap per
// dashboard of dashboards/, its JSON byte for byte, with the sidecar's
// label, in dashboards.namespace; off by default.
func TestHelmDashboards(t *testing.T) {
	for _, o := range renderHelm(t) {
		if strings.HasPrefix(o.GetName(), "telesched-dashboard-") {
			t.Errorf("%s rendered with dashboards.enabled=false (the default)", objectID(o))
		}
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in dashboards/: %v", err)
	}
	objs := renderHelm(t, "dashboards.enabled=true", "dashboards.namespace=grafana",
		"dashboards.annotations.grafana_folder=telesched", "dashboards.labels.custom=yes")
	n := 0
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "telesched-dashboard-") {
			n++
		}
	}
	if n != len(files) {
		t.Errorf("%d dashboard ConfigMaps, want %d (dashboards/*.json)", n, len(files))
	}
	for _, f := range files {
		base := filepath.Base(f)
		cm := findObject(t, objs, "ConfigMap", "telesched-dashboard-"+strings.TrimSuffix(base, ".json"))
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := unstructured.NestedString(cm.Object, "data", base)
		if got != strings.TrimRight(string(want), "\n") {
			t.Errorf("ConfigMap %s: data[%s] is not dashboards/%s", cm.GetName(), base, base)
		}
		if cm.GetNamespace() != "grafana" {
			t.Errorf("ConfigMap %s in namespace %q, want grafana (dashboards.namespace)", cm.GetName(), cm.GetNamespace())
		}
		if l := cm.GetLabels(); l["grafana_dashboard"] != "1" || l["custom"] != "yes" {
			t.Errorf("ConfigMap %s labels %v, want grafana_dashboard=1 (the default) and custom=yes", cm.GetName(), l)
		}
		if a := cm.GetAnnotations()["grafana_folder"]; a != "telesched" {
			t.Errorf("ConfigMap %s annotation grafana_folder=%q, want telesched", cm.GetName(), a)
		}
	}
}

// endpointOf returns the first scrape endpoint of a ServiceMonitor or
// PodMonitor.
func endpointOf(t *testing.T, o *unstructured.Unstructured, field string) map[string]any {
	t.Helper()
	eps, _, _ := unstructured.NestedSlice(o.Object, "spec", field)
	if len(eps) != 1 {
		t.Fatalf("%s: %d %s, want 1", objectID(o), len(eps), field)
	}
	return eps[0].(map[string]any)
}

// TestHelmServiceMonitor: the monitors scrape at the documented interval
// and timeout; the ServiceMonitor authorizes with a Bearer token from a
// Secret (not the deprecated bearerTokenFile), skips verification only of
// the scheduler's self-signed certificate, and verifies against the CA of
// scheduler.tls.secretName when it is set.
func TestHelmServiceMonitor(t *testing.T) {
	on := []string{"monitoring.podMonitor.enabled=true", "monitoring.serviceMonitor.enabled=true"}
	objs := renderHelm(t, on...)
	sm := endpointOf(t, findObject(t, objs, "ServiceMonitor", "telesched-scheduler"), "endpoints")
	pm := endpointOf(t, findObject(t, objs, "PodMonitor", "telesched-agent"), "podMetricsEndpoints")
	for what, ep := range map[string]map[string]any{"ServiceMonitor": sm, "PodMonitor": pm} {
		if ep["interval"] != "30s" || ep["scrapeTimeout"] != "10s" {
			t.Errorf("%s: interval %v, scrapeTimeout %v, want 30s and 10s (values.yaml's defaults)", what, ep["interval"], ep["scrapeTimeout"])
		}
	}
	wantAuth := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "telesched-metrics-scraper", "key": "token"}}
	if diff := cmp.Diff(wantAuth, sm["authorization"]); diff != "" {
		t.Errorf("ServiceMonitor authorization (-want +got):\n%s", diff)
	}
	if _, ok := sm["bearerTokenFile"]; ok {
		t.Error("ServiceMonitor uses bearerTokenFile, which prometheus-operator deprecates for authorization")
	}
	if diff := cmp.Diff(map[string]any{"insecureSkipVerify": true}, sm["tlsConfig"]); diff != "" {
		t.Errorf("ServiceMonitor tlsConfig without scheduler.tls.secretName (-want +got):\n%s", diff)
	}
	secret := findObject(t, objs, "Secret", "telesched-metrics-scraper")
	if secret.Object["type"] != "kubernetes.io/service-account-token" || secret.GetAnnotations()["kubernetes.io/service-account.name"] != "telesched-metrics-scraper" {
		t.Errorf("Secret %s: type %v, annotations %v, want a token of ServiceAccount telesched-metrics-scraper", secret.GetName(), secret.Object["type"], secret.GetAnnotations())
	}
	findObject(t, objs, "ServiceAccount", "telesched-metrics-scraper")
	binding := findObject(t, objs, "ClusterRoleBinding", "telesched-metrics-reader")
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	wantSubjects := []any{map[string]any{"kind": "ServiceAccount", "name": "telesched-metrics-scraper", "namespace": "telesched-system"}}
	if diff := cmp.Diff(wantSubjects, subjects); diff != "" {
		t.Errorf("ClusterRoleBinding subjects (-want +got):\n%s", diff)
	}

	t.Run("own Secret", func(t *testing.T) {
		objs := renderHelm(t, append(slices.Clone(on), "monitoring.serviceMonitor.bearerTokenSecret.create=false",
			"monitoring.serviceMonitor.bearerTokenSecret.name=mine", "monitoring.serviceMonitor.bearerTokenSecret.key=jwt")...)
		sm := endpointOf(t, findObject(t, objs, "ServiceMonitor", "telesched-scheduler"), "endpoints")
		want := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "mine", "key": "jwt"}}
		if diff := cmp.Diff(want, sm["authorization"]); diff != "" {
			t.Errorf("authorization (-want +got):\n%s", diff)
		}
		for _, o := range objs {
			if o.GetName() == "mine" || o.GetName() == "telesched-metrics-scraper" || (o.GetKind() == "ClusterRoleBinding" && o.GetName() == "telesched-metrics-reader") {
				t.Errorf("%s rendered with bearerTokenSecret.create=false", objectID(o))
			}
		}
	})

	t.Run("scheduler.tls.secretName", func(t *testing.T) {
		objs := renderHelm(t, append(slices.Clone(on), "scheduler.tls.secretName=scheduler-tls")...)
		sm := endpointOf(t, findObject(t, objs, "ServiceMonitor", "telesched-scheduler"), "endpoints")
		want := map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "scheduler-tls", "key": "ca.crt"}},
			"serverName": "telesched-scheduler.telesched-system.svc"}
		if diff := cmp.Diff(want, sm["tlsConfig"]); diff != "" {
			t.Errorf("tlsConfig (-want +got):\n%s", diff)
		}
		d := findObject(t, objs, "Deployment", "telesched-scheduler")
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		args := fmt.Sprint(containers[0].(map[string]any)["args"])
		for _, flag := range []string{"--tls-cert-file=/etc/telesched-tls/tls.crt", "--tls-private-key-file=/etc/telesched-tls/tls.key"} {
			if !strings.Contains(args, flag) {
				t.Errorf("scheduler args %s, want %s", args, flag)
			}
		}
		vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
		if !strings.Contains(fmt.Sprint(vols), "secretName:scheduler-tls") {
			t.Errorf("scheduler volumes %v mount no Secret scheduler-tls", vols)
		}
	})
}

// TestHelmAffinity: agent.affinity keeps the chart's own node rules in
// each required term (never virtual-kubelet nodes; each GPU DaemonSet on
// its side), scheduler.affinity merges with the default anti-affinity
// (null drops it), and
// the pods carry their podAnnotations and the ServiceAccounts theirs.
func TestHelmAffinity(t *testing.T) {
	objs := renderHelm(t, "agent.gpu.enabled=true",
		"agent.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=zone",
		"agent.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
		"agent.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions[0].key=rack",
		"agent.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions[0].operator=Exists",
		"scheduler.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1",
		"scheduler.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key=control",
		"scheduler.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator=Exists",
		"agent.podAnnotations.a=one", "scheduler.podAnnotations.s=two",
		"agent.serviceAccount.annotations.iam=agent-role", "scheduler.serviceAccount.labels.sa=sched")
	vk := map[string]any{"key": "type", "operator": "NotIn", "values": []any{"virtual-kubelet"}}
	label := func(key, op string) map[string]any {
		return map[string]any{"key": key, "operator": op, "values": []any{"true"}}
	}
	zone, rack := map[string]any{"key": "zone", "operator": "Exists"}, map[string]any{"key": "rack", "operator": "Exists"}
	nfd, present := "feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present"
	for name, want := range map[string][]any{
		// Off both GPU labels: one term for each of the user's.
		"telesched-agent": {
			map[string]any{"matchExpressions": []any{zone, vk, label(nfd, "NotIn"), label(present, "NotIn")}},
			map[string]any{"matchExpressions": []any{rack, vk, label(nfd, "NotIn"), label(present, "NotIn")}},
		},
		// On either: each of the user's terms once per label.
		"telesched-agent-gpu": {
			map[string]any{"matchExpressions": []any{zone, vk, label(nfd, "In")}},
			map[string]any{"matchExpressions": []any{zone, vk, label(present, "In")}},
			map[string]any{"matchExpressions": []any{rack, vk, label(nfd, "In")}},
			map[string]any{"matchExpressions": []any{rack, vk, label(present, "In")}},
		},
	} {
		ds := findObject(t, objs, "DaemonSet", name)
		terms, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "affinity", "nodeAffinity",
			"requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
		if diff := cmp.Diff(want, terms); diff != "" {
			t.Errorf("DaemonSet %s nodeSelectorTerms (-want +got):\n%s", name, diff)
		}
		if a, _, _ := unstructured.NestedString(ds.Object, "spec", "template", "metadata", "annotations", "a"); a != "one" {
			t.Errorf("DaemonSet %s: pod annotation a=%q, want one", name, a)
		}
	}
	// Without agent.affinity, one agent per node, the GPU one on GPU nodes.
	gpuOn := renderHelm(t, "agent.gpu.enabled=true")
	checkOneAgentPerNode(t, decodeObject[appsv1.DaemonSet](t, findObject(t, gpuOn, "DaemonSet", "telesched-agent")),
		decodeObject[appsv1.DaemonSet](t, findObject(t, gpuOn, "DaemonSet", "telesched-agent-gpu")))

	d := findObject(t, objs, "Deployment", "telesched-scheduler")
	aff, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec", "affinity")
	if aff["podAntiAffinity"] == nil || aff["nodeAffinity"] == nil {
		t.Errorf("scheduler affinity %v, want the default podAntiAffinity and the nodeAffinity set (Helm merges maps)", aff)
	}
	ann, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "annotations")
	if ann["s"] != "two" || ann["checksum/config"] == "" {
		t.Errorf("scheduler pod annotations %v, want s=two and checksum/config", ann)
	}
	if a := findObject(t, objs, "ServiceAccount", "telesched-agent").GetAnnotations()["iam"]; a != "agent-role" {
		t.Errorf("ServiceAccount telesched-agent annotation iam=%q, want agent-role", a)
	}
	if l := findObject(t, objs, "ServiceAccount", "telesched-scheduler").GetLabels()["sa"]; l != "sched" {
		t.Errorf("ServiceAccount telesched-scheduler label sa=%q, want sched", l)
	}

	// The default keeps both replicas apart; null drops it.
	d = findObject(t, renderHelm(t), "Deployment", "telesched-scheduler")
	if _, ok, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec", "affinity", "podAntiAffinity"); !ok {
		t.Error("scheduler has no podAntiAffinity by default")
	}
	d = findObject(t, renderHelm(t, "scheduler.affinity.podAntiAffinity=null"), "Deployment", "telesched-scheduler")
	if aff, ok, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "template", "spec", "affinity"); ok {
		t.Errorf("scheduler affinity %v with scheduler.affinity.podAntiAffinity=null, want none", aff)
	}
}

// TestHelmUpgradeFromPreviousChart installs the 0.1.0 chart on a control
// plane of its own (so no other test's objects are in Helm's way), then
// follows the README: `helm upgrade` to this chart fails on the CRDs
// 0.1.0 left unowned; the README's adoption step (its kubectl label and
// annotate commands, done through the API) makes them the release's;
// `helm upgrade` then succeeds and updates them, the PowerBudget made
// under 0.1.0 survives; and `helm uninstall` keeps the CRDs and it.
// There are no nodes or controllers: the workloads are objects here; the
// real-node test (test/node) runs them.
func TestHelmUpgradeFromPreviousChart(t *testing.T) {
	needControlPlane(t)
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	const release, namespace = "telesched", "telesched-system"
	helmAt := func(args ...string) ([]byte, error) {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(t.Context(), helm(t), append(args, "--kubeconfig", kubeconfig, "--namespace", namespace)...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir, "HELM_CONFIG_HOME="+dir, "HELM_DATA_HOME="+dir)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, withoutLinkNotes(stderr.String()))
		}
		return stdout.Bytes(), nil
	}
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	crdRes := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	pbRes := dyn.Resource(schema.GroupVersionResource{Group: "telemetry.telesched.io", Version: "v1alpha1", Resource: "powerbudgets"})
	deployRes := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(namespace)
	crdNames := []string{"nodetelemetries.telemetry.telesched.io", "powerbudgets.telemetry.telesched.io"}

	if _, err := helmAt("install", release, previousChart, "--create-namespace"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the PowerBudget kind to be served", 30*time.Second, func() bool {
		_, err := pbRes.List(ctx, metav1.ListOptions{})
		return err == nil
	})
	pb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "telemetry.telesched.io/v1alpha1", "kind": "PowerBudget",
		"metadata": map[string]any{"name": "rack-a"},
		"spec":     map[string]any{"budgetWatts": int64(5000), "nodeSelector": map[string]any{"matchLabels": map[string]any{"rack": "a"}}},
	}}
	if _, err := pbRes.Create(ctx, pb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PowerBudget rack-a under 0.1.0: %v", err)
	}

	// An API server the scheduler does not start against (make
	// test-compat's older one): the chart's kubeVersion refuses it.
	info, err := discovery.NewDiscoveryClientForConfigOrDie(cp.Config).ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if minor, _ := strconv.Atoi(strings.TrimSuffix(info.Minor, "+")); minor < compat.MinServerMinor || minor > compat.MaxServerMinor {
		_, err = helmAt("upgrade", release, chartDir)
		if err == nil || !strings.Contains(err.Error(), "incompatible with Kubernetes "+info.GitVersion) {
			t.Fatalf("helm upgrade on Kubernetes %s: error %v, want the chart's kubeVersion to refuse it", info.GitVersion, err)
		}
		t.Logf("on Kubernetes %s: %s", info.GitVersion, strings.SplitN(err.Error(), "\n", 3)[1])
		return
	}

	// Without the adoption step Helm refuses the CRDs and changes nothing.
	_, err = helmAt("upgrade", release, chartDir)
	if err == nil || !strings.Contains(err.Error(), "invalid ownership metadata") {
		t.Fatalf("helm upgrade before adopting the CRDs: error %v, want one saying \"invalid ownership metadata\"", err)
	}
	t.Logf("without the adoption step: %s", strings.SplitN(err.Error(), "\n", 3)[1])

	// The README's adoption commands, as the API calls kubectl makes.
	readme := readChartReadme(t)
	readme = strings.NewReplacer("$RELEASE", release, "$NAMESPACE", namespace).Replace(readme)
	steps := adoption.FindAllStringSubmatch(readme, -1)
	if len(steps) != 2*len(crdNames) {
		t.Fatalf("the README has %d adoption commands, want a label and an annotate per CRD (%d)", len(steps), 2*len(crdNames))
	}
	for _, s := range steps {
		kv := map[string]any{}
		for _, pair := range strings.Fields(s[3]) {
			k, v, ok := strings.Cut(pair, "=")
			if !ok {
				t.Fatalf("adoption command %q: %q is not key=value", s[0], pair)
			}
			kv[k] = v
		}
		field := map[string]string{"label": "labels", "annotate": "annotations"}[s[1]]
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{field: kv}})
		if _, err := crdRes.Patch(ctx, s[2], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("%s: %v", s[0], err)
		}
	}

	out, err := helmAt("upgrade", release, chartDir)
	if err != nil {
		t.Fatalf("helm upgrade after the adoption step: %v", err)
	}
	if !strings.Contains(string(out), "kubectl get nodetelemetry -o wide") {
		t.Errorf("helm upgrade's notes do not say how to see the telemetry:\n%s", out)
	}
	chartLabel := fmt.Sprintf("telesched-%v", chartMeta(t)["version"])
	for _, name := range crdNames {
		crd, err := crdRes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if crd.GetLabels()["helm.sh/chart"] != chartLabel || crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s after the upgrade: labels %v, annotations %v; want helm.sh/chart=%s and helm.sh/resource-policy=keep",
				name, crd.GetLabels(), crd.GetAnnotations(), chartLabel)
		}
	}
	d, err := deployRes.Get(ctx, "telesched-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetLabels()["helm.sh/chart"] != chartLabel {
		t.Errorf("Deployment telesched-scheduler after the upgrade: labels %v, want helm.sh/chart=%s", d.GetLabels(), chartLabel)
	}
	if _, err := pbRes.Get(ctx, "rack-a", metav1.GetOptions{}); err != nil {
		t.Errorf("PowerBudget rack-a after the upgrade: %v", err)
	}

	if _, err := helmAt("uninstall", release); err != nil {
		t.Fatal(err)
	}
	if _, err := deployRes.Get(ctx, "telesched-scheduler", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment telesched-scheduler after helm uninstall: %v, want not found", err)
	}
	for _, name := range crdNames {
		if _, err := crdRes.Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("CRD %s after helm uninstall: %v, want kept", name, err)
		}
	}
	if _, err := pbRes.Get(ctx, "rack-a", metav1.GetOptions{}); err != nil {
		t.Errorf("PowerBudget rack-a after helm uninstall: %v, want kept", err)
	}
}

// TestHelmPodResourcesRelay: the relays are on by default in both agent
// DaemonSets (checkRelay), the pod-resources relay follows
// agent.podResourcesHostPath, and with agent.podResources.relay.enabled=false
// the agent mounts the kubelet's directory itself; with
// agent.powercapRelay.enabled=false (the hardened choice) no powercap
// relay runs and the agent is not pointed at one.
func TestHelmPodResourcesRelay(t *testing.T) {
	objs := renderHelm(t, "agent.gpu.enabled=true", "agent.podResourcesHostPath=/data/kubelet/pod-resources")
	for _, name := range []string{"telesched-agent", "telesched-agent-gpu"} {
		ds := decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", name))
		spec := ds.Spec.Template.Spec
		if len(spec.InitContainers) != 2 || spec.InitContainers[0].Name != "podresources-relay" || spec.InitContainers[1].Name != "powercap-relay" {
			t.Fatalf("DaemonSet %s: init containers %v, want the relays", name, spec.InitContainers)
		}
		for _, v := range spec.Volumes {
			if v.Name == "host-pod-resources" && (v.HostPath == nil || v.HostPath.Path != "/data/kubelet/pod-resources") {
				t.Errorf("DaemonSet %s: volume host-pod-resources %+v, want hostPath /data/kubelet/pod-resources", name, v.VolumeSource)
			}
		}
	}

	objs = renderHelm(t, "agent.gpu.enabled=true", "agent.podResources.relay.enabled=false")
	for _, name := range []string{"telesched-agent", "telesched-agent-gpu"} {
		ds := decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", name))
		spec := ds.Spec.Template.Spec
		if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != "powercap-relay" {
			t.Errorf("DaemonSet %s with the pod-resources relay off: init containers %v, want the powercap relay alone", name, spec.InitContainers)
		}
		hostPath := map[string]string{}
		for _, v := range spec.Volumes {
			if v.HostPath != nil {
				hostPath[v.Name] = v.HostPath.Path
			}
			if v.Name == "pod-resources" {
				t.Errorf("DaemonSet %s with the relay off: has the relay's volume", name)
			}
		}
		if !slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
			return hostPath[m.Name] == "/var/lib/kubelet/pod-resources" && m.MountPath == "/host/var/lib/kubelet/pod-resources" && m.ReadOnly
		}) {
			t.Errorf("DaemonSet %s with the relay off: the agent mounts %v, want the kubelet's pod-resources directory read-only at /host/var/lib/kubelet/pod-resources", name, spec.Containers[0].VolumeMounts)
		}
	}

	objs = renderHelm(t, "agent.gpu.enabled=true", "agent.powercapRelay.enabled=false")
	for _, name := range []string{"telesched-agent", "telesched-agent-gpu"} {
		spec := decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", name)).Spec.Template.Spec
		if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != "podresources-relay" {
			t.Errorf("DaemonSet %s with the powercap relay off: init containers %v, want the pod-resources relay alone", name, spec.InitContainers)
		}
		if slices.ContainsFunc(spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--powercap-relay-socket") }) ||
			slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "powercap" }) {
			t.Errorf("DaemonSet %s with the powercap relay off: the agent still points at it (%q) or its volume is there", name, spec.Containers[0].Args)
		}
	}
}

// TestHelmPolicySwitches: the agent's ValidatingAdmissionPolicies
// (policy.enabled) and the opt-in MutatingAdmissionPolicy
// (policy.optIn.enabled) are switched apart, so an API server without
// MutatingAdmissionPolicy keeps the agent's, and the overheating taint
// with them.
func TestHelmPolicySwitches(t *testing.T) {
	kinds := func(objs []*unstructured.Unstructured) map[string]int {
		got := map[string]int{}
		for _, o := range objs {
			if strings.HasSuffix(o.GetKind(), "AdmissionPolicy") || strings.HasSuffix(o.GetKind(), "AdmissionPolicyBinding") {
				got[o.GetKind()]++
			}
		}
		return got
	}
	taint := func(objs []*unstructured.Unstructured) bool {
		spec := decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", "telesched-agent")).Spec.Template.Spec
		return slices.Contains(spec.Containers[0].Args, "--overheating-taint=true")
	}
	for _, tc := range []struct {
		set       []string
		want      map[string]int
		wantTaint bool
	}{
		{nil, map[string]int{"ValidatingAdmissionPolicy": 3, "ValidatingAdmissionPolicyBinding": 3, "MutatingAdmissionPolicy": 1, "MutatingAdmissionPolicyBinding": 1}, true},
		{[]string{"policy.optIn.enabled=false"}, map[string]int{"ValidatingAdmissionPolicy": 3, "ValidatingAdmissionPolicyBinding": 3}, true},
		{[]string{"policy.enabled=false"}, map[string]int{"MutatingAdmissionPolicy": 1, "MutatingAdmissionPolicyBinding": 1}, false},
	} {
		objs := renderHelm(t, tc.set...)
		if diff := cmp.Diff(tc.want, kinds(objs)); diff != "" {
			t.Errorf("--set %v: admission policies (-want +got):\n%s", tc.set, diff)
		}
		if got := taint(objs); got != tc.wantTaint {
			t.Errorf("--set %v: overheating taint %v, want %v", tc.set, got, tc.wantTaint)
		}
	}
}

// TestHelmLoggingFormat: logging.format=json gives every telesched
// container --logging-format=json (the agent, its two relays, the
// scheduler, the descheduler); text, the default, adds nothing; another
// format is refused.
func TestHelmLoggingFormat(t *testing.T) {
	count := func(objs []*unstructured.Unstructured) (n int) {
		for _, o := range objs {
			for _, field := range []string{"containers", "initContainers"} {
				ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
				for _, c := range ctrs {
					args, _ := c.(map[string]any)["args"].([]any)
					for _, a := range args {
						if a == "--logging-format=json" {
							n++
						}
					}
				}
			}
		}
		return n
	}
	if n := count(renderHelm(t, "descheduler.enabled=true", "logging.format=json")); n != 5 {
		t.Errorf("logging.format=json: %d containers log JSON, want 5", n)
	}
	if n := count(renderHelm(t, "descheduler.enabled=true")); n != 0 {
		t.Errorf("the default: %d containers pass --logging-format=json, want none", n)
	}
	if _, err := runHelm(t, helmTemplateArgs("logging.format=yaml")...); err == nil || !strings.Contains(err.Error(), "logging") {
		t.Errorf("logging.format=yaml: err %v, want the schema to refuse it", err)
	}
}
