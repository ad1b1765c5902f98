// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	"context"
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1 "github.com/telesched/telesched/apis/config/v1"
)

// Pods alike in what Filter and Score read sign alike; a different
// request or a DaemonSet controller signs differently.
func TestSignPod(t *testing.T) {
	pl := New(*configv1.DefaultLoadAwareArgs(), newCache())
	sign := func(p *v1.Pod) string {
		t.Helper()
		fr, st := pl.SignPod(context.Background(), p)
		if !st.IsSuccess() || len(fr) != 1 || fr[0].Key != "telesched.io/LoadAware" {
			t.Fatalf("SignPod = %v, %v", fr, st)
		}
		b, err := json.Marshal(fr[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, b := pod("2"), pod("2")
	b.Name, b.Labels = "other", map[string]string{"app": "x"}
	if sign(a) != sign(b) {
		t.Errorf("alike pods sign %s and %s", sign(a), sign(b))
	}
	if sign(a) == sign(pod("3")) {
		t.Errorf("a 3-CPU pod signs as a 2-CPU one: %s", sign(a))
	}
	ds := pod("2")
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "d", UID: "u", Controller: ptr.To(true)}}
	if sign(ds) == sign(a) {
		t.Errorf("a DaemonSet's pod signs as another's: %s", sign(ds))
	}
}
