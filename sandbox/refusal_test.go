// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A FailedScheduling message of the GPU pods on a fleet whose GPU rack
// cannot hold them, as kube-scheduler joins the nodes' reasons.
const budgetMsg = "0/4 nodes are available: 1 node(s) had untolerated taint(s), 1 PowerBudget rack-gpu: measured 571W + reserved 0W + this pod 1384W = 1955W > budget 1200W - reserve 0W (1 nodes), 2 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."

func TestBudgetReasons(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		want      []string
	}{
		{name: "a rack over its budget", msg: budgetMsg,
			want: []string{"PowerBudget rack-gpu: measured 571W + reserved 0W + this pod 1384W = 1955W > budget 1200W - reserve 0W (1 nodes)"}},
		{name: "two racks",
			msg: "0/3 nodes are available: 1 PowerBudget r1: measured 900W + reserved 10W + this pod 120W = 1030W > budget 1000W - reserve 0W (2 nodes), 2 PowerBudget r2: measured 1900W + reserved 0W + this pod 150W = 2050W > budget 2100W - reserve 100W (3 nodes).",
			want: []string{
				"PowerBudget r1: measured 900W + reserved 10W + this pod 120W = 1030W > budget 1000W - reserve 0W (2 nodes)",
				"PowerBudget r2: measured 1900W + reserved 0W + this pod 150W = 2050W > budget 2100W - reserve 100W (3 nodes)",
			}},
		{name: "an unmetered node",
			msg:  "0/2 nodes are available: 2 node has no fresh power telemetry and PowerBudget rack-a sets no unmeteredNodeWatts (1 of its 2 nodes lack one or the other).",
			want: []string{"node has no fresh power telemetry and PowerBudget rack-a sets no unmeteredNodeWatts (1 of its 2 nodes lack one or the other)"}},
		{name: "too hot, no budget", msg: "0/8 nodes are available: 1 node thermal headroom 2.0°C <= margin 5.0°C: coretemp/Package id 0 at 98.0°C, limit 100.0°C."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, budgetReasons(tc.msg)); diff != "" {
				t.Errorf("budgetReasons (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRefusedByBudget: pending pods are refused by the racks' budgets only
// when each one's last rejection names a PowerBudget and nothing was bound
// or created for the settle time; until then, or for a pod held back by
// anything else, the scenario keeps waiting.
func TestRefusedByBudget(t *testing.T) {
	quiet := time.Now()
	const settle = 50 * time.Second
	train := []podSpec{{name: "train-0", phase: phaseGPU}, {name: "train-1", phase: phaseGPU}}
	both := map[string][]string{"train-0": {budgetMsg}, "train-1": {"0/4 nodes are available: 3 Insufficient nvidia.com/gpu.", budgetMsg}}
	for _, tc := range []struct {
		name       string
		pending    []podSpec
		rejections map[string][]string
		after      time.Duration
		want       []string // refused pods; nil: keep waiting
	}{
		{name: "every pending pod refused by a budget, settled", pending: train, rejections: both, after: settle, want: []string{"train-0", "train-1"}},
		{name: "not settled yet", pending: train, rejections: both, after: settle - time.Second},
		{name: "one pod not rejected yet", pending: train, rejections: map[string][]string{"train-0": {budgetMsg}}, after: settle},
		{name: "one pod's last rejection is no budget's", pending: train,
			rejections: map[string][]string{"train-0": {budgetMsg}, "train-1": {budgetMsg, "0/4 nodes are available: 3 Insufficient nvidia.com/gpu."}}, after: settle},
		{name: "nothing pending", rejections: both, after: settle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := refusedByBudget(tc.pending, tc.rejections, quiet, quiet.Add(tc.after), settle)
			if ok != (tc.want != nil) {
				t.Fatalf("refused = %v, %v; want %v", got, ok, tc.want)
			}
			var pods []string
			for _, r := range got {
				pods = append(pods, r.Pod)
				if r.Phase != phaseGPU || len(r.Reasons) != 1 {
					t.Errorf("refusal %+v, want the GPU phase and the rack's reason", r)
				}
			}
			if diff := cmp.Diff(tc.want, pods); diff != "" {
				t.Errorf("refused pods (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBudgetSettle: the wait covers the reservation hold, the agents'
// heartbeat and the scheduler's longest backoff.
func TestBudgetSettle(t *testing.T) {
	// 1 s interval: hold 10 s + heartbeat 30 s + backoff 10 s + 2 s.
	if got := budgetSettle(time.Second); got != 52*time.Second {
		t.Errorf("budgetSettle(1s) = %v, want 52s", got)
	}
}

// TestBudgetRefusedNodes: the nodes a PowerBudget refused, by the counts
// kube-scheduler puts before each distinct reason of a FailedScheduling
// message (this one from a sandbox run of the gpu-frontier fleet).
func TestBudgetRefusedNodes(t *testing.T) {
	for msg, want := range map[string]int{
		"0/9 nodes are available: 1 PowerBudget rack-gpu: measured 7305W + reserved 3476W + this pod 1262W = 12043W > budget 9000W - reserve 200W (6 nodes), 1 PowerBudget rack-gpu: measured 7305W + reserved 3476W + this pod 1273W = 12054W > budget 9000W - reserve 200W (6 nodes), 1 PowerBudget rack-gpu: measured 7305W + reserved 3476W + this pod 695W = 11476W > budget 9000W - reserve 200W (6 nodes), 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s), 4 Insufficient nvidia.com/gpu.": 3,
		"0/4 nodes are available: 2 PowerBudget rack-a: measured 4009W + reserved 0W + this pod 1384W = 5393W > budget 4600W - reserve 100W (2 nodes), 2 Insufficient nvidia.com/gpu.": 2,
		"0/3 nodes are available: 3 Insufficient nvidia.com/gpu.": 0,
	} {
		if got := budgetRefusedNodes(msg); got != want {
			t.Errorf("budgetRefusedNodes(%.60q...) = %d, want %d", msg, got, want)
		}
	}
}

// TestBoundFeasible: the unit check reads how many nodes passed the
// filters for a pod from kube-scheduler's binding line (these two from a
// sandbox run of the gpu-frontier fleet: the baseline's pod and the
// telesched profile's, which a rack's budget left one node).
func TestBoundFeasible(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scheduler.log")
	log := `I1206 21:49:40.105215   21727 schedule_one.go:483] "Successfully bound pod to node" pod="baseline/pair-free" node="h100-16" evaluatedNodes=9 feasibleNodes=4
I1206 21:49:44.491479   21727 schedule_one.go:483] "Successfully bound pod to node" pod="demo/pair-free" node="a100-80-whole" evaluatedNodes=9 feasibleNodes=1
I1206 21:49:44.491500   21727 schedule_one.go:483] "Successfully bound pod to node" pod="demo/pair-free-2" node="h100-16" evaluatedNodes=1 feasibleNodes=1
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	for pod, want := range map[string][3]int{"demo/pair-free": {9, 1, 1}, "baseline/pair-free": {9, 4, 1}, "demo/pair-free-2": {1, 1, 1}, "demo/none": {0, 0, 0}} {
		e, f, ok := boundFeasible(path, pod)
		if got := [3]int{e, f, map[bool]int{true: 1}[ok]}; got != want {
			t.Errorf("boundFeasible(%s) = %v, want %v", pod, got, want)
		}
	}
}
