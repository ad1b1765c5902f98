// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package registry builds the scheduler framework's registry of telesched's
// plugins (LoadAware, TopologyFit, EnergyAware, PowerBudget). Every plugin
// of every profile of one scheduler shares one Shared: a telemetry cache, a
// reservation book and the power domains over them, each started once for
// that scheduler against its API server. A process that builds several
// schedulers, as Kubernetes' scheduler_perf does (a new API server and
// scheduler per workload, with one registry), gets a Shared per scheduler;
// telesched-scheduler builds one.
package registry

import (
	"context"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/energyaware"
	"github.com/telesched/telesched/scheduler/plugins/loadaware"
	powerbudgetplugin "github.com/telesched/telesched/scheduler/plugins/powerbudget"
	"github.com/telesched/telesched/scheduler/plugins/topologyfit"
	"github.com/telesched/telesched/scheduler/powerbudget"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Shared is what the plugins of one scheduler share: the telemetry cache,
// the reservation book every plugin counts, and the PowerBudgets and their
// nodes.
type Shared struct {
	Cache   *telemetry.Cache
	Book    *estimate.Book
	Domains *powerbudget.Domains
}

// NewShared returns a Shared with the cache and book at their defaults;
// status, when not nil, runs the PowerBudget status writer on those options.
func NewShared(status *powerbudget.StatusOptions) *Shared {
	cache := telemetry.NewCache()
	book := estimate.NewBook(cache, estimate.DefaultOptions())
	return &Shared{Cache: cache, Book: book, Domains: powerbudget.NewDomains(cache, book, status)}
}

// RegisterMetrics registers the metrics of the cache, the book and the
// power domains with the legacy registry; later calls do nothing.
func RegisterMetrics() {
	telemetry.RegisterMetrics()
	estimate.RegisterMetrics()
	powerbudget.RegisterMetrics()
}

// Registry hands each scheduler its Shared. A scheduler is known by its
// handle's SharedInformerFactory, which every profile of a scheduler shares
// and no two schedulers do.
type Registry struct {
	newShared func() (*Shared, error)

	mu         sync.Mutex
	schedulers map[informers.SharedInformerFactory]*Shared
}

// New returns a registry that builds a scheduler's Shared with newShared
// when the first of its plugins is built, and forgets it when the
// scheduler's context ends. It registers the metrics (RegisterMetrics).
func New(newShared func() (*Shared, error)) *Registry {
	RegisterMetrics()
	return &Registry{newShared: newShared, schedulers: map[informers.SharedInformerFactory]*Shared{}}
}

// shared returns the Shared of the scheduler whose handle h is.
func (r *Registry) shared(ctx context.Context, h fwk.Handle) (*Shared, error) {
	key := h.SharedInformerFactory()
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.schedulers[key]; ok {
		return s, nil
	}
	s, err := r.newShared()
	if err != nil {
		return nil, err
	}
	r.schedulers[key] = s
	context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.schedulers, key)
	})
	return s, nil
}

// Shared returns the Shared of the scheduler whose informer factory is
// factory, or nil when none of its plugins has been built (or its context
// has ended).
func (r *Registry) Shared(factory informers.SharedInformerFactory) *Shared {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.schedulers[factory]
}

// Len is the number of schedulers the registry holds a Shared for.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.schedulers)
}

// Framework is the out-of-tree registry of the four plugins, as
// scheduler.WithFrameworkOutOfTreeRegistry and scheduler_perf take it.
func (r *Registry) Framework() frameworkruntime.Registry {
	factory := func(build func(*Shared) frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
		return func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			s, err := r.shared(ctx, h)
			if err != nil {
				return nil, err
			}
			return build(s)(ctx, args, h)
		}
	}
	return frameworkruntime.Registry{
		loadaware.Name: factory(func(s *Shared) frameworkruntime.PluginFactory { return loadaware.NewFactory(s.Cache, s.Book) }),
		topologyfit.Name: factory(func(s *Shared) frameworkruntime.PluginFactory {
			return topologyfit.NewFactory(s.Cache, s.Book, s.Domains)
		}),
		energyaware.Name: factory(func(s *Shared) frameworkruntime.PluginFactory { return energyaware.NewFactory(s.Cache, s.Book) }),
		powerbudgetplugin.Name: factory(func(s *Shared) frameworkruntime.PluginFactory {
			return powerbudgetplugin.NewFactory(s.Cache, s.Domains)
		}),
	}
}

// Options are the registry's plugins as options of
// app.NewSchedulerCommand.
func (r *Registry) Options() []app.Option {
	plugins := r.Framework()
	var opts []app.Option
	for _, name := range slices.Sorted(maps.Keys(plugins)) {
		opts = append(opts, app.WithPlugin(name, plugins[name]))
	}
	return opts
}
