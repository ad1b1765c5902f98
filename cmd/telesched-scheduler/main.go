// Command telesched-scheduler is kube-scheduler with telesched's plugins:
// LoadAware, TopologyFit and EnergyAware, which filter and score nodes from
// their NodeTelemetry. Run it beside the default scheduler with a profile
// named telesched (see deploy/scheduler/); pods opt in with
// spec.schedulerName: telesched.
package main

import (
	"fmt"
	"os"

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
	cmd := app.NewSchedulerCommand(
		app.WithPlugin(loadaware.Name, loadaware.NewFactory(cache)),
		app.WithPlugin(topologyfit.Name, topologyfit.NewFactory(cache)),
		app.WithPlugin(energyaware.Name, energyaware.NewFactory(cache)),
	)
	cmd.Use = "telesched-scheduler"
	os.Exit(cli.Run(cmd))
}
