// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/apis/config"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// object is a NodeTelemetry as the scheduler's dynamic informer hands it to
// QueueingHints.

func TestEventsToRegister(t *testing.T) {
	t.Parallel()
	events, err := newPlugin(config.StaleTelemetryIgnore).EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []fwk.ClusterEvent
	for _, e := range events {
		got = append(got, e.Event)
		if e.QueueingHintFn == nil {
			t.Errorf("%v has no QueueingHint", e.Event)
		}
	}
	want := []fwk.ClusterEvent{
		{Resource: telemetry.EventResource, ActionType: fwk.Add | fwk.Update},
		{Resource: fwk.Pod, ActionType: fwk.Delete},
		{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete},
		{Resource: fwk.ResourceSlice, ActionType: fwk.Update | fwk.Delete},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestTelemetryHint(t *testing.T) {
	t.Parallel()
	gpu4NUMA := makePod("p", 4, "16", "64Gi", numaPolicy, singleNUMA)
	gpu4 := makePod("p", 4, "", "")
	cpuNUMA := makePod("p", 0, "16", "64Gi", numaPolicy, singleNUMA)
	fresh := telStatus(2, h100s(8, 4))
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		old, new *telemetryv1alpha1.NodeTelemetryStatus // old nil: Add
		want     fwk.QueueingHint
	}{
		{name: "added, fresh, fits", pod: gpu4NUMA, new: fresh, want: fwk.Queue},
		// Freshness is the scheduler's: an object it sees now is fresh,
		// whatever the agent's clock wrote into sampleTime.
		{name: "added, sampleTime an hour old", pod: gpu4NUMA, new: telStatus(2, h100s(8, 4), sampledAgo(time.Hour)), want: fwk.Queue},
		{name: "added, too few GPUs", pod: gpu4, new: telStatus(2, h100s(2, 1)), want: fwk.QueueSkip},
		{name: "added, GPUs split over NUMA nodes", pod: gpu4NUMA, new: telStatus(2, h100s(6, 3)), want: fwk.QueueSkip},
		{name: "became fresh", pod: gpu4NUMA, old: telStatus(2, h100s(8, 4), sampledAgo(time.Hour)), new: fresh, want: fwk.Queue},
		{name: "a GPU became healthy", pod: gpu4, old: telStatus(2, withUnhealthy(h100s(8, 4), 3)), new: fresh, want: fwk.Queue},
		{name: "a GPU appeared", pod: gpu4, old: telStatus(2, h100s(7, 4)), new: fresh, want: fwk.Queue},
		{name: "GPU data appeared", pod: gpu4, old: telStatus(2, h100s(8, 4), noGPUSource), new: fresh, want: fwk.Queue},
		{name: "a GPU became unhealthy", pod: gpu4, old: fresh, new: telStatus(2, withUnhealthy(h100s(8, 4), 3)), want: fwk.QueueSkip},
		{name: "a GPU moved to a NUMA node", pod: gpu4NUMA, old: telStatus(2, h100s(8, 3)), new: fresh, want: fwk.Queue},
		{name: "GPUs unchanged: utilization moved", pod: gpu4NUMA, old: telStatus(2, h100s(8, 4), cpuPercent(20)), new: fresh, want: fwk.QueueSkip},
		{name: "healthy GPU of another model", pod: makePod("p", 1, "", "", gpuModel, "A100"), old: telStatus(2, withUnhealthy(mixedGPUs(), 0)), new: telStatus(2, mixedGPUs()), want: fwk.QueueSkip},
		{name: "exclusive CPUs released", pod: cpuNUMA, old: telStatus(2, nil, exclusive(60, 60)), new: telStatus(2, nil, exclusive(40, 60)), want: fwk.Queue},
		{name: "exclusive CPUs taken", pod: cpuNUMA, old: telStatus(2, nil, exclusive(16, 16)), new: telStatus(2, nil, exclusive(20, 16)), want: fwk.QueueSkip},
		{name: "memory reached the request", pod: cpuNUMA, old: telStatus(2, nil, memFree(32*gi, 32*gi)), new: telStatus(2, nil, memFree(64*gi, 32*gi)), want: fwk.Queue},
		{name: "memory grew, still short", pod: cpuNUMA, old: telStatus(2, nil, memFree(32*gi, 32*gi)), new: telStatus(2, nil, memFree(48*gi, 32*gi)), want: fwk.QueueSkip},
		{name: "memory grew, already enough", pod: cpuNUMA, old: telStatus(2, nil, memFree(100*gi, 100*gi)), new: telStatus(2, nil, memFree(200*gi, 100*gi)), want: fwk.QueueSkip},
		{name: "memory is not checked for a GPU pod without NUMA policy", pod: gpu4, old: telStatus(2, h100s(8, 4), memFree(gi, gi)), new: fresh, want: fwk.QueueSkip},
		{name: "NUMA data appeared", pod: cpuNUMA, old: telStatus(2, nil, noNUMA), new: telStatus(2, nil), want: fwk.Queue},
		{name: "pod without topology needs", pod: makePod("p", 0, "1", "1Gi"), new: fresh, want: fwk.QueueSkip},
		{name: "malformed pod", pod: makePod("p", 1, "", "", gpuMinMem, "lots"), new: fresh, want: fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logger, _ := ktesting.NewTestContext(t)
			clk := plugintest.NewClock(now)
			pl := newPluginOn(clk, config.StaleTelemetryReject)
			old, cur := plugintest.HintObjects(t, pl.cache, clk, "n1", tc.old, tc.new)
			if s, err := pl.podFacts(tc.pod); err == nil {
				pl.rejected.Add(tc.pod, s) // as Filter did
			}
			got, err := pl.telemetryHint(logger, tc.pod, old, cur)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("hint = %v, want %v", got, tc.want)
			}
			// The PreQueueingHint names the pod exactly when the hint
			// queues it: it runs the hint's own test on the pod's facts.
			pre, err := pl.telemetryPreHint(logger, old, cur)
			if err != nil || pre.AllPods {
				t.Fatalf("telemetryPreHint = %+v, %v", pre, err)
			}
			if named := len(pre.Pods) == 1; named != (got == fwk.Queue) {
				t.Errorf("the hint says %v, the PreQueueingHint names %v", got, pre.Pods)
			}
		})
	}
	t.Run("unexpected object", func(t *testing.T) {
		t.Parallel()
		logger, _ := ktesting.NewTestContext(t)
		got, err := newPlugin(config.StaleTelemetryReject).telemetryHint(logger, gpu4, nil, &v1.Pod{})
		if err == nil || got != fwk.Queue {
			t.Errorf("hint = %v, %v; want Queue and an error", got, err)
		}
	})
}

// cpuPercent sets the node's CPU utilization.
func cpuPercent(p int32) func(*telemetryv1alpha1.NodeTelemetryStatus) {
	return func(st *telemetryv1alpha1.NodeTelemetryStatus) { st.CPU.UtilizationPercent = p }
}

func TestPodDeleteHint(t *testing.T) {
	t.Parallel()
	gpuPod := makePod("p", 1, "", "")
	cpuNUMA := makePod("p", 0, "16", "64Gi", numaPolicy, singleNUMA)
	nominated := makePod("held", 2, "", "")
	nominated.Status.NominatedNodeName = "n1"
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		deleted any
		want    fwk.QueueingHint
	}{
		{name: "GPU pod deleted from a node", pod: gpuPod, deleted: onNode(makePod("held", 2, "1", ""), "n1"), want: fwk.Queue},
		{name: "deleted final state unknown", pod: gpuPod, deleted: toolscache.DeletedFinalStateUnknown{Key: "default/held", Obj: onNode(makePod("held", 2, "", ""), "n1")}, want: fwk.Queue},
		{name: "nominated GPU pod deleted", pod: gpuPod, deleted: nominated, want: fwk.Queue},
		{name: "unscheduled GPU pod deleted", pod: gpuPod, deleted: makePod("held", 2, "", ""), want: fwk.QueueSkip},
		{name: "CPU pod deleted, GPU pod pending", pod: gpuPod, deleted: onNode(makePod("held", 0, "4", ""), "n1"), want: fwk.QueueSkip},
		{name: "GPU pod deleted, CPU pod without policy pending", pod: makePod("p", 0, "1", ""), deleted: onNode(makePod("held", 2, "", ""), "n1"), want: fwk.QueueSkip},
		{name: "CPU pod deleted, single-numa-node pod pending", pod: cpuNUMA, deleted: onNode(makePod("held", 0, "4", ""), "n1"), want: fwk.Queue},
		{name: "pod without CPU deleted, single-numa-node CPU pod pending", pod: cpuNUMA, deleted: onNode(makePod("held", 0, "", "1Gi"), "n1"), want: fwk.QueueSkip},
		{name: "malformed pending pod", pod: makePod("p", 1, "", "", gpuMinMem, "lots"), deleted: onNode(makePod("held", 2, "", ""), "n1"), want: fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logger, _ := ktesting.NewTestContext(t)
			got, err := newPlugin(config.StaleTelemetryIgnore).podDeleteHint(logger, tc.pod, tc.deleted, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("hint = %v, want %v", got, tc.want)
			}
		})
	}
}
