// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the telesched-agent command: its flags, and the loop that
// samples, publishes, exports metrics and records events until SIGTERM.
package app

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/nvml"
	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/publisher"
	"github.com/telesched/telesched/agent/speed"
	"github.com/telesched/telesched/agent/status"
	"github.com/telesched/telesched/agent/thermalmodel"
	"github.com/telesched/telesched/agent/window"
	"github.com/telesched/telesched/internal/heat"
)

// MaxInterval is the longest --sample-interval: the NodeTelemetry API's
// maximum status.intervalSeconds, which reports the sample window.
const MaxInterval = 3600 * time.Second

// Defaults of the flags that are not the defaults of another package.
const (
	DefaultInterval       = 5 * time.Second
	DefaultSampleInterval = time.Second
	DefaultMetricsAddress = ":9102"
	// DefaultHealthAddress serves /healthz and /readyz apart from
	// /metrics, outside its connection cap.
	DefaultHealthAddress = ":8081"
	// DefaultMetricsMaxConnections caps the metrics server's open
	// connections: a scrape, two probes and a person with curl need four.
	DefaultMetricsMaxConnections = 16
	DefaultOnceWindow            = time.Second
	DefaultPodResourcesSocket    = "/var/lib/kubelet/pod-resources/kubelet.sock"
	DefaultStateEvery            = 30 * time.Second
	// DefaultGCPercent is the Go garbage collector's target (--gc-percent,
	// GOGC), the runtime's own. The agent's live heap is about a MiB and a
	// sample allocates about 100 KiB: at 100 it collects every half
	// minute or so; at 50 it keeps 1 to 2 MiB less resident but collects
	// every few seconds, which costs more CPU than all of a sample's file
	// reads (docs/benchmarks.md).
	DefaultGCPercent = 100
	// DefaultMaxProcs is how many goroutines the agent runs at once
	// (--max-procs, GOMAXPROCS). The runtime's own default is the node's
	// CPUs (the DaemonSet sets no CPU limit), a scheduler and GC worker
	// per CPU for an agent whose work is a sample's reads once a second:
	// at 1 it used 4-32 % less CPU (four runs) and 1-2.5 MiB less
	// anonymous memory than at 2 on the 2-core development VM
	// (docs/benchmarks.md; a larger node was not measured). NVML's calls
	// block only their thread, not the others.
	DefaultMaxProcs = 1
)

// Options are the agent's flags.
type Options struct {
	HostRoot   string
	NodeName   string
	Kubeconfig string
	// WrapTransport, if set, wraps the API client's transport; for
	// programs that embed the agent (the fleet-scale benchmark times each
	// write with it). Not a flag.
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// BeforeHostRead, if set, is called with the host path of each file
	// the agent reads under HostRoot, before it reads it; for programs
	// that embed the agent over a simulated host (the sandbox brings the
	// host's counters up to date in it). Not a flag.
	BeforeHostRead func(hostPath string)
	// Interval is the longest a move past the deadbands waits to be
	// published while it does not settle, and the unit of readiness and
	// of /healthz's window.
	Interval time.Duration
	// SampleInterval is how often the agent reads the host, and the window
	// its rates cover; Complete caps it at Interval.
	SampleInterval time.Duration
	// Window is how far back status.windows looks: a ring of
	// Window/SampleInterval samples. 0 publishes no windows.
	Window time.Duration

	Once       bool
	Output     string
	OnceWindow time.Duration

	Publish        bool
	MetricsAddress string
	// MetricsMaxConnections caps the metrics server's open connections;
	// more wait to be accepted.
	MetricsMaxConnections int
	// HealthAddress is the address of the server of /healthz and /readyz,
	// which has no connection cap; "" serves neither.
	HealthAddress string
	// HealthzMissedIntervals is how many Intervals may pass without a
	// completed sample before /healthz fails.
	HealthzMissedIntervals int
	NVML                   bool
	// NVMLTimeout bounds the NVML calls of one sample (see
	// collector.GPUCollector).
	NVMLTimeout time.Duration
	// GPUTopologyInterval is how often the GPUs' PCIe roots and NVLinks
	// are read again while the GPUs stay the same.
	GPUTopologyInterval time.Duration
	// ThrottleInterval is how often the CPUs' thermal throttle counters
	// are read (see collector.CPUCollector.WithThrottleInterval).
	ThrottleInterval time.Duration
	// HostDirFDs is how many of the host's directories the agent keeps
	// open to read their files relative to (see hostfs.SetDirFDLimit);
	// 0 opens every file by its full path.
	HostDirFDs   int
	PodResources string
	// PowercapRelay is the powercap relay's socket, a path in the agent's
	// own filesystem (not under --host-root), through which RAPL's
	// root-only energy_uj is read when the agent may not read it; ""
	// reads it directly only.
	PowercapRelay string
	// GPUResources says which kubelet allocations are GPUs.
	GPUResources collector.GPUResources
	// NVMLLibrary, when set, is used instead of the system's
	// libnvidia-ml.so.1: the sandbox gives simulated nodes go-nvml's mock
	// GPUs this way. It is not a flag.
	NVMLLibrary nvml.Library

	Publisher publisher.Config
	Heat      status.HeatConfig
	// SensorHold is how long a temperature sensor's last good reading
	// stands in for it while its reads fail (see
	// collector.ThermalCollector).
	SensorHold time.Duration
	// GCPercent is the garbage collector's target percentage; the GOGC
	// environment variable, when set, wins (see main).
	GCPercent int
	// MaxProcs is the runtime's GOMAXPROCS; the GOMAXPROCS environment
	// variable, when set, wins (see main). 0 keeps the runtime's default.
	MaxProcs int
	// OverheatingTaint sets the taint OverheatingTaintKey on the Node
	// while it is Overheating, and removes it once the node has stayed
	// cool for OverheatingTaintHold (status.TaintTracker).
	OverheatingTaint     bool
	OverheatingTaintHold time.Duration
	// OverheatingConditionHeartbeat: DefaultConditionHeartbeat.
	OverheatingConditionHeartbeat time.Duration
	// StateFile keeps the models' state on the node between restarts;
	// "" keeps none. StateEvery is how often it is written.
	StateFile    string
	StateEvery   time.Duration
	PowerModel   powermodel.Config
	ThermalModel thermalmodel.Config
	// SpeedTable is the operator's speed table (speed.Table in YAML),
	// keyed by CPU model and GPU product; "" for none. CPUCoreSpeedMilli,
	// above 0, is this node's CPU core speed, above every table. Speed
	// is what they and the shipped table resolve to (Validate).
	SpeedTable        string
	CPUCoreSpeedMilli int32
	Speed             speed.Resolver

	// Flag values in user units, converted by Complete.
	hotHeadroomCelsius, coolHeadroomCelsius, absoluteLimitCelsius float64
	gpuThrottleQuiet, gpuThrottleMinInterval                      time.Duration
	deadbandTemperatureCelsius                                    float64
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		HostRoot:               "/",
		NodeName:               os.Getenv("NODE_NAME"),
		Interval:               DefaultInterval,
		SampleInterval:         DefaultSampleInterval,
		Window:                 window.DefaultDuration,
		Output:                 "json",
		OnceWindow:             DefaultOnceWindow,
		Publish:                true,
		MetricsAddress:         DefaultMetricsAddress,
		MetricsMaxConnections:  DefaultMetricsMaxConnections,
		HealthAddress:          DefaultHealthAddress,
		HealthzMissedIntervals: DefaultHealthzMissedIntervals,
		NVML:                   true,
		NVMLTimeout:            collector.DefaultNVMLTimeout,
		PodResources:           DefaultPodResourcesSocket,
		GPUTopologyInterval:    collector.DefaultGPUTopologyInterval,
		ThrottleInterval:       collector.DefaultThrottleInterval,
		HostDirFDs:             hostfs.DefaultDirFDLimit,
		GPUResources:           collector.DefaultGPUResources(),
		Publisher: publisher.Config{
			FieldManager:    publisher.DefaultFieldManager,
			Heartbeat:       publisher.DefaultHeartbeat,
			HeartbeatJitter: publisher.DefaultHeartbeatJitter,
			RateLimitQPS:    publisher.DefaultRateLimitQPS,
			RateLimitBurst:  publisher.DefaultRateLimitBurst,
			BackoffInitial:  publisher.DefaultBackoffInitial,
			BackoffMax:      publisher.DefaultBackoffMax,
			Deadbands:       publisher.DefaultDeadbands(),
		},
		SensorHold:                    collector.DefaultSensorHold,
		OverheatingTaint:              true,
		OverheatingTaintHold:          status.DefaultTaintHold,
		OverheatingConditionHeartbeat: DefaultConditionHeartbeat,
		StateEvery:                    DefaultStateEvery,
		GCPercent:                     DefaultGCPercent,
		MaxProcs:                      DefaultMaxProcs,
		PowerModel:                    powermodel.DefaultConfig(),
		ThermalModel:                  thermalmodel.DefaultConfig(),
		hotHeadroomCelsius:            float64(status.DefaultHotHeadroomMilliCelsius) / 1000,
		coolHeadroomCelsius:           float64(status.DefaultCoolHeadroomMilliCelsius) / 1000,
		absoluteLimitCelsius:          float64(heat.DefaultAbsoluteLimitMilliCelsius) / 1000,
		gpuThrottleQuiet:              status.DefaultGPUThrottleQuiet,
		gpuThrottleMinInterval:        status.DefaultGPUThrottleMinInterval,
		deadbandTemperatureCelsius:    float64(publisher.DefaultTemperatureMilliCelsius) / 1000,
	}
}

// AddFlags adds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.HostRoot, "host-root", o.HostRoot, "Directory standing for the host's /: the agent reads <host-root>/proc and <host-root>/sys. In a DaemonSet, mount the host's /proc and /sys read-only under it.")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "Name of this Node and of its NodeTelemetry object. Defaults to $NODE_NAME (set it from the downward API: spec.nodeName).")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig. Empty: the in-cluster config.")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "Publishing interval: a signal that moved past its deadband is published once two samples in a row agree within the deadbands, and at the latest this long after the move was first seen, settled or not.")
	fs.DurationVar(&o.Window, "window", o.Window, "How far back status.windows looks: p50/p90/max of CPU and memory utilization and node watts, and min/p10/p50 of the thermal margin, over the samples of this window. The agent keeps a ring of --window / --sample-interval samples (at most 3600; 300 by default), so its memory is bounded. At least 2 × --sample-interval, at most 24h (left at its default, it is widened to 2 × a longer --sample-interval); 0 publishes no windows. A series is published once the window holds half its samples.")
	fs.DurationVar(&o.SampleInterval, "sample-interval", o.SampleInterval, "How often to read the host. Rates (CPU utilization, watts) are measured over this window and status.intervalSeconds reports it; /metrics and Events follow every sample. Capped at --interval.")

	fs.BoolVar(&o.Once, "once", o.Once, "Take one sample, print the NodeTelemetry the agent would publish, and exit. Needs no cluster.")
	fs.StringVarP(&o.Output, "output", "o", o.Output, "Format of --once: json or yaml.")
	fs.DurationVar(&o.OnceWindow, "once-window", o.OnceWindow, "With --once, the time between the baseline reading and the sample, over which utilization and power are measured.")

	fs.BoolVar(&o.Publish, "publish", o.Publish, "Publish NodeTelemetry to the API server. With --publish=false the agent samples and serves /metrics without a cluster.")
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", o.MetricsAddress, "Address of the HTTP server for /metrics. Empty disables it.")
	fs.IntVar(&o.MetricsMaxConnections, "metrics-max-connections", o.MetricsMaxConnections, "Most connections the server of --metrics-bind-address holds open at once; more wait to be accepted. A client that sends no request headers within 5s, no body within 10s, or stays idle for 60s is disconnected, so slow or stuck clients cannot hold them. At least 1. The probes' server (--health-probe-bind-address) is not counted.")
	fs.StringVar(&o.HealthAddress, "health-probe-bind-address", o.HealthAddress, "Address of the HTTP server for /healthz and /readyz (the kubelet's probes), apart from /metrics and outside --metrics-max-connections, so clients holding the metrics server's connections never delay a probe. Must differ from --metrics-bind-address. Empty disables it.")
	fs.IntVar(&o.HealthzMissedIntervals, "healthz-missed-intervals", o.HealthzMissedIntervals, "/healthz fails (503, saying when the last sample completed and how long ago) once this many --interval pass without a completed sample, as when a read of the host hangs; a liveness probe on it restarts a stuck agent. At least 1.")
	fs.BoolVar(&o.NVML, "nvml", o.NVML, "Read NVIDIA GPUs through NVML (libnvidia-ml.so.1). Without the library the GPU source reports NVMLNotAvailable once.")
	fs.DurationVar(&o.NVMLTimeout, "nvml-timeout", o.NVMLTimeout, "Longest a sample waits for its NVML calls. When they do not return in time the sample is published without GPUs, the gpu source Failed with reason NVMLTimeout, and NVML is not called again until the stuck call returns. Must be shorter than --healthz-missed-intervals × --interval; left at its default, it is half of that when that is shorter than 10s.")
	fs.DurationVar(&o.GPUTopologyInterval, "gpu-topology-interval", o.GPUTopologyInterval, "How often the GPUs' PCIe roots (sysfs) and NVLinks (NVML) are read again while the set of GPUs stays the same; they are always read at start and when a GPU comes, goes or changes. Must be positive.")
	fs.IntVar(&o.HostDirFDs, "host-dir-fds", o.HostDirFDs, "How many of the host's /proc and /sys directories the agent keeps open, to open the files it reads every sample relative to them instead of walking each full path: about 90 on a 64-CPU server. Capped at a quarter of the process's open-file limit; directories past it are read by full path. 0 keeps none.")
	fs.DurationVar(&o.ThrottleInterval, "throttle-interval", o.ThrottleInterval, "How often the CPUs' thermal throttle counters (/sys/devices/system/cpu/cpuN/thermal_throttle, one file per CPU) are read; the samples in between carry the last reading. The counters count events since boot, so none is missed: a rise between two reads is throttling, seen at the later one. Temperatures are read every sample. 0 reads them every sample.")
	fs.StringVar(&o.PowercapRelay, "powercap-relay-socket", o.PowercapRelay, "Path, in the agent's own filesystem, of the powercap relay's socket (telesched-agent powercap-relay): where RAPL's energy_uj is root's (Linux 5.10 and later) and the agent is not, it reads the counters through the relay. Empty: RAPL is read directly or not at all.")
	fs.StringVar(&o.PodResources, "podresources-socket", o.PodResources, "Path, under --host-root, of the kubelet pod-resources socket, for per-NUMA exclusive CPU allocations and GPU and MIG device allocations. Absent socket: the source is reported unavailable and those fields are left out.")
	fs.StringSliceVar(&o.GPUResources.Names, "gpu-resource-names", o.GPUResources.Names, "Device-plugin resources whose devices are whole GPUs (or MIG devices, by UUID, under the device plugin's single MIG strategy), for gpus[].allocated.")
	fs.StringVar(&o.GPUResources.MIGPrefix, "mig-resource-prefix", o.GPUResources.MIGPrefix, "Prefix of the device-plugin resources of MIG devices (the device plugin's mixed MIG strategy: nvidia.com/mig-<profile>), for gpus[].mig.profiles[].allocated. Empty: none.")
	fs.StringSliceVar(&o.GPUResources.DRADrivers, "gpu-dra-drivers", o.GPUResources.DRADrivers, "DRA drivers whose claimed devices are GPUs or MIG devices. A claimed device is mapped to a GPU when its CDI device name or device name holds the GPU's or MIG device's UUID; when one is not, every GPU's allocation is left out and the podResources source says which.")

	fs.DurationVar(&o.Publisher.Heartbeat, "heartbeat", o.Publisher.Heartbeat, "Longest time between writes while no signal moves past its deadband.")
	fs.Float64Var(&o.Publisher.HeartbeatJitter, "heartbeat-jitter", o.Publisher.HeartbeatJitter, "Each heartbeat comes after --heartbeat less up to this share of it (0 to below 1), at random, so agents started together do not write together ever after; --heartbeat stays the longest gap.")
	fs.Float32Var(&o.Publisher.RateLimitQPS, "publish-qps", o.Publisher.RateLimitQPS, "Sustained rate limit of writes to the API server, per second.")
	fs.IntVar(&o.Publisher.RateLimitBurst, "publish-burst", o.Publisher.RateLimitBurst, "Burst of writes allowed above --publish-qps.")
	fs.DurationVar(&o.Publisher.BackoffInitial, "backoff-initial", o.Publisher.BackoffInitial, "Wait after a failed write; doubles per failure, with jitter.")
	fs.DurationVar(&o.Publisher.BackoffMax, "backoff-max", o.Publisher.BackoffMax, "Longest wait between write attempts while the API server fails: NodeTelemetry writes, and the overheating taint's (whose first retry waits --backoff-initial).")
	fs.Int32Var(&o.Publisher.Deadbands.UtilizationPoints, "deadband-utilization-points", o.Publisher.Deadbands.UtilizationPoints, "Percentage points CPU, memory, NUMA or GPU utilization must move to be published before the heartbeat.")
	fs.Float64Var(&o.deadbandTemperatureCelsius, "deadband-temperature-celsius", o.deadbandTemperatureCelsius, "Degrees a temperature or the thermal headroom must move to be published before the heartbeat.")
	fs.Int32Var(&o.Publisher.Deadbands.PowerPercent, "deadband-power-percent", o.Publisher.Deadbands.PowerPercent, "Percent node or GPU power must move to be published before the heartbeat.")

	fs.Float64Var(&o.hotHeadroomCelsius, "overheat-headroom-celsius", o.hotHeadroomCelsius, "The node is Overheating (condition, NodeOverheating event) when a sensor is this close to its effective limit, or when its CPUs throttle. Keep it equal to EnergyAware's thermalMarginCelsius.")
	fs.Float64Var(&o.absoluteLimitCelsius, "absolute-limit-celsius", o.absoluteLimitCelsius, "Limit of a sensor that reports none (no crit, no max, no known vendor limit), e.g. AMD k10temp Tctl on an unlisted part. Keep it equal to EnergyAware's absoluteLimitCelsius.")
	fs.Float64Var(&o.coolHeadroomCelsius, "cool-headroom-celsius", o.coolHeadroomCelsius, "An overheating node recovers (NodeTemperatureNormal event) when every sensor is at least this far below its limit. Must be at least --overheat-headroom-celsius; the gap is the hysteresis.")
	fs.BoolVar(&o.OverheatingTaint, "overheating-taint", o.OverheatingTaint, "While the node is Overheating (--overheat-headroom-celsius), taint its Node telesched.io/overheating:NoSchedule, which every scheduler honours, with the Node condition TeleschedOverheating and an Event saying why; remove the taint once every sensor has stayed at least --cool-headroom-celsius below its limit, without throttling, for --overheating-taint-hold. Needs patch on nodes and nodes/status (deploy/agent/node-taint-rbac.yaml), held to this taint and condition of the agent's own Node by deploy/policy/node-taint.yaml.")
	fs.DurationVar(&o.OverheatingConditionHeartbeat, "overheating-condition-heartbeat", o.OverheatingConditionHeartbeat, "How often the Node condition TeleschedOverheating's lastHeartbeatTime is written while nothing changes, so a condition (and taint) whose agent stopped can be told from a live one by its age; 0 writes it only on change. With --overheating-taint=false the agent removes an earlier agent's taint at start and sets the condition False (reason TaintTurnedOff).")
	fs.DurationVar(&o.OverheatingTaintHold, "overheating-taint-hold", o.OverheatingTaintHold, "How long the node must stay cool (headroom at or above --cool-headroom-celsius, no throttling, in every sample) before its overheating taint is removed; a sample between the two headrooms starts the hold again. 0 removes it at the first cool sample.")
	fs.DurationVar(&o.gpuThrottleQuiet, "gpu-throttle-event-quiet-period", o.gpuThrottleQuiet, "A GPU that starts thermal throttling records a GPUThermalThrottling Event on its Node only when it has not throttled for this long: one hovering at its slowdown temperature flips from sample to sample, and would record an Event each time. 0 records every start.")
	fs.DurationVar(&o.gpuThrottleMinInterval, "gpu-throttle-event-min-interval", o.gpuThrottleMinInterval, "Least time between two GPUThermalThrottling Events of the node: the GPUs that start throttling in between are named together in the next one. 0 records each sample's at once.")
	fs.DurationVar(&o.SensorHold, "sensor-hold-duration", o.SensorHold, "How long, from when it was read, a temperature sensor's last good reading stands in for it while its reads fail (EIO, ENODATA, a value no sensor can have): it still counts toward the hottest sensor and the headroom, so a node last seen hot does not read cool. Then the sensor is left out. Either way the thermal source is Degraded, naming the sensor and its error, while its reads fail. 0 holds none.")

	fs.IntVar(&o.PowerModel.MinSamples, "power-model-min-samples", o.PowerModel.MinSamples, "Samples the power model needs before it is published as ready.")
	fs.IntVar(&o.PowerModel.MinSpreadPercent, "power-model-min-spread-percent", o.PowerModel.MinSpreadPercent, "CPU utilization range, in percentage points, the power model's samples must cover before it is published as fitted (before then it is published as prior where RAPL gives package power limits).")
	fs.StringVar(&o.SpeedTable, "speed-table", o.SpeedTable, "YAML file of the operator's CPU and GPU speeds (cpus: and gpus: rows of match, milli, basis; docs/energy-models.md, \"Speed\"), looked up by /proc/cpuinfo's model name and NVML's product name before the table telesched ships. A model no table knows is published as the reference (source reference). Empty: the shipped table alone.")
	fs.Int32Var(&o.CPUCoreSpeedMilli, "cpu-core-speed-milli", o.CPUCoreSpeedMilli, "This node's work per logical CPU per second in thousandths of the reference core's (a Dell R740 thread of SPECpower_ssj2008 result power_ssj2008-20170829-00780), above every table: for nodes whose CPU no table names. A Node's label telesched.io/cpu-core-speed-milli, read at start, comes before it. 0: look it up.")
	fs.StringVar(&o.StateFile, "state-file", o.StateFile, "File where the agent keeps its power and thermal models between restarts (the DaemonSet sets /var/lib/telesched-agent/models.json on a volume that outlives the container). Without it a restarted agent resumes from the curve and thermal model in its NodeTelemetry. Empty (the default) keeps no file.")
	fs.IntVar(&o.MaxProcs, "max-procs", o.MaxProcs, "How many goroutines the agent runs at once (the runtime's GOMAXPROCS, whose default is the node's CPUs, or the container's CPU limit rounded up to at least 2). The agent samples once a second: more costs CPU and memory for runtime threads with nothing to do. The GOMAXPROCS environment variable, when set, takes precedence. 0 keeps the runtime's default; not negative.")
	fs.IntVar(&o.GCPercent, "gc-percent", o.GCPercent, "The Go garbage collector's target: a collection starts when the heap has grown this many percent over what the last one left live (the runtime's GOGC, whose default is 100). Lower keeps less memory resident for a little more CPU. The GOGC environment variable, when set, takes precedence. At least 10.")
	fs.DurationVar(&o.StateEvery, "state-every", o.StateEvery, "How often the models' state is written to --state-file (and once when the agent stops).")
	fs.IntVar(&o.ThermalModel.MinSamples, "thermal-model-min-samples", o.ThermalModel.MinSamples, "Consecutive sample pairs the thermal model needs before it is published.")
	fs.Float64Var(&o.ThermalModel.MinPowerStdDevWatts, "thermal-model-min-power-stddev-watts", o.ThermalModel.MinPowerStdDevWatts, "How much the node's power must have varied (standard deviation, watts) before the thermal model can tell its °C per watt and time constant.")
	fs.Float64Var(&o.ThermalModel.MinPowerVariation, "thermal-model-min-power-variation", o.ThermalModel.MinPowerVariation, "The same as a share of the node's mean power (0 to 1): a node whose power wanders a few percent around one load fits any °C per watt, near zero among them, which would let any pod through.")
	fs.Float64Var(&o.ThermalModel.MaxAmbientCelsius, "thermal-model-max-ambient-celsius", o.ThermalModel.MaxAmbientCelsius, "The warmest 0 W temperature (°C) a thermal model may have: a fit flattened by noisy power raises its ambient toward the sensor's temperature and predicts that no pod can heat the node. Default: ASHRAE class A4's 45 °C inlet, plus 5.")
	fs.Float64Var(&o.ThermalModel.MinAmbientCelsius, "thermal-model-min-ambient-celsius", o.ThermalModel.MinAmbientCelsius, "The coldest 0 W temperature (°C) a thermal model may have: a fit over a ramp can trade a low ambient for a high °C per watt and a long time constant, and then predicts far more heat than a pod brings. Default: ASHRAE's lowest allowable inlet, 5 °C, less 5.")
	fs.IntVar(&o.ThermalModel.Memory, "thermal-model-memory", o.ThermalModel.Memory, "Weight, in samples, of the thermal model's past: each sample discounts older ones by 1 - 1/memory, so a failed fan is learned.")
}

// Complete converts the flags in user units.
func (o *Options) Complete() {
	o.Heat = status.HeatConfig{
		HotHeadroomMilliCelsius:   int64(o.hotHeadroomCelsius * 1000),
		CoolHeadroomMilliCelsius:  int64(o.coolHeadroomCelsius * 1000),
		AbsoluteLimitMilliCelsius: int64(o.absoluteLimitCelsius * 1000),
		GPUThrottleQuiet:          o.gpuThrottleQuiet,
		GPUThrottleMinInterval:    o.gpuThrottleMinInterval,
	}
	o.Publisher.Deadbands.TemperatureMilliCelsius = int64(o.deadbandTemperatureCelsius * 1000)
	o.Publisher.NodeName = o.NodeName
	o.SampleInterval = min(o.SampleInterval, o.Interval)
}

// Validate reports every bad flag, naming it.
func (o *Options) Validate() error {
	var errs []error
	switch {
	case o.Interval < 100*time.Millisecond:
		errs = append(errs, fmt.Errorf("--interval %v: must be at least 100ms", o.Interval))
	}
	if o.SampleInterval > MaxInterval {
		errs = append(errs, fmt.Errorf("--sample-interval %v: the NodeTelemetry API takes at most %v (status.intervalSeconds %d)", o.SampleInterval, MaxInterval, int(MaxInterval.Seconds())))
	}
	if o.SampleInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--sample-interval %v: must be at least 100ms", o.SampleInterval))
	}
	if o.Window < 0 {
		errs = append(errs, fmt.Errorf("--window %v: must not be negative (0 publishes no windows)", o.Window))
	} else if o.Window > 0 && o.SampleInterval > 0 {
		if o.Window == window.DefaultDuration && o.Window < 2*o.SampleInterval {
			// Left at its default with a long --sample-interval: two
			// samples, so the default never contradicts the other flags.
			o.Window = 2 * o.SampleInterval
		}
		if err := window.Validate(o.Window, o.SampleInterval); err != nil {
			errs = append(errs, fmt.Errorf("--window %v with --sample-interval %v: %w", o.Window, o.SampleInterval, err))
		}
	}
	if fi, err := os.Stat(o.HostRoot); err != nil || !fi.IsDir() {
		errs = append(errs, fmt.Errorf("--host-root %q: not a directory", o.HostRoot))
	}
	if err := o.Heat.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--overheat-headroom-celsius/--cool-headroom-celsius/--gpu-throttle-event-*: %w", err))
	}
	if o.OverheatingConditionHeartbeat < 0 {
		errs = append(errs, fmt.Errorf("--overheating-condition-heartbeat %v: must not be negative (0 writes the condition only on change)", o.OverheatingConditionHeartbeat))
	}
	if o.OverheatingTaintHold < 0 {
		errs = append(errs, fmt.Errorf("--overheating-taint-hold %v: must not be negative (0 removes the taint at the first cool sample)", o.OverheatingTaintHold))
	}
	if o.SensorHold < 0 {
		errs = append(errs, fmt.Errorf("--sensor-hold-duration %v: must not be negative", o.SensorHold))
	}
	if o.GPUTopologyInterval <= 0 {
		errs = append(errs, fmt.Errorf("--gpu-topology-interval %v: must be positive", o.GPUTopologyInterval))
	}
	if o.MaxProcs < 0 {
		errs = append(errs, fmt.Errorf("--max-procs %d: must not be negative (0 keeps the runtime's default)", o.MaxProcs))
	}
	if o.GCPercent < 10 {
		errs = append(errs, fmt.Errorf("--gc-percent %d: must be at least 10", o.GCPercent))
	}
	if o.HostDirFDs < 0 {
		errs = append(errs, fmt.Errorf("--host-dir-fds %d: must not be negative (0 keeps no directory open)", o.HostDirFDs))
	}
	if o.ThrottleInterval < 0 {
		errs = append(errs, fmt.Errorf("--throttle-interval %v: must not be negative (0 reads the counters every sample)", o.ThrottleInterval))
	}
	if o.NVMLTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--nvml-timeout %v: must be positive", o.NVMLTimeout))
	}
	if o.CPUCoreSpeedMilli < 0 || o.CPUCoreSpeedMilli > speed.MaxMilli {
		errs = append(errs, fmt.Errorf("--cpu-core-speed-milli %d: must be 0 (look it up) to %d", o.CPUCoreSpeedMilli, speed.MaxMilli))
	}
	o.Speed = speed.Resolver{Shipped: speed.Shipped(), CPUCoreMilli: o.CPUCoreSpeedMilli}
	if o.SpeedTable != "" {
		t, err := speed.Load(o.SpeedTable)
		if err != nil {
			errs = append(errs, fmt.Errorf("--speed-table: %w", err))
		}
		o.Speed.Operator = t
	}
	if o.StateEvery < time.Second {
		return fmt.Errorf("--state-every %v must be at least 1s", o.StateEvery)
	}
	if err := o.ThermalModel.Validate(); err != nil {
		return err
	}
	if err := o.PowerModel.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--power-model-*: %w", err))
	}
	if o.Once {
		if o.Output != "json" && o.Output != "yaml" {
			errs = append(errs, fmt.Errorf("--output %q: must be json or yaml", o.Output))
		}
		if o.OnceWindow < 100*time.Millisecond {
			errs = append(errs, fmt.Errorf("--once-window %v: must be at least 100ms", o.OnceWindow))
		}
		return errors.Join(errs...)
	}
	if o.MetricsMaxConnections < 1 {
		errs = append(errs, fmt.Errorf("--metrics-max-connections %d: must be at least 1", o.MetricsMaxConnections))
	}
	if o.HealthAddress != "" && o.HealthAddress == o.MetricsAddress {
		errs = append(errs, fmt.Errorf("--health-probe-bind-address %q: the same as --metrics-bind-address; the probes need a listener of their own, outside --metrics-max-connections", o.HealthAddress))
	}
	if o.HealthzMissedIntervals < 1 {
		errs = append(errs, fmt.Errorf("--healthz-missed-intervals %d: must be at least 1", o.HealthzMissedIntervals))
	} else if window := time.Duration(o.HealthzMissedIntervals) * o.Interval; o.NVML && o.HealthAddress != "" && o.NVMLTimeout >= window {
		if o.NVMLTimeout == collector.DefaultNVMLTimeout {
			// Left at its default with a short --interval: half the
			// window, so the default never contradicts the other flags.
			o.NVMLTimeout = window / 2
		} else {
			errs = append(errs, fmt.Errorf("--nvml-timeout %v: must be shorter than --healthz-missed-intervals × --interval (%v), or one sample held up by NVML fails /healthz", o.NVMLTimeout, window))
		}
	}
	if o.Publish {
		if err := o.Publisher.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("publishing (see --node-name, --heartbeat, --publish-*, --backoff-*, --deadband-*): %w", err))
		}
	}
	return errors.Join(errs...)
}
