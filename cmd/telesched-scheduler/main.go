// Command telesched-scheduler is kube-scheduler with telesched's plugins:
// LoadAware, TopologyFit and EnergyAware, which filter and score nodes from
// their NodeTelemetry. Run it beside the default scheduler with a profile
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
	"github.com/telesched/telesched/scheduler/plugins/topologyfit"
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
	cmd := app.NewSchedulerCommand(
		app.WithPlugin(loadaware.Name, loadaware.NewFactory(cache, reservations)),
		app.WithPlugin(topologyfit.Name, topologyfit.NewFactory(cache)),
		app.WithPlugin(energyaware.Name, energyaware.NewFactory(cache, reservations)),
	)
	cmd.Use = "telesched-scheduler"
	var skew time.Duration
	fs := pflag.NewFlagSet("telesched", pflag.ContinueOnError)
	fs.DurationVar(&skew, "telemetry-clock-skew-tolerance", telemetry.DefaultClockSkewTolerance,
		"how far a node agent's sampleTime may be from this scheduler's clock, when the scheduler sees the sample, "+
			"before the node counts as skewed (metric telesched_scheduler_telemetry_skewed_nodes, and a note in stale-telemetry rejections). "+
			"Freshness is judged by the scheduler's own clock either way.")
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
		cache.SetClockSkewTolerance(skew)
		return run(c, args)
	}
	os.Exit(cli.Run(cmd))
}
