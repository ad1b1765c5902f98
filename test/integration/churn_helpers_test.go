// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/telesched/telesched/scheduler/estimate"
)

// The churn soak's simulated nodes: 16 cores, 10 % busy with their own
// work, on rackNode's straight curve (100 W idle to 900 W at full load,
// 50 W a core), sampled every churnInterval.
const (
	churnInterval     = 5 * time.Second
	churnCores        = 16
	churnBasePercent  = 10
	churnWattsPerCore = 50
	// churnMaxAge is the scheduler's --reservation-max-age in the soak:
	// short enough that two pods whose images take 50 s are started
	// after their reservations expired, long enough for every other pod
	// (pending up to 15 s, then a hold) to be shown by a sample first.
	churnMaxAge = 41 * time.Second
	// churnExpireTick is how late the book may expire a reservation after
	// its max age (estimate.ExpireInterval), plus the informer's lag.
	churnExpireTick = estimate.ExpireInterval + 200*time.Millisecond
	// churnReserveLead is how long before the test sees a pod's binding
	// the scheduler may have reserved it (its Reserve, then the binding
	// call, then the test's watch).
	churnReserveLead = 700 * time.Millisecond
)

// churnHold is the book's hold for the soak's interval.
var churnHold = estimate.Hold(churnInterval)

// churnLoad is a node's CPU utilization and watts with cores of pods'
// load on it: exactly its curve.
func churnLoad(cores float64) (percent, watts int32) {
	u := float64(churnBasePercent) + cores/churnCores*100
	return int32(math.Round(u)), int32(math.Round(100 + 800*u/100))
}

// churnPod is what the test knows of one pod: it plays the kubelet, so
// when the pod started is its own doing.
type churnPod struct {
	name           string
	cpuMilli, gpus int64
	// delay is how long its image takes to pull: it is marked running at
	// the first start slot that much after its binding.
	delay time.Duration
	// node and bound: where and when (the test's watch) it was bound;
	// scheduled is its PodScheduled condition's time (whole seconds),
	// which a restarted scheduler counts it from.
	node             string
	bound, scheduled time.Time
	// marked is when the test wrote it running; started is its
	// container's first startedAt (whole seconds). A container restart
	// writes a new startedAt but is no new start of the pod's load.
	marked, started time.Time
	restarts        int
	deleted         time.Time
}

// churnSample is one sample the test published for a node: taken is its
// sampleTime, observed when the API server had it (the scheduler's
// informer sees it a few milliseconds later), written the time its
// managed fields record (whole seconds: what a restarted scheduler's
// first view is observed at).
type churnSample struct {
	node                     string
	taken, observed, written time.Time
	cpuPercent, watts        int32
	cores                    float64
}

// churnTruth is the soak's ground truth: every pod's binding, start and
// end and every sample, as the test made them, and the scheduler's
// restarts. reserved replays them through the book's rules.
type churnTruth struct {
	mu       sync.Mutex
	pods     map[string]*churnPod
	samples  []*churnSample
	restarts []time.Time
}

func newChurnTruth() *churnTruth { return &churnTruth{pods: map[string]*churnPod{}} }

// load is the pods' load on node in a sample taken at taken: each pod
// marked running a whole interval before it (by its container's start,
// the kubelet's clock) and not deleted by then.
func (tr *churnTruth) load(node string, taken time.Time) float64 {
	var milli int64
	for _, p := range tr.pods {
		if p.node == node && !p.started.IsZero() && !taken.Before(p.started.Add(churnInterval)) &&
			(p.deleted.IsZero() || p.deleted.After(taken)) {
			milli += p.cpuMilli
		}
	}
	return float64(milli) / 1000
}

// The replay's events, in the order the book sees events of one instant.
const (
	evRestart = iota
	evBind
	evRun
	evDelete
	evSample
)

type churnEvent struct {
	at   time.Time
	kind int
	pod  *churnPod
	s    *churnSample
}

// churnView is a sample as one scheduler process observed it.
type churnView struct {
	s        *churnSample
	observed time.Time
}

// churnRes is a reservation in the replay. at is when it was made, known
// within [atLo, atHi].
type churnRes struct {
	pod        *churnPod
	atLo, atHi time.Time
	running    time.Time
	started    time.Time
	base       *churnView
}

// churnReserved is what the truth says a node's book holds at a moment.
type churnReserved struct {
	cpuMilli, gpus int64
	pods           []string
	// ambiguous says why the moment cannot be judged (an expiry due
	// within the expiry tick of it); empty when it can.
	ambiguous string
}

// reserved replays node's events up to at through the book's rules, as
// the scheduler's design states them (estimate.Book): a pod counts from
// its binding; once it runs, until a sample taken (sampleTime) a whole
// interval after its container started and observed a hold after it was
// seen running, or observed an interval after it ran when the sample's
// CPU rose by ShownFraction of what every running pod still counted
// requests above the earliest of their views when they were seen running
// (shownByJump); a pending pod at most churnMaxAge from its binding; a
// deleted one not at all. Readiness flaps, container restarts, label
// patches and pending pods' status updates are not events: they move
// nothing. A scheduler restart rebuilds the book from the pods then
// bound: pending ones from their PodScheduled time, running ones from
// their start, unless the node's newest sample, observed when its agent
// wrote it, came a hold after it. unbasedRebuild says whether a running
// pod so rebuilt has no view to measure its jump from (the scheduler
// listed its pods before its NodeTelemetry): the two can differ, and a
// moment they differ at is ambiguous.
func (tr *churnTruth) reserved(node string, at time.Time, unbasedRebuild bool) churnReserved {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var evs []churnEvent
	for _, r := range tr.restarts {
		if !r.After(at) {
			evs = append(evs, churnEvent{at: r, kind: evRestart})
		}
	}
	for _, p := range tr.pods {
		if p.node != node {
			continue
		}
		for _, e := range []churnEvent{{p.bound, evBind, p, nil}, {p.marked, evRun, p, nil}, {p.deleted, evDelete, p, nil}} {
			if !e.at.IsZero() && !e.at.After(at) {
				evs = append(evs, e)
			}
		}
	}
	for _, s := range tr.samples {
		if s.node == node && !s.observed.After(at) {
			evs = append(evs, churnEvent{at: s.observed, kind: evSample, s: s})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool {
		if !evs[i].at.Equal(evs[j].at) {
			return evs[i].at.Before(evs[j].at)
		}
		return evs[i].kind < evs[j].kind
	})

	res := map[string]*churnRes{}
	ended := map[string]bool{}
	var latest *churnView
	var lastSample *churnSample // the newest published, whichever process saw it
	expire := func(now time.Time) {
		for name, r := range res {
			if now.Sub(r.atHi) > churnMaxAge+churnExpireTick {
				delete(res, name)
			}
		}
	}
	for _, e := range evs {
		expire(e.at)
		switch e.kind {
		case evRestart:
			res, ended = map[string]*churnRes{}, map[string]bool{}
			latest = nil
			if lastSample != nil {
				latest = &churnView{s: lastSample, observed: lastSample.written}
			}
			for _, p := range tr.pods {
				if p.node != node || p.bound.IsZero() || p.bound.After(e.at) || (!p.deleted.IsZero() && !p.deleted.After(e.at)) {
					continue
				}
				r := &churnRes{pod: p, atLo: p.scheduled, atHi: p.scheduled}
				if !p.marked.IsZero() && !p.marked.After(e.at) {
					r.running, r.started = p.started, p.started
					if latest != nil && !latest.observed.Before(r.running.Add(churnHold)) {
						continue // its node's sample shows it already
					}
					if !unbasedRebuild {
						r.base = latest
					}
				}
				if e.at.Sub(r.atHi) > churnMaxAge {
					continue
				}
				res[p.name] = r
			}
		case evBind:
			if !ended[e.pod.name] {
				if _, ok := res[e.pod.name]; !ok {
					res[e.pod.name] = &churnRes{pod: e.pod, atLo: e.at.Add(-churnReserveLead), atHi: e.at}
				}
			}
		case evRun:
			if r, ok := res[e.pod.name]; ok {
				if r.running.IsZero() {
					r.running, r.started, r.base = e.at, e.pod.started, latest
				}
			} else if !ended[e.pod.name] {
				// Its reservation expired while it pulled its image: its
				// load is new to its node's samples, counted from now.
				res[e.pod.name] = &churnRes{pod: e.pod, atLo: e.at, atHi: e.at.Add(churnReserveLead), running: e.at, started: e.pod.started, base: latest}
			}
		case evDelete:
			delete(res, e.pod.name)
			ended[e.pod.name] = true
		case evSample:
			lastSample = e.s
			latest = &churnView{s: e.s, observed: e.at}
			jump := churnShownByJump(res, latest)
			for name, r := range res {
				if !r.running.IsZero() && churnTakenAfter(e.s, r) && (jump || !e.at.Before(r.running.Add(churnHold))) {
					delete(res, name)
				}
			}
		}
	}
	expire(at)
	var out churnReserved
	for name, r := range res {
		out.cpuMilli += r.pod.cpuMilli
		out.gpus += r.pod.gpus
		out.pods = append(out.pods, name)
		if due := r.atLo.Add(churnMaxAge); at.After(due) && out.ambiguous == "" {
			out.ambiguous = fmt.Sprintf("%s's reservation expires about now", name)
		}
	}
	slices.Sort(out.pods)
	return out
}

// churnTakenAfter: a sample taken less than an interval after the pod's
// container started cannot show it.
func churnTakenAfter(s *churnSample, r *churnRes) bool {
	return !s.taken.Before(r.started.Add(churnInterval))
}

// churnShownByJump is the book's early retirement: every running pod it
// counts was seen running an interval before the sample, which was taken
// an interval after each started, and the node's CPU rose from the
// earliest of their views by ShownFraction of what they request.
func churnShownByJump(res map[string]*churnRes, cur *churnView) bool {
	var base *churnView
	var milli int64
	for _, r := range res {
		if r.running.IsZero() {
			continue
		}
		if r.base == nil || cur.observed.Before(r.running.Add(churnInterval)) || !churnTakenAfter(cur.s, r) {
			return false
		}
		if base == nil || r.base.observed.Before(base.observed) {
			base = r.base
		}
		milli += r.pod.cpuMilli
	}
	if base == nil || milli <= 0 {
		return false
	}
	expected := float64(milli) / (churnCores * 1000) * 100
	return float64(cur.s.cpuPercent-base.s.cpuPercent) >= estimate.ShownFraction*expected
}

// unmeasured is the physical truth, for the report only: the CPU of the
// pods bound to node whose load the node's newest sample by at does not
// hold. The book counts more by design (a pod's load may show before its
// hold ends); how much more is reported.
func (tr *churnTruth) unmeasured(node string, at time.Time) int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var last *churnSample
	for _, s := range tr.samples {
		if s.node == node && !s.observed.After(at) {
			last = s
		}
	}
	var milli int64
	for _, p := range tr.pods {
		if p.node != node || p.bound.IsZero() || p.bound.After(at) || (!p.deleted.IsZero() && !p.deleted.After(at)) {
			continue
		}
		if last == nil || p.started.IsZero() || last.taken.Before(p.started.Add(churnInterval)) {
			milli += p.cpuMilli
		}
	}
	return milli
}

// churnScheduler is a telesched-scheduler process serving /metrics.
type churnScheduler struct {
	cmd    *exec.Cmd
	exited chan struct{}
	out    *syncBuffer
	url    string
}

// startChurnScheduler runs bin/telesched-scheduler with the deployed
// config and args, its metrics open on a free local port, and waits for
// its /healthz. The test stops it at its end if it still runs.
func startChurnScheduler(t *testing.T, binDir, kubeconfig string, args ...string) *churnScheduler {
	t.Helper()
	config := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(config, []byte(schedulerConfig(t, "")+"clientConnection:\n  kubeconfig: "+kubeconfig+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(freeAddress(t))
	if err != nil {
		t.Fatal(err)
	}
	s := &churnScheduler{out: &syncBuffer{}, exited: make(chan struct{}), url: "https://" + net.JoinHostPort(host, port)}
	base := append([]string{"--config=" + config, "--cert-dir=" + t.TempDir(),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics", "-v=4",
		"--bind-address=" + host, "--secure-port=" + port}, deployedFeatureGates(t)...)
	s.cmd = exec.Command(filepath.Join(binDir, "telesched-scheduler"), append(base, args...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(s.stop)
	waitReady(t, "the scheduler's /healthz", s.out, 60*time.Second, func() bool {
		resp, err := insecureClient.Get(s.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// stop interrupts the scheduler and waits for it to exit.
func (s *churnScheduler) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// churnGauges returns a metric family's gauge values by the value of label.
func churnGauges(fams map[string]*dto.MetricFamily, name, label string) map[string]float64 {
	out := map[string]float64{}
	f := fams[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// churnCounters returns a counter family's values by the value of label.
func churnCounters(fams map[string]*dto.MetricFamily, name, label string) map[string]float64 {
	out := map[string]float64{}
	if f := fams[name]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// churnStats are the soak's numbers for its closing note.
type churnStats struct {
	comparisons, skipped             int
	maxCPUMilli, maxGPUs             int64
	maxWatts, maxBudgetWatts         float64
	maxOvercountMilli, maxTruthMilli int64
	flaps, restarts, labels, pulls   int
	deletions, expiredStarts         int
	skippedWhy                       []string
	failures, badRatios              int
}

func (s *churnStats) skip(why string) {
	s.skipped++
	if len(s.skippedWhy) < 10 {
		s.skippedWhy = append(s.skippedWhy, why)
	}
}

func (s *churnStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d comparisons (%d skipped as ambiguous), largest error: CPU %dm, GPUs %d, watts %.3f W, rack budget watts %.3f W; "+
		"largest truth %dm; largest count beyond the physically unmeasured %dm; churn: %d readiness flaps, %d container restarts, "+
		"%d label patches, %d image-pull status updates, %d deletions, %d pods started after their reservation expired; "+
		"%d comparisons found a calibration ratio more than 10 %% from 1",
		s.comparisons, s.skipped, s.maxCPUMilli, s.maxGPUs, s.maxWatts, s.maxBudgetWatts, s.maxTruthMilli, s.maxOvercountMilli,
		s.flaps, s.restarts, s.labels, s.pulls, s.deletions, s.expiredStarts, s.badRatios)
	return b.String()
}
