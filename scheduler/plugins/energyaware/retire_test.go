// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
)

// A pod refused on predicted heat because of the pods placed on a node is
// requeued by the sample that shows those pods drawing less than reserved:
// the hint judges the previous view with the reservations it had then
// (estimate.Book.Before), not with none.
func TestHintQueuesPodTheRetirementLetsIn(t *testing.T) {
	t.Cleanup(func() { clock.Set(now) })
	pl := New(*configv1.DefaultEnergyAwareArgs(), newCache())
	old := modelled(status(60), 170)
	oldObj, _ := plugintest.HintObjects(t, pl.cache, clock, "n", old, old)
	pl.reserved.ReserveDemand("n", "placed", estimate.Demand{CPUMilli: 4000})
	pl.reserved.Running("n", "placed")
	p := cpuPod("4")
	d := pl.reserved.Demand(p)
	view, _ := pl.cache.Get("n")
	st := pl.fits(view, pl.reservedOn("n"), &podState{Demand: d, now: clock.Now()})
	if st.IsSuccess() {
		t.Fatal("the pod fits beside the reserved one; the test needs it refused")
	}
	t.Logf("refused: %s", st.Message())
	pl.rejected.Add(p, d)
	// 10 s on, a sample shows the placed pod running at 5 W.
	clock.Set(now.Add(10 * time.Second))
	cur := modelled(status(60), 175)
	cur.SampleTime = metav1.NewTime(clock.Now())
	newObj := plugintest.Object(t, "n", 2, cur, clock.Now())
	got, err := pl.hint(klog.Background(), p, oldObj, newObj)
	if err != nil || got != fwk.Queue {
		t.Errorf("hint = %v, %v; want Queue", got, err)
	}
	if view, _ := pl.cache.Get("n"); !pl.fits(view, pl.reservedOn("n"), &podState{Demand: d, now: clock.Now()}).IsSuccess() {
		t.Fatal("Filter refuses the pod on the new sample; the test needs it let in")
	}
	pre, err := pl.preHint(klog.Background(), oldObj, newObj)
	if err != nil || len(pre.Pods) != 1 {
		t.Errorf("preHint = %+v, %v; want the pod named", pre, err)
	}
}
