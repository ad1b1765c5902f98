// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package thermal is TeleschedThermal, a descheduler plugin: a node that
// stays at or past its limit − margin (measured, or predicted steady with
// its pods) for a sustained window loses the fewest pods, by their
// marginal watts, that bring it back under, each only to a checked
// destination.
package thermal

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/internal/heat"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Name is the plugin's name in a descheduler profile.
const Name = "TeleschedThermal"

// DefaultSustain is how long a node must stay at or past limit − margin
// before it loses pods: several of the agent's samples (5 s by default)
// and two cycles at the default --interval, so a spike that passes does
// not move pods (descheduling on instantaneous readings is what the
// descheduler's maintainers call unwise, descheduler PR #1092), while a
// failed fan, which keeps a node hot for good, is acted on within minutes.
// --thermal-sustain changes it.
const DefaultSustain = 2 * time.Minute

// Options are the plugin's settings.
type Options struct {
	// MarginMilli and AbsoluteMilli are EnergyAware's thermalMarginCelsius
	// and absoluteLimitCelsius, in milli-°C: the same rule of "too hot".
	MarginMilli, AbsoluteMilli int64
	// Sustain: see DefaultSustain.
	Sustain time.Duration
	// MaxAge is how old a node's telemetry may be and still count; a
	// node with stale telemetry is left alone.
	MaxAge time.Duration
}

// Plugin is TeleschedThermal.
type Plugin struct {
	handle  frameworktypes.Handle
	cache   *telemetry.Cache
	book    *estimate.Book
	checker *descheduler.Checker
	gate    *descheduler.Gate
	opts    Options

	mu       sync.Mutex
	hotSince map[string]time.Time // node → when it was first seen hot, by the cache's clock
}

var _ frameworktypes.DeschedulePlugin = &Plugin{}

// New returns the plugin. It watches every sample the cache sees, so a
// node that cools between two cycles restarts its window.
func New(h frameworktypes.Handle, cache *telemetry.Cache, book *estimate.Book, checker *descheduler.Checker, gate *descheduler.Gate, opts Options) *Plugin {
	p := &Plugin{handle: h, cache: cache, book: book, checker: checker, gate: gate, opts: opts, hotSince: map[string]time.Time{}}
	cache.Watch(func(name string, _, cur *telemetry.Node) {
		if cur == nil {
			p.mu.Lock()
			delete(p.hotSince, name)
			p.mu.Unlock()
			return
		}
		p.observe(cur)
	})
	return p
}

// Name implements frameworktypes.Plugin.
func (p *Plugin) Name() string { return Name }

// Judgement is what the plugin makes of a node's telemetry.
type Judgement struct {
	// Hot: measured headroom <= margin, or predicted steady temperature
	// with its pods >= limit − margin.
	Hot bool
	// NeedWatts is how many watts the node must shed for its predicted
	// steady temperature to fall under limit − margin; 0 when the node
	// has no thermal model or the prediction is under (hot by its
	// measurement alone): then one pod is evicted per window.
	NeedWatts float64
	Why       string
}

// Judge applies the rule to node n: EnergyAware's measured "too hot"
// (heat.Effective against the margin) and its prediction (estimate
// Book.Heat: the node's thermal model at its CPU-side watts).
func Judge(n *telemetry.Node, book *estimate.Book, marginMilli, absoluteMilli int64) Judgement {
	var j Judgement
	if n.HasThermal {
		if h, _, ok := heat.Effective(n.HasHeadroom, n.HeadroomMilli, n.HasUnlimited, n.UnlimitedMilli, absoluteMilli); ok && h <= marginMilli {
			j.Hot = true
			j.Why = fmt.Sprintf("headroom %s <= margin %s", heat.Celsius(h), heat.Celsius(marginMilli))
		}
	}
	h := book.Heat(n, estimate.Demand{}, estimate.Demand{})
	if h.Predicted && h.SteadyMilli >= h.LimitMilli-marginMilli {
		t := &n.Models.Thermal
		j.Hot = true
		if t.MilliPerWatt > 0 {
			// Steady(w) = ambient + mpw·w < limit − margin
			// ⇔ w < (limit − margin − ambient)/mpw; shed 1 m°C more.
			target := float64(h.LimitMilli-marginMilli-t.AmbientMilli-1) / float64(t.MilliPerWatt)
			j.NeedWatts = math.Max(0, h.Watts-target)
		}
		pred := fmt.Sprintf("predicted steady %s at %.0fW >= limit %s - margin %s", heat.Celsius(h.SteadyMilli), h.Watts, heat.Celsius(h.LimitMilli), heat.Celsius(marginMilli))
		if j.Why == "" {
			j.Why = pred
		} else {
			j.Why += "; " + pred
		}
	}
	return j
}

// observe starts or ends a node's hot window from a sample.
func (p *Plugin) observe(n *telemetry.Node) bool {
	j := Judge(n, p.book, p.opts.MarginMilli, p.opts.AbsoluteMilli)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !j.Hot {
		delete(p.hotSince, n.Name)
		return false
	}
	if _, ok := p.hotSince[n.Name]; !ok {
		at := n.Observed
		if at.IsZero() {
			at = p.cache.Now()
		}
		p.hotSince[n.Name] = at
	}
	return true
}

// restart begins a node's window again after pods left it: its sensor
// takes its time constant to settle, and more pods go only if it is
// still hot a whole window later.
func (p *Plugin) restart(node string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.hotSince[node]; ok {
		p.hotSince[node] = now
	}
}

// Deschedule implements frameworktypes.DeschedulePlugin.
func (p *Plugin) Deschedule(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	now := p.cache.Now()
	hot := 0
	for _, node := range nodes {
		n, ok := p.cache.Get(node.Name)
		if !ok || !n.Fresh(now, p.opts.MaxAge) {
			continue
		}
		if !p.observe(n) {
			continue
		}
		hot++
		p.mu.Lock()
		since := p.hotSince[node.Name]
		p.mu.Unlock()
		if now.Sub(since) < p.opts.Sustain {
			logger.V(2).Info("Node hot, window not yet sustained", "node", klog.KObj(node), "hotFor", now.Sub(since).Round(time.Second), "sustain", p.opts.Sustain)
			continue
		}
		j := Judge(n, p.book, p.opts.MarginMilli, p.opts.AbsoluteMilli)
		why := fmt.Sprintf("node %s at or past limit - margin for %s: %s", node.Name, now.Sub(since).Round(time.Second), j.Why)
		if p.shed(ctx, node, n, j, why) > 0 {
			p.restart(node.Name, now)
		}
	}
	descheduler.SetHotNodes(hot)
	return nil
}

// shed evicts the fewest pods of node that bring it under (one when the
// need is unknown) and returns how many it acted on (evicted or, in
// dry-run, reported).
func (p *Plugin) shed(ctx context.Context, node *v1.Node, n *telemetry.Node, j Judgement, why string) int {
	ev := p.handle.Evictor()
	pods, err := p.handle.GetPodsAssignedToNodeFunc()(node.Name, func(pod *v1.Pod) bool {
		return ev.Filter(pod) && !p.gate.Cooling(pod)
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing pods", "node", klog.KObj(node))
		return 0
	}
	moves := make([]descheduler.Move, 0, len(pods))
	for _, pod := range pods {
		// What the pod keeps busy: a service its requests over the
		// node's speed (estimate.Busy).
		d := p.book.Busy(n, pod)
		// What the node's curve drops by without the pod and those
		// chosen before it; no power curve: rank by CPU.
		frees := func(gone []*v1.Pod) float64 {
			less := d.CPUMilli
			for _, g := range gone {
				less += p.book.Busy(n, g).CPUMilli
			}
			if w, ok := p.book.PodWatts(n, d, estimate.Demand{CPUMilli: -less}); ok {
				return w.Mean
			}
			return float64(d.CPUMilli) / 1000
		}
		moves = append(moves, descheduler.Move{Pod: pod, Frees: frees(nil), Refit: frees})
	}
	need, limit := j.NeedWatts, 0
	if need <= 0 {
		// Need unknown: one pod, the one that frees most.
		need, limit = math.SmallestNonzeroFloat64, 1
	}
	return p.gate.Shed(ctx, ev, p.handle.SharedInformerFactory().Core().V1().Nodes().Lister(), Name, why, moves, need, limit, p.checker.Destination)
}
