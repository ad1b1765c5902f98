// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/apis/config"
)

func TestNormalizeMissing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		in, want []int64
	}{
		{"lowest other", []int64{NoTelemetry, 40, 90}, []int64{40, 40, 90}},
		{"none has telemetry", []int64{NoTelemetry, NoTelemetry}, []int64{0, 0}},
		{"all have telemetry", []int64{0, 100}, []int64{0, 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := make(fwk.NodeScoreList, len(tc.in))
			for i, s := range tc.in {
				list[i].Score = s
			}
			NormalizeMissing(list)
			got := make([]int64, len(list))
			for i := range list {
				got[i] = list[i].Score
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStaleStatus(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	old := &Node{Name: "a", Observed: now.Add(-10 * time.Minute), SampleTime: now.Add(-10 * time.Minute)}
	behind := &Node{Name: "b", Observed: now.Add(-10 * time.Minute), SampleTime: now.Add(-11*time.Minute - 10*time.Second), ClockOffset: -70 * time.Second, Skewed: true}
	unwritten := &Node{Name: "d", SampleTime: now.Add(-time.Hour), unwritten: true}
	withAgent := &Node{Name: "c", Observed: now.Add(-10 * time.Minute), SampleTime: now.Add(-10 * time.Minute), AgentReady: true, agentMaxAge: 6 * time.Minute}
	ignore := config.TelemetryArgs{TelemetryMaxAge: time.Minute, StaleTelemetryPolicy: config.StaleTelemetryIgnore}
	reject := config.TelemetryArgs{TelemetryMaxAge: time.Minute, StaleTelemetryPolicy: config.StaleTelemetryReject}
	if st := StaleStatus(ignore, old, now); st != nil {
		t.Errorf("Ignore: %v, want no rejection", st)
	}
	for _, tc := range []struct {
		node *Node
		want string
	}{
		{nil, "node has no NodeTelemetry (staleTelemetryPolicy Reject)"},
		{old, "node telemetry is 10m0s old > telemetryMaxAge 1m0s (no new sample seen by the scheduler since, and no Ready agent pod seen on the node; staleTelemetryPolicy Reject)"},
		{withAgent, "node telemetry is 10m0s old > 6m0s, the most while the node's agent pod is Ready (--telemetry-max-age-ready-agent; no new sample seen by the scheduler since; staleTelemetryPolicy Reject)"},
		{unwritten, "node telemetry has no sample of its agent's that the scheduler saw: its status was last written by someone else (no write of field manager telesched-agent on record), and counts as stale until the agent's next sample (staleTelemetryPolicy Reject)"},
		{behind, "node telemetry is 10m0s old > telemetryMaxAge 1m0s (no new sample seen by the scheduler since, and no Ready agent pod seen on the node; staleTelemetryPolicy Reject); its agent's clock was 1m10s behind the scheduler's"},
	} {
		st := StaleStatus(reject, tc.node, now)
		if st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), tc.want) {
			t.Errorf("Reject: %v, want Unschedulable %q", st, tc.want)
		}
	}
}
