// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

var _ fwk.SignPlugin = &LoadAware{}

// signature is everything Filter and Score read from the pod: its scaled
// requests, and the DaemonSet it names as controller (PreFilter's skip).
type signature struct {
	CPUMilli, MemoryBytes int64
	DaemonSet             types.UID `json:",omitempty"`
}

// SignPod signs the pod for kube-scheduler's opportunistic batching
// (KEP-5598): pods with equal signatures get the same answers from this
// plugin on every node, so a batch may reuse one pod's scores for the
// next. The node's load, which each placement changes, is not the pod's:
// kube-scheduler runs Filter again on the node it hints.
func (pl *LoadAware) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	req := pl.scaledRequests(pod)
	s := signature{CPUMilli: req[0], MemoryBytes: req[1]}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.Kind == "DaemonSet" {
		s.DaemonSet = ref.UID
	}
	return []fwk.SignFragment{{Key: "telesched.io/" + Name, Value: s}}, nil
}
