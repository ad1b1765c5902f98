// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/telesched/telesched/agent/kube"
	"github.com/telesched/telesched/agent/publisher"
	"github.com/telesched/telesched/test/fixtures"
)

// TestHeartbeatsSpread starts 50 agents' publishers at the same instant,
// as a rollout or a power-on does, with nothing changing on their nodes,
// and follows 3 minutes of their heartbeats (on a fake clock, written to
// the real API server). Without jitter every heartbeat of the fleet lands
// in the same second for ever after, as kubelets' status writes did
// (kubernetes/kubernetes#124202); with --heartbeat-jitter's 0.2 they
// spread over the last fifth of the heartbeat, and no node goes longer
// than --heartbeat without a write.
func TestHeartbeatsSpread(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	admin := newClients(t)
	const agents, step, span = 50, 250 * time.Millisecond, 3 * time.Minute
	kc, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	suffix := utilrand.String(5)
	var nodes []string
	for i := range agents {
		n := fmt.Sprintf("hb-%s-%03d", suffix, i)
		if _, err := admin.kube.CoreV1().Nodes().Create(ctx, fixtures.Node(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
		t.Cleanup(func() {
			_ = admin.dyn.Resource(ntResource).Delete(context.Background(), n, metav1.DeleteOptions{})
			_ = admin.kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		})
	}
	// busiest is the most writes of the fleet in one second, after the
	// first two heartbeats; longest, the longest gap between a node's
	// writes.
	run := func(jitter float64) (writes, busiest int, longest time.Duration) {
		t.Helper()
		clk := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
		start := clk.Now()
		var pubs []*publisher.Publisher
		for _, n := range nodes {
			p, err := publisher.New(publisher.Config{
				NodeName: n, FieldManager: publisher.DefaultFieldManager,
				Heartbeat: publisher.DefaultHeartbeat, HeartbeatJitter: jitter,
				RateLimitQPS: publisher.DefaultRateLimitQPS, RateLimitBurst: publisher.DefaultRateLimitBurst,
				BackoffInitial: time.Second, BackoffMax: time.Second, Deadbands: publisher.DefaultDeadbands(),
			}, kc, clk)
			if err != nil {
				t.Fatal(err)
			}
			pubs = append(pubs, p)
		}
		st := fixtures.FullStatus(start, 1, 0)
		perSecond := map[int64]int{}
		last := make([]time.Time, len(pubs))
		for clk.Since(start) <= span {
			for i, p := range pubs {
				out := p.Offer(ctx, &st)
				if out.Err != nil {
					t.Fatalf("%s: %v", nodes[i], out.Err)
				}
				if !out.Published {
					continue
				}
				writes++
				now := clk.Now()
				if !last[i].IsZero() {
					longest = max(longest, now.Sub(last[i]))
				}
				last[i] = now
				if now.Sub(start) >= 2*publisher.DefaultHeartbeat {
					perSecond[int64(now.Sub(start)/time.Second)]++
				}
			}
			clk.Step(step)
		}
		for _, n := range perSecond {
			busiest = max(busiest, n)
		}
		return writes, busiest, longest
	}

	writesAligned, busiestAligned, longestAligned := run(0)
	writes, busiest, longest := run(publisher.DefaultHeartbeatJitter)
	t.Logf("%d agents started together, %v of heartbeats: without jitter %d writes, at most %d in one second, longest gap %v; with jitter %.1f %d writes, at most %d in one second, longest gap %v",
		agents, span, writesAligned, busiestAligned, longestAligned, publisher.DefaultHeartbeatJitter, writes, busiest, longest)
	if busiestAligned != agents {
		t.Errorf("without jitter, at most %d of %d writes in one second: the test no longer starts the fleet aligned", busiestAligned, agents)
	}
	if busiest > agents/3 {
		t.Errorf("with jitter, %d of %d agents wrote in one second: the heartbeats did not spread", busiest, agents)
	}
	if longest > publisher.DefaultHeartbeat+step {
		t.Errorf("a node went %v without a write, more than --heartbeat (%v)", longest, publisher.DefaultHeartbeat)
	}
}
