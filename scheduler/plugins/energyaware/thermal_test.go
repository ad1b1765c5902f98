// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// thermalSource sets st's thermal source to state with reason and message,
// and drops its thermal section, as the agent publishes a source it could
// not read, or the publisher (agent/publisher trim) a section the API
// server refused.
func thermalSource(st *telemetryv1alpha1.NodeTelemetryStatus, state telemetryv1alpha1.SourceState, reason, msg string) *telemetryv1alpha1.NodeTelemetryStatus {
	st.Thermal = nil
	st.Sources = append(st.Sources, telemetryv1alpha1.SourceStatus{Name: telemetryv1alpha1.SourceThermal, State: state, Reason: reason, Message: msg})
	return st
}

func refused(st *telemetryv1alpha1.NodeTelemetryStatus) *telemetryv1alpha1.NodeTelemetryStatus {
	return thermalSource(st, telemetryv1alpha1.SourceFailed, "RejectedByAPIServer",
		"the API server refused this section, left out until the next heartbeat: status.thermal.sensors[0].name: Too long")
}

// sampleAt is st taken at now+d.
func sampleAt(st *telemetryv1alpha1.NodeTelemetryStatus, d time.Duration) *telemetryv1alpha1.NodeTelemetryStatus {
	st.SampleTime = metav1.NewTime(now.Add(d))
	return st
}

// TestThermalFailedIsNotCool: a node whose thermal source failed (the API
// server refused its section, or its sensors could not be read) keeps its
// last reading for the cache's thermal hold (2m by default): a hot one
// keeps it out, whatever the policy, until a sample shows it cool; a cool
// one lets pods in until the hold ends. After it, or with no earlier
// reading, its heat is unknown: rejected under staleTelemetryPolicy
// Reject, neither rejected nor favoured under Ignore. A node without
// sensors (Unavailable) is judged as before: nothing to be hot.
func TestThermalFailedIsNotCool(t *testing.T) {
	type step struct {
		at     time.Duration                          // when the sample is taken and seen
		status *telemetryv1alpha1.NodeTelemetryStatus // nil: no new sample
		check  time.Duration                          // when Filter runs
		// wantIgnore and wantReject are the rejection under each policy,
		// "" when the node takes the pod.
		wantIgnore, wantReject string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"last seen hot, then refused", []step{
			{at: 0, status: status(96), check: 0, wantIgnore: "node thermal headroom 4.0°C", wantReject: "node thermal headroom 4.0°C"},
			// The refused sample at 30s holds the 96°C reading of 0s.
			{at: 30 * time.Second, status: refused(status(60)), check: 40 * time.Second,
				wantIgnore: "node thermal headroom 4.0°C <= margin 5.0°C (cpu at 96.0°C, limit 100.0°C), as last read 40s ago: thermal section refused by the API server",
				wantReject: "node thermal headroom 4.0°C <= margin 5.0°C (cpu at 96.0°C, limit 100.0°C), as last read 40s ago: thermal section refused by the API server"},
			// Past the hold, a reading last seen hot still keeps it out.
			{at: 150 * time.Second, status: refused(status(60)), check: 150 * time.Second,
				wantIgnore: "as last read 2m30s ago", wantReject: "as last read 2m30s ago"},
		}},
		{"last seen cool, then refused", []step{
			{at: 0, status: status(60), check: 0},
			{at: 60 * time.Second, status: refused(status(60)), check: 60 * time.Second},
			// 2m is the hold: the 60°C reading of 0s holds until 2m.
			{at: 119 * time.Second, status: refused(status(60)), check: 119 * time.Second},
			{at: 120 * time.Second, status: refused(status(60)), check: 120 * time.Second},
			{at: 121 * time.Second, status: refused(status(60)), check: 121 * time.Second, wantReject: "node's heat is unknown: thermal section refused by the API server (the API server refused this section, left out until the next heartbeat: status.thermal.sensors[0].name: Too long); its last reading, 2m1s old, is past --telemetry-thermal-hold 2m0s (staleTelemetryPolicy Reject)"},
			// A sample with thermal again: cool.
			{at: 130 * time.Second, status: status(60), check: 130 * time.Second},
		}},
		{"sensors failed, no earlier reading", []step{
			{at: 0, status: thermalSource(status(60), telemetryv1alpha1.SourceFailed, "SensorFault", "all 4 temperature sensors flag a fault"), check: 0,
				wantReject: "node's heat is unknown: thermal source failed (SensorFault: all 4 temperature sensors flag a fault); the scheduler saw no earlier reading to hold (staleTelemetryPolicy Reject)"},
		}},
		{"no sensors", []step{
			{at: 0, status: status(96), check: 0, wantIgnore: "node thermal headroom 4.0°C", wantReject: "node thermal headroom 4.0°C"},
			{at: 30 * time.Second, status: thermalSource(status(60), telemetryv1alpha1.SourceUnavailable, "NoSensors", "no thermal zones or hwmon temperature sensors (typical in VMs)"), check: 30 * time.Second},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := newCache()
			reject := configv1.DefaultEnergyAwareArgs()
			reject.StaleTelemetryPolicy = config.StaleTelemetryReject
			pls := map[string]*EnergyAware{"Ignore": New(*configv1.DefaultEnergyAwareArgs(), cache), "Reject": New(*reject, cache)}
			defer clock.Set(now)
			for i, s := range tc.steps {
				if s.status != nil {
					observe(cache, "n", sampleAt(s.status, s.at))
				}
				clock.Set(now.Add(s.check))
				for policy, want := range map[string]string{"Ignore": s.wantIgnore, "Reject": s.wantReject} {
					pod := gpuPod("")
					cs := framework.NewCycleState()
					_, _ = pls[policy].PreFilter(context.Background(), cs, pod, nil)
					ni := framework.NewNodeInfo()
					ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
					st := pls[policy].Filter(context.Background(), cs, pod, ni)
					switch {
					case want == "" && !st.IsSuccess():
						t.Errorf("step %d (%v), %s: Filter = %v, want success", i, s.check, policy, st)
					case want != "" && (st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), want)):
						t.Errorf("step %d (%v), %s: Filter = %v, want Unschedulable containing %q", i, s.check, policy, st, want)
					}
				}
			}
		})
	}
}

// TestPickHeatKnownAgain: under staleTelemetryPolicy Reject, a pod Filter
// rejected because a node's heat was unknown is named by pick (so
// activated) on the sample that reads its heat again; under Ignore the
// node took it already (PreFilter let it pass), so a pod waiting for
// another reason is not named.
func TestPickHeatKnownAgain(t *testing.T) {
	defer clock.Set(now)
	for _, tc := range []struct {
		policy config.StaleTelemetryPolicy
		// rejected: Filter rejects the pod on the old view; want: pick
		// names it.
		rejected, want bool
	}{
		{config.StaleTelemetryReject, true, true},
		{config.StaleTelemetryIgnore, false, false},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			args := configv1.DefaultEnergyAwareArgs()
			args.StaleTelemetryPolicy = tc.policy
			pl := New(*args, newCache())
			pod := gpuPod("")
			// No reading to hold: the first sample seen has its thermal
			// source failed.
			old := sampleAt(refused(status(60)), -10*time.Second)
			stored := storeOld(t, pl.cache, "n", old)
			st := attempt(pl, pod, "n")
			if rejected := !st.IsSuccess(); rejected != tc.rejected {
				t.Fatalf("Filter on the refused sample = %v; the case needs it rejected: %v", st, tc.rejected)
			}
			if !tc.rejected {
				pl.rejected.AddOn(pod, "n", pl.reserved.Demand(pod)) // waiting since an earlier view
			}
			prev, cur := change(t, pl.cache, "n", stored, old, status(60))
			got := pl.pick(prev, cur)
			if named := slices.Contains(got, keyOf(pod)); named != tc.want || len(got) > 1 {
				t.Errorf("pick = %v; want the pod named: %v", got, tc.want)
			}
			if st := attempt(pl, pod, "n"); !st.IsSuccess() {
				t.Errorf("Filter on the sample with heat again = %v; want the node to take the pod", st)
			}
		})
	}
}

// TestScoreHeatUnknown: a node whose held reading is past the hold earns
// no thermal points; within the hold it earns its held reading's.
func TestScoreHeatUnknown(t *testing.T) {
	defer clock.Set(now)
	cache := newCache()
	observe(cache, "n", sampleAt(status(60), 0))
	observe(cache, "n", sampleAt(refused(status(60)), 100*time.Second))
	pl := New(*configv1.DefaultEnergyAwareArgs(), cache)
	pod := gpuPod("")
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{
		{100 * time.Second, 100}, // 40°C headroom held: full thermal score
		{121 * time.Second, 0},   // past the 2m hold
	} {
		clock.Set(now.Add(tc.at))
		cs := framework.NewCycleState()
		_, _ = pl.PreFilter(context.Background(), cs, pod, nil)
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
		s, st := pl.Score(context.Background(), cs, pod, ni)
		if _, _, thermal := unpackScore(s); !st.IsSuccess() || thermal != tc.want {
			t.Errorf("at %v: Score = %d (thermal %d), %v; want thermal %d", tc.at, s, thermal, st, tc.want)
		}
	}
}
