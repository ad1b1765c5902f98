// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command telesched-agent samples a node's hardware telemetry and publishes
// it as the node's NodeTelemetry object and as Prometheus metrics.
package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/internal/version"
)

func main() {
	opts := app.NewOptions()
	fs := pflag.NewFlagSet("telesched-agent", pflag.ContinueOnError)
	fs.SortFlags = false
	opts.AddFlags(fs)
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	var showVersion bool
	fs.BoolVar(&showVersion, "version", false, "Print the version and exit.")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, `telesched-agent samples this node's CPU, memory, NUMA topology, temperatures,
power and GPUs from /proc, /sys and NVML every --interval, and publishes them
as the node's NodeTelemetry object (server-side apply on the status
subresource) and as Prometheus metrics. It emits NodeOverheating,
NodeTemperatureNormal and GPUThermalThrottling events on the Node.

It fails closed on heat: a temperature sensor whose read fails keeps its
last reading for --sensor-hold-duration and the thermal source turns
Degraded, naming it; NVML calls are bounded by --nvml-timeout; /healthz
fails once no sample has completed for --healthz-missed-intervals x
--interval.

Usage:
  telesched-agent [flags]
  telesched-agent --once [-o json|yaml]   print one sample and exit; no cluster needed

Flags:
%s`, fs.FlagUsages())
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "telesched-agent: %v (see --help)\n", err)
		os.Exit(2)
	}
	if showVersion {
		fmt.Println(version.Line("telesched-agent"))
		os.Exit(0)
	}
	opts.Complete()
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "telesched-agent: invalid flags:\n%v\n", err)
		os.Exit(2)
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(opts.GCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if err := app.Run(ctx, opts, os.Stdout); err != nil {
		klog.FromContext(ctx).Error(err, "telesched-agent failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
