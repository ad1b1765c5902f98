// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powerbudget

import (
	"context"
	"strings"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/scheduler/estimate"
)

// PowerBudget signs a pod with its demand while no budget is near its
// limit, and refuses while one is: rack-a has 100 W of its 2000 W left.
func TestSignPod(t *testing.T) {
	pl := newPlugin(t)
	_, st := pl.SignPod(context.Background(), pod("p", "1"))
	if st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), "PowerBudget") || !strings.Contains(st.Message(), "near its limit") {
		t.Fatalf("SignPod with a rack at 95 %% = %v, want Unschedulable naming the budget", st)
	}
	t.Logf("refused: %s", st.Message())
	snap := snapshot(pl)
	if why := near(snap, estimate.Demand{CPUMilli: 1000}, 50); !strings.HasPrefix(why, "PowerBudget ") {
		t.Errorf("near = %q", why)
	}
	// Every budget far from its limit: pdu-1 alone, 1900 W of 5000 W;
	// a 1-core pod adds 50 W at most, leaving 62 % free, over 50 %.
	for i := len(snap.Domains) - 1; i >= 0; i-- {
		if snap.Domains[i].Name != "pdu-1" {
			snap.Domains = append(snap.Domains[:i], snap.Domains[i+1:]...)
		}
	}
	if why := near(snap, estimate.Demand{CPUMilli: 1000}, 50); why != "" {
		t.Errorf("near with pdu-1 at 38 %% = %q, want none", why)
	}
	// ... but not at a fullScoreHeadroomPercent of 70.
	if why := near(snap, estimate.Demand{CPUMilli: 1000}, 70); !strings.Contains(why, "pdu-1") {
		t.Errorf("near at 70 %% = %q, want pdu-1", why)
	}
}
