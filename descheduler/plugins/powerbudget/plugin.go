// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package powerbudget is TeleschedPowerBudget, a descheduler plugin: a
// PowerBudget whose measured watts stay over its limit
// (budgetWatts − reserveWatts) for a sustained window loses the fewest
// pods of its nodes, by their marginal watts, that bring it back under,
// each only to a checked destination outside it and outside every other
// budget that is over.
package powerbudget

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/powerbudget"
)

// Name is the plugin's name in a descheduler profile.
const Name = "TeleschedPowerBudget"

// DefaultSustain is how long a budget must stay over before its pods go;
// as TeleschedThermal's, for the same reasons. --budget-sustain changes
// it.
const DefaultSustain = 2 * time.Minute

// Options are the plugin's settings.
type Options struct {
	// Sustain: see DefaultSustain. A budget's window is judged at each
	// cycle (its watts are a sum over nodes, read from a snapshot).
	Sustain time.Duration
	// MaxAge is PowerBudget's telemetryMaxAge.
	MaxAge time.Duration
}

// Plugin is TeleschedPowerBudget.
type Plugin struct {
	handle  frameworktypes.Handle
	domains *powerbudget.Domains
	book    *estimate.Book
	checker *descheduler.Checker
	gate    *descheduler.Gate
	opts    Options
	now     func() time.Time

	mu        sync.Mutex
	overSince map[string]time.Time // budget → first cycle seen over
}

var _ frameworktypes.DeschedulePlugin = &Plugin{}

// New returns the plugin.
func New(h frameworktypes.Handle, domains *powerbudget.Domains, book *estimate.Book, checker *descheduler.Checker, gate *descheduler.Gate, opts Options, now func() time.Time) *Plugin {
	return &Plugin{handle: h, domains: domains, book: book, checker: checker, gate: gate, opts: opts, now: now, overSince: map[string]time.Time{}}
}

// Name implements frameworktypes.Plugin.
func (p *Plugin) Name() string { return Name }

// Deschedule implements frameworktypes.DeschedulePlugin.
func (p *Plugin) Deschedule(ctx context.Context, _ []*v1.Node) *frameworktypes.Status {
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	now := p.now()
	snap := p.domains.Snapshot(now, p.opts.MaxAge)
	over := map[string]string{} // node → the over budget it is in
	seen := map[string]bool{}
	for i := range snap.Domains {
		dom := &snap.Domains[i]
		seen[dom.Name] = true
		if !overBudget(dom) {
			continue
		}
		for _, m := range dom.Members {
			over[m] = dom.Name
		}
	}
	p.mu.Lock()
	for name := range p.overSince {
		if !seen[name] {
			delete(p.overSince, name)
		}
	}
	p.mu.Unlock()
	for i := range snap.Domains {
		dom := &snap.Domains[i]
		p.mu.Lock()
		if !overBudget(dom) {
			delete(p.overSince, dom.Name)
			p.mu.Unlock()
			continue
		}
		since, ok := p.overSince[dom.Name]
		if !ok {
			since = now
			p.overSince[dom.Name] = now
		}
		p.mu.Unlock()
		if now.Sub(since) < p.opts.Sustain {
			logger.V(2).Info("Budget over, window not yet sustained", "budget", dom.Name, "overFor", now.Sub(since).Round(time.Second))
			continue
		}
		why := fmt.Sprintf("PowerBudget %s over for %s: measured %.0fW > limit %dW (budget %dW - reserve %dW)",
			dom.Name, now.Sub(since).Round(time.Second), dom.MeasuredWatts, dom.LimitWatts(), dom.BudgetWatts, dom.ReserveWatts)
		if p.shed(ctx, snap, dom, over, why) > 0 {
			p.mu.Lock()
			p.overSince[dom.Name] = now
			p.mu.Unlock()
		} else {
			// Nothing moved: no pod the evictor may evict (bare pods,
			// DaemonSets, local storage, priority, cool-down) freed
			// watts with a checked destination outside the budget.
			logger.Info("Budget over, no pod to evict", "budget", dom.Name, "reason", why)
		}
	}
	return nil
}

// shed evicts the fewest pods of dom's metered nodes whose marginal watts
// bring it under, and returns how many it acted on.
func (p *Plugin) shed(ctx context.Context, snap *powerbudget.Snapshot, dom *powerbudget.Domain, over map[string]string, why string) int {
	ev := p.handle.Evictor()
	var moves []descheduler.Move
	for _, m := range dom.Members {
		ns := snap.Node(m)
		if ns == nil || !ns.Metered {
			continue
		}
		pods, err := p.handle.GetPodsAssignedToNodeFunc()(m, func(pod *v1.Pod) bool {
			return ev.Filter(pod) && !p.gate.Cooling(pod)
		})
		if err != nil {
			continue
		}
		for _, pod := range pods {
			// What the pod keeps busy: a service its requests over the
			// node's speed (estimate.Busy).
			d := p.book.Busy(ns.View, pod)
			frees := func(gone []*v1.Pod) (float64, bool) {
				less := d.CPUMilli
				for _, g := range gone {
					less += p.book.Busy(ns.View, g).CPUMilli
				}
				w, ok := p.book.PodWatts(ns.View, d, estimate.Demand{CPUMilli: -less})
				return w.Mean, ok
			}
			w, ok := frees(nil)
			if !ok {
				continue
			}
			moves = append(moves, descheduler.Move{Pod: pod, Frees: w, Refit: func(gone []*v1.Pod) float64 { w, _ := frees(gone); return w }})
		}
	}
	// Shed 1 mW more than over, so the sum ends under.
	need := dom.MeasuredWatts - float64(dom.LimitWatts()) + 0.001
	outside := func(node string) string {
		if b, ok := over[node]; ok {
			return "node in PowerBudget " + b + ", over"
		}
		return ""
	}
	return p.gate.Shed(ctx, ev, p.handle.SharedInformerFactory().Core().V1().Nodes().Lister(), Name, why, moves, need, 0,
		func(ctx context.Context, pod *v1.Pod, planned map[string][]*v1.Pod) (string, string) {
			return p.checker.DestinationOutside(ctx, pod, planned, outside)
		})
}

// overBudget is whether dom's measured watts are over its limit. The
// watts reserved for pods placed since their nodes' samples do not count:
// the scheduler reserves them to keep a burst out, but a descheduler that
// counted them would evict for watts no meter has shown (and, just
// started, its book holds every running pod it sees as newly placed).
func overBudget(dom *powerbudget.Domain) bool {
	return dom.MeasuredWatts > float64(dom.LimitWatts())
}
