// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/yaml"

	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/sandbox/controlplane"
)

// chartDir is the Helm chart of this checkout.
var chartDir = filepath.Join(manifestsRoot, "helm", "telesched")

// helmRelease is the release name the chart is rendered with.
const helmRelease = "telesched"

// helmKubeVersion is the Kubernetes version the chart is rendered for:
// the one the scheduler is built from.
const helmKubeVersion = "1.37.2"

// helm returns bin/helm, which make test builds from hack/helm.
func helm(t *testing.T) string {
	t.Helper()
	dir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (run `make test`, which builds it from hack/helm)", bin, err)
	}
	return bin
}

// runHelm runs bin/helm and returns its standard output; the chart's
// links into deploy/ make helm note each on stderr, which is dropped
// unless it fails.
func runHelm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), helm(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, withoutLinkNotes(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// withoutLinkNotes drops helm's note about each symbolic link it follows.
func withoutLinkNotes(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "found symbolic link in path") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// helmTemplateArgs renders the chart as `helm install telesched
// deploy/helm/telesched --namespace telesched-system` would, CRDs included.
func helmTemplateArgs(values ...string) []string {
	args := []string{"template", helmRelease, chartDir, "--namespace", "telesched-system",
		"--include-crds", "--kube-version", helmKubeVersion}
	for _, v := range values {
		args = append(args, "--set", v)
	}
	return args
}

// renderHelm renders the chart with the values set (key=value, as --set).
func renderHelm(t *testing.T, values ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := runHelm(t, helmTemplateArgs(values...)...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifests(t, "helm template", out)
}

// decodeManifests decodes a multi-document YAML stream through JSON, so
// numbers are int64 as the API machinery expects.
func decodeManifests(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if string(js) == "null" {
			continue // a document of comments only
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, doc)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		t.Fatalf("%s: no objects", what)
	}
	return objs
}

// helmVariants are the value sets the chart is linted, rendered and
// installed with: the defaults and each variant the kustomize tree has.
var helmVariants = []struct {
	name   string
	values []string
	// kustomize is the manifest set (manifestSets) that must render the
	// same objects.
	kustomize string
}{
	{"defaults", []string{"namespace.create=true"}, "deploy"},
	{"rapl", []string{"namespace.create=true", "agent.rapl.enabled=true"}, "deploy+rapl"},
	{"gpu", []string{"namespace.create=true", "agent.gpu.enabled=true"}, "deploy+gpu"},
	{"gpu+rapl", []string{"namespace.create=true", "agent.gpu.enabled=true", "agent.rapl.enabled=true"}, "deploy+gpu+rapl"},
	{"descheduler", []string{"namespace.create=true", "descheduler.enabled=true"}, "deploy+descheduler"},
	{"monitoring", []string{"agent.enabled=false", "scheduler.enabled=false", "policy.enabled=false", "policy.optIn.enabled=false",
		"monitoring.podMonitor.enabled=true", "monitoring.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true",
		"dashboards.enabled=true",
		// deploy/monitoring's PodMonitor leaves both to Prometheus.
		"monitoring.podMonitor.interval=", "monitoring.podMonitor.scrapeTimeout="}, "monitoring"},
}

// TestHelmLint runs `helm lint --strict` on the defaults and every variant.
func TestHelmLint(t *testing.T) {
	for _, v := range helmVariants {
		t.Run(v.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir, "--namespace", "telesched-system", "--kube-version", helmKubeVersion}
			for _, s := range v.values {
				args = append(args, "--set", s)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), "0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// kustomizeHash is the content hash kustomize's configMapGenerator appends.
var kustomizeHash = regexp.MustCompile(`^(telesched-scheduler-config)-[a-z0-9]{10}$`)

// chartOnlyLabels are the standard labels the chart sets on every object
// (TestHelmStandardLabels checks them) and the kustomize tree does not
// carry everywhere, or carries with other values (its instance is the
// object's name).
var chartOnlyLabels = []string{"helm.sh/chart", "app.kubernetes.io/name", "app.kubernetes.io/instance",
	"app.kubernetes.io/managed-by", "app.kubernetes.io/version", "app.kubernetes.io/component"}

// chartOnlyPodLabels are those of chartOnlyLabels a pod template carries
// beside its selector's; the selector's instance is compared.
var chartOnlyPodLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/version"}

// dropLabels deletes keys from the labels at path, and the labels if
// none remain.
func dropLabels(o *unstructured.Unstructured, keys []string, path ...string) {
	labels, found, _ := unstructured.NestedStringMap(o.Object, path...)
	if !found {
		return
	}
	for _, k := range keys {
		delete(labels, k)
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(o.Object, path...)
		return
	}
	_ = unstructured.SetNestedStringMap(o.Object, labels, path...)
}

// normalize makes a kustomize and a Helm rendering comparable: the
// scheduler's ConfigMap without kustomize's hash suffix, its configuration
// parsed (the comments differ), the Deployment without Helm's checksum
// annotation (which kustomize's suffix stands for), and every object
// without the standard labels only the chart sets (chartOnlyLabels) and
// the CRDs without the chart's labels and resource policy
// (TestHelmCRDs checks those).
func normalize(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		o = o.DeepCopy()
		dropLabels(o, chartOnlyLabels, "metadata", "labels")
		dropLabels(o, chartOnlyPodLabels, "spec", "template", "metadata", "labels")
		if l, _, _ := unstructured.NestedString(o.Object, "spec", "template", "metadata", "labels", "app.kubernetes.io/instance"); l == helmRelease {
			// The release's instance, on pods whose selector does not
			// name one (the scheduler's).
			dropLabels(o, []string{"app.kubernetes.io/instance"}, "spec", "template", "metadata", "labels")
		}
		switch o.GetKind() {
		case "CustomResourceDefinition":
			unstructured.RemoveNestedField(o.Object, "metadata", "labels")
			dropLabels(o, []string{"helm.sh/resource-policy"}, "metadata", "annotations")
		case "ConfigMap":
			if m := kustomizeHash.FindStringSubmatch(o.GetName()); m != nil {
				o.SetName(m[1])
			}
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			parsed := map[string]any{}
			for k, v := range data {
				var doc any
				if err := yaml.Unmarshal([]byte(v), &doc); err != nil {
					t.Fatalf("ConfigMap %s key %s: %v", o.GetName(), k, err)
				}
				parsed[k] = doc
			}
			o.Object["data"] = parsed
		case "Deployment":
			ann, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "annotations")
			delete(ann, "checksum/config")
			delete(ann, "checksum/scheduler-config")
			if len(ann) == 0 {
				unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "annotations")
			}
			vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				cm, ok := v.(map[string]any)["configMap"].(map[string]any)
				if !ok {
					continue
				}
				if m := kustomizeHash.FindStringSubmatch(fmt.Sprint(cm["name"])); m != nil {
					cm["name"] = m[1]
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, vols, "spec", "template", "spec", "volumes")
		}
		id := objectID(o)
		if _, dup := out[id]; dup {
			t.Fatalf("%s rendered twice", id)
		}
		out[id] = o
	}
	return out
}

// TestHelmRendersWhatKustomizeDoes: with its defaults, and with each
// variant's values, the chart renders the very objects of the matching
// kustomization, field for field.
func TestHelmRendersWhatKustomizeDoes(t *testing.T) {
	sets := manifestSets(t)
	for _, v := range helmVariants {
		t.Run(v.name, func(t *testing.T) {
			i := slices.IndexFunc(sets, func(s manifestSet) bool { return s.name == v.kustomize })
			if i < 0 {
				t.Fatalf("no manifest set %s", v.kustomize)
			}
			want := normalize(t, sets[i].objs)
			// The kustomize tree pins its images' tag itself; the chart's
			// default is its appVersion.
			tag := kustomizeImageTag(t)
			got := normalize(t, renderHelm(t, append(slices.Clone(v.values), "image.agent.tag="+tag, "image.scheduler.tag="+tag, "image.descheduler.tag="+tag)...))
			if v.name == "monitoring" {
				// The chart renders the CRDs by default; deploy/monitoring/
				// goes on top of deploy/, which has them. The chart's
				// ServiceMonitor scrapes with a token Secret of its own
				// (TestHelmServiceMonitor), deploy/monitoring's with
				// Prometheus's; the dashboards are the chart's alone
				// (TestHelmDashboards).
				for id, o := range got {
					switch {
					case o.GetKind() == "CustomResourceDefinition",
						o.GetKind() == "ServiceMonitor",
						o.GetKind() == "ClusterRoleBinding" && o.GetName() == "telesched-metrics-reader",
						o.GetName() == "telesched-metrics-scraper",
						o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "telesched-dashboard-"):
						delete(got, id)
					}
				}
				for id, o := range want {
					switch {
					case o.GetKind() == "ServiceMonitor",
						o.GetKind() == "ClusterRoleBinding" && o.GetName() == "telesched-metrics-reader":
						delete(want, id)
					}
				}
			}
			if v.name == "descheduler" {
				// The chart gives its descheduler its scheduler's
				// configuration (TestHelmDeschedulerFollowsTheSchedulersArgs);
				// deploy/descheduler cannot: kustomize suffixes the
				// scheduler's ConfigMap with a hash and will not read its
				// file from outside the kustomization, so it runs on the
				// plugins' defaults (its deployment.yaml says how an overlay
				// adds it).
				dropSchedulerConfig(t, got["Deployment telesched-system/telesched-descheduler"])
			}
			var ids []string
			for id := range want {
				ids = append(ids, id)
			}
			for id := range got {
				if _, ok := want[id]; !ok {
					ids = append(ids, id)
				}
			}
			sort.Strings(ids)
			for _, id := range ids {
				w, g := want[id], got[id]
				switch {
				case g == nil:
					t.Errorf("%s: in kustomize %s, not rendered by the chart", id, v.kustomize)
				case w == nil:
					t.Errorf("%s: rendered by the chart, not in kustomize %s", id, v.kustomize)
				default:
					if diff := cmp.Diff(w.Object, g.Object); diff != "" {
						t.Errorf("%s differs (-kustomize +helm):\n%s", id, diff)
					}
				}
			}
			if !t.Failed() {
				t.Logf("%d objects, the same in both", len(want))
			}
		})
	}
}

// kustomizeImageTag returns the tag deploy/kustomization.yaml gives both
// its images, which deploy/descheduler/kustomization.yaml must give the
// descheduler's too.
func kustomizeImageTag(t *testing.T) string {
	t.Helper()
	tags := map[string]bool{}
	for _, dir := range []string{manifestsRoot, filepath.Join(manifestsRoot, "descheduler")} {
		k := readYAMLMap(t, filepath.Join(dir, "kustomization.yaml"))
		images, _, _ := unstructured.NestedSlice(k, "images")
		for _, img := range images {
			tags[fmt.Sprint(img.(map[string]any)["newTag"])] = true
		}
	}
	if len(tags) != 1 {
		t.Fatalf("deploy/kustomization.yaml and deploy/descheduler/kustomization.yaml: images' tags %v, want one", tags)
	}
	for tag := range tags {
		return tag
	}
	return ""
}

// schedulerConfigOf returns the KubeSchedulerConfiguration in the
// rendered ConfigMap.
func schedulerConfigOf(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	cm := findObject(t, objs, "ConfigMap", "telesched-scheduler-config")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "scheduler-config.yaml")
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// pluginArgs returns, per "profile/plugin", the args of every plugin in the
// configuration.
func pluginArgs(t *testing.T, cfg map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	profiles, _, _ := unstructured.NestedSlice(cfg, "profiles")
	for _, p := range profiles {
		p := p.(map[string]any)
		pcs, _, _ := unstructured.NestedSlice(p, "pluginConfig")
		for _, pc := range pcs {
			pc := pc.(map[string]any)
			out[fmt.Sprintf("%s/%s", p["schedulerName"], pc["name"])] = pc["args"].(map[string]any)
		}
	}
	return out
}

// TestHelmSharedValues: each setting the agent and the plugins must agree
// on is one value, and it reaches every flag and arg that carries it, in
// both profiles and both agent DaemonSets.
func TestHelmSharedValues(t *testing.T) {
	objs := renderHelm(t, "agent.gpu.enabled=true",
		"shared.thermalMarginCelsius=7", "shared.absoluteLimitCelsius=95",
		"shared.gpuResourceName=example.com/accelerator", "shared.migResourcePrefix=example.com/slice-",
		"shared.gpuDriverNames={accel.example.com,gpu.example.com}", "shared.telemetryMaxAge=2m",
		"shared.staleTelemetryPolicy=Reject", "agent.heartbeat=45s")
	args := pluginArgs(t, schedulerConfigOf(t, objs))
	want := map[string]struct {
		value   any
		plugins []string
	}{
		"telemetryMaxAge":      {"2m", []string{"LoadAware", "TopologyFit", "EnergyAware", "PowerBudget"}},
		"staleTelemetryPolicy": {"Reject", []string{"LoadAware", "TopologyFit", "EnergyAware"}},
		"gpuResourceName":      {"example.com/accelerator", []string{"TopologyFit", "EnergyAware", "PowerBudget"}},
		"migResourcePrefix":    {"example.com/slice-", []string{"TopologyFit"}},
		"gpuDriverNames":       {[]any{"accel.example.com", "gpu.example.com"}, []string{"TopologyFit"}},
		"thermalMarginCelsius": {float64(7), []string{"EnergyAware"}},
		"absoluteLimitCelsius": {float64(95), []string{"EnergyAware"}},
	}
	for key, w := range want {
		for _, profile := range []string{"telesched", "telesched-energy"} {
			for _, plugin := range w.plugins {
				a, ok := args[profile+"/"+plugin]
				if !ok {
					t.Errorf("profile %s has no args for %s", profile, plugin)
					continue
				}
				if got := a[key]; fmt.Sprint(got) != fmt.Sprint(w.value) {
					t.Errorf("profile %s, %s.%s = %v, want %v", profile, plugin, key, got, w.value)
				}
			}
		}
	}
	for _, name := range []string{"telesched-agent", "telesched-agent-gpu"} {
		ds := findObject(t, objs, "DaemonSet", name)
		containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
		var got []string
		for _, a := range containers[0].(map[string]any)["args"].([]any) {
			got = append(got, a.(string))
		}
		for _, flag := range []string{"--overheat-headroom-celsius=7", "--absolute-limit-celsius=95", "--heartbeat=45s",
			"--gpu-resource-names=example.com/accelerator", "--mig-resource-prefix=example.com/slice-", "--gpu-dra-drivers=accel.example.com,gpu.example.com"} {
			if !slices.Contains(got, flag) {
				t.Errorf("DaemonSet %s: args %v, want %s", name, got, flag)
			}
		}
	}
}

// TestHelmRejectsBadValues: a value of the wrong type or range, an unknown
// key, or settings that contradict each other stop the render with the
// value's path.
func TestHelmRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		set     string
		wantErr string
	}{
		{"shared.thermalMarginCelsius=-1", "/shared/thermalMarginCelsius"},
		{"shared.telemetryMaxAge=60", "/shared/telemetryMaxAge"},
		{"shared.staleTelemetryPolicy=Drop", "/shared/staleTelemetryPolicy"},
		{"scheduler.loadAware.cpuTreshold=70", "cpuTreshold"},
		{"scheduler.replicas=0", "/scheduler/replicas"},
		{"agent.extraArgs={interval=5s}", "/agent/extraArgs/0"},
		{"shared.telemetryMaxAgeReadyAgent=4m", "shared.telemetryMaxAgeReadyAgent (4m) must be longer than agent.heartbeat (5m)"},
		{"shared.telemetryMaxAgeReadyAgent=6", "/shared/telemetryMaxAgeReadyAgent"},
		{"agent.healthPort=9102", "agent.healthPort (9102) must differ from agent.metricsPort"},
		{"networkPolicy.metricsFrom=null", "/networkPolicy"},
		{"crds.enabled=maybe", "/crds/enabled"},
		{"commonLabels.bad\\ key=x", "at '/commonLabels': additional properties 'bad key' not allowed"},
		{"agent.podLabels.team=not\\ a\\ label\\ value", "/agent/podLabels/team"},
		{"scheduler.affinity.nodeAfinity.x=y", "nodeAfinity"},
		{"agent.serviceAccount.annotations=x", "/agent/serviceAccount/annotations"},
		{"scheduler.tls.secretName=Not_A_Name", "/scheduler/tls/secretName"},
		{"monitoring.serviceMonitor.interval=30", "/monitoring/serviceMonitor/interval"},
		{"monitoring.podMonitor.scrapeTimeout=10sec", "/monitoring/podMonitor/scrapeTimeout"},
		{"monitoring.serviceMonitor.bearerTokenSecret.name=", "/monitoring/serviceMonitor/bearerTokenSecret/name"},
		{"monitoring.prometheus.serviceAccount=prometheus-k8s", "prometheus"},
		{"dashboards.namespace=Grafana", "/dashboards/namespace"},
		{"dashboards.labels.grafana_dashboard=1", "/dashboards/labels/grafana_dashboard"},
		{"descheduler.maxEvictionsPerCycle=0", "/descheduler/maxEvictionsPerCycle"},
		{"descheduler.interval=60", "/descheduler/interval"},
		{"descheduler.dryRun=maybe", "/descheduler/dryRun"},
		{"descheduler.leaderElection.leaseDuration=15", "/descheduler/leaderElection/leaseDuration"},
		{"descheduler.replicas=0", "/descheduler/replicas"},
		{"agent.speedTable.cpus[0].match=EPYC,agent.speedTable.cpus[0].milli=0,agent.speedTable.cpus[0].basis=x", "/agent/speedTable/cpus/0/milli"},
		{"agent.speedTable.gpu[0].match=L40S", "/agent/speedTable"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := runHelm(t, helmTemplateArgs(tc.set)...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("helm template --set %s: error %v, want one containing %q", tc.set, err, tc.wantErr)
			}
		})
	}
}

// TestHelmSingleScheduler: with scheduler.serveDefaultScheduler the chart's
// scheduler serves default-scheduler and telesched's two profiles as the
// kubeadm single-scheduler install does, and elects on kube-scheduler's
// Lease, which its RBAC then names.
func TestHelmSingleScheduler(t *testing.T) {
	objs := renderHelm(t, "scheduler.serveDefaultScheduler=true")
	got := schedulerConfigOf(t, objs)
	want := readYAMLMap(t, filepath.Join(singleDir, "scheduler-config.yaml"))
	if diff := cmp.Diff(want["profiles"], got["profiles"]); diff != "" {
		t.Errorf("profiles differ from deploy/variants/single-scheduler/scheduler-config.yaml's (-kubeadm +helm):\n%s", diff)
	}
	le, _, _ := unstructured.NestedString(got, "leaderElection", "resourceName")
	if le != "kube-scheduler" {
		t.Errorf("leaderElection.resourceName %q, want kube-scheduler", le)
	}
	role := findObject(t, objs, "ClusterRole", "telesched-scheduler:kube-scheduler-lease")
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	if !strings.Contains(fmt.Sprint(rules), "kube-scheduler") {
		t.Errorf("ClusterRole %s rules %v name no kube-scheduler Lease", role.GetName(), rules)
	}
	// And without it, no such right.
	for _, o := range renderHelm(t) {
		if o.GetName() == "telesched-scheduler:kube-scheduler-lease" {
			t.Errorf("%s rendered without serveDefaultScheduler", objectID(o))
		}
	}
}

// TestHelmNetworkPolicy: networkPolicy.metricsFrom names who may scrape,
// in both policies, and networkPolicy.enabled=false renders none.
func TestHelmNetworkPolicy(t *testing.T) {
	objs := renderHelm(t, "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=observability")
	for _, name := range []string{"telesched-agent", "telesched-scheduler"} {
		np := findObject(t, objs, "NetworkPolicy", name)
		from, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
		want := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "observability"}}}}
		if diff := cmp.Diff(want, from[0].(map[string]any)["from"]); diff != "" {
			t.Errorf("NetworkPolicy %s: ingress from (-want +got):\n%s", name, diff)
		}
	}
	for _, o := range renderHelm(t, "networkPolicy.enabled=false") {
		if o.GetKind() == "NetworkPolicy" {
			t.Errorf("%s rendered with networkPolicy.enabled=false", objectID(o))
		}
	}
}

// dropSchedulerConfig takes the scheduler's configuration (its volume, its
// mount and the --scheduler-config and --scheduler-profile flags) out of
// the chart's descheduler Deployment, failing the test if it is not there.
func dropSchedulerConfig(t *testing.T, dep *unstructured.Unstructured) {
	t.Helper()
	if dep == nil {
		t.Fatal("the chart rendered no descheduler Deployment")
	}
	spec := dep.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	named := func(list any) ([]any, bool) {
		var out []any
		found := false
		for _, e := range list.([]any) {
			if e.(map[string]any)["name"] == "scheduler-config" {
				found = true
				continue
			}
			out = append(out, e)
		}
		return out, found
	}
	vols, vok := named(spec["volumes"])
	c := spec["containers"].([]any)[0].(map[string]any)
	mounts, mok := named(c["volumeMounts"])
	var args []any
	flags := 0
	for _, a := range c["args"].([]any) {
		if strings.HasPrefix(a.(string), "--scheduler-config=") || strings.HasPrefix(a.(string), "--scheduler-profile=") {
			flags++
			continue
		}
		args = append(args, a)
	}
	if !vok || !mok || flags != 2 {
		t.Fatalf("the chart's descheduler lacks the scheduler's configuration: volume %v, mount %v, %d of its 2 flags", vok, mok, flags)
	}
	c["args"] = args
	spec["volumes"] = vols // as normalize writes them back, nil or not
	delete(c, "volumeMounts")
	if mounts != nil {
		c["volumeMounts"] = mounts
	}
}

// TestHelmExtraProfilesAndPluginConfig: scheduler.extraProfiles adds
// profiles of one's own after the chart's, and scheduler.extraPluginConfig
// adds args for plugins the chart does not configure to both telesched
// profiles; the result is a configuration kube-scheduler's own decoder and
// validation accept (as the descheduler reads it). A profile named as one
// of the chart's, or args for a plugin the chart configures, stop the
// render, naming the value.
func TestHelmExtraProfilesAndPluginConfig(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`scheduler:
  extraPluginConfig:
  - name: NodeResourcesFit
    args: {apiVersion: kubescheduler.config.k8s.io/v1, kind: NodeResourcesFitArgs, scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 1}]}}
  extraProfiles:
  - schedulerName: telesched-gpu
    plugins: {multiPoint: {enabled: [{name: TopologyFit, weight: 20}]}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runHelm(t, append(helmTemplateArgs(), "-f", values)...)
	if err != nil {
		t.Fatal(err)
	}
	cm := findObject(t, decodeManifests(t, "helm template", out), "ConfigMap", "telesched-scheduler-config")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "scheduler-config.yaml")
	path := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := descheduler.LoadSchedulerConfig(path)
	if err != nil {
		t.Fatalf("kube-scheduler's decoder refuses the rendered configuration: %v", err)
	}
	var names []string
	for _, p := range cfg.Profiles {
		names = append(names, p.SchedulerName)
		if p.SchedulerName == "telesched-gpu" {
			continue
		}
		if !slices.ContainsFunc(p.PluginConfig, func(pc schedconfig.PluginConfig) bool { return pc.Name == "NodeResourcesFit" }) {
			t.Errorf("profile %s lacks the extra NodeResourcesFit args", p.SchedulerName)
		}
	}
	if !slices.Equal(names, []string{"telesched", "telesched-energy", "telesched-gpu"}) {
		t.Errorf("profiles %v, want telesched, telesched-energy and the extra telesched-gpu", names)
	}
	for _, tc := range []struct{ set, want string }{
		{`scheduler.extraProfiles=[{"schedulerName":"telesched"}]`, "scheduler.extraProfiles: schedulerName \"telesched\""},
		{`scheduler.extraPluginConfig=[{"name":"EnergyAware","args":{}}]`, "scheduler.extraPluginConfig: EnergyAware's args are the chart's"},
	} {
		_, err := runHelm(t, append(helmTemplateArgs(), "--set-json", tc.set)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set-json %s: err %v, want %q", tc.set, err, tc.want)
		}
	}
}
