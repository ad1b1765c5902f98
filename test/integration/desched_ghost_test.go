// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/descheduler/app"
)

// TestDeschedulerCyclesPastPodsOfAGoneNode: a pod bound to a node that no
// longer exists (deleted before its pods, their deletion pending) is left
// out of the cycle's snapshot; the cycle goes on and the hot node's pod is
// moved. It used to panic the descheduler (StartMutations on a node-less
// NodeInfo).
func TestDeschedulerCyclesPastPodsOfAGoneNode(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	deschedNode(ctx, t, c, "dsghost-hot", "dsghost", true)
	deschedNode(ctx, t, c, "dsghost-cool", "dsghost", false)
	deschedPod(ctx, t, c, "dsghost-pod", "dsghost-hot", "dsghost")
	ghost := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dsghost-orphan", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "dsghost-gone", Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := c.kube.CoreV1().Pods("default").Create(ctx, ghost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.CoreV1().Pods("default").Delete(context.Background(), ghost.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	would := evictions(t, descheduler.ResultWouldEvict)
	d := startDescheduler(t, func(o *app.Options) { o.DryRun = true })
	cycle(t, d)
	if got := evictions(t, descheduler.ResultWouldEvict) - would; got != 1 {
		t.Errorf("would_evict rose by %v, want 1", got)
	}
}
