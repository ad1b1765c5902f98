// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command telesched-agent samples a node's hardware telemetry and publishes
// it as the node's NodeTelemetry object and as Prometheus metrics.
package main

import (
	"context"
	"fmt"
	iofs "io/fs"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/agent/relay"
	"github.com/telesched/telesched/internal/logging"
	"github.com/telesched/telesched/internal/memlimit"
	"github.com/telesched/telesched/internal/version"
)

func main() {
	// The Go runtime's soft memory limit under the container's
	// (internal/memlimit), for the relays too.
	if _, err := memlimit.Apply(); err != nil {
		fmt.Fprintf(os.Stderr, "telesched-agent: %v\n", err)
		os.Exit(2)
	}
	if len(os.Args) > 1 && os.Args[1] == "podresources-relay" {
		relayMain(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "powercap-relay" {
		powercapMain(os.Args[2:])
		return
	}
	opts := app.NewOptions()
	fs := pflag.NewFlagSet("telesched-agent", pflag.ContinueOnError)
	fs.SortFlags = false
	opts.AddFlags(fs)
	logs := logging.AddFlags(fs)
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
  telesched-agent podresources-relay [flags]   relay the kubelet's pod-resources socket (see its --help)
  telesched-agent powercap-relay [flags]       serve RAPL's root-only energy counters (see its --help)

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
	if err := logging.Apply(logs); err != nil {
		fmt.Fprintf(os.Stderr, "telesched-agent: %v\n", err)
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
	if _, set := os.LookupEnv("GOMAXPROCS"); !set && opts.MaxProcs > 0 {
		runtime.GOMAXPROCS(opts.MaxProcs)
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

// relayMain runs the pod-resources relay (package relay) with args.
func relayMain(args []string) {
	o := relay.Options{Mode: relay.DefaultMode, MaxConnections: relay.DefaultMaxConnections,
		CheckInterval: relay.DefaultCheckInterval, DialTimeout: relay.DefaultDialTimeout}
	fs := pflag.NewFlagSet("podresources-relay", pflag.ContinueOnError)
	fs.StringVar(&o.Listen, "listen", "", "Path of the relay's own socket, in a volume shared with the agent, where the agent's --podresources-socket points. Required.")
	fs.StringVar(&o.Upstream, "kubelet-socket", "/var/lib/kubelet/pod-resources/kubelet.sock", "Path of the kubelet's pod-resources socket.")
	mode := socketModeFlag(fs)
	fs.IntVar(&o.MaxConnections, "max-connections", o.MaxConnections, "Connections relayed at once; more are closed when accepted. The agent holds one.")
	fs.DurationVar(&o.CheckInterval, "check-interval", o.CheckInterval, "How often the kubelet's socket is looked for: the relay listens only while it is there and connectable.")
	fs.DurationVar(&o.DialTimeout, "dial-timeout", o.DialTimeout, "Bound on connecting to the kubelet's socket.")
	runRelay(fs, args, `relays the kubelet's pod-resources socket
to a socket of its own, so that an agent that does not run as root can read
the pod-resources API. The kubelet's socket is root's, and connect(2) needs
write permission on it: the relay runs as uid 0 with every capability
dropped and sees nothing of the host but the kubelet's pod-resources
directory. It listens only while the kubelet's socket is there and
connectable, and copies bytes without reading them (the API is read-only).`,
		func() error { o.Mode = *mode; return o.Validate() },
		func(ctx context.Context) error { return relay.Run(ctx, o) })
}

// powercapMain runs the powercap relay (relay.RunPowercap) with args.
func powercapMain(args []string) {
	o := relay.PowercapOptions{Root: relay.DefaultPowercapRoot, Mode: relay.DefaultMode,
		MinInterval: relay.DefaultPowercapMinInterval, MaxConnections: relay.DefaultMaxConnections}
	fs := pflag.NewFlagSet("powercap-relay", pflag.ContinueOnError)
	fs.StringVar(&o.Listen, "listen", "", "Path of the relay's socket, in a volume shared with the agent, where the agent's --powercap-relay-socket points. Required.")
	fs.StringVar(&o.Root, "powercap-root", o.Root, "The host's powercap devices directory, mounted read-only: zones are read under it (<root>/intel-rapl/intel-rapl:0/energy_uj).")
	mode := socketModeFlag(fs)
	fs.DurationVar(&o.MinInterval, "min-interval", o.MinInterval, "A counter is read at most once each interval, and requests in between get its last value: the agent reads once a sample (--interval, 1s and up), while the power side channel the kernel closed (CVE-2020-8694) reads counters thousands of times a second. 10ms to 10s.")
	fs.IntVar(&o.MaxConnections, "max-connections", o.MaxConnections, "Requests served at once; more are closed when accepted.")
	runRelay(fs, args, `serves the host's RAPL energy counters
(energy_uj), which Linux lets only root read since 5.10 (CVE-2020-8694), to
an agent that does not run as root. It runs as uid 0 with every capability
dropped (the files are root's: their owner needs no capability) and sees
only the host's powercap devices, read-only. It answers with the counters
asked for and nothing else, each read at most once each --min-interval.`,
		func() error { o.Mode = *mode; return o.Validate() },
		func(ctx context.Context) error { return relay.RunPowercap(ctx, o) })
}

// octalMode is a file mode flag written in octal.
type octalMode iofs.FileMode

func (m *octalMode) String() string { return fmt.Sprintf("%#o", iofs.FileMode(*m)) }
func (m *octalMode) Type() string   { return "octal" }
func (m *octalMode) Set(v string) error {
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil {
		return fmt.Errorf("%q: not an octal mode", v)
	}
	*m = octalMode(n)
	return nil
}

// socketModeFlag adds a relay's --socket-mode; read it after parsing.
func socketModeFlag(fs *pflag.FlagSet) *iofs.FileMode {
	m := iofs.FileMode(relay.DefaultMode)
	fs.Var((*octalMode)(&m), "socket-mode", "Permission bits of the relay's socket, octal; its group is the relay's group (the pod's runAsGroup), which the agent shares. The owner's read and write are required.")
	return &m
}

// runRelay is a relay subcommand's main: its flags (fs, the logging flags
// added here) parsed from args, validated, and run until SIGTERM. what
// completes "telesched-agent <name> ..." in its --help.
func runRelay(fs *pflag.FlagSet, args []string, what string, validate func() error, run func(context.Context) error) {
	name := "telesched-agent " + fs.Name()
	fs.SortFlags = false
	logs := logging.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "%s %s\n\nUsage:\n  %s --listen PATH [flags]\n\nFlags:\n%s", name, what, name, fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "%s: %v (see --help)\n", name, err)
		os.Exit(2)
	}
	if err := logging.Apply(logs); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	if err := validate(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: invalid flags:\n%v\n", name, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if err := run(ctx); err != nil {
		klog.FromContext(ctx).Error(err, name+" failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
