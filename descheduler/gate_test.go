// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
)

// TestGateForgetsPodsPastTheCooldown: the cool-down's record holds the
// pods of one cool-down, not every pod ever acted on.
func TestGateForgetsPodsPastTheCooldown(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	g := NewGate(events.NewFakeRecorder(10), 10*time.Minute, true, func() time.Time { return now })
	pod := func(i int) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprint(i))}}
	}
	for i := range 1000 {
		g.remember(pod(i))
	}
	now = now.Add(10 * time.Minute)
	g.remember(pod(1000))
	if got := g.Remembered(); got != 2 {
		t.Errorf("after 1001 pods, 1000 of them a cool-down ago, the record holds %d keys; want 2 (one pod's UID and name)", got)
	}
	if g.Cooling(pod(0)) || !g.Cooling(pod(1000)) {
		t.Errorf("Cooling: pod acted on a cool-down ago %v (want false), pod acted on now %v (want true)", g.Cooling(pod(0)), g.Cooling(pod(1000)))
	}
}
