// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	configv1 "github.com/telesched/telesched/apis/config/v1"
)

// A pod whose container requests nothing counts the args' default
// requests twice alike: while it is placed, and in its node's
// reservation afterwards, so the node's estimate does not fall by the
// difference once the pod is bound.
func TestDefaultRequestsCountInTheReservation(t *testing.T) {
	args := configv1.DefaultLoadAwareArgs()
	args.DefaultPodCPUMilli = 1000
	pl := New(*args, newCache())
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	cs := framework.NewCycleState()
	pl.PreFilter(context.Background(), cs, p, nil)
	placed := pl.state(cs, p).cpuMilli
	pl.Reserve(context.Background(), cs, p, "n")
	if got := pl.book.Get("n").CPUMilli; placed != 1000 || got != placed {
		t.Errorf("placed as %dm, reserved as %dm; want both 1000m (defaultPodCPUMilli)", placed, got)
	}
}
