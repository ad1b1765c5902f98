// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package thermal is TeleschedThermal, a descheduler plugin: a node that
// stays at or past its limit − margin (measured, or predicted steady with
// its pods) for a sustained window loses the fewest pods, by their
// marginal watts, that bring it back under, each only to a checked
// destination; a GPU that stays at or past its slowdown temperature −
// margin loses, each window, the pod that frees most of its watts among
// the pods known to hold it (GPUHolders).
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
	// GPUMarginMilli is EnergyAware's gpuSlowdownMarginCelsius, in
	// milli-°C: a GPU at or past its slowdown temperature less it is hot
	// (GPUHot).
	GPUMarginMilli int64
	// Sustain: see DefaultSustain.
	Sustain time.Duration
	// MaxAge is how old a node's telemetry may be and still count; a
	// node with stale telemetry is left alone.
	MaxAge time.Duration
	// Chooses, when set, says which pods the plugin may choose beside the
	// evictor's rules (the policy's namespaces and schedulerNames).
	Chooses func(*v1.Pod) bool
}

// Plugin is TeleschedThermal.
type Plugin struct {
	handle frameworktypes.Handle
	cache  *telemetry.Cache
	book   *estimate.Book
	sim    *descheduler.Simulator
	gate   *descheduler.Gate
	opts   Options

	mu sync.Mutex
	// windows are the nodes hot now, by the cache's clock.
	windows map[string]window
	// evictedAt is when pods last left a node, until a sample taken after
	// it comes: until then the node's samples are not evidence.
	evictedAt map[string]time.Time
	// ledSince is when this replica started leading (Reset): no window
	// starts before it.
	ledSince time.Time
	// gpuWindows and gpuEvictedAt are windows and evictedAt per GPU: by
	// node, then by GPU UUID.
	gpuWindows   map[string]map[string]window
	gpuEvictedAt map[string]map[string]time.Time
	// unpinned are the hot GPUs, by node and UUID, whose window was
	// sustained while no pod was known to hold them: said once a window.
	unpinned map[string]map[string]bool
}

// window is a node's hot spell: since its first hot sample, through its
// last.
type window struct {
	since time.Time
	last  *telemetry.Node
}

var _ frameworktypes.DeschedulePlugin = &Plugin{}

// New returns the plugin. It watches every sample the cache sees, so a
// node that cools between two cycles restarts its window.
func New(h frameworktypes.Handle, cache *telemetry.Cache, book *estimate.Book, sim *descheduler.Simulator, gate *descheduler.Gate, opts Options) *Plugin {
	p := &Plugin{handle: h, cache: cache, book: book, sim: sim, gate: gate, opts: opts, windows: map[string]window{}, evictedAt: map[string]time.Time{},
		gpuWindows: map[string]map[string]window{}, gpuEvictedAt: map[string]map[string]time.Time{}, unpinned: map[string]map[string]bool{}}
	cache.Watch(func(name string, _, cur *telemetry.Node) {
		if cur == nil {
			p.mu.Lock()
			delete(p.windows, name)
			delete(p.evictedAt, name)
			delete(p.gpuWindows, name)
			delete(p.gpuEvictedAt, name)
			delete(p.unpinned, name)
			p.mu.Unlock()
			return
		}
		p.observe(cur, cache.Now())
		p.observeGPUs(cur, cache.Now())
	})
	return p
}

// Reset forgets every window: a replica that starts leading judges nodes
// on what it sees from then on, not on samples it watched as a standby
// while another replica evicted.
func (p *Plugin) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.windows)
	clear(p.gpuWindows)
	clear(p.unpinned)
	p.ledSince = p.cache.Now()
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
// Book.Heat: the node's thermal model at its CPU-side watts). A node
// whose heat is not known (heatKnown false: its thermal source failed and
// the reading it holds is older than the cache's thermal hold,
// telemetry.Node.ThermalKnown) is not hot: EnergyAware no longer counts
// that reading, and neither does an eviction.
func Judge(n *telemetry.Node, book *estimate.Book, marginMilli, absoluteMilli int64, heatKnown bool) Judgement {
	var j Judgement
	if !heatKnown {
		j.Why = "heat unknown: " + n.ThermalFailed
		return j
	}
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

// judge is Judge at now, with the cache's thermal hold.
func (p *Plugin) judge(n *telemetry.Node, now time.Time) Judgement {
	return Judge(n, p.book, p.opts.MarginMilli, p.opts.AbsoluteMilli, n.ThermalKnown(now, p.cache.ThermalHold()))
}

// observe starts, continues or ends a node's hot window from a sample:
// only a sample taken after the node's last eviction counts, and one that
// comes after a gap (the window's last sample stale by then) starts the
// window again.
func (p *Plugin) observe(n *telemetry.Node, now time.Time) bool {
	j := p.judge(n, now)
	p.mu.Lock()
	defer p.mu.Unlock()
	if at, ok := p.evictedAt[n.Name]; ok {
		if !descheduler.SampledAfter(n, at) {
			delete(p.windows, n.Name)
			return false
		}
		delete(p.evictedAt, n.Name)
	}
	if !j.Hot {
		delete(p.windows, n.Name)
		return false
	}
	p.windows[n.Name] = p.extend(p.windows[n.Name], n, now)
	return true
}

// extend is window w, continued by sample n: started at n's arrival
// (not before this replica led) when w is new or its last sample went
// stale before n came. The caller holds mu.
func (p *Plugin) extend(w window, n *telemetry.Node, now time.Time) window {
	at := n.Observed
	if at.IsZero() {
		at = now
	}
	if at.Before(p.ledSince) {
		at = p.ledSince
	}
	if w.last == nil || !w.last.Fresh(at, p.opts.MaxAge) {
		w.since = at
	}
	w.last = n
	return w
}

// evicted ends a node's window when pods left it: its sensor takes its
// time constant to settle, and more pods go only if samples taken after
// these left show it hot for a whole window again.
func (p *Plugin) evicted(node string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.windows, node)
	p.evictedAt[node] = now
}

// Deschedule implements frameworktypes.DeschedulePlugin.
func (p *Plugin) Deschedule(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	now := p.cache.Now()
	hot := 0
	for _, node := range nodes {
		n, ok := p.cache.Get(node.Name)
		if !ok || !n.Fresh(now, p.opts.MaxAge) {
			// Stale: no evidence; a sample after the gap starts anew.
			p.mu.Lock()
			delete(p.windows, node.Name)
			delete(p.gpuWindows, node.Name)
			p.mu.Unlock()
			continue
		}
		if p.node(ctx, node, n, now) {
			hot++
		}
		p.gpus(ctx, node, n, now)
	}
	descheduler.SetHotNodes(hot)
	return nil
}

// node judges node by its hottest sensor, and sheds its pods when its
// window is sustained; it reports whether the node is hot.
func (p *Plugin) node(ctx context.Context, node *v1.Node, n *telemetry.Node, now time.Time) bool {
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	if !p.observe(n, now) {
		return false
	}
	p.mu.Lock()
	since := p.windows[node.Name].since
	p.mu.Unlock()
	if now.Sub(since) < p.opts.Sustain {
		logger.V(2).Info("Node hot, window not yet sustained", "node", klog.KObj(node), "hotFor", now.Sub(since).Round(time.Second), "sustain", p.opts.Sustain)
		return true
	}
	j := p.judge(n, now)
	// The sample it is decided on, so an Event says what evidence
	// moved the pod.
	why := fmt.Sprintf("node %s at or past limit - margin for %s: %s (sample taken %s, seen %s ago)", node.Name, now.Sub(since).Round(time.Second), j.Why,
		n.SampleTime.UTC().Format(descheduler.SampleTimeLayout), now.Sub(n.Observed).Round(time.Second))
	if len(p.shed(ctx, node, n, j, why)) > 0 {
		p.evicted(node.Name, now)
	}
	return true
}

// Frees is what pod's leaving node n cools its sensor by, in the watts of
// the node's thermal model, once the pods gone have left: the CPU side of
// its marginal watts on the node's power curve. The sensor is the node's
// hottest (hwmon, thermal zones: CPU packages, board), which a GPU's watts
// reach only through the air; a GPU's heat is its own, which NVML
// reports and the plugin judges per GPU (gpus). A pod's load is its requests
// over the node's speed (estimate.Book.Busy): the agent measures no
// per-pod use. A node without a power curve: its CPUs, as watts.
func Frees(book *estimate.Book, n *telemetry.Node, pod *v1.Pod, gone []*v1.Pod) float64 {
	d := book.Busy(n, pod).CPUOnly()
	if w, ok := descheduler.PodFrees(book, n, d, gone); ok {
		return w
	}
	return float64(d.CPUMilli) / 1000
}

// shed evicts the fewest pods of node that bring it under (one when the
// need is unknown) and returns those it acted on (evicted or, in
// dry-run, reported).
func (p *Plugin) shed(ctx context.Context, node *v1.Node, n *telemetry.Node, j Judgement, why string) []descheduler.Move {
	ev := p.handle.Evictor()
	pods, err := p.handle.GetPodsAssignedToNodeFunc()(node.Name, p.movable)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing pods", "node", klog.KObj(node))
		return nil
	}
	moves := make([]descheduler.Move, 0, len(pods))
	for _, pod := range pods {
		// What the pod keeps busy: a service its requests over the
		// node's speed (estimate.Busy).
		frees := func(gone []*v1.Pod) float64 { return Frees(p.book, n, pod, gone) }
		moves = append(moves, descheduler.Move{Pod: pod, Frees: frees(nil), Refit: frees})
	}
	need, limit := j.NeedWatts, 0
	if need <= 0 {
		// Need unknown: one pod, the one that frees most.
		need, limit = math.SmallestNonzeroFloat64, 1
	}
	return p.gate.Shed(ctx, ev, p.sim, Name, why, moves, need, limit, nil)
}

// movable reports whether the plugin may choose pod: the evictor lets it
// go, it is not cooling down, and the policy chooses it.
func (p *Plugin) movable(pod *v1.Pod) bool {
	return p.handle.Evictor().Filter(pod) && !p.gate.Cooling(pod) && (p.opts.Chooses == nil || p.opts.Chooses(pod))
}
