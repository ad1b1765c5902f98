// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/descheduler/app"
)

// deschedulerArgs returns the descheduler container's args as flag name to
// value.
func deschedulerArgs(t *testing.T, dep *appsv1.Deployment) map[string]string {
	t.Helper()
	args := map[string]string{}
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") {
			t.Fatalf("descheduler arg %q: want --name=value", a)
		}
		args[name] = value
	}
	return args
}

// deschedulerFlags names the flag of each field of app.Options
// (cmd/telesched-descheduler defines them); "" for a field with no flag.
var deschedulerFlags = map[string]string{
	"Interval": "interval", "DryRun": "dry-run", "MaxEvictionsPerNode": "max-evictions-per-node-per-cycle",
	"MaxEvictionsPerCycle": "max-evictions-per-cycle", "Cooldown": "cooldown", "ThermalSustain": "thermal-sustain", "BudgetSustain": "budget-sustain",
	"PriorityThreshold": "priority-threshold", "AgentNamespace": "telemetry-agent-namespace", "CacheSyncTimeout": "",
	"ThermalHold": "telemetry-thermal-hold", "PowerHold": "telemetry-power-hold", "ReservationMaxAge": "reservation-max-age",
	// No policy file by default: descheduler.DefaultPolicy (the chart's
	// descheduler.policy renders one: TestHelmDeschedulerPolicy).
	"Policy": "",
	// Their own maps below; the scheduler's configuration only where the
	// install has it (the chart with its scheduler).
	"LeaderElection": "", "SchedulerConfig": "", "SchedulerProfile": "",
}

// leaderElectionFlags names the flag of each field of app.LeaderElection.
var leaderElectionFlags = map[string]string{
	"Enabled": "leader-elect", "LeaseDuration": "leader-elect-lease-duration", "RenewDeadline": "leader-elect-renew-deadline",
	"RetryPeriod": "leader-elect-retry-period", "Namespace": "leader-elect-resource-namespace", "Name": "leader-elect-resource-name", "Identity": "",
}

// defaultDeschedulerArgs are the binary's defaults (app.DefaultOptions), as
// the flags cmd/telesched-descheduler defines for them, and -v 2. A field
// of app.Options that deschedulerFlags does not name fails the test: a new
// setting of the binary must get its flag in deploy/descheduler and its
// value in the chart.
func defaultDeschedulerArgs(t *testing.T) map[string]string {
	t.Helper()
	args := map[string]string{"v": "2"}
	addFlagArgs(t, args, app.DefaultOptions(), deschedulerFlags, "app.Options", "deschedulerFlags")
	addFlagArgs(t, args, app.DefaultLeaderElection(), leaderElectionFlags, "app.LeaderElection", "leaderElectionFlags")
	// Both installs give the agent's namespace as their own, from the
	// downward API, as the scheduler's do.
	args["telemetry-agent-namespace"] = "$(POD_NAMESPACE)"
	return args
}

// addFlagArgs adds to args each field of the struct v under its flag in
// flags, as fmt.Sprint writes its value; a field flags does not name fails
// the test (a new setting of the binary must get its flag in
// deploy/descheduler and its value in the chart).
func addFlagArgs(t *testing.T, args map[string]string, v any, flags map[string]string, typeName, mapName string) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		field := rv.Type().Field(i).Name
		flag, ok := flags[field]
		switch {
		case !ok:
			t.Errorf("%s.%s is new: give its flag to deploy/descheduler/deployment.yaml and the chart (a descheduler value, its README row), then name it in %s", typeName, field, mapName)
			continue
		case flag == "":
			continue
		}
		args[flag] = fmt.Sprint(rv.Field(i).Interface())
	}
}

// goDuration writes a Go duration as the manifests do (1m, not 1m0s).
func goDuration(s string) string {
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// TestDeschedulerKustomization: deploy/ leaves the descheduler out (an
// operator adds deploy/descheduler on purpose); deploy/descheduler runs it
// hardened, as a uid of its own, one replica elected leader on its Lease
// (so a rolling update never has two evicting), in dry-run, with the
// binary's defaults written out.
func TestDeschedulerKustomization(t *testing.T) {
	for _, o := range renderKustomization(t, manifestsRoot) {
		if strings.Contains(o.GetName(), "descheduler") {
			t.Errorf("deploy/ holds %s: the descheduler is installed only on purpose, from deploy/descheduler", objectID(o))
		}
	}
	objs := renderKustomization(t, filepath.Join(manifestsRoot, "descheduler"))
	dep := decodeObject[appsv1.Deployment](t, findObject(t, objs, "Deployment", "telesched-descheduler"))
	spec := dep.Spec.Template.Spec
	checkHardened(t, "Deployment telesched-descheduler", spec, false)
	findObject(t, objs, "ServiceAccount", spec.ServiceAccountName)
	pc := findObject(t, objs, "PriorityClass", spec.PriorityClassName)
	if p, _, _ := unstructured.NestedString(pc.Object, "preemptionPolicy"); p != "Never" {
		t.Errorf("PriorityClass %s: preemptionPolicy %q, want Never (a late descheduler harms nothing; preempting for it does)", pc.GetName(), p)
	}
	if got := ptr.Deref(dep.Spec.Replicas, 1); got != 1 {
		t.Errorf("replicas %d, want 1 (a second is a warm standby an operator may add)", got)
	}
	if ru := dep.Spec.Strategy.RollingUpdate; dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("strategy %+v, want RollingUpdate with maxUnavailable 0: the new pod stands by on the Lease until the old one releases it", dep.Spec.Strategy)
	}

	full := renderKustomization(t, manifestsRoot)
	uids := map[string]int64{
		"agent":     ptr.Deref(decodeObject[appsv1.DaemonSet](t, findObject(t, full, "DaemonSet", "telesched-agent")).Spec.Template.Spec.SecurityContext.RunAsUser, -1),
		"scheduler": ptr.Deref(decodeObject[appsv1.Deployment](t, findObject(t, full, "Deployment", "telesched-scheduler")).Spec.Template.Spec.SecurityContext.RunAsUser, -1),
	}
	uid := ptr.Deref(spec.SecurityContext.RunAsUser, 0)
	for what, other := range uids {
		if uid == other {
			t.Errorf("the descheduler runs as uid %d, the %s's: one could read the other's token through /proc", uid, what)
		}
	}
	if slices.Contains([]int64{0, 1, 33, 999, 1000, 1001, 10001, 65532, 65534}, uid) || uid >= 65536 {
		t.Errorf("the descheduler runs as uid %d: one workloads commonly run as, or in the user-namespace range", uid)
	}

	c := spec.Containers[0]
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" && p.ContainerPort == 10262 }) {
		t.Errorf("ports %v, want metrics 10262 (the binary's --metrics-bind-address default)", c.Ports)
	}
	for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/healthz" || probe.HTTPGet.Port.String() != "metrics" {
			t.Errorf("probe %v, want GET /healthz on port metrics", probe)
		}
	}
	got := deschedulerArgs(t, dep)
	for k, v := range got {
		got[k] = goDuration(v)
	}
	want := defaultDeschedulerArgs(t)
	for k, v := range want {
		want[k] = goDuration(v)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deploy/descheduler's args are not the binary's defaults, dry-run included (-want +got):\n%s", diff)
	}
}

// TestHelmDescheduler: the chart installs no descheduler unless
// descheduler.enabled; enabled, it runs in dry-run until descheduler.dryRun
// is false, and renders each value into its flag.
func TestHelmDescheduler(t *testing.T) {
	for _, o := range renderHelm(t) {
		if strings.Contains(o.GetName(), "descheduler") && o.GetKind() != "PodMonitor" {
			t.Errorf("the chart's defaults render %s: the descheduler is installed only with descheduler.enabled", objectID(o))
		}
	}
	for _, tc := range []struct {
		name   string
		values []string
		want   map[string]string
	}{
		{"enabled", []string{"descheduler.enabled=true"}, nil},
		{"evicting", []string{"descheduler.enabled=true", "descheduler.dryRun=false"}, map[string]string{"dry-run": "false"}},
		{"every value", []string{"descheduler.enabled=true", "descheduler.interval=30s", "descheduler.thermalSustain=5m", "descheduler.budgetSustain=3m",
			"descheduler.cooldown=1h", "descheduler.maxEvictionsPerNodePerCycle=1", "descheduler.maxEvictionsPerCycle=3",
			"descheduler.priorityThreshold=100000", "descheduler.logVerbosity=4", "descheduler.extraArgs={--kubeconfig=/k}",
			"descheduler.telemetryThermalHold=1m", "descheduler.telemetryPowerHold=3m", "descheduler.reservationMaxAge=5m"},
			map[string]string{"interval": "30s", "thermal-sustain": "5m", "budget-sustain": "3m", "cooldown": "1h", "max-evictions-per-node-per-cycle": "1",
				"max-evictions-per-cycle": "3", "priority-threshold": "100000", "v": "4", "kubeconfig": "/k",
				"telemetry-thermal-hold": "1m", "telemetry-power-hold": "3m", "reservation-max-age": "5m"}},
		{"leader election", []string{"descheduler.enabled=true", "descheduler.replicas=2", "descheduler.leaderElection.resourceNamespace=telesched-system",
			"descheduler.leaderElection.leaseDuration=30s", "descheduler.leaderElection.renewDeadline=20s", "descheduler.leaderElection.retryPeriod=4s"},
			map[string]string{"leader-elect-resource-namespace": "telesched-system", "leader-elect-lease-duration": "30s", "leader-elect-renew-deadline": "20s",
				"leader-elect-retry-period": "4s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dep := decodeObject[appsv1.Deployment](t, findObject(t, renderHelm(t, tc.values...), "Deployment", "telesched-descheduler"))
			want := defaultDeschedulerArgs(t)
			for k, v := range want {
				want[k] = goDuration(v)
			}
			// With the chart's scheduler: its configuration
			// (TestHelmDeschedulerFollowsTheSchedulersArgs).
			want["scheduler-config"], want["scheduler-profile"] = "/etc/telesched/scheduler-config.yaml", descheduler.DefaultSchedulerProfile
			for k, v := range tc.want {
				want[k] = v
			}
			if diff := cmp.Diff(want, deschedulerArgs(t, dep)); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeschedulerRBAC installs deploy/descheduler's RBAC on the real API
// server and asks it (SubjectAccessReview) what the descheduler's
// ServiceAccount may do: read what its informers list, evict, write
// events.k8s.io Events, keep its own leader Lease, and nothing more (no
// delete of a pod, no write to NodeTelemetry, no Secrets, no other Lease). test/integration's
// TestHelmDeschedulerRunsWithChartRBAC runs the binary under this
// ServiceAccount's token.
func TestDeschedulerRBAC(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	a := newManifestApplier(t)
	for _, o := range slices.Concat(renderKustomization(t, manifestsRoot), renderKustomization(t, filepath.Join(manifestsRoot, "descheduler"))) {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := a.apply(ctx, o, false); err != nil {
				t.Fatalf("applying %s: %v", objectID(o), err)
			}
		}
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	sa := "system:serviceaccount:telesched-system:telesched-descheduler"
	for _, tc := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}, true},
		{authorizationv1.ResourceAttributes{Verb: "watch", Resource: "pods"}, true},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "nodes"}, true},
		{authorizationv1.ResourceAttributes{Verb: "watch", Resource: "namespaces"}, true},
		{authorizationv1.ResourceAttributes{Verb: "list", Group: "policy", Resource: "poddisruptionbudgets"}, true},
		{authorizationv1.ResourceAttributes{Verb: "watch", Group: "resource.k8s.io", Resource: "resourceclaims"}, true},
		{authorizationv1.ResourceAttributes{Verb: "list", Group: "resource.k8s.io", Resource: "resourceslices"}, true},
		{authorizationv1.ResourceAttributes{Verb: "watch", Group: "telemetry.telesched.io", Resource: "nodetelemetries"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Resource: "pods", Subresource: "eviction", Name: "p"}, true},
		// The telemetry cache's informer on the agent's DaemonSets, and
		// LoadAware's in every namespace (the scheduler's profile, run
		// in process to check destinations).
		{authorizationv1.ResourceAttributes{Namespace: "telesched-system", Verb: "watch", Group: "apps", Resource: "daemonsets"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "list", Group: "apps", Resource: "daemonsets"}, true},
		// The scheduler's in-tree plugins' reads: volumes, storage,
		// DRA, spread; none of its writes.
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "watch", Resource: "persistentvolumeclaims"}, true},
		{authorizationv1.ResourceAttributes{Verb: "list", Group: "storage.k8s.io", Resource: "csinodes"}, true},
		{authorizationv1.ResourceAttributes{Verb: "list", Group: "resource.k8s.io", Resource: "deviceclasses"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "list", Group: "apps", Resource: "statefulsets"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Resource: "pods", Subresource: "binding", Name: "p"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "update", Resource: "persistentvolumeclaims", Name: "c"}, false},
		// A new leader reads its predecessor's cool-down from Events.
		{authorizationv1.ResourceAttributes{Verb: "list", Group: "events.k8s.io", Resource: "events"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Group: "events.k8s.io", Resource: "events"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "patch", Group: "events.k8s.io", Resource: "events", Name: "e"}, true},
		// It evicts; it never deletes a pod itself (that would skip PDBs).
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "delete", Resource: "pods", Name: "p"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "update", Resource: "pods", Name: "p"}, false},
		{authorizationv1.ResourceAttributes{Verb: "patch", Group: "telemetry.telesched.io", Resource: "nodetelemetries", Subresource: "status", Name: "n"}, false},
		{authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Name: "n"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "get", Resource: "secrets", Name: "s"}, false},
		// Its leader Lease, by name; no other.
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "create", Group: "coordination.k8s.io", Resource: "leases"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "telesched-descheduler"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Name: "telesched-descheduler"}, true},
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "telesched-scheduler"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "delete", Group: "coordination.k8s.io", Resource: "leases", Name: "telesched-descheduler"}, false},
		{authorizationv1.ResourceAttributes{Verb: "watch", Group: "telemetry.telesched.io", Resource: "powerbudgets"}, true},
		{authorizationv1.ResourceAttributes{Verb: "patch", Group: "telemetry.telesched.io", Resource: "powerbudgets", Subresource: "status", Name: "rack"}, false},
	} {
		checkAccess(ctx, t, kube, sa, tc.attrs, tc.want)
	}
}

func parseDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestHelmDeschedulerFollowsTheSchedulersArgs: with the chart's scheduler,
// the descheduler reads the scheduler's own configuration (the ConfigMap
// mounted where --scheduler-config points), so a shared value reaches both:
// parsed as the binary parses it, the rendered file gives the descheduler
// the changed args. Without the chart's scheduler it has no such file, and
// the chart refuses a shared value it would not follow, naming it.
func TestHelmDeschedulerFollowsTheSchedulersArgs(t *testing.T) {
	_, ea, err := descheduler.DefaultPluginArgs()
	if err != nil {
		t.Fatal(err)
	}
	shared := readYAMLMap(t, filepath.Join(chartDir, "values.yaml"))["shared"].(map[string]any)
	if diff := cmp.Diff(map[string]string{
		"thermalMarginCelsius": strconv.Itoa(int(ea.ThermalMarginCelsius)),
		"absoluteLimitCelsius": strconv.Itoa(int(ea.AbsoluteLimitCelsius)),
		"telemetryMaxAge":      ea.TelemetryMaxAge.String(),
	}, map[string]string{
		"thermalMarginCelsius": fmt.Sprint(shared["thermalMarginCelsius"]),
		"absoluteLimitCelsius": fmt.Sprint(shared["absoluteLimitCelsius"]),
		"telemetryMaxAge":      parseDuration(t, fmt.Sprint(shared["telemetryMaxAge"])).String(),
	}); diff != "" {
		t.Fatalf("the chart's shared defaults are not the descheduler's default EnergyAware args (-descheduler +chart):\n%s", diff)
	}

	objs := renderHelm(t, "descheduler.enabled=true", "shared.thermalMarginCelsius=8", "shared.absoluteLimitCelsius=85", "shared.telemetryMaxAge=2m")
	dep := decodeObject[appsv1.Deployment](t, findObject(t, objs, "Deployment", "telesched-descheduler"))
	path := deschedulerArgs(t, dep)["scheduler-config"]
	spec := dep.Spec.Template.Spec
	var configMap string
	for _, m := range spec.Containers[0].VolumeMounts {
		if rel, ok := strings.CutPrefix(path, m.MountPath+"/"); ok {
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					configMap = v.ConfigMap.Name
				}
			}
			path = rel
		}
	}
	if configMap == "" {
		t.Fatalf("--scheduler-config %q is on no ConfigMap volume of the descheduler pod (mounts %+v)", deschedulerArgs(t, dep)["scheduler-config"], spec.Containers[0].VolumeMounts)
	}
	data, _, _ := unstructured.NestedString(findObject(t, objs, "ConfigMap", configMap).Object, "data", path)
	file := filepath.Join(t.TempDir(), path)
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, got, err := descheduler.PluginArgsFrom(file, deschedulerArgs(t, dep)["scheduler-profile"])
	if err != nil {
		t.Fatalf("the descheduler cannot read the chart's scheduler configuration: %v", err)
	}
	if got.ThermalMarginCelsius != 8 || got.AbsoluteLimitCelsius != 85 || got.TelemetryMaxAge != 2*time.Minute {
		t.Errorf("the descheduler's EnergyAware args from the chart: margin %d, limit %d, max age %v; want the shared values 8, 85, 2m",
			got.ThermalMarginCelsius, got.AbsoluteLimitCelsius, got.TelemetryMaxAge)
	}

	for _, tc := range []struct {
		set     string
		wantErr string
	}{
		{"shared.thermalMarginCelsius=8", "descheduler.enabled without scheduler.enabled, with shared.thermalMarginCelsius 8"},
		{"shared.absoluteLimitCelsius=85", "descheduler.enabled without scheduler.enabled, with shared.absoluteLimitCelsius 85"},
		{"shared.telemetryMaxAge=2m", "descheduler.enabled without scheduler.enabled, with shared.telemetryMaxAge 2m"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := runHelm(t, helmTemplateArgs("descheduler.enabled=true", "scheduler.enabled=false", tc.set)...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("helm template --set descheduler.enabled=true,scheduler.enabled=false --set %s: error %v, want one containing %q", tc.set, err, tc.wantErr)
			}
		})
	}
	// The same value written another way is the same value.
	if _, err := runHelm(t, helmTemplateArgs("descheduler.enabled=true", "scheduler.enabled=false", "shared.telemetryMaxAge=1m")...); err != nil {
		t.Errorf("shared.telemetryMaxAge=1m is 60s: %v", err)
	}
}

// TestHelmDeschedulerPolicy: descheduler.policy renders into the ConfigMap
// telesched-descheduler-policy, mounted where --policy reads it, and the
// descheduler takes it as written.
func TestHelmDeschedulerPolicy(t *testing.T) {
	objs := renderHelm(t, "descheduler.enabled=true", "descheduler.policy.apiVersion=descheduler/v1alpha2", "descheduler.policy.kind=DeschedulerPolicy",
		"descheduler.policy.profiles[0].name=telesched", "descheduler.policy.profiles[0].plugins.deschedule.enabled[0]=TeleschedPowerBudget")
	dep := decodeObject[appsv1.Deployment](t, findObject(t, objs, "Deployment", "telesched-descheduler"))
	path := deschedulerArgs(t, dep)["policy"]
	cm := decodeObject[corev1.ConfigMap](t, findObject(t, objs, "ConfigMap", "telesched-descheduler-policy"))
	mounted := false
	for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name && filepath.Join(m.MountPath, "policy.yaml") == path {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Fatalf("--policy=%q is not the ConfigMap %s's policy.yaml mounted", path, cm.Name)
	}
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["policy.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := descheduler.LoadPolicy(file, app.DefaultPriorityThreshold, []string{"telesched"})
	if err != nil {
		t.Fatalf("the rendered policy: %v\n%s", err, cm.Data["policy.yaml"])
	}
	if _, on := p.Plugins[descheduler.ThermalPluginName]; on || len(p.Plugins) != 1 {
		t.Errorf("the rendered policy runs %v; want TeleschedPowerBudget alone", p.Plugins)
	}
}
