// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command telesched-descheduler is the Kubernetes descheduler's framework
// (sigs.k8s.io/descheduler) with telesched's plugins: every --interval,
// TeleschedThermal evicts the fewest pods that bring a node that stayed
// at or past its limit − margin back under, and TeleschedPowerBudget those
// that bring a PowerBudget over its limit back under, each only to a
// destination telesched's filters pass now. It starts in --dry-run, which only
// reports.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/telesched/telesched/descheduler"
	"github.com/telesched/telesched/descheduler/app"
	"github.com/telesched/telesched/internal/logging"
	"github.com/telesched/telesched/internal/memlimit"
	"github.com/telesched/telesched/internal/version"
)

// defaultMetricsAddress serves /metrics and /healthz; "" turns it off.
const defaultMetricsAddress = ":10262"

func main() {
	// The Go runtime's soft memory limit under the container's
	// (internal/memlimit), for the relays too.
	if _, err := memlimit.Apply(); err != nil {
		fmt.Fprintf(os.Stderr, "telesched-descheduler: %v\n", err)
		os.Exit(2)
	}
	opts := app.DefaultOptions()
	fs := pflag.NewFlagSet("telesched-descheduler", pflag.ContinueOnError)
	var kubeconfig, metricsAddress string
	var showVersion bool
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster config")
	fs.StringVar(&metricsAddress, "metrics-bind-address", defaultMetricsAddress, "address serving /metrics and /healthz; empty turns it off")
	fs.DurationVar(&opts.Interval, "interval", opts.Interval, "time between descheduling cycles")
	fs.BoolVar(&opts.DryRun, "dry-run", opts.DryRun, "only report: Events TeleschedWouldEvict and telesched_descheduler_evictions_total{result=\"would_evict\"}; no pod is evicted. --dry-run=false evicts")
	fs.UintVar(&opts.MaxEvictionsPerNode, "max-evictions-per-node-per-cycle", opts.MaxEvictionsPerNode, "most pods evicted from one node in one cycle (>= 1)")
	fs.UintVar(&opts.MaxEvictionsPerCycle, "max-evictions-per-cycle", opts.MaxEvictionsPerCycle, "most pods evicted in the cluster in one cycle (>= 1)")
	fs.DurationVar(&opts.Cooldown, "cooldown", opts.Cooldown, "a pod evicted, reported in dry-run or refused by its PodDisruptionBudget is left alone this long (by UID and by namespace/name)")
	fs.DurationVar(&opts.ThermalSustain, "thermal-sustain", opts.ThermalSustain, "how long a node must stay at or past its limit - margin (measured or predicted) before TeleschedThermal evicts from it")
	fs.StringVar(&opts.AgentNamespace, "telemetry-agent-namespace", opts.AgentNamespace, "namespace of the node agent's DaemonSets and pods (the scheduler's flag of the same name); the descheduler lists and watches daemonsets and pods there")
	fs.DurationVar(&opts.BudgetSustain, "budget-sustain", opts.BudgetSustain, "how long a PowerBudget must stay over its limit (budgetWatts - reserveWatts) before TeleschedPowerBudget evicts from its nodes")
	fs.DurationVar(&opts.ThermalHold, "telemetry-thermal-hold", opts.ThermalHold, "how long a node whose thermal source failed keeps its last thermal reading; after it the node's heat is unknown and no eviction is decided on it. Set it as the scheduler's flag of the same name")
	fs.DurationVar(&opts.PowerHold, "telemetry-power-hold", opts.PowerHold, "how long a node whose samples lack watts keeps counting its last plausible watts; after it they are no evidence that its PowerBudget is over. Set it as the scheduler's flag of the same name")
	fs.DurationVar(&opts.ReservationMaxAge, "reservation-max-age", opts.ReservationMaxAge, "how long a bound pod counts toward its node's load, watts and heat when no sample shows it running. Set it as the scheduler's flag of the same name")
	fs.Int32Var(&opts.PriorityThreshold, "priority-threshold", opts.PriorityThreshold, "pods with at least this priority are never evicted")
	fs.StringVar(&opts.SchedulerConfig, "scheduler-config", opts.SchedulerConfig, "the scheduler's KubeSchedulerConfiguration file (its --config): the plugins of --scheduler-profile, in-tree and telesched's, with their args, check every destination as the scheduler would, and EnergyAware's and PowerBudget's args say what too hot and stale mean; empty: the configuration telesched-scheduler ships (deploy/scheduler/scheduler-config.yaml)")
	fs.StringVar(&opts.Policy, "policy", opts.Policy, "policy file: upstream's DeschedulerPolicy (descheduler/v1alpha2), one profile, with DefaultEvictor's args (namespaces by label, label selector, priority, minimum pod age, pod protections: PVC, ResourceClaim, local storage pods, ...) and TeleschedThermal's and TeleschedPowerBudget's (namespaces include/exclude, schedulerNames), and which of the two run (plugins.deschedule.enabled); empty: upstream's DefaultEvictor defaults with --priority-threshold and pods with PVCs or ResourceClaims protected, both plugins, pods of the scheduler's profiles only (docs/descheduler.md)")
	fs.StringVar(&opts.SchedulerProfile, "scheduler-profile", opts.SchedulerProfile, "the profile (schedulerName) of --scheduler-config the descheduler runs to check destinations and whose args it judges by")
	le := &opts.LeaderElection
	fs.BoolVar(&le.Enabled, "leader-elect", le.Enabled, "elect a leader among the replicas on a Lease; only the leader runs descheduling cycles, the others stand by with their caches synced")
	fs.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", le.LeaseDuration, "how long a standby waits after the leader's last renewal before taking the Lease")
	fs.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", le.RenewDeadline, "how long the leader keeps trying to renew before it stops leading (and exits)")
	fs.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", le.RetryPeriod, "time between tries to acquire or renew the Lease")
	fs.StringVar(&le.Namespace, "leader-elect-resource-namespace", le.Namespace, "namespace of the leader Lease")
	fs.StringVar(&le.Name, "leader-elect-resource-name", le.Name, "name of the leader Lease")
	fs.BoolVar(&showVersion, "version", false, "print the version and exit")
	logs := logging.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "telesched-descheduler: %v\n", err)
		os.Exit(2)
	}
	if err := logging.Apply(logs); err != nil {
		fmt.Fprintf(os.Stderr, "telesched-descheduler: %v\n", err)
		os.Exit(2)
	}
	if showVersion {
		fmt.Println(version.Line("telesched-descheduler"))
		return
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "telesched-descheduler: %v\n", err)
		os.Exit(2)
	}
	if err := run(kubeconfig, metricsAddress, opts); err != nil {
		fmt.Fprintf(os.Stderr, "telesched-descheduler: %v\n", err)
		os.Exit(1)
	}
}

func run(kubeconfig, metricsAddress string, opts app.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	if metricsAddress != "" {
		l, err := net.Listen("tcp", metricsAddress)
		if err != nil {
			return fmt.Errorf("--metrics-bind-address %q: %w", metricsAddress, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", legacyregistry.Handler())
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		srv := &http.Server{Handler: mux}
		go func() { _ = srv.Serve(l) }()
		defer srv.Close()
	}
	d, err := app.New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Descheduler started", "version", version.Line("telesched-descheduler"), "dryRun", opts.DryRun, "interval", opts.Interval,
		"leaderElect", opts.LeaderElection.Enabled)
	if !opts.LeaderElection.Enabled {
		descheduler.SetLeader(true)
		d.Run(ctx)
		return nil
	}
	return app.RunElected(ctx, cfg, opts.LeaderElection, d.Run)
}
