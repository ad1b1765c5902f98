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
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	configscheme "github.com/telesched/telesched/apis/config/scheme"
	"github.com/telesched/telesched/scheduler/plugins/energyaware"
	"github.com/telesched/telesched/scheduler/plugins/loadaware"
	powerbudgetplugin "github.com/telesched/telesched/scheduler/plugins/powerbudget"
	"github.com/telesched/telesched/scheduler/plugins/topologyfit"
	"github.com/telesched/telesched/scheduler/powerbudget"
	"github.com/telesched/telesched/scheduler/telemetry"
)

func main() {
	if err := configscheme.Register(); err != nil {
		fmt.Fprintf(os.Stderr, "telesched-scheduler: registering plugin args: %v\n", err)
		os.Exit(1)
	}
	// One telemetry cache for every plugin of every profile.
	cache := telemetry.NewCache()
	telemetry.RegisterMetrics()
	// The pods placed on each node since its sample: LoadAware keeps them,
	// EnergyAware counts them in its estimated load.
	reservations := loadaware.NewReservations(cache)
	// The PowerBudgets, their nodes and the pods placed on them; the
	// status writer starts with the first PowerBudget plugin, on the
	// options the flags below set.
	status := powerbudget.DefaultStatusOptions()
	powerbudget.RegisterMetrics()
	domains := powerbudget.NewDomains(cache, &status)
	cmd := app.NewSchedulerCommand(
		app.WithPlugin(loadaware.Name, loadaware.NewFactory(cache, reservations)),
		app.WithPlugin(topologyfit.Name, topologyfit.NewFactory(cache)),
		app.WithPlugin(energyaware.Name, energyaware.NewFactory(cache, reservations)),
		app.WithPlugin(powerbudgetplugin.Name, powerbudgetplugin.NewFactory(cache, domains)),
	)
	cmd.Use = "telesched-scheduler"
	var skew time.Duration
	fs := pflag.NewFlagSet("telesched", pflag.ContinueOnError)
	fs.DurationVar(&skew, "telemetry-clock-skew-tolerance", telemetry.DefaultClockSkewTolerance,
		"how far a node agent's sampleTime may be from this scheduler's clock, when the scheduler sees the sample, "+
			"before the node counts as skewed (metric telesched_scheduler_telemetry_skewed_nodes, and a note in stale-telemetry rejections). "+
			"Freshness is judged by the scheduler's own clock either way.")
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
	help := cmd.HelpFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		help(c, args)
		fmt.Fprintf(c.OutOrStdout(), "\nTelesched flags:\n\n%s", fs.FlagUsages())
	})
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if skew <= 0 {
			return fmt.Errorf("--telemetry-clock-skew-tolerance must be greater than 0, got %v", skew)
		}
		if err := status.Validate(); err != nil {
			return err
		}
		cache.SetClockSkewTolerance(skew)
		return run(c, args)
	}
	os.Exit(cli.Run(cmd))
}
