// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/telesched/telesched/sandbox/controlplane"
)

// manifestsRoot is deploy/ of this checkout, seen from test/deploy.
var manifestsRoot = filepath.Join("..", "..", "deploy")

// promOperatorCRDDir holds the pinned Prometheus Operator CRDs that
// deploy/monitoring/ needs (see its README.md).
var promOperatorCRDDir = filepath.Join("..", "testdata", "prometheus-operator", "v0.85.0")

// deployFieldManager applies the manifests in these tests.
const deployFieldManager = "telesched-deploy-test"

// manifestSet is what one `kubectl apply -k` would install.
type manifestSet struct {
	name string
	objs []*unstructured.Unstructured
}

// renderKustomization builds the kustomization in dir with bin/kustomize
// (pinned in hack/tools, the kustomize kubectl embeds), as `kubectl apply
// -k dir` does (default options: files may only come from under the
// kustomization's own directory). A binary rather than the kustomize API,
// so that kustomize stays out of telesched's module.
func renderKustomization(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	bin, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	kustomize := filepath.Join(bin, "kustomize")
	if _, err := os.Stat(kustomize); err != nil {
		t.Fatalf("%v (make test builds bin/kustomize from hack/tools)", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), kustomize, "build", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.String())
	}
	return decodeManifests(t, "kustomize build "+dir, stdout.Bytes())
}

// renderWithComponents builds deploy/crds and deploy/ with the components
// under deploy/variants/ named, in that order, as the overlay a user writes
// (see each variant's README.md).
func renderWithComponents(t *testing.T, components ...string) []*unstructured.Unstructured {
	t.Helper()
	return renderOverlay(t, "", components...)
}

// renderOverlay is renderWithComponents with the overlay's `namespace:`
// set to namespace ("": none).
func renderOverlay(t *testing.T, namespace string, components ...string) []*unstructured.Unstructured {
	t.Helper()
	overlay := t.TempDir()
	rel := func(path string) string {
		abs, err := filepath.Abs(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := filepath.Rel(overlay, abs)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{rel(filepath.Join(manifestsRoot, "crds")), rel(manifestsRoot)},
	}
	if namespace != "" {
		k["namespace"] = namespace
	}
	var paths []string
	for _, c := range components {
		paths = append(paths, rel(filepath.Join(manifestsRoot, "variants", c)))
	}
	k["components"] = paths
	data, err := yaml.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return renderKustomization(t, overlay)
}

// manifestSets renders every installable kustomization (the full install,
// its variants alone and together, and the monitoring overlay) and the
// Helm chart.
func manifestSets(t *testing.T) []manifestSet {
	t.Helper()
	return []manifestSet{
		// What the README's two commands install: deploy/crds, then deploy/.
		{"deploy", append(renderKustomization(t, filepath.Join(manifestsRoot, "crds")), renderKustomization(t, manifestsRoot)...)},
		{"deploy+rapl", renderWithComponents(t, "rapl")},
		{"deploy+gpu", renderWithComponents(t, "gpu")},
		{"deploy+gpu+rapl", renderWithComponents(t, "gpu", "rapl")},
		{"deploy+single-scheduler", renderWithComponents(t, "single-scheduler")},
		// deploy/descheduler, which an operator adds to the full install.
		{"deploy+descheduler", slices.Concat(renderKustomization(t, filepath.Join(manifestsRoot, "crds")), renderKustomization(t, manifestsRoot),
			renderKustomization(t, filepath.Join(manifestsRoot, "descheduler")))},
		{"monitoring", renderKustomization(t, filepath.Join(manifestsRoot, "monitoring"))},
		// The Helm chart (deploy/helm/telesched), with every object of
		// its defaults and variants.
		{"helm", renderHelm(t, "namespace.create=true")},
		{"helm gpu+rapl", renderHelm(t, "agent.gpu.enabled=true", "agent.rapl.enabled=true")},
		{"helm single-scheduler", renderHelm(t, "scheduler.serveDefaultScheduler=true")},
		{"helm descheduler", renderHelm(t, "descheduler.enabled=true")},
		{"helm monitoring", renderHelm(t, "agent.enabled=false", "scheduler.enabled=false", "policy.enabled=false", "policy.optIn.enabled=false",
			"monitoring.podMonitor.enabled=true", "monitoring.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true",
			"dashboards.enabled=true")},
	}
}

// TestDeployKustomizations builds each kustomization under deploy/ on its
// own too (each says it can be applied alone) and checks that the full
// install holds every object of its parts.
func TestDeployKustomizations(t *testing.T) {
	full := map[string]bool{}
	for _, o := range renderKustomization(t, manifestsRoot) {
		full[objectID(o)] = true
	}
	for _, o := range renderKustomization(t, manifestsRoot) {
		// `kubectl delete -k deploy/` must not take the CRDs, and with
		// them every PowerBudget users wrote.
		if o.GetKind() == "CustomResourceDefinition" {
			t.Errorf("deploy/ holds %s: uninstalling it would delete every object of that kind; the CRDs belong in deploy/crds alone", objectID(o))
		}
	}
	for _, part := range []string{"agent", "scheduler", "policy"} {
		t.Run(part, func(t *testing.T) {
			for _, o := range renderKustomization(t, filepath.Join(manifestsRoot, part)) {
				if !full[objectID(o)] {
					t.Errorf("%s is in deploy/%s but not in deploy/", objectID(o), part)
				}
			}
		})
	}
}

func objectID(o *unstructured.Unstructured) string {
	id := o.GetKind() + " " + o.GetName()
	if ns := o.GetNamespace(); ns != "" {
		id = o.GetKind() + " " + ns + "/" + o.GetName()
	}
	return id
}

// TestDeployManifests applies every rendered object to the real API server
// by server-side apply with dryRun=All: the server's own defaulting,
// validation (built-in types, CRD schemas and their CEL rules, the type
// checking of the admission policy's CEL) and admission see each object. Server-side apply rejects a field the
// schema does not declare or of the wrong type whatever fieldValidation
// says; Strict adds duplicate fields. CRDs and Namespaces are applied for
// real first, since objects of a CRD's kinds and objects in a namespace
// cannot be dry-run without them.
func TestDeployManifests(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	a := newManifestApplier(t)

	// The Prometheus Operator's CRDs, for deploy/monitoring/.
	var promCRDs []*unstructured.Unstructured
	for _, name := range []string{"servicemonitors", "podmonitors", "prometheusrules"} {
		promCRDs = append(promCRDs, readManifests(t, filepath.Join(promOperatorCRDDir, "monitoring.coreos.com_"+name+".yaml"))...)
	}
	for _, crd := range promCRDs {
		if err := a.apply(ctx, crd, false); err != nil {
			t.Fatalf("installing %s: %v", crd.GetName(), err)
		}
	}
	a.waitEstablished(t, promCRDs)

	// In this order: deploy/monitoring/ goes into the namespace deploy/
	// creates, as a user applies them.
	sets := manifestSets(t)
	objsOf := func(name string) []*unstructured.Unstructured {
		i := slices.IndexFunc(sets, func(s manifestSet) bool { return s.name == name })
		if i < 0 {
			t.Fatalf("no manifest set %s", name)
		}
		return sets[i].objs
	}
	for _, set := range sets {
		t.Run(set.name, func(t *testing.T) {
			var crds, namespaces, rest []*unstructured.Unstructured
			for _, o := range set.objs {
				switch o.GroupVersionKind().GroupKind() {
				case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
					crds = append(crds, o)
				case schema.GroupKind{Kind: "Namespace"}:
					namespaces = append(namespaces, o)
				default:
					rest = append(rest, o)
				}
			}
			for _, o := range append(slices.Clone(crds), namespaces...) {
				if err := a.apply(ctx, o, false); err != nil {
					t.Fatalf("applying %s: %v", objectID(o), err)
				}
			}
			a.waitEstablished(t, crds)
			for _, o := range rest {
				if err := a.apply(ctx, o, true); err != nil {
					t.Errorf("dry-run apply of %s: %v", objectID(o), err)
				}
			}
			t.Logf("%d CRDs and %d namespaces applied, %d objects dry-run applied", len(crds), len(namespaces), len(rest))
		})
	}

	// The dry run must catch a broken manifest, or the test proves nothing.
	setAgentSecurityField := func(field string, value any) func(t *testing.T, o *unstructured.Unstructured) {
		return func(t *testing.T, o *unstructured.Unstructured) {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			containers[0].(map[string]any)["securityContext"].(map[string]any)[field] = value
			if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		obj     *unstructured.Unstructured
		mutate  func(t *testing.T, o *unstructured.Unstructured)
		wantErr string
	}{
		{
			name:    "DaemonSet field of the wrong type",
			obj:     findObject(t, objsOf("deploy"), "DaemonSet", "telesched-agent"),
			mutate:  setAgentSecurityField("readOnlyRootFilesystem", "yes"),
			wantErr: `.securityContext.readOnlyRootFilesystem: expected boolean`,
		},
		{
			name:    "DaemonSet unknown field",
			obj:     findObject(t, objsOf("deploy"), "DaemonSet", "telesched-agent"),
			mutate:  setAgentSecurityField("readOnlyRootFileSystem", true),
			wantErr: `.securityContext.readOnlyRootFileSystem: field not declared in schema`,
		},
		{
			// A custom resource is checked against its CRD's schema.
			name: "PodMonitor unknown field",
			obj:  findObject(t, objsOf("monitoring"), "PodMonitor", "telesched-agent"),
			mutate: func(t *testing.T, o *unstructured.Unstructured) {
				if err := unstructured.SetNestedField(o.Object, "metrics", "spec", "podMetricEndpoints"); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: `.spec.podMetricEndpoints: field not declared in schema`,
		},
	} {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			bad := tc.obj.DeepCopy()
			tc.mutate(t, bad)
			err := a.apply(ctx, bad, true)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("dry-run apply: error %v, want one containing %q", err, tc.wantErr)
			}
			t.Logf("rejected as it should be: %v", err)
		})
	}
}

// manifestApplier server-side applies unstructured objects, finding their
// resources through discovery (refreshed when a kind is not found yet,
// as after a CRD is installed).
type manifestApplier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newManifestApplier(t *testing.T) *manifestApplier {
	t.Helper()
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &manifestApplier{
		dyn:    dynamic.NewForConfigOrDie(cfg),
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
	}
}

// mapping waits up to 30s for the API server to serve the object's kind.
func (a *manifestApplier) mapping(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil || !meta.IsNoMatchError(err) || time.Now().After(deadline) {
			return m, err
		}
		a.mapper.Reset()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// apply server-side applies obj with strict field validation; dryRun
// leaves the cluster unchanged.
func (a *manifestApplier) apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := a.mapping(ctx, gvk)
	if err != nil {
		return fmt.Errorf("mapping %s: %w", gvk, err)
	}
	var res dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		// deploy/ sets no namespace transformer: every namespaced object
		// names its namespace, or `kubectl apply -k` would put it in the
		// user's current one.
		if obj.GetNamespace() == "" {
			return fmt.Errorf("%s is namespaced but names no namespace", gvk.Kind)
		}
		res = a.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{
		FieldManager:    deployFieldManager,
		Force:           ptr.To(true),
		FieldValidation: metav1.FieldValidationStrict,
	}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = res.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	return err
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// waitEstablished waits until every CRD is Established.
func (a *manifestApplier) waitEstablished(t *testing.T, crds []*unstructured.Unstructured) {
	t.Helper()
	for _, crd := range crds {
		waitFor(t, "CRD "+crd.GetName()+" established", 30*time.Second, func() bool {
			got, err := a.dyn.Resource(crdResource).Get(t.Context(), crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return false
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				c, _ := c.(map[string]any)
				if c["type"] == "Established" && c["status"] == "True" {
					return true
				}
			}
			return false
		})
	}
}

// readManifests decodes every object in a YAML file.
func readManifests(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifests(t, path, data)
}

func findObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among the rendered objects", kind, name)
	return nil
}

// decodeObject converts a rendered object to its Go type, failing on any
// field the type does not have.
func decodeObject[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("decoding %s: %v", objectID(o), err)
	}
	return out
}

// checkHardened reports every way a pod template departs from the
// hardening both telesched workloads share: no privilege escalation, no
// capabilities, read-only root file system, seccomp RuntimeDefault, and a
// non-root user unless wantRoot.
func checkHardened(t *testing.T, what string, spec corev1.PodSpec, wantRoot bool) {
	t.Helper()
	psc := ptr.Deref(spec.SecurityContext, corev1.PodSecurityContext{})
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		t.Fatalf("%s: %d containers and %d init containers, want exactly one container", what, len(spec.Containers), len(spec.InitContainers))
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Errorf("%s: shares a host namespace (network %v, pid %v, ipc %v)", what, spec.HostNetwork, spec.HostPID, spec.HostIPC)
	}
	c := spec.Containers[0]
	sc := ptr.Deref(c.SecurityContext, corev1.SecurityContext{})
	if !ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
		t.Errorf("%s: readOnlyRootFilesystem is not true", what)
	}
	if ptr.Deref(sc.AllowPrivilegeEscalation, true) {
		t.Errorf("%s: allowPrivilegeEscalation is not false", what)
	}
	if ptr.Deref(sc.Privileged, false) {
		t.Errorf("%s: privileged", what)
	}
	caps := ptr.Deref(sc.Capabilities, corev1.Capabilities{})
	if !slices.Equal(caps.Drop, []corev1.Capability{"ALL"}) || len(caps.Add) != 0 {
		t.Errorf("%s: capabilities drop %v add %v, want drop [ALL] and nothing added", what, caps.Drop, caps.Add)
	}
	// A container's seccomp profile overrides the pod's.
	seccomp := psc.SeccompProfile
	if sc.SeccompProfile != nil {
		seccomp = sc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccomp profile %v, want RuntimeDefault", what, seccomp)
	}
	runAsNonRoot := ptr.Deref(psc.RunAsNonRoot, false)
	runAsUser := psc.RunAsUser
	if sc.RunAsNonRoot != nil {
		runAsNonRoot = *sc.RunAsNonRoot
	}
	if sc.RunAsUser != nil {
		runAsUser = sc.RunAsUser
	}
	switch {
	case wantRoot && (runAsNonRoot || ptr.Deref(runAsUser, -1) != 0):
		t.Errorf("%s: runAsNonRoot %v, runAsUser %v; want uid 0", what, runAsNonRoot, ptr.Deref(runAsUser, -1))
	case !wantRoot && (!runAsNonRoot || ptr.Deref(runAsUser, 0) == 0):
		t.Errorf("%s: runAsNonRoot %v, runAsUser %v; want a non-root uid", what, runAsNonRoot, ptr.Deref(runAsUser, 0))
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: resources %v, want CPU and memory requests and a memory limit", what, c.Resources)
	}
}

// checkRelay checks the pod-resources relay of an agent DaemonSet: the
// pod's one init container, a sidecar (restartPolicy Always) that runs
// telesched-agent podresources-relay as uid 0 with every capability
// dropped, no privilege escalation and a read-only root, that mounts the
// kubelet's pod-resources directory (read-only) and an emptyDir and
// nothing else, and listens there on the socket the agent's default
// --podresources-socket finds under its --host-root: the agent mounts the
// same emptyDir at /host/var/lib/kubelet/pod-resources.
func checkRelay(t *testing.T, what string, spec corev1.PodSpec) {
	t.Helper()
	var names []string
	for _, c := range spec.InitContainers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"podresources-relay", "powercap-relay"}) {
		t.Errorf("%s: init containers %v, want the podresources-relay and powercap-relay sidecars alone", what, names)
		return
	}
	for _, r := range spec.InitContainers {
		checkSidecar(t, what, spec, r)
	}
	checkPodResourcesRelay(t, what, spec, spec.InitContainers[0])
	checkPowercapRelay(t, what, spec, spec.InitContainers[1])
}

// checkSidecar checks what both relays share: a sidecar of the agent's
// image, uid 0 with every capability dropped, a read-only root, and
// resources.
func checkSidecar(t *testing.T, what string, spec corev1.PodSpec, r corev1.Container) {
	t.Helper()
	what += " " + r.Name
	if ptr.Deref(r.RestartPolicy, "") != corev1.ContainerRestartPolicyAlways {
		t.Errorf("%s: relay restartPolicy %v, want Always (a sidecar, started before the agent)", what, r.RestartPolicy)
	}
	if r.Image != spec.Containers[0].Image {
		t.Errorf("%s: relay image %s, want the agent's %s", what, r.Image, spec.Containers[0].Image)
	}
	sc := ptr.Deref(r.SecurityContext, corev1.SecurityContext{})
	caps := ptr.Deref(sc.Capabilities, corev1.Capabilities{})
	if ptr.Deref(sc.RunAsUser, -1) != 0 || ptr.Deref(sc.RunAsNonRoot, true) || ptr.Deref(sc.AllowPrivilegeEscalation, true) ||
		ptr.Deref(sc.Privileged, false) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) ||
		!slices.Equal(caps.Drop, []corev1.Capability{"ALL"}) || len(caps.Add) != 0 {
		t.Errorf("%s: relay securityContext %+v, want uid 0, no privilege escalation, a read-only root and every capability dropped", what, sc)
	}
	if r.Resources.Requests.Cpu().IsZero() || r.Resources.Requests.Memory().IsZero() || r.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: relay resources %v, want CPU and memory requests and a memory limit", what, r.Resources)
	}
}

// checkPodResourcesRelay: the pod-resources relay sees the kubelet's
// directory read-only and an emptyDir the agent mounts where its
// --podresources-socket looks.
func checkPodResourcesRelay(t *testing.T, what string, spec corev1.PodSpec, r corev1.Container) {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	var hostDir, relayDir string
	for _, m := range r.VolumeMounts {
		switch v := volumes[m.Name]; {
		case v.HostPath != nil && v.HostPath.Path == "/var/lib/kubelet/pod-resources" && m.ReadOnly:
			hostDir = m.MountPath
		case v.EmptyDir != nil:
			relayDir = m.MountPath
		default:
			t.Errorf("%s: the relay mounts %s (%+v) at %s readOnly %t; want the kubelet's pod-resources directory read-only and an emptyDir only", what, m.Name, v.VolumeSource, m.MountPath, m.ReadOnly)
		}
	}
	args := strings.Join(r.Args, " ")
	if hostDir == "" || relayDir == "" || !strings.HasPrefix(args, "podresources-relay ") ||
		!slices.Contains(r.Args, "--kubelet-socket="+hostDir+"/kubelet.sock") || !slices.Contains(r.Args, "--listen="+relayDir+"/kubelet.sock") {
		t.Errorf("%s: relay args %q with the host's directory at %q and the emptyDir at %q; want podresources-relay from one socket to the other", what, args, hostDir, relayDir)
	}
	shared := slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return volumes[m.Name].EmptyDir != nil && slices.ContainsFunc(r.VolumeMounts, func(rm corev1.VolumeMount) bool { return rm.Name == m.Name }) &&
			m.MountPath == "/host/var/lib/kubelet/pod-resources" && m.ReadOnly
	})
	if !shared {
		t.Errorf("%s: the agent does not mount the relay's emptyDir read-only at /host/var/lib/kubelet/pod-resources, where its --podresources-socket looks", what)
	}
}

// checkPowercapRelay: the powercap relay sees the host's /sys read-only
// and serves the powercap devices under it on a socket in an emptyDir,
// which the agent mounts read-only where its --powercap-relay-socket
// points.
func checkPowercapRelay(t *testing.T, what string, spec corev1.PodSpec, r corev1.Container) {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	var sys, dir, dirVolume string
	for _, m := range r.VolumeMounts {
		switch v := volumes[m.Name]; {
		case v.HostPath != nil && v.HostPath.Path == "/sys" && m.ReadOnly:
			sys = m.MountPath
		case v.EmptyDir != nil:
			dir, dirVolume = m.MountPath, m.Name
		default:
			t.Errorf("%s: the powercap relay mounts %s (%+v) at %s readOnly %t; want the host's /sys read-only and an emptyDir only", what, m.Name, v.VolumeSource, m.MountPath, m.ReadOnly)
		}
	}
	if sys == "" || dir == "" || len(r.Args) == 0 || r.Args[0] != "powercap-relay" ||
		!slices.Contains(r.Args, "--powercap-root="+sys+"/devices/virtual/powercap") || !slices.Contains(r.Args, "--listen="+dir+"/relay.sock") {
		t.Errorf("%s: powercap relay args %q, /sys at %q, emptyDir at %q; want powercap-relay serving <sys>/devices/virtual/powercap on <emptyDir>/relay.sock", what, r.Args, sys, dir)
		return
	}
	agent := spec.Containers[0]
	var at string
	for _, m := range agent.VolumeMounts {
		if m.Name == dirVolume && m.ReadOnly {
			at = m.MountPath
		}
	}
	if at == "" || !slices.Contains(agent.Args, "--powercap-relay-socket="+at+"/relay.sock") {
		t.Errorf("%s: the agent mounts the powercap relay's emptyDir at %q with args %q; want it read-only and --powercap-relay-socket at its relay.sock", what, at, agent.Args)
	}
}

// checkAgent checks what an agent DaemonSet must do to read its node and
// publish: host /proc and /sys read-only under --host-root, every node,
// NODE_NAME from the downward API, probes on a port of their own, apart
// from the connection-capped metrics port, and no host network (where a
// NetworkPolicy would not apply).
func checkAgent(t *testing.T, objs []*unstructured.Unstructured, ds *appsv1.DaemonSet, wantRoot bool) {
	t.Helper()
	what := "DaemonSet " + ds.Name
	spec := ds.Spec.Template.Spec
	checkRelay(t, what, spec)
	agentSpec := *spec.DeepCopy()
	agentSpec.InitContainers = nil
	checkHardened(t, what, agentSpec, wantRoot)
	c := spec.Containers[0]

	if !slices.Contains(c.Args, "--host-root=/host") {
		t.Errorf("%s: args %v, want --host-root=/host", what, c.Args)
	}
	hostPaths := map[string]string{} // volume name -> host path
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	mounted := map[string]corev1.VolumeMount{} // host path -> mount
	for _, m := range c.VolumeMounts {
		if p, ok := hostPaths[m.Name]; ok {
			mounted[p] = m
		}
	}
	if len(mounted) != 2 {
		t.Errorf("%s: host paths mounted in the agent %v, want /proc and /sys only (the relay mounts the kubelet's pod-resources directory)", what, mounted)
	}
	for _, p := range []string{"/proc", "/sys"} {
		m, ok := mounted[p]
		switch {
		case !ok:
			t.Errorf("%s: host %s not mounted", what, p)
		case m.MountPath != "/host"+p || !m.ReadOnly:
			t.Errorf("%s: host %s mounted at %s readOnly %v, want /host%s readOnly", what, p, m.MountPath, m.ReadOnly, p)
		}
	}
	// Linux nodes only, and not virtual-kubelet ones, in every term.
	if spec.NodeSelector[corev1.LabelOSStable] != "linux" {
		t.Errorf("%s: nodeSelector %v, want %s: linux", what, spec.NodeSelector, corev1.LabelOSStable)
	}
	if a := spec.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Errorf("%s: no required node affinity keeping it off virtual-kubelet nodes", what)
	} else {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if !slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
				return r.Key == "type" && r.Operator == corev1.NodeSelectorOpNotIn && slices.Equal(r.Values, []string{"virtual-kubelet"})
			}) {
				t.Errorf("%s: node selector term %v lets it onto virtual-kubelet nodes (type NotIn [virtual-kubelet])", what, term)
			}
		}
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == ""
	}) {
		t.Errorf("%s: tolerations %v, want one with operator Exists and no key or effect", what, spec.Tolerations)
	}
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "NODE_NAME" })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("%s: NODE_NAME is not set from the downward API's spec.nodeName (env %v)", what, c.Env)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" && p.ContainerPort == 9102 }) {
		t.Errorf("%s: ports %v, want metrics 9102 (--metrics-bind-address)", what, c.Ports)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "health" && p.ContainerPort == 8081 }) ||
		!slices.Contains(c.Args, "--health-probe-bind-address=:8081") {
		t.Errorf("%s: ports %v, args %v; want health 8081 and --health-probe-bind-address=:8081", what, c.Ports, c.Args)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "health" {
			t.Errorf("%s: no HTTP probe on health %s (the metrics port caps its connections; idle clients would time the probes out)", what, path)
		}
	}
	if spec.HostNetwork {
		t.Errorf("%s: hostNetwork: its NetworkPolicy would not apply, and its ports would be open on the node's address", what)
	}
	if spec.ServiceAccountName != "telesched-agent" {
		t.Errorf("%s: serviceAccountName %q, want telesched-agent", what, spec.ServiceAccountName)
	}
	// Whatever it references is installed with it.
	findObject(t, objs, "ServiceAccount", spec.ServiceAccountName)
	findObject(t, objs, "PriorityClass", spec.PriorityClassName)
}

// TestDeploySecurity checks the rendered agent DaemonSet and scheduler
// Deployment: hardening, host access, and that each reference resolves
// within the install. It needs no control plane.
func TestDeploySecurity(t *testing.T) {
	objs := renderKustomization(t, manifestsRoot)

	t.Run("agent", func(t *testing.T) {
		ds := decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", "telesched-agent"))
		checkAgent(t, objs, ds, false)
		// Without the GPU variant, every (Linux, real) node: the one term
		// checkAgent asks for, and nothing else.
		if terms := ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) != 1 || len(terms[0].MatchExpressions) != 1 {
			t.Errorf("without the GPU variant the agent must run on every node but virtual ones; node selector terms %v", terms)
		}
	})

	t.Run("scheduler", func(t *testing.T) {
		dep := decodeObject[appsv1.Deployment](t, findObject(t, objs, "Deployment", "telesched-scheduler"))
		spec := dep.Spec.Template.Spec
		checkHardened(t, "Deployment telesched-scheduler", spec, false)
		// A process reads another's /proc/<pid>/root, environ and mem when
		// both run as one uid, and the agent sees the host's /proc: the
		// scheduler (and its token) must run as a user of its own.
		agent := decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", "telesched-agent")).Spec.Template.Spec.SecurityContext
		if a, s := ptr.Deref(agent.RunAsUser, -1), ptr.Deref(spec.SecurityContext.RunAsUser, -2); a == s {
			t.Errorf("the scheduler runs as uid %d, the agent's: a compromised agent could read its token through the host's /proc", s)
		}
		// Nor as a user workloads commonly run as (whose processes could
		// then read the agent's or the scheduler's), nor in the range the
		// kubelet maps user-namespaced pods into.
		common := []int64{0, 1, 33, 999, 1000, 1001, 10001, 65532, 65534}
		for what, uid := range map[string]int64{"agent": ptr.Deref(agent.RunAsUser, 0), "scheduler": ptr.Deref(spec.SecurityContext.RunAsUser, 0)} {
			if slices.Contains(common, uid) || uid >= 65536 {
				t.Errorf("the %s runs as uid %d: one workloads commonly run as (%v) or in the user-namespace range (65536 and up)", what, uid, common)
			}
		}
		c := spec.Containers[0]
		if got := ptr.Deref(dep.Spec.Replicas, 1); got != 2 {
			t.Errorf("replicas %d, want 2", got)
		}
		findObject(t, objs, "ServiceAccount", spec.ServiceAccountName)
		findObject(t, objs, "PriorityClass", spec.PriorityClassName)
		for probe, path := range map[*corev1.Probe]string{c.StartupProbe: "/healthz", c.LivenessProbe: "/livez", c.ReadinessProbe: "/readyz"} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS || probe.HTTPGet.Port.String() != "https" {
				t.Errorf("no HTTPS probe on %s", path)
			}
		}
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "https" && p.ContainerPort == 10259 }) {
			t.Errorf("ports %v, want https 10259", c.Ports)
		}

		// --config names the file of the generated ConfigMap, which holds
		// scheduler-config.yaml unchanged.
		if !slices.Contains(c.Args, "--config=/etc/telesched/scheduler-config.yaml") {
			t.Fatalf("args %v, want --config=/etc/telesched/scheduler-config.yaml", c.Args)
		}
		m := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/telesched" })
		if m < 0 {
			t.Fatal("nothing mounted at /etc/telesched")
		}
		v := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[m].Name })
		if v < 0 || spec.Volumes[v].ConfigMap == nil {
			t.Fatalf("volume %s is not a ConfigMap", c.VolumeMounts[m].Name)
		}
		cm := decodeObject[corev1.ConfigMap](t, findObject(t, objs, "ConfigMap", spec.Volumes[v].ConfigMap.Name))
		want, err := os.ReadFile(filepath.Join(manifestsRoot, "scheduler", "scheduler-config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), cm.Data["scheduler-config.yaml"]); diff != "" {
			t.Errorf("ConfigMap %s differs from scheduler-config.yaml (-want +got):\n%s", cm.Name, diff)
		}

		// A ClusterRole bound to the scheduler names the Lease the
		// configuration elects on (TestSchedulerRBAC asks the API server).
		var config struct {
			LeaderElection struct {
				ResourceName string `json:"resourceName"`
			} `json:"leaderElection"`
		}
		if err := yaml.Unmarshal(want, &config); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
			if o.GetKind() != "ClusterRole" {
				return false
			}
			role := decodeObject[rbacv1.ClusterRole](t, o)
			return slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
				return slices.Contains(r.Resources, "leases") && slices.Contains(r.ResourceNames, config.LeaderElection.ResourceName) &&
					slices.Contains(r.Verbs, "get") && slices.Contains(r.Verbs, "update")
			})
		}) {
			t.Errorf("no ClusterRole grants get and update on the Lease %s", config.LeaderElection.ResourceName)
		}
	})
}

// TestDeployVariants checks the components under deploy/variants/: RAPL
// runs every agent as uid 0 with nothing else relaxed; GPU adds an agent
// DaemonSet for GPU nodes that is the base one plus the NVIDIA runtime,
// and the two never share a node.
func TestDeployVariants(t *testing.T) {
	t.Run("rapl", func(t *testing.T) {
		objs := renderWithComponents(t, "rapl")
		checkAgent(t, objs, decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", "telesched-agent")), true)
	})

	t.Run("gpu+rapl", func(t *testing.T) {
		objs := renderWithComponents(t, "gpu", "rapl")
		for _, name := range []string{"telesched-agent", "telesched-agent-gpu"} {
			checkAgent(t, objs, decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", name)), true)
		}
	})

	t.Run("gpu", func(t *testing.T) {
		objs := renderWithComponents(t, "gpu")
		base := decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", "telesched-agent"))
		gpu := decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", "telesched-agent-gpu"))
		checkAgent(t, objs, base, false)
		checkAgent(t, objs, gpu, false)

		if got := ptr.Deref(gpu.Spec.Template.Spec.RuntimeClassName, ""); got != "nvidia" {
			t.Errorf("GPU agent runtimeClassName %q, want nvidia", got)
		}
		env := map[string]string{}
		for _, e := range gpu.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env["NVIDIA_VISIBLE_DEVICES"] != "all" || env["NVIDIA_DRIVER_CAPABILITIES"] != "utility" {
			t.Errorf("GPU agent NVIDIA_VISIBLE_DEVICES %q, NVIDIA_DRIVER_CAPABILITIES %q; want all, utility", env["NVIDIA_VISIBLE_DEVICES"], env["NVIDIA_DRIVER_CAPABILITIES"])
		}
		if _, ok := gpu.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceName("nvidia.com/gpu")]; ok {
			t.Error("the GPU agent requests nvidia.com/gpu: it would take a GPU from workloads")
		}

		// Exactly one agent per node, and the GPU agent on the nodes that
		// NVIDIA's device plugin selects (its chart's node affinity: NFD's
		// PCI vendor label, or the GPU Operator's gpu.present), judged by
		// the scheduler's own node affinity matcher over every combination
		// of the labels.
		checkOneAgentPerNode(t, base, gpu)
		// The selectors must not overlap, or each DaemonSet would see the
		// other's pods as its own.
		if metav1.FormatLabelSelector(base.Spec.Selector) == metav1.FormatLabelSelector(gpu.Spec.Selector) {
			t.Errorf("both DaemonSets select %s", metav1.FormatLabelSelector(base.Spec.Selector))
		}
		for _, pair := range [][2]*appsv1.DaemonSet{{base, gpu}, {gpu, base}} {
			sel, err := metav1.LabelSelectorAsSelector(pair[0].Spec.Selector)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Matches(labels.Set(pair[1].Spec.Template.Labels)) {
				t.Errorf("DaemonSet %s's selector matches the pods of %s", pair[0].Name, pair[1].Name)
			}
		}

		// Past those differences, the GPU agent is the base agent: the
		// copy in deploy/variants/gpu/ must follow changes to
		// deploy/agent/daemonset.yaml.
		want := base.Spec.Template.Spec.DeepCopy()
		got := gpu.Spec.Template.Spec.DeepCopy()
		want.Affinity, got.Affinity = nil, nil
		got.RuntimeClassName = nil
		got.Containers[0].Env = slices.DeleteFunc(got.Containers[0].Env, func(e corev1.EnvVar) bool {
			return strings.HasPrefix(e.Name, "NVIDIA_")
		})
		got.Containers[0].Resources.Limits = want.Containers[0].Resources.Limits
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GPU agent pod spec differs from the base agent's beyond runtime class, affinity, NVIDIA_* env and limits (-base +gpu):\n%s", diff)
		}
		if diff := cmp.Diff(base.Spec.UpdateStrategy, gpu.Spec.UpdateStrategy); diff != "" {
			t.Errorf("update strategies differ (-base +gpu):\n%s", diff)
		}
	})
}

// gpuNodeLabels are the node labels that mark an NVIDIA GPU node, as
// NVIDIA's device plugin and GPU Feature Discovery select their nodes
// (deployments/helm/nvidia-device-plugin/values.yaml in
// NVIDIA/k8s-device-plugin): Node Feature Discovery's label for a PCI
// device of vendor 10de, and the GPU Operator's.
var gpuNodeLabels = []string{"feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present"}

// checkOneAgentPerNode: on nodes with every combination of the GPU labels
// (absent, true, false) and of type=virtual-kubelet, exactly one of the
// two DaemonSets runs, the GPU one where a GPU label is true, and none on
// a virtual-kubelet node. The DaemonSets' required node affinity decides,
// through k8s.io/component-helpers' matcher, which the DaemonSet
// controller and the scheduler use.
func checkOneAgentPerNode(t *testing.T, base, gpu *appsv1.DaemonSet) {
	t.Helper()
	runs := func(ds *appsv1.DaemonSet, node *corev1.Node) bool {
		ok, err := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: ds.Spec.Template.Spec}).Match(node)
		if err != nil {
			t.Fatalf("DaemonSet %s: %v", ds.Name, err)
		}
		return ok
	}
	values := []string{"", "true", "false"} // "" is no label
	for _, vk := range []bool{false, true} {
		for _, a := range values {
			for _, b := range values {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"kubernetes.io/os": "linux"}}}
				isGPU := false
				for i, v := range []string{a, b} {
					if v != "" {
						node.Labels[gpuNodeLabels[i]] = v
					}
					isGPU = isGPU || v == "true"
				}
				if vk {
					node.Labels["type"] = "virtual-kubelet"
				}
				wantGPU, wantBase := isGPU && !vk, !isGPU && !vk
				if gotGPU, gotBase := runs(gpu, node), runs(base, node); gotGPU != wantGPU || gotBase != wantBase {
					t.Errorf("node labelled %v: %s runs %t, %s runs %t; want %t, %t", node.Labels, gpu.Name, gotGPU, base.Name, gotBase, wantGPU, wantBase)
				}
			}
		}
	}
}

// TestDeployNetworkPolicies: the agent's and the scheduler's pods are each
// selected by a NetworkPolicy that admits ingress to their metrics port
// alone, from named peers only (the kubelet's probes come from the node,
// which a NetworkPolicy always allows); the GPU variant's agent pods too.
func TestDeployNetworkPolicies(t *testing.T) {
	objs := renderWithComponents(t, "gpu")
	var policies []*networkingv1.NetworkPolicy
	for _, o := range objs {
		if o.GetKind() == "NetworkPolicy" {
			policies = append(policies, decodeObject[networkingv1.NetworkPolicy](t, o))
		}
	}
	for _, tc := range []struct {
		kind, name, port string
	}{
		{"DaemonSet", "telesched-agent", "metrics"},
		{"DaemonSet", "telesched-agent-gpu", "metrics"},
		{"Deployment", "telesched-scheduler", "https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := findObject(t, objs, tc.kind, tc.name)
			podLabels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			var selecting []*networkingv1.NetworkPolicy
			for _, np := range policies {
				sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
				if err != nil {
					t.Fatal(err)
				}
				if np.Namespace == o.GetNamespace() && sel.Matches(labels.Set(podLabels)) {
					selecting = append(selecting, np)
				}
			}
			if len(selecting) != 1 {
				t.Fatalf("%d NetworkPolicies select the pods of %s %s, want 1", len(selecting), tc.kind, tc.name)
			}
			np := selecting[0]
			if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				t.Errorf("NetworkPolicy %s: policyTypes %v, want Ingress", np.Name, np.Spec.PolicyTypes)
			}
			var ports []string
			for _, rule := range np.Spec.Ingress {
				if len(rule.From) == 0 {
					t.Errorf("NetworkPolicy %s: an ingress rule without peers admits everyone", np.Name)
				}
				for _, p := range rule.Ports {
					ports = append(ports, p.Port.String())
				}
			}
			if diff := cmp.Diff([]string{tc.port}, ports); diff != "" {
				t.Errorf("NetworkPolicy %s: ingress ports (-want +got):\n%s", np.Name, diff)
			}
		})
	}
}
