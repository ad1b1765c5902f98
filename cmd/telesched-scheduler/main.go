// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command telesched-scheduler is kube-scheduler with telesched's plugins:
// LoadAware, TopologyFit and EnergyAware, which filter and score nodes from
// their NodeTelemetry, and PowerBudget, which keeps power domains (racks,
// PDUs) under their PowerBudgets and writes those budgets' status. Run it beside the default scheduler with a profile
// named telesched (see deploy/scheduler/); pods opt in with
// spec.schedulerName: telesched.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"k8s.io/component-base/cli"
	// client-go's metrics, leader election's among them
	// (leader_election_master_status, which TeleschedSchedulerNoLeader
	// reads), as kube-scheduler's own main registers them.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	configscheme "github.com/telesched/telesched/apis/config/scheme"
	"github.com/telesched/telesched/internal/memlimit"
	"github.com/telesched/telesched/internal/version"
	"github.com/telesched/telesched/scheduler/compat"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/powerbudget"
	"github.com/telesched/telesched/scheduler/registry"
	"github.com/telesched/telesched/scheduler/telemetry"
)

func main() {
	// The Go runtime's soft memory limit under the container's
	// (internal/memlimit); the scheduler's log is not set up yet, so a
	// bad value is said on stderr.
	if _, err := memlimit.Apply(); err != nil {
		fmt.Fprintf(os.Stderr, "telesched-scheduler: %v\n", err)
		os.Exit(2)
	}
	if err := configscheme.Register(); err != nil {
		fmt.Fprintf(os.Stderr, "telesched-scheduler: registering plugin args: %v\n", err)
		os.Exit(1)
	}
	// One telemetry cache, reservation book and set of PowerBudgets for
	// every plugin of every profile of the scheduler, configured by the
	// flags below (configure); the status writer starts with the first
	// PowerBudget plugin, on the options the flags set.
	status := powerbudget.DefaultStatusOptions()
	var configure func(*registry.Shared) error
	plugins := registry.New(func() (*registry.Shared, error) {
		s := registry.NewShared(&status)
		return s, configure(s)
	})
	cmd := app.NewSchedulerCommand(plugins.Options()...)
	cmd.Use = "telesched-scheduler"
	var skew, powerHold, thermalHold, agentMaxAge, reservationMaxAge time.Duration
	var agentSelector, agentNamespace string
	var agentDaemonSets []string
	var skipVersionCheck bool
	limits := telemetry.DefaultLimits()
	fs := pflag.NewFlagSet("telesched", pflag.ContinueOnError)
	fs.BoolVar(&skipVersionCheck, strings.TrimPrefix(compat.SkipFlag, "--"), false,
		fmt.Sprintf("start against any API server; without it the scheduler stops at start, naming the server's version, unless the server is Kubernetes 1.%d or 1.%d "+
			"(Kubernetes' version skew policy: kube-scheduler must not be newer than its API server, and at most one minor version older)",
			compat.MinServerMinor, compat.MaxServerMinor))
	fs.Int32Var(&limits.MaxNodeWatts, "telemetry-max-node-watts", limits.MaxNodeWatts,
		"the most watts any node may draw: a published power curve beyond it (or falling, or negative) reads as no curve, "+
			"and measured watts beyond it, or beyond half again the node's own curve and GPUs at full load, read as missing "+
			"(metric telesched_scheduler_telemetry_rejected_total; the log names the node); 100-1000000")
	fs.Int32Var(&limits.BaseWatts, "telemetry-max-node-base-watts", limits.BaseWatts,
		"of a node without a power curve, the most it may draw beside its CPUs and GPUs (memory, fans, disks, NICs, board, power supply losses); "+
			"its watts above this plus --telemetry-max-watts-per-core for each online logical CPU and --telemetry-max-watts-per-gpu for each GPU read as missing; "+
			"0 to --telemetry-max-node-watts")
	fs.Int32Var(&limits.WattsPerCore, "telemetry-max-watts-per-core", limits.WattsPerCore,
		"of a node without a power curve, the most each online logical CPU may draw (above an 8-core 180-200 W server CPU with SMT off); "+
			"1 to --telemetry-max-node-watts")
	fs.Int32Var(&limits.WattsPerGPU, "telemetry-max-watts-per-gpu", limits.WattsPerGPU,
		"of a node without a power curve, the most each GPU its agent lists may draw (above a B200's 1000 W board power); "+
			"1 to --telemetry-max-node-watts")
	fs.Int32Var(&limits.IdleFloorPercent, "telemetry-idle-floor-percent", limits.IdleFloorPercent,
		"a node's measured watts, GPUs aside, below this percentage of its own power curve at 0% CPU (less 3 x the curve's uncertainty there) "+
			"read as missing, as a meter that stopped counting; 0 turns the check off; 0-100")
	fs.DurationVar(&powerHold, "telemetry-power-hold", telemetry.DefaultPowerHold,
		"how long a node whose samples lack watts (no power section, or watts refused as implausible) keeps counting its last plausible watts "+
			"in its PowerBudgets and as the base of its pods' watts; after it, the budget's unmeteredNodeWatts apply")
	fs.DurationVar(&thermalHold, "telemetry-thermal-hold", telemetry.DefaultThermalHold,
		"how long a node whose thermal source failed (its thermal section refused by the API server, or its sensors unreadable) keeps its last thermal reading: "+
			"a hot one keeps it out of EnergyAware until a sample shows it cool, a cool one counts for this long; after it the node's heat is unknown, "+
			"which EnergyAware's staleTelemetryPolicy decides (Reject: Unschedulable; Ignore: no thermal score). A node without sensors is unaffected")
	fs.DurationVar(&skew, "telemetry-clock-skew-tolerance", telemetry.DefaultClockSkewTolerance,
		"how far a node agent's sampleTime may be from this scheduler's clock, when the scheduler sees the sample, "+
			"before the node counts as skewed (metric telesched_scheduler_telemetry_skewed_nodes, and a note in stale-telemetry rejections). "+
			"Freshness is judged by the scheduler's own clock either way.")
	fs.StringVar(&agentSelector, "telemetry-agent-pod-selector", telemetry.DefaultAgentSelector,
		"label selector of the node agent's pods in --telemetry-agent-namespace: a node on which one of them that --telemetry-agent-daemonsets controls is Ready "+
			"has fresh telemetry for --telemetry-max-age-ready-agent since its last write, since the agent writes on every move past a deadband and turns NotReady "+
			"once it stops sampling or publishing; empty: every node has the plugins' telemetryMaxAge (metric telesched_scheduler_telemetry_ready_agent_nodes)")
	fs.StringVar(&agentNamespace, "telemetry-agent-namespace", telemetry.DefaultAgentNamespace,
		"namespace of the node agent's DaemonSets and pods; the scheduler lists and watches daemonsets and pods there")
	fs.StringSliceVar(&agentDaemonSets, "telemetry-agent-daemonsets", telemetry.DefaultAgentDaemonSets,
		"names of the node agent's DaemonSets in --telemetry-agent-namespace: only a pod one of them controls (its controller reference names the DaemonSet "+
			"and its UID) vouches for its node; other pods with the agent's labels are ignored (metric telesched_scheduler_telemetry_ignored_agent_pods)")
	fs.DurationVar(&agentMaxAge, "telemetry-max-age-ready-agent", telemetry.DefaultAgentMaxAge,
		"how old a node's NodeTelemetry may be while its agent pod is Ready; keep it above the agent's --heartbeat "+
			"(the shipped DaemonSet's is 5m). Where the plugins' telemetryMaxAge is longer, theirs applies")
	fs.DurationVar(&reservationMaxAge, "reservation-max-age", estimate.DefaultMaxReservationAge,
		fmt.Sprintf("how long a pod bound to a node counts toward the node's load, watts and heat when no sample of the node shows it running: "+
			"a pod counts at most this long from its binding (from its start, when it starts after that), and when it stops counting so, the pods it kept out are requeued (at least %v)",
			estimate.MinReservationHold))
	fs.DurationVar(&status.Interval, "power-budget-status-interval", status.Interval,
		"how often the PowerBudget plugin computes every PowerBudget's watts (its metrics on every replica, and the status the lease holder writes)")
	fs.DurationVar(&status.Heartbeat, "power-budget-status-heartbeat", status.Heartbeat,
		"write a PowerBudget's status at least this often, changed or not, so its updateTime says it is current")
	fs.Int32Var(&status.DeadbandPercent, "power-budget-status-deadband-percent", status.DeadbandPercent,
		"write a PowerBudget's status before the heartbeat when its measured or reserved watts moved by at least this percentage of its budget (or its conditions or node counts changed); 0 to 50")
	fs.StringVar(&status.LeaseNamespace, "power-budget-lease-namespace", status.LeaseNamespace,
		"namespace of the Lease that elects the one replica writing PowerBudget status")
	fs.StringVar(&status.LeaseName, "power-budget-lease-name", status.LeaseName,
		"name of the Lease that elects the one replica writing PowerBudget status")
	cmd.Flags().AddFlagSet(fs)
	configure = func(s *registry.Shared) error {
		if err := s.Cache.SetLimits(limits); err != nil {
			return err
		}
		if err := s.Book.SetMaxAge(reservationMaxAge); err != nil {
			return fmt.Errorf("--reservation-max-age: %w", err)
		}
		if err := s.Cache.SetAgents(agentSelector, agentMaxAge); err != nil {
			return fmt.Errorf("--telemetry-agent-pod-selector, --telemetry-max-age-ready-agent: %w", err)
		}
		if err := s.Cache.SetAgentOwners(agentNamespace, agentDaemonSets); err != nil {
			return fmt.Errorf("--telemetry-agent-namespace=%s, --telemetry-agent-daemonsets=%s: %w", agentNamespace, strings.Join(agentDaemonSets, ","), err)
		}
		s.Cache.SetClockSkewTolerance(skew)
		s.Cache.SetPowerHold(powerHold)
		s.Cache.SetThermalHold(thermalHold)
		if !skipVersionCheck {
			s.Cache.SetServerCheck(compat.Check)
		}
		return nil
	}
	help := cmd.HelpFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		help(c, args)
		fmt.Fprintf(c.OutOrStdout(), "\nTelesched flags:\n\n%s", fs.FlagUsages())
	})
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		// kube-scheduler's --version prints the Kubernetes version it
		// was built from, which a build outside Kubernetes' own tree
		// does not stamp ("v0.0.0-master"): print telesched's, with the
		// Kubernetes modules it links.
		if f := c.Flags().Lookup("version"); f != nil && f.Value.String() != "false" {
			fmt.Fprintln(c.OutOrStdout(), version.Line("telesched-scheduler"))
			return nil
		}
		if skew <= 0 {
			return fmt.Errorf("--telemetry-clock-skew-tolerance must be greater than 0, got %v", skew)
		}
		if err := status.Validate(); err != nil {
			return err
		}
		if powerHold < 0 {
			return fmt.Errorf("--telemetry-power-hold must not be negative, got %v", powerHold)
		}
		if thermalHold < 0 {
			return fmt.Errorf("--telemetry-thermal-hold must not be negative, got %v", thermalHold)
		}
		// The flags' other checks are the setters': try them on a
		// Shared of their own, so a bad flag stops the scheduler here.
		if err := configure(registry.NewShared(&status)); err != nil {
			return err
		}
		return run(c, args)
	}
	os.Exit(cli.Run(cmd))
}
