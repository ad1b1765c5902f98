// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

var _ fwk.SignPlugin = &TopologyFit{}

// signature is everything Filter and Score read from the pod (podFacts):
// its GPUs, CPU and memory requests, its claims' GPUs, NUMA policy and GPU
// constraints.
type signature struct {
	GPUs, CPUMilli, MemoryBytes int64
	ClaimGPUs, ClaimPending     int64
	SingleNUMA                  bool
	Model                       string
	MinGPUMemory                int64
}

// SignPod signs the pod for kube-scheduler's opportunistic batching
// (KEP-5598). A pod with a malformed annotation is not signed: PreFilter
// rejects it, and there is nothing to batch.
func (pl *TopologyFit) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	s, err := pl.podFacts(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	return []fwk.SignFragment{{Key: "telesched.io/" + Name, Value: signature{
		GPUs: s.gpus, CPUMilli: s.cpuMilli, MemoryBytes: s.memoryBytes,
		ClaimGPUs: s.claimGPUs, ClaimPending: s.claimPending,
		SingleNUMA: s.singleNUMA, Model: s.model, MinGPUMemory: s.minGPUMemory,
	}}}, nil
}
