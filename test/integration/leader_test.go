// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeschedulerLeaderElection: two telesched-descheduler replicas on one
// Lease; only the one holding it runs cycles (and reports
// telesched_descheduler_leader 1), the other stands by; stopped, the
// leader releases the Lease and the standby takes over at once, long
// before the lease duration.
func TestDeschedulerLeaderElection(t *testing.T) {
	needControlPlane(t)
	ctx, c := t.Context(), newClients(t)
	binDir, kubeconfig := binDirAndKubeconfig(t)
	const lease = "dsleader"
	type replica struct {
		addr string
		out  *syncBuffer
		stop func()
	}
	start := func() replica {
		addr := freeAddress(t)
		out, stop := startStoppable(t, filepath.Join(binDir, "telesched-descheduler"), "--kubeconfig="+kubeconfig, "--metrics-bind-address="+addr,
			"--interval=1s", "--leader-elect-resource-name="+lease, "--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s",
			"--leader-elect-retry-period=1s", "-v=2")
		return replica{addr, out, stop}
	}
	leading := func(r replica) (float64, bool) {
		fams, err := tryScrape(http.DefaultClient, "http://"+r.addr+"/metrics")
		if err != nil || fams["telesched_descheduler_leader"] == nil {
			return 0, false
		}
		return fams["telesched_descheduler_leader"].GetMetric()[0].GetGauge().GetValue(), true
	}
	holder := func() string {
		l, err := c.kube.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	const cycle = "Descheduling cycle done"

	first := start()
	waitReady(t, "the first replica to lead", first.out, 60*time.Second, func() bool {
		v, ok := leading(first)
		return ok && v == 1 && strings.Contains(first.out.String(), cycle)
	})
	leader := holder()
	if leader == "" {
		t.Fatalf("kube-system/%s has no holder while the first replica leads", lease)
	}
	second := start()
	waitReady(t, "the second replica to stand by", second.out, 60*time.Second, func() bool {
		v, ok := leading(second)
		return ok && v == 0 && strings.Contains(second.out.String(), "Standing by: another replica leads")
	})
	time.Sleep(3 * time.Second) // three of its retries, three cycles of the leader
	if log := second.out.String(); strings.Contains(log, cycle) {
		t.Fatalf("the standby ran a cycle while the first replica held the Lease:\n%s", tail(log, 20))
	}
	if got := holder(); got != leader {
		t.Fatalf("Lease holder %q, want the first replica %q still", got, leader)
	}

	// The leader stops: it releases the Lease, and the standby takes it
	// within a few retries, inside half the 30s lease duration it would
	// wait for a leader that vanished without releasing it.
	first.stop()
	waitReady(t, "the standby to take over", second.out, 15*time.Second, func() bool {
		v, ok := leading(second)
		return ok && v == 1 && strings.Contains(second.out.String(), cycle)
	})
	if got := holder(); got == leader || got == "" {
		t.Errorf("Lease holder %q after the leader stopped, want the second replica", got)
	}
}
