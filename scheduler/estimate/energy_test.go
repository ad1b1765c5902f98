// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"math"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Slices are not a cheaper GPU: on a node of the single MIG strategy,
// nvidia.com/gpu: 4 is four 1g devices, 4/7 of one GPU's work per second
// against the four reference GPUs the pod asked for. Its GPU watts are
// 4/7 of one GPU's, and its job takes 7 times as long: per unit of its
// work the GPUs cost what four whole GPUs of the model cost, and its
// host CPUs run 7 times as long. The same node with whole GPUs (the
// node's GPUs not in MIG mode) is cheaper per unit of work; ranked by
// watts, the slices were (4/7 of a GPU's watts against 4 GPUs').
func TestSlicesAreNoCheaperGPU(t *testing.T) {
	slices := migNode()
	for i := range slices.GPUs {
		slices.GPUs[i].Speed, slices.GPUs[i].SpeedSource = 1, "table"
	}
	whole := migNode()
	for i := range whole.GPUs {
		g := &whole.GPUs[i]
		g.MIG, g.ComputeSlices, g.MIGProfiles, g.Speed, g.SpeedSource = false, 0, nil, 1, "table"
	}
	d := Demand{CPUMilli: 16000, GPUs: 4}
	if k, known := PodSpeed(slices, d); math.Abs(k-1.0/7) > 1e-9 || !known {
		t.Errorf("four 1g devices for four GPUs' work: speed %v (known %v), want 1/7", k, known)
	}
	if k, _ := PodSpeed(whole, d); k != 1 {
		t.Errorf("four whole GPUs: speed %v, want 1", k)
	}
	es, _ := (*Book)(nil).RankJoules(slices, d, Demand{}, WorkFinite, 1, 1<<40)
	ew, _ := (*Book)(nil).RankJoules(whole, d, Demand{}, WorkFinite, 1, 1<<40)
	ws, _ := PodWatts(slices, d, Demand{})
	ww, _ := PodWatts(whole, d, Demand{})
	if !(ws.Mean < ww.Mean) || !(es.Joules > ew.Joules) {
		t.Errorf("watts now: slices %.0f, whole %.0f; joules per unit of work: slices %.0f, whole %.0f: want the slices cheaper now and dearer for the work",
			ws.Mean, ww.Mean, es.Joules, ew.Joules)
	}
	// The GPUs' share alone is the same per unit of work.
	if gs, gw := PodGPUWatts(slices, d)*7, PodGPUWatts(whole, d); math.Abs(gs-gw) > 1e-6 {
		t.Errorf("GPU joules per unit of work: slices %.1f, whole %.1f; want equal", gs, gw)
	}
	// A mixed-strategy device asked for by profile runs at its GPU's pace
	// against the same profile of the reference.
	if k, _ := PodSpeed(slices, Demand{MIGSlices: 3}); math.Abs(k-1) > 1e-9 {
		t.Errorf("a 3g device: speed %v, want 1", k)
	}
}

func TestWorkOf(t *testing.T) {
	job := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j"}}
	rs := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "r"}}
	for _, tc := range []struct {
		name  string
		ann   string
		owner []metav1.OwnerReference
		want  Work
		valid bool
	}{
		{"bare pod", "", nil, WorkService, true},
		{"a Job's pod", "", job, WorkFinite, true},
		{"a ReplicaSet's pod", "", rs, WorkService, true},
		{"declared finite", "finite", rs, WorkFinite, true},
		{"a Job's pod declared a service", "service", job, WorkService, true},
		{"a bad value: the owner decides", "batch", job, WorkFinite, false},
	} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.owner}}
		if tc.ann != "" {
			pod.Annotations = map[string]string{WorkAnnotation: tc.ann}
		}
		if w, ok := WorkOf(pod); w != tc.want || ok != tc.valid {
			t.Errorf("%s: %v %v, want %v %v", tc.name, w, ok, tc.want, tc.valid)
		}
	}
}

// A service keeps its requests over its node's speed busy, and frees
// that when it leaves; a finite pod keeps its requests busy.
func TestBusy(t *testing.T) {
	n := r740Node(0)
	n.CPUSpeed, n.CPUSpeedSource = 0.5, "table"
	d := Demand{CPUMilli: 2000}
	if got := Busy(n, d, WorkService).CPUMilli; got != 4000 {
		t.Errorf("a 2-CPU service on a node of half the reference's speed keeps %d mCPU busy, want 4000", got)
	}
	if got := Busy(n, d, WorkFinite).CPUMilli; got != 2000 {
		t.Errorf("a 2-CPU finite pod keeps %d mCPU busy, want 2000", got)
	}
}

// A view with no speed set (not built from a status) is the reference,
// unknown, not a node a thousand times slower.
func TestPodSpeedUnset(t *testing.T) {
	n := r740Node(0)
	n.CPUSpeed, n.CPUSpeedSource = 0, ""
	if k, known := PodSpeed(n, Demand{CPUMilli: 1000}); k != 1 || known {
		t.Errorf("speed %v known %v, want 1, unknown", k, known)
	}
}
