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
	"cmp"
	"context"
	"fmt"
	"slices"
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
	// Chooses: see thermal.Options.
	Chooses func(*v1.Pod) bool
}

// Plugin is TeleschedPowerBudget.
type Plugin struct {
	handle  frameworktypes.Handle
	domains *powerbudget.Domains
	book    *estimate.Book
	sim     *descheduler.Simulator
	gate    *descheduler.Gate
	opts    Options
	now     func() time.Time

	mu        sync.Mutex
	overSince map[string]time.Time // budget → first cycle seen over
	// evictedAt is when pods last left a node, until a sample taken after
	// it comes: until then its watts are not evidence.
	evictedAt map[string]time.Time
}

var _ frameworktypes.DeschedulePlugin = &Plugin{}

// New returns the plugin.
func New(h frameworktypes.Handle, domains *powerbudget.Domains, book *estimate.Book, sim *descheduler.Simulator, gate *descheduler.Gate, opts Options, now func() time.Time) *Plugin {
	return &Plugin{handle: h, domains: domains, book: book, sim: sim, gate: gate, opts: opts, now: now,
		overSince: map[string]time.Time{}, evictedAt: map[string]time.Time{}}
}

// Name implements frameworktypes.Plugin.
func (p *Plugin) Name() string { return Name }

// Reset forgets every window: see thermal.Plugin.Reset.
func (p *Plugin) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.overSince)
}

// evidence is what the descheduler judges a budget by: the watts its
// members were measured drawing, fresh (within telemetryMaxAge, or held
// within the cache's power hold while a sample lacks them) and taken
// after pods last left them. A member without such watts adds nothing:
// the scheduler counts its last watts or the budget's unmeteredNodeWatts
// to stay careful, but an eviction needs watts a meter showed. The sum
// is a lower bound of the budget's draw; missing names the members left
// out, and oldest is when the oldest sample counted was taken.
func (p *Plugin) evidence(snap *powerbudget.Snapshot, dom *powerbudget.Domain) (watts float64, missing []string, oldest time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range dom.Members {
		ns := snap.Node(m)
		if ns == nil || ns.View == nil || !ns.FreshPower {
			missing = append(missing, m+" (no fresh watts)")
			continue
		}
		if at, ok := p.evictedAt[m]; ok {
			if !descheduler.SampledAfter(ns.View, at) {
				missing = append(missing, m+" (no sample since pods left it)")
				continue
			}
			delete(p.evictedAt, m)
		}
		watts += ns.Watts
		if t := ns.View.SampleTime; !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	return watts, missing, oldest
}

// Deschedule implements frameworktypes.DeschedulePlugin. Budgets are
// judged innermost first (fewest members); a budget whose nodes lost pods
// this cycle, for a budget inside it, sheds nothing more this cycle: a
// rack inside a row, both over because of one node, loses the pods that
// bring the rack under, and the row is judged again on samples taken
// after they left.
func (p *Plugin) Deschedule(ctx context.Context, _ []*v1.Node) *frameworktypes.Status {
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	now := p.now()
	snap := p.domains.Snapshot(now, p.opts.MaxAge)
	type judged struct {
		dom     *powerbudget.Domain
		watts   float64
		missing []string
		oldest  time.Time
	}
	var overs []judged
	over := map[string]string{} // node → the over budget it is in
	seen := map[string]bool{}
	for i := range snap.Domains {
		dom := &snap.Domains[i]
		seen[dom.Name] = true
		w, missing, oldest := p.evidence(snap, dom)
		if w <= float64(dom.LimitWatts()) {
			p.mu.Lock()
			delete(p.overSince, dom.Name)
			p.mu.Unlock()
			if dom.MeasuredWatts > float64(dom.LimitWatts()) {
				logger.V(2).Info("Budget over only by watts no meter showed fresh: no eviction", "budget", dom.Name,
					"measuredWatts", dom.MeasuredWatts, "evidenceWatts", w, "limitWatts", dom.LimitWatts(), "without", missing)
			}
			continue
		}
		overs = append(overs, judged{dom, w, missing, oldest})
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
	slices.SortFunc(overs, func(a, b judged) int {
		if c := cmp.Compare(len(a.dom.Members), len(b.dom.Members)); c != 0 {
			return c
		}
		return cmp.Compare(a.dom.Name, b.dom.Name)
	})
	freed := map[string]float64{} // budget → watts freed this cycle from its nodes
	for _, o := range overs {
		dom := o.dom
		p.mu.Lock()
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
		if freed[dom.Name] > 0 {
			// A budget inside it shed pods from its nodes this cycle: its
			// samples of them were taken before they left, so it is judged
			// again, for a whole window, on samples taken after (as a
			// budget is after its own evictions), never shed twice on one
			// reading of an excess that estimates, off by a few watts,
			// leave a watt or two of.
			logger.Info("Budget over, but pods left its nodes this cycle for a budget inside it: judged again on samples taken after they left",
				"budget", dom.Name, "evidenceWatts", o.watts, "freedWatts", freed[dom.Name], "limitWatts", dom.LimitWatts())
			p.mu.Lock()
			p.overSince[dom.Name] = now
			p.mu.Unlock()
			continue
		}
		// Shed 1 mW more than over, so the sum ends under.
		need := o.watts - float64(dom.LimitWatts()) + 0.001
		why := fmt.Sprintf("PowerBudget %s over for %s: measured %.0fW > limit %dW (budget %dW - reserve %dW)",
			dom.Name, now.Sub(since).Round(time.Second), o.watts, dom.LimitWatts(), dom.BudgetWatts, dom.ReserveWatts)
		if !o.oldest.IsZero() {
			why += " (samples taken since " + o.oldest.UTC().Format(descheduler.SampleTimeLayout) + ")"
		}
		acted := p.shed(ctx, snap, dom, over, why, need)
		if len(acted) == 0 {
			// Nothing moved: no pod the evictor may evict (bare pods,
			// DaemonSets, local storage, priority, cool-down) freed
			// watts with a checked destination outside the budget.
			logger.Info("Budget over, no pod to evict", "budget", dom.Name, "reason", why)
			continue
		}
		p.mu.Lock()
		p.overSince[dom.Name] = now
		for _, m := range acted {
			node := m.Pod.Spec.NodeName
			p.evictedAt[node] = now
			if ns := snap.Node(node); ns != nil {
				for _, i := range ns.Domains {
					freed[snap.Domains[i].Name] += m.Frees
				}
			}
		}
		p.mu.Unlock()
	}
	return nil
}

// shed evicts the fewest pods of dom's metered nodes whose marginal watts
// reach need, and returns those it acted on.
func (p *Plugin) shed(ctx context.Context, snap *powerbudget.Snapshot, dom *powerbudget.Domain, over map[string]string, why string, need float64) []descheduler.Move {
	ev := p.handle.Evictor()
	var moves []descheduler.Move
	for _, m := range dom.Members {
		ns := snap.Node(m)
		if ns == nil || !ns.Metered {
			continue
		}
		pods, err := p.handle.GetPodsAssignedToNodeFunc()(m, func(pod *v1.Pod) bool {
			return ev.Filter(pod) && !p.gate.Cooling(pod) && (p.opts.Chooses == nil || p.opts.Chooses(pod))
		})
		if err != nil {
			continue
		}
		for _, pod := range pods {
			// What the pod keeps busy: a service its requests over the
			// node's speed (estimate.Busy).
			d := p.book.Busy(ns.View, pod)
			frees := func(gone []*v1.Pod) (float64, bool) { return descheduler.PodFrees(p.book, ns.View, d, gone) }
			w, ok := frees(nil)
			if !ok {
				continue
			}
			moves = append(moves, descheduler.Move{Pod: pod, Frees: w, Refit: func(gone []*v1.Pod) float64 { w, _ := frees(gone); return w }})
		}
	}
	outside := func(node string) string {
		if b, ok := over[node]; ok {
			return "node in PowerBudget " + b + ", over"
		}
		return ""
	}
	return p.gate.Shed(ctx, ev, p.sim, Name, why, moves, need, 0, outside)
}
