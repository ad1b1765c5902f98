// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/estimate"
)

// A pod refused on predicted heat because of the pods placed on a node is
// named by pick (so activated) on the sample that shows those pods drawing
// less than reserved: pick judges the previous view with the reservations
// it had then (estimate.Book.Before), not with none.
func TestPickNamesPodTheRetirementLetsIn(t *testing.T) {
	t.Cleanup(func() { clock.Set(now) })
	pl := New(*configv1.DefaultEnergyAwareArgs(), newCache())
	old := modelled(status(60), 170)
	stored := storeOld(t, pl.cache, "n", old)
	pl.reserved.ReserveDemand("n", "placed", estimate.Demand{CPUMilli: 4000})
	pl.reserved.Running("n", "placed")
	p := cpuPod("4")
	st := attempt(pl, p, "n")
	if st.IsSuccess() {
		t.Fatal("the pod fits beside the reserved one; the test needs it refused")
	}
	t.Logf("refused: %s", st.Message())
	// 10 s on, a sample shows the placed pod running at 5 W.
	clock.Set(now.Add(10 * time.Second))
	cur := modelled(status(60), 175)
	cur.SampleTime = metav1.NewTime(clock.Now())
	prev, view := change(t, pl.cache, "n", stored, old, cur)
	if got := pl.pick(prev, view); !slices.Equal(got, []types.NamespacedName{keyOf(p)}) {
		t.Errorf("pick = %v; want the pod named", got)
	}
	if st := attempt(pl, p, "n"); !st.IsSuccess() {
		t.Fatalf("Filter refuses the pod on the new sample (%v); the test needs it let in", st)
	}
}
