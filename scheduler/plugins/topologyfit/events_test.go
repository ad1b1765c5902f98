// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/apis/config"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
)

// TestEventsToRegister: a NodeTelemetry change requeues through pick and
// rejected.OnTelemetry, so the events are these alone, none of
// NodeTelemetry.
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
		{Resource: fwk.Pod, ActionType: fwk.Delete},
		{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete},
		{Resource: fwk.ResourceSlice, ActionType: fwk.Update | fwk.Delete},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// rejects reports whether st is TopologyFit's rejection of a pod: not a
// success, nor a PreFilter Skip (nothing to check).
func rejects(st *fwk.Status) bool { return !st.IsSuccess() && !st.IsSkip() }

// TestPick: a pod waiting after TopologyFit's Filter rejected it is named
// by pick (so rejected.OnTelemetry activates it) when a NodeTelemetry
// change of n1 can let it in. The pod is recorded as Filter records it:
// rejected by PreFilter and Filter on n1 before the change or, where n1
// took it then, as a pod Filter rejected on another node. Each case checks
// pick against Filter run after the change, too: a pod Filter now takes on
// n1 and rejected there before must be named; one Filter still rejects,
// not.
func TestPick(t *testing.T) {
	t.Parallel()
	gpu4NUMA := makePod("p", 4, "16", "64Gi", numaPolicy, singleNUMA)
	gpu4 := makePod("p", 4, "", "")
	cpuNUMA := makePod("p", 0, "16", "64Gi", numaPolicy, singleNUMA)
	fresh := telStatus(2, h100s(8, 4))
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		old, new *telemetryv1alpha1.NodeTelemetryStatus // old nil: Add
		want     bool
	}{
		{name: "added, fresh, fits", pod: gpu4NUMA, new: fresh, want: true},
		// Freshness is the scheduler's: an object it sees now is fresh,
		// whatever the agent's clock wrote into sampleTime.
		{name: "added, sampleTime an hour old", pod: gpu4NUMA, new: telStatus(2, h100s(8, 4), sampledAgo(time.Hour)), want: true},
		{name: "added, too few GPUs", pod: gpu4, new: telStatus(2, h100s(2, 1)), want: false},
		{name: "added, GPUs split over NUMA nodes", pod: gpu4NUMA, new: telStatus(2, h100s(6, 3)), want: false},
		{name: "became fresh", pod: gpu4NUMA, old: telStatus(2, h100s(8, 4), sampledAgo(time.Hour)), new: fresh, want: true},
		{name: "a GPU became healthy", pod: gpu4, old: telStatus(2, withUnhealthy(h100s(8, 4), 3)), new: fresh, want: true},
		{name: "a GPU appeared", pod: gpu4, old: telStatus(2, h100s(7, 4)), new: fresh, want: true},
		{name: "GPU data appeared", pod: gpu4, old: telStatus(2, h100s(8, 4), noGPUSource), new: fresh, want: true},
		{name: "a GPU became unhealthy", pod: gpu4, old: fresh, new: telStatus(2, withUnhealthy(h100s(8, 4), 3)), want: false},
		{name: "a GPU moved to a NUMA node", pod: gpu4NUMA, old: telStatus(2, h100s(8, 3)), new: fresh, want: true},
		{name: "GPUs unchanged: utilization moved", pod: gpu4NUMA, old: telStatus(2, h100s(8, 4), cpuPercent(20)), new: fresh, want: false},
		{name: "healthy GPU of another model", pod: makePod("p", 1, "", "", gpuModel, "A100"), old: telStatus(2, withUnhealthy(mixedGPUs(), 0)), new: telStatus(2, mixedGPUs()), want: false},
		{name: "exclusive CPUs released", pod: cpuNUMA, old: telStatus(2, nil, exclusive(60, 60)), new: telStatus(2, nil, exclusive(40, 60)), want: true},
		{name: "exclusive CPUs taken", pod: cpuNUMA, old: telStatus(2, nil, exclusive(16, 16)), new: telStatus(2, nil, exclusive(20, 16)), want: false},
		{name: "memory reached the request", pod: cpuNUMA, old: telStatus(2, nil, memFree(32*gi, 32*gi)), new: telStatus(2, nil, memFree(64*gi, 32*gi)), want: true},
		{name: "memory grew, still short", pod: cpuNUMA, old: telStatus(2, nil, memFree(32*gi, 32*gi)), new: telStatus(2, nil, memFree(48*gi, 32*gi)), want: false},
		{name: "memory grew, already enough", pod: cpuNUMA, old: telStatus(2, nil, memFree(100*gi, 100*gi)), new: telStatus(2, nil, memFree(200*gi, 100*gi)), want: false},
		{name: "memory is not checked for a GPU pod without NUMA policy", pod: gpu4, old: telStatus(2, h100s(8, 4), memFree(gi, gi)), new: fresh, want: false},
		{name: "NUMA data appeared", pod: cpuNUMA, old: telStatus(2, nil, noNUMA), new: telStatus(2, nil), want: true},
		// Recorded here although Filter never records it (PreFilter skips
		// it): with nothing to check, no change is one pick names it for.
		{name: "pod without topology needs", pod: makePod("p", 0, "1", "1Gi"), new: fresh, want: false},
		// Rejected by PreFilter, never recorded: no change fixes its
		// annotation.
		{name: "malformed pod", pod: makePod("p", 1, "", "", gpuMinMem, "lots"), new: fresh, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := plugintest.NewClock(now)
			pl := newPluginOn(clk, config.StaleTelemetryReject)
			ni := nodeInfo("n1", 8)
			key := types.NamespacedName{Namespace: tc.pod.Namespace, Name: tc.pod.Name}
			if tc.old != nil {
				plugintest.Observe(pl.cache, clk, "n1", tc.old) // the view before the change
			}
			// (Before an add, n1 has no telemetry: rejected under Reject.)
			before := filter(pl, tc.pod, ni)
			if !rejects(before) {
				// n1 took it: it waits because Filter rejected it on
				// another node (or in an earlier attempt), recorded with
				// the facts Filter records.
				if s, err := pl.podFacts(tc.pod); err == nil {
					pl.rejected.Add(tc.pod, s)
				}
			}
			// The cycle is over (the next one's Begin replaces it): the
			// index names the pod only as Filter recorded it.
			pl.rejected.End(tc.pod)
			if _, err := pl.podFacts(tc.pod); (err == nil) != (pl.rejected.Len() == 1) {
				t.Fatalf("%d pods recorded (Filter before the change: %v); want the pod, unless its facts do not parse", pl.rejected.Len(), before)
			}

			prev, cur := plugintest.Change(t, pl.cache, clk, "n1", tc.old, tc.new)
			got := pl.pick(prev, cur)
			named := slices.Contains(got, key)
			if named != tc.want || len(got) > 1 {
				t.Errorf("pick = %v; want %v named: %v", got, key, tc.want)
			}

			// Ground truth: Filter on n1 after the change.
			after := filter(pl, tc.pod, ni)
			if rejects(before) && !rejects(after) && !named {
				t.Errorf("Filter took the pod after the change and rejected it before (%v), but pick = %v does not name it", before, got)
			}
			if rejects(after) && named {
				t.Errorf("pick names the pod, but Filter still rejects it: %v", after)
			}
		})
	}
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
