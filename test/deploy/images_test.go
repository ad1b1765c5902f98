// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/scheduler/compat"
)

// TestDockerfiles checks what can be checked of the images without a
// container engine: each runs as the user its manifest names, and builds
// for TARGETARCH on the builder's platform (amd64 and arm64 from one
// build).
func TestDockerfiles(t *testing.T) {
	objs := renderKustomization(t, manifestsRoot)
	agent := decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", "telesched-agent")).Spec.Template.Spec.SecurityContext
	scheduler := decodeObject[appsv1.Deployment](t, findObject(t, objs, "Deployment", "telesched-scheduler")).Spec.Template.Spec.SecurityContext
	descheduler := decodeObject[appsv1.Deployment](t, findObject(t, renderKustomization(t, filepath.Join(manifestsRoot, "descheduler")),
		"Deployment", "telesched-descheduler")).Spec.Template.Spec.SecurityContext
	for file, sc := range map[string][2]int64{
		"Dockerfile.agent":       {ptr.Deref(agent.RunAsUser, -1), ptr.Deref(agent.RunAsGroup, -1)},
		"Dockerfile.scheduler":   {ptr.Deref(scheduler.RunAsUser, -1), ptr.Deref(scheduler.RunAsGroup, -1)},
		"Dockerfile.descheduler": {ptr.Deref(descheduler.RunAsUser, -1), ptr.Deref(descheduler.RunAsGroup, -1)},
	} {
		data, err := os.ReadFile(filepath.Join(manifestsRoot, "..", file))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		users := regexp.MustCompile(`(?m)^USER (\S+)$`).FindAllStringSubmatch(text, -1)
		if want := fmt.Sprintf("%d:%d", sc[0], sc[1]); len(users) != 1 || users[0][1] != want {
			t.Errorf("%s: USER %v, want %s, the user its manifest runs it as", file, users, want)
		}
		if !strings.Contains(text, "FROM --platform=$BUILDPLATFORM ") || !strings.Contains(text, "ARG TARGETARCH") || !strings.Contains(text, "GOARCH=${TARGETARCH}") {
			t.Errorf("%s: the build stage does not cross-compile for TARGETARCH on $BUILDPLATFORM", file)
		}
	}
}

// imageRef is an image of telesched's with its tag, in a manifest or a
// doc; newTagRE a kustomization's tag; versionRE a doc's VERSION=.
var (
	imageRef  = regexp.MustCompile(`ghcr\.io/telesched/telesched-(?:agent|scheduler|descheduler)(?:\{[a-z,]+\})?:(v[0-9][^\s"'` + "`" + `;]*)`)
	newTagRE  = regexp.MustCompile(`(?m)^\s*newTag:\s*(\S+)`)
	versionRE = regexp.MustCompile(`VERSION=(v[0-9]\S*)`)
	// changelogVersionRE is a CHANGELOG version heading: ## [0.2.0] - date.
	changelogVersionRE = regexp.MustCompile(`(?m)^## \[([^\]]+)\]`)
)

// TestOneVersion: one version drives the install. The chart's appVersion
// is the tag of every telesched image the manifests under deploy/ name
// (each kustomization's newTag included) and the version the README and
// docs/install.md build, push and name; and its kubeVersion is the range
// of API servers the scheduler starts against (scheduler/compat), which
// helm refuses to install outside of.
func TestOneVersion(t *testing.T) {
	meta := chartMeta(t)
	want := fmt.Sprint(meta["appVersion"])
	root := filepath.Join(manifestsRoot, "..")
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "docs", "install.md")}
	if err := filepath.WalkDir(manifestsRoot, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
			files = append(files, path)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range []*regexp.Regexp{imageRef, newTagRE, versionRE} {
			for _, m := range re.FindAllStringSubmatch(string(data), -1) {
				found++
				if m[1] != want {
					t.Errorf("%s: %q names %s, want the chart's appVersion %s", path, m[0], m[1], want)
				}
			}
		}
	}
	if found < 8 {
		t.Errorf("found %d version references; the patterns no longer match the manifests", found)
	}

	// The CHANGELOG's newest version is the chart's (Keep a Changelog: an
	// [Unreleased] section, then versions newest first).
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	versions := changelogVersionRE.FindAllStringSubmatch(string(changelog), -1)
	if len(versions) < 2 || versions[0][1] != "Unreleased" {
		t.Errorf("CHANGELOG.md: want an [Unreleased] section, then versions; found %v", versions)
	} else if got := versions[1][1]; got != fmt.Sprint(meta["version"]) || "v"+got != want {
		t.Errorf("CHANGELOG.md: newest version %s, want the chart's version %v (appVersion %s)", got, meta["version"], want)
	}

	wantKube := fmt.Sprintf(">=1.%d.0-0 <1.%d.0-0", compat.MinServerMinor, compat.MaxServerMinor+1)
	if got := fmt.Sprint(meta["kubeVersion"]); got != wantKube {
		t.Errorf("Chart.yaml kubeVersion %q, want %q, the API servers the scheduler starts against", got, wantKube)
	}
	for _, tc := range []struct {
		kube string
		ok   bool
	}{
		{fmt.Sprintf("1.%d.0", compat.MinServerMinor-1), false},
		{fmt.Sprintf("1.%d.2", compat.MinServerMinor), true},
		{fmt.Sprintf("1.%d.0-eks-1234", compat.MaxServerMinor), true},
		{fmt.Sprintf("1.%d.0", compat.MaxServerMinor+1), false},
	} {
		_, err := runHelm(t, "template", helmRelease, chartDir, "--kube-version", tc.kube)
		if (err == nil) != tc.ok {
			t.Errorf("helm template --kube-version %s: err %v, want ok %v", tc.kube, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "incompatible with Kubernetes") {
			t.Errorf("helm template --kube-version %s: %v, want the kubeVersion refusal", tc.kube, err)
		}
	}
}

// TestHelmImageRegistryAndDigests: image.registry moves all three images
// to one's own registry, keeping their names, and a digest pins an image
// in place of its tag; a digest that is not one is refused.
func TestHelmImageRegistryAndDigests(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	objs := renderHelm(t, "descheduler.enabled=true", "image.registry=registry.example.com:5000/ops/telesched",
		"image.scheduler.digest="+digest)
	images := map[string]string{}
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" && o.GetKind() != "Deployment" {
			continue
		}
		ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		inits, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "initContainers")
		for _, c := range append(ctrs, inits...) {
			m := c.(map[string]any)
			images[o.GetName()+"/"+fmt.Sprint(m["name"])] = fmt.Sprint(m["image"])
		}
	}
	meta := chartMeta(t)
	want := map[string]string{
		"telesched-agent/agent":              "registry.example.com:5000/ops/telesched/telesched-agent:" + fmt.Sprint(meta["appVersion"]),
		"telesched-agent/podresources-relay": "registry.example.com:5000/ops/telesched/telesched-agent:" + fmt.Sprint(meta["appVersion"]),
		"telesched-scheduler/scheduler":      "registry.example.com:5000/ops/telesched/telesched-scheduler@" + digest,
		"telesched-descheduler/descheduler":  "registry.example.com:5000/ops/telesched/telesched-descheduler:" + fmt.Sprint(meta["appVersion"]),
	}
	for k, v := range want {
		if images[k] != v {
			t.Errorf("%s: image %q, want %q (all: %v)", k, images[k], v, images)
		}
	}
	if _, err := runHelm(t, helmTemplateArgs("image.agent.digest=abc123")...); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Errorf("a digest that is not sha256:<64 hex>: err %v, want the schema to refuse it", err)
	}
}

// TestMemoryLimitHeadroom: the agent, the scheduler and the descheduler
// get their container's memory limit as TELESCHED_MEMORY_LIMIT, from
// which they set the Go runtime's soft limit with headroom
// (internal/memlimit), and no GOMEMLIMIT, which would put the soft limit
// at the hard one; in the chart and in the kustomize manifests alike.
func TestMemoryLimitHeadroom(t *testing.T) {
	for what, objs := range map[string][]*unstructured.Unstructured{
		"helm":      renderHelm(t, "descheduler.enabled=true", "agent.gpu.enabled=true"),
		"kustomize": append(renderWithComponents(t, "gpu"), renderKustomization(t, filepath.Join(manifestsRoot, "descheduler"))...),
	} {
		seen := 0
		for _, o := range objs {
			if o.GetKind() != "DaemonSet" && o.GetKind() != "Deployment" {
				continue
			}
			ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			c := ctrs[0].(map[string]any)
			env, _ := c["env"].([]any)
			ok := false
			for _, e := range env {
				m := e.(map[string]any)
				if m["name"] == "GOMEMLIMIT" {
					t.Errorf("%s: %s sets GOMEMLIMIT", what, o.GetName())
				}
				res, _, _ := unstructured.NestedString(m, "valueFrom", "resourceFieldRef", "resource")
				if m["name"] == "TELESCHED_MEMORY_LIMIT" && res == "limits.memory" {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s: %s's %v has no TELESCHED_MEMORY_LIMIT from limits.memory", what, o.GetName(), c["name"])
			}
			seen++
		}
		if seen < 4 {
			t.Errorf("%s: %d workloads checked, want the two agents, the scheduler and the descheduler", what, seen)
		}
	}
}

// TestWorkflowsPinActions: every action the workflows use is pinned by a
// commit (a tag can be moved to other code), with the tag it was read
// from in a comment.
func TestWorkflowsPinActions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(manifestsRoot, "..", ".github", "workflows", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows (%v)", err)
	}
	uses := regexp.MustCompile(`(?m)^\s*-?\s*uses:\s*(\S+)(.*)$`)
	pinned := regexp.MustCompile(`^[\w.-]+/[\w.-]+@[0-9a-f]{40}$`)
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range uses.FindAllStringSubmatch(string(data), -1) {
			n++
			if !pinned.MatchString(m[1]) || !strings.Contains(m[2], "# v") {
				t.Errorf("%s: uses %s%s, want owner/repo@<commit> # <tag>", filepath.Base(f), m[1], m[2])
			}
		}
	}
	if n == 0 {
		t.Error("no uses: found; the pattern no longer matches the workflows")
	}
}

// TestModuleCarriesNoTestTools: an integrator who imports telesched (its
// API types, the generated client, a plugin) gets none of the tools its
// tests and releases run in the module graph: the etcd server (hack/etcd),
// kustomize (bin/kustomize from hack/tools) and go-containerregistry
// (hack/release) live in modules of their own.
func TestModuleCarriesNoTestTools(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(manifestsRoot, "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"go.etcd.io/etcd/server/", "sigs.k8s.io/kustomize/", "github.com/google/go-containerregistry "} {
		for i, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0]+" ", tool) {
				t.Errorf("go.mod:%d: %s: a test or release tool in telesched's module graph", i+1, strings.TrimSpace(line))
			}
		}
	}
}
