// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package metrics exports the agent's last sample and its own health as
// Prometheus metrics. Every value comes from the same Observation the status
// was built from; a signal the node does not have is an absent series, never
// a sentinel value.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/telesched/telesched/agent"
	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/publisher"
	"github.com/telesched/telesched/agent/status"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

const ns = "telesched"

func desc(subsystem, name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(ns, subsystem, name), help, labels, nil)
}

var (
	// Agent.
	collectorDuration = desc("agent", "collector_duration_seconds", "Duration of the collector's last run.", "collector")
	collectorSuccess  = desc("agent", "collector_success", "Whether the collector's source was read in the last sample (1, also when only in part: source_info's reason is then Degraded) or not (0).", "collector")
	sourceInfo        = desc("agent", "source_info", "State of each telemetry source in the last sample, with the reason when it is not Available or was read only in part (Available, reason Degraded).", "source", "state", "reason")

	// Node CPU and memory.
	cpuUtilization = desc("node", "cpu_utilization_ratio", "Busy share of the online CPUs over the last interval.")
	cpuCores       = desc("node", "cpu_logical_cores", "Logical CPUs present.")
	cpuOnline      = desc("node", "cpu_online_cores", "Logical CPUs online.")
	load           = desc("node", "load_average", "Load average.", "window")
	pressureAvg10  = desc("node", "pressure_avg10_ratio", "Share of the last 10 s in which tasks stalled on the resource (PSI).", "resource", "kind")
	pressureTotal  = desc("node", "pressure_stalled_seconds_total", "Total time some task stalled on the resource (PSI some).", "resource")
	throttleEvents = desc("node", "cpu_thermal_throttle_events_total", "CPU thermal throttle events the agent has seen since it started (rises of the kernel's per-CPU and per-package counters; a CPU going offline is no reset).", "level")
	memTotal       = desc("node", "memory_total_bytes", "MemTotal.")
	memAvailable   = desc("node", "memory_available_bytes", "MemAvailable.")
	memUtilization = desc("node", "memory_utilization_ratio", "Share of memory in use: (total - available) / total.")

	// Thermal.
	temperature      = desc("node", "temperature_celsius", "Temperature of a sensor.", "sensor")
	temperatureMax   = desc("node", "temperature_max_celsius", "Max limit a sensor reports.", "sensor")
	temperatureCrit  = desc("node", "temperature_crit_celsius", "Critical limit a sensor reports.", "sensor")
	temperatureLimit = desc("node", "temperature_limit_celsius", "Effective limit of a sensor: its crit, else its max, else its vendor's published limit, else the agent's absolute limit (--absolute-limit-celsius); type says which.", "sensor", "type")
	headroom         = desc("node", "thermal_headroom_celsius", "Smallest distance from a sensor's temperature up to its effective limit (the node is Overheating at --overheat-headroom-celsius or less).")
	alarms           = desc("node", "thermal_alarms", "Sensors with an alarm flag raised; some alarms stay raised until reboot, so an alarm is not heat.")
	throttling       = desc("node", "thermal_throttling", "Whether the node was thermally throttled during the last interval.")
	overheating      = desc("node", "overheating", "Whether the node is overheating (the Overheating condition is True).")

	// Power.
	powerWatts      = desc("node", "power_zone_watts", "Power of one meter over the last interval.", "zone", "source")
	powerTotal      = desc("node", "power_watts", "Node power over the last interval, each domain counted once.")
	energy          = desc("node", "energy_joules_total", "Energy measured since the agent started.")
	modelReady      = desc("node", "power_model_ready", "Whether the fitted power model is ready.")
	modelIdle       = desc("node", "power_model_idle_watts", "Fitted power at 0% CPU.")
	modelFull       = desc("node", "power_model_full_load_watts", "Fitted power at 100% CPU.")
	modelSamples    = desc("node", "power_model_samples", "Samples the power model rests on.")
	cpuSpeed        = desc("node", "cpu_core_speed_ratio", "Work a logical CPU does per second at full load against the reference core's (status.speed; docs/energy-models.md), and where the figure came from: operator, table, or reference (unknown, judged as the reference).", "source")
	gpuSpeed        = desc("gpu", "speed_ratio", "Work a whole GPU of the model does per second against the reference GPU's (status.speed), and where the figure came from.", "model", "source")
	numaMemTotal    = desc("node", "numa_memory_total_bytes", "MemTotal of a NUMA node.", "numa_node")
	numaMemFree     = desc("node", "numa_memory_free_bytes", "MemFree of a NUMA node.", "numa_node")
	numaUtilization = desc("node", "numa_cpu_utilization_ratio", "Busy share of a NUMA node's CPUs over the last interval.", "numa_node")

	// GPUs.
	gpuLabels         = []string{"gpu", "uuid", "model"}
	gpuInfo           = desc("gpu", "info", "A GPU and where it is attached.", "gpu", "uuid", "model", "pci_bus_id", "numa_node")
	gpuUtilization    = desc("gpu", "utilization_ratio", "Share of the last period a kernel ran on the GPU.", gpuLabels...)
	gpuMemTotal       = desc("gpu", "memory_total_bytes", "GPU framebuffer memory.", gpuLabels...)
	gpuMemUsed        = desc("gpu", "memory_used_bytes", "GPU framebuffer memory in use.", gpuLabels...)
	gpuTemperature    = desc("gpu", "temperature_celsius", "GPU die temperature.", gpuLabels...)
	gpuSlowdown       = desc("gpu", "slowdown_temperature_celsius", "Temperature at which the GPU slows down.", gpuLabels...)
	gpuShutdown       = desc("gpu", "shutdown_temperature_celsius", "Temperature at which the GPU shuts down.", gpuLabels...)
	gpuPower          = desc("gpu", "power_watts", "GPU power draw.", gpuLabels...)
	gpuPowerLimit     = desc("gpu", "power_limit_watts", "Enforced GPU power limit.", gpuLabels...)
	gpuEnergy         = desc("gpu", "energy_joules_total", "GPU energy counter since the driver loaded.", gpuLabels...)
	gpuHealthy        = desc("gpu", "healthy", "Whether the GPU may be given new work.", gpuLabels...)
	gpuECC            = desc("gpu", "ecc_uncorrected_errors", "Volatile uncorrected ECC errors.", gpuLabels...)
	gpuXID            = desc("gpu", "xid_critical_events_total", "Critical XID events since the agent started.", gpuLabels...)
	gpuThrottleReason = desc("gpu", "throttle_reason", "Active clock-event (throttle) reasons, one series per reason.", "gpu", "uuid", "model", "reason")
)

// Metrics holds the agent's metrics. Update it after every cycle and after
// every publish attempt.
type Metrics struct {
	mu  sync.Mutex
	obs *agent.Observation

	samples        prometheus.Counter
	publishes      *prometheus.CounterVec
	publishLatency prometheus.Histogram
	lastPublish    prometheus.Gauge
	events         *prometheus.CounterVec
	leftOut        *prometheus.CounterVec
}

// New registers the agent's metrics with reg.
func New(reg prometheus.Registerer, version string) *Metrics {
	m := &Metrics{
		samples: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "agent", Name: "samples_total", Help: "Sampling cycles run.",
		}),
		publishes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "agent", Name: "publish_total",
			Help: "NodeTelemetry writes by result (success, error) and, for success, why (first, heartbeat, change, recreated).",
		}, []string{"result", "reason"}),
		publishLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: "agent", Name: "publish_duration_seconds", Help: "Duration of NodeTelemetry writes.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
		lastPublish: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: "agent", Name: "last_publish_timestamp_seconds", Help: "Unix time of the last successful NodeTelemetry write.",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "agent", Name: "events_total", Help: "Kubernetes Events emitted on the Node, by reason.",
		}, []string{"reason"}),
		leftOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "agent", Name: "publish_sections_left_out_total",
			Help: "NodeTelemetry writes that left a status section out because the API server refused it (422), by section.",
		}, []string{"section"}),
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: "agent", Name: "build_info", Help: "The agent's version; value 1.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	info.Set(1)
	reg.MustRegister(m, m.samples, m.publishes, m.publishLatency, m.lastPublish, m.events, m.leftOut, info)
	return m
}

// Observe records a sampling cycle.
func (m *Metrics) Observe(obs *agent.Observation) {
	m.mu.Lock()
	m.obs = obs
	m.mu.Unlock()
	m.samples.Inc()
}

// Published records a publish attempt.
func (m *Metrics) Published(out publisher.Outcome, at time.Time) {
	for _, section := range out.Dropped {
		m.leftOut.WithLabelValues(section).Inc()
	}
	switch {
	case out.Err != nil:
		m.publishes.WithLabelValues("error", "").Inc()
		m.publishLatency.Observe(out.Duration.Seconds())
	case out.Published:
		reason := "change"
		switch {
		case out.Recreated:
			reason = "recreated"
		case out.Reason == "first" || out.Reason == "heartbeat":
			reason = out.Reason
		}
		m.publishes.WithLabelValues("success", reason).Inc()
		m.publishLatency.Observe(out.Duration.Seconds())
		m.lastPublish.Set(float64(at.UnixNano()) / 1e9)
	}
}

// Event records an emitted Kubernetes Event.
func (m *Metrics) Event(reason string) { m.events.WithLabelValues(reason).Inc() }

// Describe implements prometheus.Collector. The sample's series vary, so
// the collector is unchecked.
func (m *Metrics) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	obs := m.obs
	m.mu.Unlock()
	if obs == nil {
		return
	}
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	c := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, r := range obs.Results {
		g(collectorDuration, r.Duration.Seconds(), string(r.Name))
		g(collectorSuccess, boolValue(r.Err == nil || collector.IsDegraded(r.Err)), string(r.Name))
	}
	for _, s := range obs.Sample.Sources {
		g(sourceInfo, 1, string(s.Name), string(s.State), s.Reason)
	}

	st := &obs.Status
	if cpu := st.CPU; cpu != nil {
		g(cpuUtilization, obs.Sample.CPUBusy)
		g(cpuCores, float64(cpu.LogicalCores))
		g(cpuOnline, float64(cpu.OnlineCores))
		if l := cpu.LoadAverage; l != nil {
			g(load, float64(l.OneMinuteMilli)/1000, "1m")
			g(load, float64(l.FiveMinuteMilli)/1000, "5m")
			g(load, float64(l.FifteenMinuteMilli)/1000, "15m")
		}
		pressure(g, c, "cpu", cpu.Pressure)
		if cpu.ThermalThrottle != nil {
			c(throttleEvents, float64(obs.Sample.ThrottleEvents.Core), "core")
			c(throttleEvents, float64(obs.Sample.ThrottleEvents.Package), "package")
		}
	}
	pressure(g, c, "io", obs.Sample.IOPressure)
	if mem := st.Memory; mem != nil {
		g(memTotal, float64(mem.TotalBytes))
		g(memAvailable, float64(mem.AvailableBytes))
		g(memUtilization, float64(mem.TotalBytes-mem.AvailableBytes)/float64(mem.TotalBytes))
		pressure(g, c, "memory", mem.Pressure)
	}
	if th := obs.Sample.Thermal; th != nil {
		for _, s := range th.Sensors {
			g(temperature, milli(s.MilliCelsius), s.Name)
			if s.MaxMilliCelsius != nil {
				g(temperatureMax, milli(*s.MaxMilliCelsius), s.Name)
			}
			if s.CritMilliCelsius != nil {
				g(temperatureCrit, milli(*s.CritMilliCelsius), s.Name)
			}
			limit, typ := status.EffectiveLimit(s)
			if limit == nil {
				limit, typ = &obs.AbsoluteLimitMilliCelsius, "Absolute"
			}
			g(temperatureLimit, milli(*limit), s.Name, string(typ))
		}
	}
	if th := st.Thermal; th != nil {
		g(throttling, boolValue(th.Throttling))
		g(alarms, float64(th.Alarms))
	}
	if obs.Heat.Headroom.Known {
		g(headroom, milli(obs.Heat.Headroom.MilliCelsius))
	}
	if obs.Heat.Known {
		g(overheating, boolValue(obs.Heat.Hot))
	}
	if p := obs.Sample.Power; p != nil {
		g(powerTotal, p.Watts)
		c(energy, p.EnergyJoules)
		for _, z := range p.Zones {
			g(powerWatts, z.Watts, z.Name, string(z.Source))
		}
	}
	if p := st.Power; p != nil && p.Model != nil {
		g(modelReady, boolValue(p.Model.Ready))
		g(modelSamples, float64(p.Model.Samples))
		if p.Model.Ready {
			g(modelIdle, float64(*p.Model.IdleWatts))
			g(modelFull, float64(*p.Model.FullLoadWatts))
		}
	}
	if sp := st.Speed; sp != nil {
		g(cpuSpeed, float64(sp.CPUCoreMilli)/1000, string(sp.CPUSource))
		for _, gs := range sp.GPUs {
			g(gpuSpeed, float64(gs.Milli)/1000, gs.Model, string(gs.Source))
		}
	}
	for _, n := range st.NUMA {
		id := strconv.Itoa(int(n.ID))
		g(numaMemTotal, float64(n.MemoryTotalBytes), id)
		g(numaMemFree, float64(n.MemoryFreeBytes), id)
		if n.CPUUtilizationPercent != nil {
			g(numaUtilization, float64(*n.CPUUtilizationPercent)/100, id)
		}
	}
	for _, gpu := range st.GPUs {
		l := []string{strconv.Itoa(int(gpu.Index)), gpu.UUID, gpu.Model}
		numa := ""
		if gpu.NUMANode != nil {
			numa = strconv.Itoa(int(*gpu.NUMANode))
		}
		g(gpuInfo, 1, append(l, gpu.PCIBusID, numa)...)
		g(gpuMemTotal, float64(gpu.MemoryTotalBytes), l...)
		g(gpuMemUsed, float64(gpu.MemoryUsedBytes), l...)
		g(gpuHealthy, boolValue(gpu.Health.Healthy), l...)
		c(gpuXID, float64(gpu.Health.XIDCriticalEvents), l...)
		optional(g, gpuUtilization, gpu.UtilizationPercent, 0.01, l)
		optional(g, gpuTemperature, gpu.TemperatureMilliCelsius, 0.001, l)
		optional(g, gpuSlowdown, gpu.SlowdownMilliCelsius, 0.001, l)
		optional(g, gpuShutdown, gpu.ShutdownMilliCelsius, 0.001, l)
		optional(g, gpuPower, gpu.PowerWatts, 1, l)
		optional(g, gpuPowerLimit, gpu.PowerLimitWatts, 1, l)
		optional(g, gpuECC, gpu.Health.ECCUncorrectedErrors, 1, l)
		if gpu.EnergyJoules != nil {
			c(gpuEnergy, float64(*gpu.EnergyJoules), l...)
		}
		for _, r := range gpu.ThrottleReasons {
			g(gpuThrottleReason, 1, append(l, string(r))...)
		}
	}
}

type emit func(d *prometheus.Desc, v float64, labels ...string)

func pressure(g, c emit, resource string, p *telemetryv1alpha1.PressureStatus) {
	if p == nil {
		return
	}
	g(pressureAvg10, float64(p.SomeAvg10BasisPoints)/10000, resource, "some")
	if p.FullAvg10BasisPoints != nil {
		g(pressureAvg10, float64(*p.FullAvg10BasisPoints)/10000, resource, "full")
	}
	c(pressureTotal, float64(p.SomeTotalMicroseconds)/1e6, resource)
}

func optional[T int32 | int64](g emit, d *prometheus.Desc, v *T, scale float64, labels []string) {
	if v != nil {
		g(d, float64(*v)*scale, labels...)
	}
}

func milli(v int64) float64 { return float64(v) / 1000 }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
