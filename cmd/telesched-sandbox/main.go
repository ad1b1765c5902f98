// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command telesched-sandbox runs telesched on this machine: a local etcd
// and kube-apiserver, the real host and simulated nodes each read by the
// real agent, the real telesched-scheduler, and a scenario that shows
// where pods go and why. `make demo` runs it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/telesched/telesched/internal/version"
	"github.com/telesched/telesched/sandbox"
)

func main() {
	var opts sandbox.Options
	fs := pflag.NewFlagSet("telesched-sandbox", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVar(&opts.BinDir, "bin-dir", "", "Directory with etcd, kube-apiserver and telesched-scheduler (`make build control-plane`). Default: $TELESCHED_BIN_DIR, else bin/ of this checkout.")
	fs.StringVar(&opts.Dir, "dir", "", "Directory for the kubeconfig, the simulated nodes' trees and the logs. Default: a new temporary directory, removed after a successful run without --keep.")
	fs.BoolVar(&opts.Keep, "keep", false, "Leave the cluster up after the scenario and print a kubectl command to try; Ctrl-C stops it.")
	fs.DurationVar(&opts.Timeout, "timeout", sandbox.DefaultTimeout, "Give up if the run (start and scenario) takes longer.")
	fs.DurationVar(&opts.Interval, "interval", sandbox.DefaultInterval, "Every agent's sampling interval.")
	fs.StringVar(&opts.Profile, "profile", sandbox.DefaultProfile, "The telesched profile that schedules the workload: "+sandbox.DefaultProfile+" (balanced) or "+sandbox.EnergyProfile+" (energy first; deploy/scheduler/scheduler-config.yaml). The baseline is always the default profile.")
	fs.StringVar(&opts.Descheduler, "descheduler", sandbox.DeschedulerBoth, "After the scenario, the after-placement phases (the heater's fan fails under running pods; a rack's load rises past its budget): without bin/telesched-descheduler ("+sandbox.DeschedulerOff+"), with it ("+sandbox.DeschedulerOn+"), both side by side ("+sandbox.DeschedulerBoth+"), or not at all ("+sandbox.DeschedulerSkip+").")
	fs.BoolVar(&opts.Soak, "soak", false, "After the after-placement phases, the soak (about 7 minutes): bin/telesched-descheduler evicting, two replicas under leader election, through churn of ReplicaSet and StatefulSet pods (one on a local PersistentVolume), a fan failure with the leader killed during it, a node's sensors failing while hot, an agent dying at high watts, nested rack and row budgets, and the overheating taint switched off; every eviction is listed and a missed goal fails the run (docs/sandbox.md).")
	fs.DurationVar(&opts.DeschedulerInterval, "descheduler-interval", sandbox.DefaultDeschedulerInterval, "telesched-descheduler's --interval in the after-placement phases.")
	fs.DurationVar(&opts.BudgetSustain, "budget-sustain", sandbox.DefaultBudgetSustain, "telesched-descheduler's --budget-sustain in the after-placement phases (the rack's load stays past its budget for 60s).")
	fs.Float64Var(&opts.WorkSpeedup, "work-speedup", sandbox.DefaultWorkSpeedup, "Seconds of a training job's work the simulation runs in a second: a job ends when its work is done at its GPUs' speed (an hour's work on the reference GPU in a minute at 60), and a job a rack's budget kept pending can then run.")
	fs.DurationVar(&opts.ThermalSustain, "thermal-sustain", sandbox.DefaultThermalSustain, "telesched-descheduler's --thermal-sustain in the after-placement phases (the sandbox's nodes settle in seconds).")
	var fleet string
	fs.StringVar(&fleet, "fleet", "", "YAML file describing the simulated fleet (nodes, CPUs, memory, NUMA, GPUs, power curves, base load, thermal response, fan faults, counts, racks and their power budgets); see sandbox/fleets/example.yaml. Default: the built-in fleet, sandbox/fleets/default.yaml.")
	var showVersion bool
	fs.BoolVar(&showVersion, "version", false, "Print the version and exit.")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, `telesched-sandbox starts a local control plane, registers this machine and
%d simulated nodes (or the fleet of --fleet), each read by the real telesched agent, runs the real
telesched-scheduler and a scenario: web pods, a burst, two 4-GPU training pods
that each need one NUMA node, a pod that would overheat a cool node once it
settled, and a node that overheats and recovers, on racks with power budgets.
It prints the NodeTelemetry and PowerBudget tables, where every pod went and
why, each rack's peak watts against its budget, and each profile's watts.
Then, after placement, the heater's fan fails under running pods and a rack's
load rises past its budget, without and with bin/telesched-descheduler
(--descheduler), side by side.

Usage:
  telesched-sandbox [flags]

Flags:
%s`, len(sandbox.DefaultFleet().Nodes), fs.FlagUsages())
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "telesched-sandbox: %v (see --help)\n", err)
		os.Exit(2)
	}
	if showVersion {
		fmt.Println(version.Line("telesched-sandbox"))
		os.Exit(0)
	}
	if opts.Profile != sandbox.DefaultProfile && opts.Profile != sandbox.EnergyProfile {
		fmt.Fprintf(os.Stderr, "telesched-sandbox: --profile %q: want %s or %s\n", opts.Profile, sandbox.DefaultProfile, sandbox.EnergyProfile)
		os.Exit(2)
	}
	switch opts.Descheduler {
	case sandbox.DeschedulerOn, sandbox.DeschedulerOff, sandbox.DeschedulerBoth, sandbox.DeschedulerSkip:
	default:
		fmt.Fprintf(os.Stderr, "telesched-sandbox: --descheduler %q: want %s, %s, %s or %s\n", opts.Descheduler, sandbox.DeschedulerOn, sandbox.DeschedulerOff, sandbox.DeschedulerBoth, sandbox.DeschedulerSkip)
		os.Exit(2)
	}
	if opts.DeschedulerInterval <= 0 || opts.ThermalSustain < 0 || opts.BudgetSustain < 0 {
		fmt.Fprintf(os.Stderr, "telesched-sandbox: --descheduler-interval %v must be > 0, --thermal-sustain %v and --budget-sustain %v >= 0\n", opts.DeschedulerInterval, opts.ThermalSustain, opts.BudgetSustain)
		os.Exit(2)
	}
	if fleet != "" {
		f, err := sandbox.ReadFleet(fleet)
		if err != nil {
			fmt.Fprintf(os.Stderr, "telesched-sandbox: --fleet: %v\n", err)
			os.Exit(2)
		}
		opts.Fleet = f
	}
	opts.Out = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := sandbox.Run(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "\ntelesched-sandbox: %v\n", err)
		os.Exit(1)
	}
}
