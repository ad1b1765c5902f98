// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"context"
	"testing"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/estimate"
)

// The signature is the pod's demand, GPUs included.
func TestSignPod(t *testing.T) {
	pl := New(*configv1.DefaultEnergyAwareArgs(), newCache())
	for _, tc := range []struct {
		gpus string
		want estimate.Demand
	}{{"", pl.reserved.Demand(gpuPod(""))}, {"2", pl.reserved.Demand(gpuPod("2"))}} {
		fr, st := pl.SignPod(context.Background(), gpuPod(tc.gpus))
		if !st.IsSuccess() || len(fr) != 1 || fr[0].Key != "telesched.io/EnergyAware" || fr[0].Value != tc.want {
			t.Errorf("SignPod(%q GPUs) = %+v, %v; want the demand %+v", tc.gpus, fr, st, tc.want)
		}
	}
	if a, b := pl.reserved.Demand(gpuPod("")), pl.reserved.Demand(gpuPod("2")); a == b {
		t.Fatalf("the test's pods have one demand: %+v", a)
	}
}
