// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/apis/config"
)

// The signature covers the GPUs, requests, NUMA policy and GPU
// constraints; a malformed annotation is not signed.
func TestSignPod(t *testing.T) {
	pl := newPlugin(config.StaleTelemetryReject)
	sign := func(p *v1.Pod) string {
		t.Helper()
		fr, st := pl.SignPod(context.Background(), p)
		if !st.IsSuccess() || len(fr) != 1 {
			t.Fatalf("SignPod = %v, %v", fr, st)
		}
		b, err := json.Marshal(fr[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	base := sign(makePod("p", 4, "16", "64Gi"))
	for name, p := range map[string]*v1.Pod{
		"more GPUs":        makePod("p", 8, "16", "64Gi"),
		"single NUMA node": makePod("p", 4, "16", "64Gi", numaPolicy, singleNUMA),
		"a GPU model":      makePod("p", 4, "16", "64Gi", gpuModel, "A100"),
		"GPU memory":       makePod("p", 4, "16", "64Gi", gpuMinMem, "40Gi"),
		"more memory":      makePod("p", 4, "16", "128Gi"),
	} {
		if sign(p) == base {
			t.Errorf("%s: signs as the base pod (%s)", name, base)
		}
	}
	if sign(makePod("q", 4, "16", "64Gi")) != base {
		t.Error("a pod alike but for its name signs differently")
	}
	if _, st := pl.SignPod(context.Background(), makePod("p", 1, "", "", gpuMinMem, "lots")); st.Code() != fwk.Unschedulable {
		t.Errorf("a malformed annotation: %v, want Unschedulable", st)
	}
}
