// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

// TestOptInNamespace installs deploy/policy/opt-in.yaml, the
// MutatingAdmissionPolicy, on the real API server: a pod created without
// a scheduler in a namespace labelled telesched.io/scheduler goes to that
// profile; one that names another scheduler, one already bound to a node,
// and every pod of an unlabelled namespace are left alone.
func TestOptInNamespace(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	admin := newClients(t)
	applyManifests(ctx, t, admin, filepath.Join(deployDir, "policy", "opt-in.yaml"))

	suffix := utilrand.String(5)
	ns := func(name string, labels map[string]string) string {
		t.Helper()
		if _, err := admin.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		return name
	}
	energy := ns("optin-energy-"+suffix, map[string]string{"telesched.io/scheduler": "telesched-energy"})
	plain := ns("optin-plain-"+suffix, nil)
	typo := ns("optin-typo-"+suffix, map[string]string{"telesched.io/scheduler": "telesched-enrgy"})

	pod := func(namespace, name, scheduler, node string) *corev1.Pod {
		t.Helper()
		p, err := admin.kube.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{SchedulerName: scheduler, NodeName: node,
				Containers: []corev1.Container{{Name: "app", Image: "app:test"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating pod %s/%s: %v", namespace, name, err)
		}
		t.Cleanup(func() {
			_ = admin.kube.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		})
		return p
	}

	// The policy takes effect once the API server has loaded it.
	i := 0
	waitFor(t, "the opt-in policy to set the scheduler of a new pod", 30*time.Second, func() bool {
		i++
		return pod(energy, "probe-"+utilrand.String(5), "", "").Spec.SchedulerName == "telesched-energy"
	})
	t.Logf("policy in force after %d pods", i)

	for _, tc := range []struct {
		namespace, name, scheduler, node, want string
	}{
		{energy, "unset", "", "", "telesched-energy"},
		{energy, "default", "default-scheduler", "", "telesched-energy"},
		{energy, "own-choice", "gang-scheduler", "", "gang-scheduler"},
		{energy, "bound", "", "node-x", "default-scheduler"},
		{plain, "unset", "", "", "default-scheduler"},
		{typo, "unset", "", "", "default-scheduler"},
	} {
		if got := pod(tc.namespace, tc.name, tc.scheduler, tc.node).Spec.SchedulerName; got != tc.want {
			t.Errorf("pod %s/%s (schedulerName %q, nodeName %q): schedulerName %q, want %q", tc.namespace, tc.name, tc.scheduler, tc.node, got, tc.want)
		}
	}
}
