// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

var _ fwk.SignPlugin = &EnergyAware{}

// SignPod signs the pod for kube-scheduler's opportunistic batching
// (KEP-5598) with what Filter and Score read from it: its demand (CPU,
// memory, GPUs). The node's heat and watts are not the pod's:
// kube-scheduler runs Filter again, and scores again, the node it hints.
func (pl *EnergyAware) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{{Key: "telesched.io/" + Name, Value: pl.reserved.Demand(pod)}}, nil
}
