// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var singleDir = filepath.Join(manifestsRoot, "variants", "single-scheduler")

func readYAMLMap(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// TestSingleSchedulerConfig: the single-scheduler configuration serves
// default-scheduler with kube-scheduler's defaults and telesched's two
// profiles exactly as the second-scheduler install defines them, elects on
// kube-scheduler's own Lease, and the static pod mounts what it names.
func TestSingleSchedulerConfig(t *testing.T) {
	single := readYAMLMap(t, filepath.Join(singleDir, "scheduler-config.yaml"))
	second := readYAMLMap(t, filepath.Join(manifestsRoot, "scheduler", "scheduler-config.yaml"))

	profiles := single["profiles"].([]any)
	if len(profiles) == 0 || !cmp.Equal(profiles[0], map[string]any{"schedulerName": "default-scheduler"}) {
		t.Errorf("first profile %v, want default-scheduler with kube-scheduler's default plugins (nothing else set)", profiles[0])
	}
	if diff := cmp.Diff(second["profiles"], profiles[1:]); diff != "" {
		t.Errorf("the telesched profiles differ from deploy/scheduler/scheduler-config.yaml's (-second +single):\n%s", diff)
	}
	le := single["leaderElection"].(map[string]any)
	if le["leaderElect"] != true || le["resourceNamespace"] != "kube-system" || le["resourceName"] != "kube-scheduler" {
		t.Errorf("leaderElection %v, want kube-system/kube-scheduler, the Lease kube-scheduler holds", le)
	}
	kubeconfig, _ := single["clientConnection"].(map[string]any)["kubeconfig"].(string)

	pod := decodeObject[corev1.Pod](t, readManifests(t, filepath.Join(singleDir, "kube-scheduler.yaml"))[0])
	c := pod.Spec.Containers[0]
	mounts := map[string]string{} // mount path -> host path
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || pod.Spec.Volumes[i].HostPath == nil {
			t.Fatalf("mount %s is no hostPath volume", m.Name)
		}
		mounts[m.MountPath] = pod.Spec.Volumes[i].HostPath.Path
	}
	config := flagValue(c.Args, "config", "")
	for _, a := range c.Args {
		for _, flag := range []string{"--authentication-kubeconfig=", "--authorization-kubeconfig="} {
			if v, ok := strings.CutPrefix(a, flag); ok && v != kubeconfig {
				t.Errorf("%s%s, want the configuration's kubeconfig %s", flag, v, kubeconfig)
			}
		}
	}
	if host := mounts[filepath.Dir(config)]; host != filepath.Dir(config) {
		t.Errorf("--config=%s: its directory is mounted from host %q, want %s (README.md's step 2)", config, host, filepath.Dir(config))
	}
	if host := mounts[kubeconfig]; host != kubeconfig {
		t.Errorf("kubeconfig %s is mounted from host %q, want kubeadm's %s", kubeconfig, host, kubeconfig)
	}
	if !pod.Spec.HostNetwork || pod.Spec.PriorityClassName != "system-node-critical" || pod.Namespace != "kube-system" {
		t.Errorf("static pod: hostNetwork %v, priorityClassName %q, namespace %q; want kubeadm's true, system-node-critical, kube-system",
			pod.Spec.HostNetwork, pod.Spec.PriorityClassName, pod.Namespace)
	}
}

// TestSingleSchedulerStaticPod dry-runs the static pod manifest on the
// real API server, as the kubelet's mirror pod would be checked.
func TestSingleSchedulerStaticPod(t *testing.T) {
	needControlPlane(t)
	a := newManifestApplier(t)
	for _, o := range readManifests(t, filepath.Join(singleDir, "kube-scheduler.yaml")) {
		if err := a.apply(t.Context(), o, true); err != nil {
			t.Errorf("dry-run apply of %s: %v", objectID(o), err)
		}
	}
}
