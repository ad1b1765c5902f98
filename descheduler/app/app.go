// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app wires telesched-descheduler: upstream's descheduler profile
// (sigs.k8s.io/descheduler profile.NewProfile) with upstream's
// DefaultEvictor and PodEvictor and telesched's plugins, run one cycle per
// --interval. See package descheduler for why the wiring is ours.
package app

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	podutil "sigs.k8s.io/descheduler/pkg/descheduler/pod"
	"sigs.k8s.io/descheduler/pkg/features"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/defaultevictor"
	"sigs.k8s.io/descheduler/pkg/framework/profile"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/descheduler"
	budgetplugin "github.com/telesched/telesched/descheduler/plugins/powerbudget"
	"github.com/telesched/telesched/descheduler/plugins/thermal"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/powerbudget"
	"github.com/telesched/telesched/scheduler/registry"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Defaults of the descheduler's flags.
const (
	// DefaultInterval is the time between two cycles: a few of the
	// agent's samples, and short beside DefaultSustain, so a node is
	// acted on within a cycle of its window ending.
	DefaultInterval = time.Minute
	// DefaultDryRun: a new install only reports (Events
	// TeleschedWouldEvict, result="would_evict") until an operator turns
	// eviction on.
	DefaultDryRun = true
	// DefaultMaxEvictionsPerNode bounds the pods one node loses per cycle;
	// with DefaultMaxEvictionsPerCycle it bounds the damage a wrong
	// reading can do.
	DefaultMaxEvictionsPerNode uint = 2
	// DefaultMaxEvictionsPerCycle bounds the pods the cluster loses per
	// cycle.
	DefaultMaxEvictionsPerCycle uint = 10
	// DefaultPriorityThreshold: pods at or above it are never evicted;
	// upstream's system-critical priority (system-cluster-critical).
	DefaultPriorityThreshold int32 = 2000000000
	// ProfileName is the descheduler profile's name, in upstream's
	// eviction annotations.
	ProfileName = "telesched"
)

// Options are the descheduler's settings (its flags).
type Options struct {
	Interval             time.Duration
	DryRun               bool
	MaxEvictionsPerNode  uint
	MaxEvictionsPerCycle uint
	Cooldown             time.Duration
	ThermalSustain       time.Duration
	BudgetSustain        time.Duration
	PriorityThreshold    int32
	// AgentNamespace is where the node agent's DaemonSets and pods are:
	// a node whose agent pod is Ready has fresh telemetry, as for the
	// scheduler (--telemetry-agent-namespace).
	AgentNamespace string
	// CacheSyncTimeout bounds the wait for the telemetry cache's first
	// list.
	CacheSyncTimeout time.Duration
	// LeaderElection: only the replica holding the Lease runs cycles.
	LeaderElection LeaderElection
	// ThermalHold, PowerHold and ReservationMaxAge are the scheduler's
	// --telemetry-thermal-hold, --telemetry-power-hold and
	// --reservation-max-age: how long a failed sensor's last reading
	// counts, how long a node's last watts count while its samples lack
	// them, and how long a bound pod counts toward its node before a
	// sample shows it. Set them as the scheduler's.
	ThermalHold, PowerHold, ReservationMaxAge time.Duration
	// SchedulerConfig is the scheduler's KubeSchedulerConfiguration file,
	// SchedulerProfile the profile the descheduler checks destinations
	// with and whose LoadAware and EnergyAware args it judges nodes by
	// (descheduler.ProfileArgs); empty SchedulerConfig: the configuration
	// telesched-scheduler ships.
	SchedulerConfig, SchedulerProfile string
	// Policy is the policy file (descheduler.LoadPolicy): the evictor's
	// settings and the pods each plugin may choose; empty:
	// descheduler.DefaultPolicy.
	Policy string
}

// DefaultOptions are the documented defaults.
func DefaultOptions() Options {
	return Options{
		Interval: DefaultInterval, DryRun: DefaultDryRun,
		MaxEvictionsPerNode: DefaultMaxEvictionsPerNode, MaxEvictionsPerCycle: DefaultMaxEvictionsPerCycle,
		Cooldown: descheduler.DefaultCooldown, ThermalSustain: thermal.DefaultSustain, BudgetSustain: budgetplugin.DefaultSustain,
		PriorityThreshold: DefaultPriorityThreshold, AgentNamespace: telemetry.DefaultAgentNamespace, CacheSyncTimeout: time.Minute,
		LeaderElection: DefaultLeaderElection(), SchedulerProfile: descheduler.DefaultSchedulerProfile,
		ThermalHold: telemetry.DefaultThermalHold, PowerHold: telemetry.DefaultPowerHold, ReservationMaxAge: estimate.DefaultMaxReservationAge,
	}
}

// Validate names the flag and value of the first bad setting.
func (o Options) Validate() error {
	switch {
	case o.Interval <= 0:
		return fmt.Errorf("--interval must be > 0, got %s", o.Interval)
	case o.MaxEvictionsPerNode == 0:
		return fmt.Errorf("--max-evictions-per-node-per-cycle must be >= 1, got %d", o.MaxEvictionsPerNode)
	case o.MaxEvictionsPerCycle == 0:
		return fmt.Errorf("--max-evictions-per-cycle must be >= 1, got %d", o.MaxEvictionsPerCycle)
	case o.Cooldown < 0:
		return fmt.Errorf("--cooldown must be >= 0, got %s", o.Cooldown)
	case o.ThermalSustain < 0:
		return fmt.Errorf("--thermal-sustain must be >= 0, got %s", o.ThermalSustain)
	case o.BudgetSustain < 0:
		return fmt.Errorf("--budget-sustain must be >= 0, got %s", o.BudgetSustain)
	case o.ThermalHold < 0:
		return fmt.Errorf("--telemetry-thermal-hold must be >= 0, got %s", o.ThermalHold)
	case o.PowerHold < 0:
		return fmt.Errorf("--telemetry-power-hold must be >= 0, got %s", o.PowerHold)
	}
	return o.LeaderElection.Validate()
}

// Descheduler is one running descheduler: its informers, telemetry cache
// and profile.
type Descheduler struct {
	opts    Options
	factory informers.SharedInformerFactory
	evictor *evictions.PodEvictor
	profile interface {
		RunDeschedulePlugins(context.Context, []*v1.Node) *frameworktypes.Status
	}
	sim       *descheduler.Simulator
	windows   []interface{ Reset() }
	gate      *descheduler.Gate
	client    kubernetes.Interface
	broadcast events.EventBroadcaster
}

// New builds a descheduler against the API server of cfg and starts its
// informers and telemetry cache; it runs no cycle.
func New(ctx context.Context, cfg *rest.Config, opts Options) (*Descheduler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	descheduler.RegisterMetrics()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	factory.Core().V1().Namespaces().Informer()
	factory.Policy().V1().PodDisruptionBudgets().Informer()
	podsOn, err := podutil.BuildGetPodsAssignedToNodeFunc(podInformer)
	if err != nil {
		return nil, err
	}

	// events.k8s.io/v1 Events, which every supported API server serves
	// (the adapter that falls back to core/v1 is deprecated).
	broadcast := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	recorder := broadcast.NewRecorder(scheme.Scheme, descheduler.ReportingController)

	// The scheduler's own profile, built before the informers start: its
	// plugins register theirs. Its args are what the plugins judge by.
	schedConfig, err := descheduler.LoadSchedulerConfig(opts.SchedulerConfig)
	if err != nil {
		return nil, fmt.Errorf("--scheduler-config: %w", err)
	}
	schedProfile, err := descheduler.ProfileOf(schedConfig, opts.SchedulerConfig, opts.SchedulerProfile)
	if err != nil {
		return nil, fmt.Errorf("--scheduler-config: %w", err)
	}
	la, ea, err := descheduler.ProfileArgs(schedProfile)
	if err != nil {
		return nil, fmt.Errorf("--scheduler-config %q, --scheduler-profile %q: %w", opts.SchedulerConfig, opts.SchedulerProfile, err)
	}
	from := "the shipped scheduler configuration, profile " + opts.SchedulerProfile + " (no --scheduler-config)"
	if opts.SchedulerConfig != "" {
		from = opts.SchedulerConfig + ", profile " + opts.SchedulerProfile
	}
	klog.FromContext(ctx).Info("Judging nodes by the scheduler's args", "from", from,
		"thermalMarginCelsius", ea.ThermalMarginCelsius, "absoluteLimitCelsius", ea.AbsoluteLimitCelsius, "gpuSlowdownMarginCelsius", ea.GPUSlowdownMarginCelsius, "telemetryMaxAge", ea.TelemetryMaxAge,
		"cpuThresholdPercent", la.CPUThresholdPercent, "memoryThresholdPercent", la.MemoryThresholdPercent, "usage", la.Usage)
	cache := telemetry.NewCache()
	if err := cache.SetAgentOwners(opts.AgentNamespace, telemetry.DefaultAgentDaemonSets); err != nil {
		return nil, fmt.Errorf("--telemetry-agent-namespace=%s: %w", opts.AgentNamespace, err)
	}
	cache.SetThermalHold(opts.ThermalHold)
	cache.SetPowerHold(opts.PowerHold)
	book := estimate.NewBook(cache, estimate.DefaultOptions())
	if err := book.SetMaxAge(opts.ReservationMaxAge); err != nil {
		return nil, fmt.Errorf("--reservation-max-age: %w", err)
	}
	// The budgets' status is the scheduler's to write (nil: no writer).
	domains := powerbudget.NewDomains(cache, book, nil)
	policy, err := descheduler.LoadPolicy(opts.Policy, opts.PriorityThreshold, descheduler.SchedulerNames(schedConfig))
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	var enabled []string
	for _, name := range []string{thermal.Name, budgetplugin.Name} {
		if sel, ok := policy.Plugins[name]; ok {
			enabled = append(enabled, name)
			klog.FromContext(ctx).Info("Plugin runs", "plugin", name, "schedulerNames", sel.SchedulerNames, "namespaces", sel.Namespaces)
		}
	}
	sim, err := descheduler.NewSimulator(ctx, descheduler.SimulatorConfig{
		Profile: schedProfile, Client: client, Config: cfg, Factory: factory, Recorder: recorder,
		Shared: &registry.Shared{Cache: cache, Book: book, Domains: domains},
	})
	if err != nil {
		return nil, fmt.Errorf("--scheduler-config %q, --scheduler-profile %q: %w", opts.SchedulerConfig, opts.SchedulerProfile, err)
	}
	if err := domains.Start(ctx, cfg, factory, config.PowerBudgetArgs{}, nil); err != nil {
		return nil, err
	}
	gate := descheduler.NewGate(recorder, opts.Cooldown, opts.DryRun, time.Now)

	podEvictor, err := evictions.NewPodEvictor(ctx, evictClient{client, opts.DryRun}, recorder, podInformer, features.DefaultMutableFeatureGate,
		evictions.NewOptions().
			WithDryRun(opts.DryRun).
			WithMaxPodsToEvictPerNode(ptr.To(opts.MaxEvictionsPerNode)).
			WithMaxPodsToEvictTotal(ptr.To(opts.MaxEvictionsPerCycle)).
			WithEvictionFailureEventNotification(ptr.To(false)))
	if err != nil {
		return nil, err
	}

	reg := pluginregistry.NewRegistry()
	pluginregistry.Register(defaultevictor.PluginName, defaultevictor.New, &defaultevictor.DefaultEvictor{}, &defaultevictor.DefaultEvictorArgs{}, nil, nil, reg)
	thermalOpts := thermal.Options{
		MarginMilli: int64(ea.ThermalMarginCelsius) * 1000, AbsoluteMilli: int64(ea.AbsoluteLimitCelsius) * 1000,
		GPUMarginMilli: int64(ea.GPUSlowdownMarginCelsius) * 1000,
		Sustain:        opts.ThermalSustain, MaxAge: ea.TelemetryMaxAge, Chooses: policy.Plugins[thermal.Name].Chooses,
	}
	var windows []interface{ Reset() }
	pluginregistry.Register(thermal.Name, func(_ context.Context, _ runtime.Object, h frameworktypes.Handle) (frameworktypes.Plugin, error) {
		p := thermal.New(h, cache, book, sim, gate, thermalOpts)
		windows = append(windows, p)
		return p, nil
	}, &thermal.Plugin{}, nil, nil, nil, reg)
	budgetOpts := budgetplugin.Options{Sustain: opts.BudgetSustain, MaxAge: descheduler.PowerBudgetMaxAge(schedProfile), Chooses: policy.Plugins[budgetplugin.Name].Chooses}
	pluginregistry.Register(budgetplugin.Name, func(_ context.Context, _ runtime.Object, h frameworktypes.Handle) (frameworktypes.Plugin, error) {
		p := budgetplugin.New(h, domains, book, sim, gate, budgetOpts, cache.Now)
		windows = append(windows, p)
		return p, nil
	}, &budgetplugin.Plugin{}, nil, nil, nil, reg)

	evictorArgs := policy.Evictor.DeepCopy()
	pluginConfigs := []api.PluginConfig{{Name: defaultevictor.PluginName, Args: evictorArgs}}
	for _, name := range enabled {
		pluginConfigs = append(pluginConfigs, api.PluginConfig{Name: name})
	}
	prof, err := profile.NewProfile(ctx, api.DeschedulerProfile{
		Name:          ProfileName,
		PluginConfigs: pluginConfigs,
		Plugins: api.Plugins{
			Deschedule:        api.PluginSet{Enabled: enabled},
			Filter:            api.PluginSet{Enabled: []string{defaultevictor.PluginName}},
			PreEvictionFilter: api.PluginSet{Enabled: []string{defaultevictor.PluginName}},
		},
	}, reg,
		profile.WithClientSet(client),
		profile.WithSharedInformerFactory(factory),
		profile.WithPodEvictor(podEvictor),
		profile.WithGetPodsAssignedToNodeFnc(podsOn),
		profile.WithProfileInstanceID("0"),
	)
	if err != nil {
		return nil, fmt.Errorf("building descheduler profile %s: %w", ProfileName, err)
	}

	broadcast.StartRecordingToSink(ctx.Done())
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	if err := cache.Start(ctx, cfg, opts.CacheSyncTimeout); err != nil {
		return nil, fmt.Errorf("starting the telemetry cache: %w", err)
	}
	return &Descheduler{opts: opts, factory: factory, evictor: podEvictor, profile: prof, sim: sim, windows: windows, gate: gate, client: client, broadcast: broadcast}, nil
}

// Cycle runs one descheduling cycle over every node; the per-node and
// per-cycle limits start again at each.
func (d *Descheduler) Cycle(ctx context.Context) error {
	start := time.Now()
	defer func() { descheduler.ObserveCycle(time.Since(start)) }()
	d.evictor.ResetCounters()
	nodes, err := d.factory.Core().V1().Nodes().Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	// One snapshot for the cycle: every pod either plugin plans to move
	// counts at its destination for the next.
	if err := d.sim.BeginCycle(); err != nil {
		return err
	}
	defer d.sim.EndCycle()
	if st := d.profile.RunDeschedulePlugins(ctx, nodes); st != nil && st.Err != nil {
		return st.Err
	}
	return nil
}

// Lead starts this replica's term as the one that evicts: every window
// starts afresh, so a node or budget is judged on what this replica sees
// from now on, not on samples it watched as a standby while another
// replica acted on them; and the pods the replicas before it evicted,
// reported or saw refused within the cool-down (their Events) are left
// alone for the rest of it.
func (d *Descheduler) Lead(ctx context.Context) {
	for _, w := range d.windows {
		w.Reset()
	}
	n, err := d.gate.Recall(ctx, d.client)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading the cool-down from Events: pods evicted before this replica led may be evicted again within it")
		return
	}
	klog.FromContext(ctx).Info("Leading: windows start afresh", "podsInCooldown", n)
}

// Run leads (Lead) and runs a cycle every interval until ctx ends.
func (d *Descheduler) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	d.Lead(ctx)
	t := time.NewTicker(d.opts.Interval)
	defer t.Stop()
	for {
		began := time.Now()
		if err := d.Cycle(ctx); err != nil {
			logger.Error(err, "Descheduling cycle")
		} else {
			logger.V(2).Info("Descheduling cycle done", "duration", time.Since(began).Round(time.Millisecond), "dryRun", d.opts.DryRun)
		}
		select {
		case <-ctx.Done():
			d.broadcast.Shutdown()
			return
		case <-t.C:
		}
	}
}
