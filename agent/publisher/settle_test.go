// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package publisher

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// sample is one step of a Settler test: the clock moves on by after (1s
// unless set), a sample with CPU utilization cpu (and mutate applied) is
// offered, and the test writes it when it is released and worth a write.
type sample struct {
	after  time.Duration
	cpu    int32
	mutate func(s *telemetryv1alpha1.NodeTelemetryStatus)
}

func TestSettlerHold(t *testing.T) {
	const (
		heartbeat = 30 * time.Second
		maxWait   = 5 * time.Second
	)
	d := DefaultDeadbands() // cpu: 5 points
	flip := func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Conditions[0].Status = metav1.ConditionTrue }
	for _, tc := range []struct {
		name    string
		samples []sample // the first is published at once, as "first"
		// want is, per sample after the first: H held back, R released
		// (and written when it moved past the deadbands), . released but
		// within the deadbands.
		want string
	}{
		{
			// The sample straddling the step reads 45%, halfway; the next
			// reads 70%, unlike 45%; the one after agrees: written once.
			name:    "a step is written once it has settled",
			samples: []sample{{cpu: 20}, {cpu: 20}, {cpu: 45}, {cpu: 70}, {cpu: 70}, {cpu: 70}},
			want:    ".HHR.",
		},
		{
			name:    "a step that lands on a sample boundary waits one sample to be confirmed",
			samples: []sample{{cpu: 20}, {cpu: 70}, {cpu: 70}, {cpu: 71}},
			want:    "HR.",
		},
		{
			name:    "noise within the deadbands is neither held nor written",
			samples: []sample{{cpu: 40}, {cpu: 42}, {cpu: 38}, {cpu: 44}, {cpu: 36}},
			want:    "....",
		},
		{
			// 60, 80, 60, ... never agree within 5 points. The move is
			// first seen at 1s; at 6s it has waited maxWait: written.
			name:    "a move that never settles is written after maxWait",
			samples: []sample{{cpu: 40}, {cpu: 60}, {cpu: 80}, {cpu: 60}, {cpu: 80}, {cpu: 60}, {cpu: 80}, {cpu: 60}},
			want:    "HHHHHRH",
		},
		{
			name:    "a move that falls back within the deadbands starts its wait again",
			samples: []sample{{cpu: 40}, {cpu: 60}, {cpu: 80}, {cpu: 40}, {cpu: 60}, {cpu: 80}, {cpu: 60}, {cpu: 80}, {cpu: 60}, {cpu: 80}},
			want:    "HH.HHHHHR",
		},
		{
			name:    "a state change is not held back",
			samples: []sample{{cpu: 20}, {cpu: 45, mutate: flip}, {cpu: 70, mutate: flip}, {cpu: 70, mutate: flip}},
			want:    "RHR",
		},
		{
			// Written at 0s; at 30s the heartbeat is due, moving or not.
			name:    "the heartbeat is not held back",
			samples: []sample{{cpu: 20}, {cpu: 20, after: 29 * time.Second}, {cpu: 45}},
			want:    ".R",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			s := NewSettler(d, heartbeat, maxWait, clk)
			var last *telemetryv1alpha1.NodeTelemetryStatus
			var lastAt time.Time
			var got []byte
			for i, smp := range tc.samples {
				if i > 0 {
					step := time.Second
					if smp.after != 0 {
						step = smp.after
					}
					clk.SetTime(clk.Now().Add(step))
				}
				st := baseStatus()
				st.CPU.UtilizationPercent = smp.cpu
				if smp.mutate != nil {
					smp.mutate(st)
				}
				why := s.Hold(st)
				switch {
				case i == 0:
					if why != "" {
						t.Fatalf("first status held back: %s", why)
					}
				case why != "":
					got = append(got, 'H')
					continue
				case Change(last, st, d) == "" && clk.Since(lastAt) < heartbeat:
					got = append(got, '.')
					continue
				default:
					got = append(got, 'R')
				}
				last, lastAt = st, clk.Now()
				s.Published(st, lastAt)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("held (H), written (R), nothing to write (.) (-want +got):\n%s", diff)
			}
		})
	}
}
