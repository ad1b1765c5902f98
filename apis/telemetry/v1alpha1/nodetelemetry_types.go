// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeTelemetry is the live hardware telemetry of one Node, as its telesched
// agent last sampled it. There is one object per Node, named after the Node
// and owned by it, so it is garbage-collected with the Node. The agent owns
// the whole status and writes it through the status subresource with
// server-side apply; the telesched scheduler reads it to filter and score
// nodes.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=nt,categories=telesched
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.status.summary.cpu`,description="CPU utilization over the last interval."
// +kubebuilder:printcolumn:name="MEMORY",type=string,JSONPath=`.status.summary.memory`,description="Memory in use (total minus available)."
// +kubebuilder:printcolumn:name="TEMP",type=string,JSONPath=`.status.summary.temperature`,description="Hottest sensor on the node, or why the node has none (e.g. NoSensors)."
// +kubebuilder:printcolumn:name="POWER",type=string,JSONPath=`.status.summary.power`,description="Measured node power, or why there is none (e.g. NoPowerMeter, PermissionDenied)."
// +kubebuilder:printcolumn:name="POWER-SRC",type=string,JSONPath=`.status.power.sources`,priority=1,description="Where the measured node power comes from: rapl (CPU packages and DRAM only), acpi or hwmon meters, nvml (GPUs)."
// +kubebuilder:printcolumn:name="GPUS",type=string,JSONPath=`.status.summary.gpus`,description="Healthy GPUs / all GPUs."
// +kubebuilder:printcolumn:name="SPEED",type=string,JSONPath=`.status.summary.speed`,priority=1,description="Work a CPU core (and each GPU model) does per second against the reference, with the figure's source; ref? means unknown, judged as the reference."
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,priority=1,description="Whether the agent's last sample succeeded."
// +kubebuilder:printcolumn:name="OVERHEATING",type=string,JSONPath=`.status.conditions[?(@.type=="Overheating")].status`,priority=1,description="Whether the node is at or near its thermal limit."
// +kubebuilder:printcolumn:name="HOTTEST",type=string,JSONPath=`.status.thermal.hottestSensor`,priority=1,description="Name of the hottest sensor."
// +kubebuilder:printcolumn:name="ALARMS",type=integer,JSONPath=`.status.thermal.alarms`,priority=1,description="Sensors with an alarm flag raised (some alarms are sticky until reboot)."
// +kubebuilder:printcolumn:name="POWER-EST%",type=integer,JSONPath=`.status.calibration.measuredPercentOfPredicted`,priority=1,description="Measured watts of the pods placed here as a percentage of the scheduler's estimate (100 is exact); written by telesched-scheduler."
// +kubebuilder:printcolumn:name="AGENT",type=string,JSONPath=`.status.agentVersion`,priority=1,description="Version of the agent that published the sample."
// +kubebuilder:printcolumn:name="SAMPLED",type=date,JSONPath=`.status.sampleTime`,description="Age of the last sample; a large value means stale telemetry."
type NodeTelemetry struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata. The name is the Node's name.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// status is the node's telemetry, written only by its agent.
	// +optional
	Status NodeTelemetryStatus `json:"status,omitempty"`
}

// NodeTelemetryList is a list of NodeTelemetry objects.
//
// +kubebuilder:object:root=true
type NodeTelemetryList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the NodeTelemetry objects.
	Items []NodeTelemetry `json:"items"`
}

// NodeTelemetryStatus is one sample of a node's hardware telemetry. Every
// section is optional: a section is absent when its source cannot be read on
// this node, and sources says why. A value is never zeroed to stand for
// "unknown".
//
// +kubebuilder:validation:XValidation:rule="!has(self.gpus) || self.gpus.all(g, self.gpus.exists_one(o, o.uuid == g.uuid))",message="gpus[].uuid must be unique"
type NodeTelemetryStatus struct {
	// sampleTime is when the agent took this sample. The agent writes on a
	// settled change and at least every heartbeat (5m as the DaemonSet
	// ships it, 30s by the binary's default), so an age well past the
	// heartbeat means stale telemetry.
	// +required
	SampleTime metav1.Time `json:"sampleTime"`

	// intervalSeconds is the window, in seconds, that this sample's rates
	// (CPU utilization, watts) were measured over: the agent's
	// --sample-interval. It is not how often the object is written.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	IntervalSeconds int32 `json:"intervalSeconds"`

	// agentVersion is the version of the telesched agent that took the sample.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	AgentVersion string `json:"agentVersion"`

	// summary holds short, human-readable renderings of this sample for
	// `kubectl get nodetelemetry`. They are derived from the numeric fields
	// of the same sample and carry no information of their own; programs
	// should read the numeric fields.
	// +optional
	Summary *Summary `json:"summary,omitempty"`

	// sources says, for every telemetry source the agent knows, whether it
	// could be read on this node and, if not, why. A section of this status
	// is present only when its source is Available.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Sources []SourceStatus `json:"sources,omitempty"`

	// cpu is processor utilization, load and pressure over the last interval.
	// +optional
	CPU *CPUStatus `json:"cpu,omitempty"`

	// memory is the node's memory use.
	// +optional
	Memory *MemoryStatus `json:"memory,omitempty"`

	// thermal is the node's temperature sensors and their limits.
	// +optional
	Thermal *ThermalStatus `json:"thermal,omitempty"`

	// power is the node's measured power draw and a fitted model of it.
	// +optional
	Power *PowerStatus `json:"power,omitempty"`

	// numa lists the node's NUMA nodes, ordered by id.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=64
	NUMA []NUMANodeStatus `json:"numa,omitempty"`

	// gpus lists the node's GPUs, ordered by index.
	// +optional
	// +listType=map
	// +listMapKey=index
	// +kubebuilder:validation:MaxItems=16
	GPUs []GPUStatus `json:"gpus,omitempty"`

	// speed is how much work the node's CPU cores and GPUs do per second,
	// relative to a documented reference, and where each figure came
	// from. The scheduler judges a placement's energy by it: joules for
	// the pod's work at this node's speed. Absent only from agents older
	// than the field.
	// +optional
	Speed *SpeedStatus `json:"speed,omitempty"`

	// windows summarizes the node's recent samples (the agent's --window,
	// 5m by default): percentiles of utilization, thermal margin and
	// watts, for consumers that judge sustained load rather than one
	// sample. Absent until the agent holds enough samples.
	// +optional
	Windows *WindowsStatus `json:"windows,omitempty"`

	// conditions are the node's telemetry conditions: Ready (the last sample
	// was taken and published) and Overheating (the node is at or near a
	// thermal limit).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// calibration is how the scheduler's estimates of this node's pods'
	// watts held against its measured watts. telesched-scheduler writes it
	// (the replica holding the PowerBudget status Lease), never the agent;
	// absent until the scheduler has measured a pod start here.
	// +optional
	Calibration *PowerCalibration `json:"calibration,omitempty"`
}

// WindowsStatus summarizes the samples the agent took over its last
// window, one sample per sampling interval. A series is absent when its
// source was missing from too many of the window's samples (fewer than half
// the samples a full window holds carried it), never zero.
type WindowsStatus struct {
	// durationSeconds is the window the series cover: the agent's --window.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	DurationSeconds int32 `json:"durationSeconds"`
	// samples is how many samples the window holds now.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	Samples int32 `json:"samples"`
	// cpuPercent is CPU utilization (cpu.utilizationPercent) over the window.
	// +optional
	CPUPercent *UsageWindow `json:"cpuPercent,omitempty"`
	// memoryPercent is memory utilization (memory.utilizationPercent) over
	// the window.
	// +optional
	MemoryPercent *UsageWindow `json:"memoryPercent,omitempty"`
	// thermalMarginCelsius is the node's effective thermal headroom (the
	// sensor closest to its effective limit, as the Overheating condition
	// judges it) over the window, in whole degrees Celsius rounded down.
	// Its low tail is what matters: min and p10 are the closest the node
	// came to its limit.
	// +optional
	ThermalMarginCelsius *MarginWindow `json:"thermalMarginCelsius,omitempty"`
	// watts is the measured node power (power.watts) over the window.
	// +optional
	Watts *UsageWindow `json:"watts,omitempty"`
}

// UsageWindow is the distribution of a signal whose high tail matters.
// Percentiles are nearest-rank over the window's samples.
type UsageWindow struct {
	// p50 is the median.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	P50 int32 `json:"p50"`
	// p90 is the 90th percentile.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	P90 int32 `json:"p90"`
	// max is the largest sample.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Max int32 `json:"max"`
}

// MarginWindow is the distribution of a margin whose low tail matters.
// Percentiles are nearest-rank over the window's samples.
type MarginWindow struct {
	// min is the smallest sample.
	// +required
	// +kubebuilder:validation:Minimum=-2000
	// +kubebuilder:validation:Maximum=2000
	Min int32 `json:"min"`
	// p10 is the 10th percentile.
	// +required
	// +kubebuilder:validation:Minimum=-2000
	// +kubebuilder:validation:Maximum=2000
	P10 int32 `json:"p10"`
	// p50 is the median.
	// +required
	// +kubebuilder:validation:Minimum=-2000
	// +kubebuilder:validation:Maximum=2000
	P50 int32 `json:"p50"`
}

// PowerCalibration compares, on one node, the jump in measured watts when
// pods the scheduler placed started with the jump it predicted for them at
// placement.
type PowerCalibration struct {
	// measuredPercentOfPredicted is the moving mean of measured over
	// predicted, in percent: 100 means the estimates were right, 150 that
	// the node's pods cost half again what was estimated. Once it rests on
	// 2 measurements the scheduler scales the node's estimates by it.
	// +required
	// +kubebuilder:validation:Minimum=0
	MeasuredPercentOfPredicted int32 `json:"measuredPercentOfPredicted"`
	// measurements is how many pod starts the mean rests on.
	// +required
	// +kubebuilder:validation:Minimum=1
	Measurements int64 `json:"measurements"`
	// updateTime is when the scheduler last measured.
	// +required
	UpdateTime metav1.Time `json:"updateTime"`
}

// Summary is the text that `kubectl get nodetelemetry` prints. A field is
// "n/a" when the agent has no such data on this node (status.sources says
// why), so a missing sensor never reads as 0.
type Summary struct {
	// cpu is CPU utilization, e.g. "45%".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	CPU string `json:"cpu,omitempty"`
	// memory is memory utilization, e.g. "62%".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Memory string `json:"memory,omitempty"`
	// temperature is the hottest sensor's temperature, e.g. "71°C".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Temperature string `json:"temperature,omitempty"`
	// power is the measured node power, e.g. "230W"; without it, the power
	// source's reason (NoPowerMeter, PermissionDenied) or n/a.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Power string `json:"power,omitempty"`
	// gpus is healthy GPUs over all GPUs, e.g. "7/8"; "none" when NVML
	// reports no GPU.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	GPUs string `json:"gpus,omitempty"`
	// speed is the CPU core's speed against the reference and its source,
	// then each GPU model's, e.g. "cpu 1.31x table, gpu 2.10x table";
	// "ref?" marks a figure unknown and judged as the reference.
	// +optional
	// +kubebuilder:validation:MaxLength=40
	Speed string `json:"speed,omitempty"`
}

// SpeedSource is where a speed figure comes from.
// +kubebuilder:validation:Enum=operator;table;reference
type SpeedSource string

const (
	// SpeedSourceOperator is the operator's own figure: the agent's
	// --speed-table file or its --cpu-core-speed-milli flag.
	SpeedSourceOperator SpeedSource = "operator"
	// SpeedSourceTable is the table telesched ships, keyed by CPU model
	// name and GPU product, each row citing a public benchmark result.
	SpeedSourceTable SpeedSource = "table"
	// SpeedSourceReference means the hardware's speed is unknown: it is
	// judged as the reference (1000).
	SpeedSourceReference SpeedSource = "reference"
)

// SpeedStatus is how much work the node's processors do per second,
// relative to references documented in docs/energy-models.md ("Speed"):
// a logical CPU of the Dell PowerEdge R740 of SPECpower_ssj2008 result
// power_ssj2008-20170829-00780 at full load, and an NVIDIA A100 GPU.
// A pod's requests are sized on the reference; on a node k times faster
// the same work takes 1/k of the CPU time (or GPU time).
type SpeedStatus struct {
	// cpuCoreMilli is the work one logical CPU does per second at full
	// load, in thousandths of a reference CPU's (1000: as fast).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	CPUCoreMilli int32 `json:"cpuCoreMilli"`
	// cpuSource is where cpuCoreMilli comes from.
	// +required
	CPUSource SpeedSource `json:"cpuSource"`
	// cpuBasis names what the figure rests on: the table row's benchmark
	// result, the operator's entry, or the CPU model the table lacks.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CPUBasis string `json:"cpuBasis,omitempty"`
	// gpus is the speed of each GPU model on the node (the first two
	// models the GPUs list; a GPU of a third model is judged as the
	// reference). A MIG device does its GPU's work times its compute
	// slices over the GPU's (a 3g device of a 7-slice GPU: 3/7).
	// +optional
	// +listType=map
	// +listMapKey=model
	// +kubebuilder:validation:MaxItems=2
	GPUs []GPUSpeed `json:"gpus,omitempty"`
}

// GPUSpeed is the speed of one GPU model.
type GPUSpeed struct {
	// model is the GPU's product name as status.gpus[].model has it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=96
	Model string `json:"model"`
	// milli is the work one whole GPU of the model does per second, in
	// thousandths of the reference GPU's.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	Milli int32 `json:"milli"`
	// source is where milli comes from.
	// +required
	Source SpeedSource `json:"source"`
	// basis names what the figure rests on.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Basis string `json:"basis,omitempty"`
}

// SourceName names a telemetry source of the agent.
// +kubebuilder:validation:Enum=cpu;memory;thermal;power;numa;gpu;podresources
type SourceName string

// The telemetry sources of the agent.
const (
	SourceCPU          SourceName = "cpu"
	SourceMemory       SourceName = "memory"
	SourceThermal      SourceName = "thermal"
	SourcePower        SourceName = "power"
	SourceNUMA         SourceName = "numa"
	SourceGPU          SourceName = "gpu"
	SourcePodResources SourceName = "podresources"
)

// SourceState is whether a telemetry source could be read.
// +kubebuilder:validation:Enum=Available;Unavailable;Failed
type SourceState string

const (
	// SourceAvailable means the source was read in this sample.
	SourceAvailable SourceState = "Available"
	// SourceUnavailable means the node does not expose the source, e.g. a
	// virtual machine without powercap or a node without an NVIDIA driver.
	SourceUnavailable SourceState = "Unavailable"
	// SourceFailed means the source exists but could not be read, e.g.
	// permission denied on energy_uj.
	SourceFailed SourceState = "Failed"
)

// SourceStatus is the state of one telemetry source.
type SourceStatus struct {
	// name is the telemetry source.
	// +required
	Name SourceName `json:"name"`
	// state is whether the source was read in this sample.
	// +required
	State SourceState `json:"state"`
	// reason is a CamelCase word for why the source is not Available, e.g.
	// NoPowercap, PermissionDenied or NVMLNotFound; for an Available source
	// read only in part, Degraded (e.g. a temperature sensor whose reads
	// fail, named in message). Empty when Available and whole.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^([A-Z][A-Za-z0-9]*)?$`
	Reason string `json:"reason,omitempty"`
	// message is a human-readable explanation of reason.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}

// CPUStatus is processor utilization, load and pressure.
type CPUStatus struct {
	// logicalCores is the number of logical CPUs present (online or not).
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65536
	LogicalCores int32 `json:"logicalCores"`
	// onlineCores is the number of logical CPUs online.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65536
	OnlineCores int32 `json:"onlineCores"`
	// utilizationPercent is the busy share of all online CPUs over the last
	// interval, 0 to 100.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	UtilizationPercent int32 `json:"utilizationPercent"`
	// loadAverage is /proc/loadavg. Absent when it cannot be read.
	// +optional
	LoadAverage *LoadAverage `json:"loadAverage,omitempty"`
	// pressure is CPU pressure stall information (/proc/pressure/cpu).
	// Absent when the kernel has no PSI.
	// +optional
	Pressure *PressureStatus `json:"pressure,omitempty"`
	// thermalThrottle is the CPUs' thermal throttling.
	// Absent when the kernel exposes no thermal_throttle counters.
	// +optional
	ThermalThrottle *CPUThrottleStatus `json:"thermalThrottle,omitempty"`
}

// LoadAverage is the kernel's load averages, in thousandths (1.25 is 1250).
type LoadAverage struct {
	// oneMinuteMilli is the one-minute load average times 1000.
	// +required
	// +kubebuilder:validation:Minimum=0
	OneMinuteMilli int64 `json:"oneMinuteMilli"`
	// fiveMinuteMilli is the five-minute load average times 1000.
	// +required
	// +kubebuilder:validation:Minimum=0
	FiveMinuteMilli int64 `json:"fiveMinuteMilli"`
	// fifteenMinuteMilli is the fifteen-minute load average times 1000.
	// +required
	// +kubebuilder:validation:Minimum=0
	FifteenMinuteMilli int64 `json:"fifteenMinuteMilli"`
}

// PressureStatus is Linux pressure stall information for one resource.
type PressureStatus struct {
	// someAvg10BasisPoints is the share of the last 10 seconds in which at
	// least one task stalled on the resource, in basis points (1.23% is 123).
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	SomeAvg10BasisPoints int32 `json:"someAvg10BasisPoints"`
	// fullAvg10BasisPoints is the share of the last 10 seconds in which all
	// non-idle tasks stalled on the resource, in basis points. Absent where
	// the kernel reports no "full" line.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	FullAvg10BasisPoints *int32 `json:"fullAvg10BasisPoints,omitempty"`
	// someTotalMicroseconds is the total stall time of the "some" line since
	// boot, in microseconds.
	// +required
	// +kubebuilder:validation:Minimum=0
	SomeTotalMicroseconds int64 `json:"someTotalMicroseconds"`
}

// CPUThrottleStatus is the CPUs' thermal throttling.
type CPUThrottleStatus struct {
	// throttling is true when any CPU was thermally throttled during the
	// last interval.
	// +required
	Throttling bool `json:"throttling"`
	// coreEventsTotal is the sum of core_throttle_count over all CPUs.
	// +required
	// +kubebuilder:validation:Minimum=0
	CoreEventsTotal int64 `json:"coreEventsTotal"`
	// packageEventsTotal is the sum of package_throttle_count over all
	// packages.
	// +required
	// +kubebuilder:validation:Minimum=0
	PackageEventsTotal int64 `json:"packageEventsTotal"`
}

// MemoryStatus is the node's memory use.
//
// +kubebuilder:validation:XValidation:rule="self.availableBytes <= self.totalBytes",message="availableBytes must not exceed totalBytes"
type MemoryStatus struct {
	// totalBytes is MemTotal from /proc/meminfo.
	// +required
	// +kubebuilder:validation:Minimum=0
	TotalBytes int64 `json:"totalBytes"`
	// availableBytes is MemAvailable from /proc/meminfo.
	// +required
	// +kubebuilder:validation:Minimum=0
	AvailableBytes int64 `json:"availableBytes"`
	// utilizationPercent is (total - available) / total, 0 to 100.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	UtilizationPercent int32 `json:"utilizationPercent"`
	// pressure is memory pressure stall information (/proc/pressure/memory).
	// Absent when the kernel has no PSI.
	// +optional
	Pressure *PressureStatus `json:"pressure,omitempty"`
}

// ThermalLimitType is where a sensor's effective limit comes from.
// +kubebuilder:validation:Enum=Critical;Max;Vendor
type ThermalLimitType string

const (
	// ThermalLimitCritical is a critical limit (hwmon temp*_crit, a thermal
	// zone's critical trip point): hardware shuts down or throttles hard.
	ThermalLimitCritical ThermalLimitType = "Critical"
	// ThermalLimitMax is a maximum operating limit (hwmon temp*_max, a
	// thermal zone's hot trip point), used where a sensor reports no
	// critical limit.
	ThermalLimitMax ThermalLimitType = "Max"
	// ThermalLimitVendor is a limit the sensor does not report but its
	// vendor publishes for that exact part (e.g. AMD's maximum operating
	// temperature for a Ryzen's Tctl, which k10temp does not expose), from
	// the agent's table of known limits.
	ThermalLimitVendor ThermalLimitType = "Vendor"
)

// ThermalStatus is the node's temperature sensors and their limits.
//
// A sensor's effective limit is its critical limit, else its max limit, else
// a limit its vendor publishes for the part (limitType Vendor), else none.
// Consumers hold a sensor without an effective limit against a fixed
// absolute limit of their own (the agent's --absolute-limit-celsius and
// EnergyAware's absoluteLimitCelsius, both 90°C by default): the node's
// effective headroom is the smaller of headroomMilliCelsius and that limit
// minus hottestUnlimitedMilliCelsius.
type ThermalStatus struct {
	// hottestSensor names the sensor with the highest temperature, as
	// "<chip or zone>/<label>", e.g. "coretemp/Package id 0".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	HottestSensor string `json:"hottestSensor"`
	// hottestMilliCelsius is the hottest sensor's temperature in
	// thousandths of a degree Celsius.
	// +required
	// +kubebuilder:validation:Minimum=-273150
	// +kubebuilder:validation:Maximum=1000000
	HottestMilliCelsius int64 `json:"hottestMilliCelsius"`
	// limitMilliCelsius is the hottest sensor's effective limit. Absent when
	// it has none.
	// +optional
	// +kubebuilder:validation:Minimum=-273150
	// +kubebuilder:validation:Maximum=1000000
	LimitMilliCelsius *int64 `json:"limitMilliCelsius,omitempty"`
	// limitType is where limitMilliCelsius comes from.
	// +optional
	LimitType ThermalLimitType `json:"limitType,omitempty"`
	// headroomMilliCelsius is the smallest distance, over every sensor with
	// an effective limit, from its temperature up to that limit. Negative
	// when a sensor is over its limit. Absent when no sensor has a limit.
	// +optional
	// +kubebuilder:validation:Minimum=-2000000
	// +kubebuilder:validation:Maximum=2000000
	HeadroomMilliCelsius *int64 `json:"headroomMilliCelsius,omitempty"`
	// headroomSensor names the sensor headroomMilliCelsius belongs to.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	HeadroomSensor string `json:"headroomSensor,omitempty"`
	// hottestUnlimitedSensor names the hottest sensor without an effective
	// limit. Absent when every sensor has one.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	HottestUnlimitedSensor string `json:"hottestUnlimitedSensor,omitempty"`
	// hottestUnlimitedMilliCelsius is hottestUnlimitedSensor's temperature.
	// +optional
	// +kubebuilder:validation:Minimum=-273150
	// +kubebuilder:validation:Maximum=1000000
	HottestUnlimitedMilliCelsius *int64 `json:"hottestUnlimitedMilliCelsius,omitempty"`
	// throttling is true when some CPU's thermal throttle counter (core or
	// package), read at both ends of the last interval, rose. GPU thermal
	// slowdown is reported per GPU in gpus[].throttleReasons. A sensor
	// alarm is not throttling: see alarms.
	// +required
	Throttling bool `json:"throttling"`
	// alarms is how many sensors have an alarm flag raised (hwmon
	// temp*_alarm, temp*_max_alarm, temp*_crit_alarm). Some alarms are
	// sticky until reboot (coretemp's crit_alarm), so an alarm is published
	// as a fact and never by itself makes the node Overheating.
	// Always written, so 0 reads as "no alarm", not as a blank.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65536
	Alarms int32 `json:"alarms"`
	// sensors are the few sensors closest to their limits, closest first,
	// a sensor without a limit ranked by its distance to the agent's
	// absolute limit. The hottest sensor and the hottest sensor without a
	// limit are always listed.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Sensors []ThermalSensor `json:"sensors,omitempty"`
	// model is how the temperature of the sensor closest to its limit
	// answers the node's power, once the agent has learned it. Absent
	// before then, and on nodes without power telemetry.
	// +optional
	Model *ThermalModel `json:"model,omitempty"`
}

// ThermalSensor is one temperature reading.
type ThermalSensor struct {
	// name is "<chip or zone>/<label>", e.g. "nvme/Composite".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// milliCelsius is the temperature in thousandths of a degree Celsius.
	// +required
	// +kubebuilder:validation:Minimum=-273150
	// +kubebuilder:validation:Maximum=1000000
	MilliCelsius int64 `json:"milliCelsius"`
	// limitMilliCelsius is the sensor's effective limit (the agent's
	// telesched_node_temperature_limit_celsius metric says where each came
	// from; for the hottest sensor, thermal.limitType does). Absent when it
	// has none.
	// +optional
	// +kubebuilder:validation:Minimum=-273150
	// +kubebuilder:validation:Maximum=1000000
	LimitMilliCelsius *int64 `json:"limitMilliCelsius,omitempty"`
	// alarm is true when the sensor has an alarm flag raised.
	// +optional
	Alarm bool `json:"alarm,omitempty"`
}

// PowerSource is where a power reading comes from.
// +kubebuilder:validation:Enum=rapl;hwmon;acpi;nvml
type PowerSource string

const (
	// PowerSourceRAPL is Intel/AMD RAPL through /sys/class/powercap.
	PowerSourceRAPL PowerSource = "rapl"
	// PowerSourceHwmon is hwmon power or energy sensors.
	PowerSourceHwmon PowerSource = "hwmon"
	// PowerSourceACPI is the ACPI power meter.
	PowerSourceACPI PowerSource = "acpi"
	// PowerSourceNVML is GPU power from NVML.
	PowerSourceNVML PowerSource = "nvml"
)

// PowerStatus is the node's measured power draw.
type PowerStatus struct {
	// watts is the node's measured power over the last interval: the sum
	// over sources, each counted once.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Watts int32 `json:"watts"`
	// sources are where watts came from.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	Sources []PowerSource `json:"sources"`
	// gpuWatts is the part of watts drawn by GPUs, from NVML. Absent on
	// nodes without GPUs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	GPUWatts *int32 `json:"gpuWatts,omitempty"`
	// energyJoules is the energy measured since the agent started, in joules,
	// with counter wraparound accounted for.
	// +required
	// +kubebuilder:validation:Minimum=0
	EnergyJoules int64 `json:"energyJoules"`
	// model is the node's power curve (GPU power excluded) against CPU
	// utilization, learned online by the agent, and what its GPUs draw busy
	// and idle, for estimating the marginal power of a pod.
	// +optional
	Model *PowerModel `json:"model,omitempty"`
}

// PowerModelBasis is what a power model rests on.
// +kubebuilder:validation:Enum=fitted;prior
type PowerModelBasis string

const (
	// PowerModelFitted: the node's own samples, over enough of the
	// utilization range.
	PowerModelFitted PowerModelBasis = "fitted"
	// PowerModelPrior: the hardware's identity (RAPL power limits, the
	// GPUs' enforced power limits), joined to the samples there are.
	PowerModelPrior PowerModelBasis = "prior"
)

// PowerModel is node power (GPU power excluded) as a monotone
// piecewise-linear function of CPU utilization: curveWatts gives it at 0%,
// 10% … 100%, curveUncertaintyWatts how far off each point may be. The
// agent learns it from per-utilization bins, so many idle samples do not
// outweigh a few busy ones; it keeps the bins on the node (--state-file) and
// resumes from them, or from this curve, after a restart.
//
// +kubebuilder:validation:XValidation:rule="!self.ready || (has(self.idleWatts) && has(self.fullLoadWatts) && has(self.basis) && has(self.curveWatts) && size(self.curveWatts) == 11 && has(self.curveUncertaintyWatts) && size(self.curveUncertaintyWatts) == 11)",message="a ready model needs basis, idleWatts, fullLoadWatts and 11-point curveWatts and curveUncertaintyWatts"
// +kubebuilder:validation:XValidation:rule="!has(self.idleWatts) || !has(self.fullLoadWatts) || self.idleWatts <= self.fullLoadWatts",message="fullLoadWatts must not be below idleWatts",fieldPath=".fullLoadWatts"
type PowerModel struct {
	// ready is true when the curve can be used: fitted from enough samples
	// over a wide enough utilization spread, or from a prior. A model that
	// is not ready carries no curve.
	// +required
	Ready bool `json:"ready"`
	// basis is what the curve rests on: fitted or prior. Consumers should
	// weigh a prior less.
	// +optional
	Basis PowerModelBasis `json:"basis,omitempty"`
	// samples is how many samples the fit rests on.
	// +required
	// +kubebuilder:validation:Minimum=0
	Samples int32 `json:"samples"`
	// utilizationSpreadPercent is the range of CPU utilization the samples
	// cover, 0 to 100.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	UtilizationSpreadPercent int32 `json:"utilizationSpreadPercent"`
	// idleWatts is the curve at 0% CPU.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	IdleWatts *int32 `json:"idleWatts,omitempty"`
	// fullLoadWatts is the curve at 100% CPU.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	FullLoadWatts *int32 `json:"fullLoadWatts,omitempty"`
	// fitQualityBasisPoints is the coefficient of determination (R²) of
	// the curve over the bins' means, in basis points, 0 to 10000.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	FitQualityBasisPoints *int32 `json:"fitQualityBasisPoints,omitempty"`
	// curveWatts is the power at 0%, 10% … 100% CPU (11 values),
	// non-decreasing: the API server refuses a curve whose watts fall as
	// load rises (a pod's marginal watts would read negative).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.isSorted()",message="curveWatts must be non-decreasing: watts may not fall as CPU load rises"
	// +kubebuilder:validation:MaxItems=11
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=1000000
	CurveWatts []int32 `json:"curveWatts,omitempty"`
	// curveUncertaintyWatts is how far off each point of curveWatts may
	// be: the standard error of the samples it rests on, plus half of any
	// step taken beyond them (along the prior's shape, or the outermost
	// samples' slope).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=11
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=1000000
	CurveUncertaintyWatts []int32 `json:"curveUncertaintyWatts,omitempty"`
	// prior says where the prior came from, when the agent has one, e.g.
	// "RAPL package limits 150W+150W; Intel(R) Xeon(R) Gold 6248".
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Prior string `json:"prior,omitempty"`
}

// ThermalModel is how the temperature of one sensor answers the node's
// power (GPU power excluded), fitted online by the agent as a first-order
// system: the sensor settles at ambientMilliCelsius +
// milliCelsiusPerWatt × watts, with time constant timeConstantSeconds.
type ThermalModel struct {
	// sensor is the sensor modelled: the one closest to its limit
	// (headroomSensor) when the fit began.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Sensor string `json:"sensor"`
	// limitMilliCelsius is the sensor's effective limit (as in
	// sensors[].limitMilliCelsius).
	// +required
	// +kubebuilder:validation:Minimum=-273150
	// +kubebuilder:validation:Maximum=1000000
	LimitMilliCelsius int64 `json:"limitMilliCelsius"`
	// ambientMilliCelsius is where the sensor would settle at 0 W.
	// +required
	// +kubebuilder:validation:Minimum=-273150
	// +kubebuilder:validation:Maximum=1000000
	AmbientMilliCelsius int64 `json:"ambientMilliCelsius"`
	// milliCelsiusPerWatt is the steady-state rise per watt.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	MilliCelsiusPerWatt int32 `json:"milliCelsiusPerWatt"`
	// timeConstantSeconds is the time the sensor takes to get 63% of the
	// way to a new steady temperature.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	TimeConstantSeconds int32 `json:"timeConstantSeconds"`
	// samples is how many samples the fit rests on.
	// +required
	// +kubebuilder:validation:Minimum=0
	Samples int32 `json:"samples"`
	// residualMilliCelsius is the fit's root-mean-square one-step error.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ResidualMilliCelsius int32 `json:"residualMilliCelsius,omitempty"`
}

// NUMANodeStatus is one NUMA node.
//
// +kubebuilder:validation:XValidation:rule="self.memoryFreeBytes <= self.memoryTotalBytes",message="memoryFreeBytes must not exceed memoryTotalBytes"
type NUMANodeStatus struct {
	// id is the NUMA node number (nodeN in /sys/devices/system/node).
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1023
	ID int32 `json:"id"`
	// cpus is the node's online logical CPUs in Linux cpulist format, e.g.
	// "0-11,24-35".
	// +required
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[0-9,-]*$`
	CPUs string `json:"cpus"`
	// logicalCores is the number of online logical CPUs in cpus.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65536
	LogicalCores int32 `json:"logicalCores"`
	// memoryTotalBytes is the node's MemTotal.
	// +required
	// +kubebuilder:validation:Minimum=0
	MemoryTotalBytes int64 `json:"memoryTotalBytes"`
	// memoryFreeBytes is the node's MemFree.
	// +required
	// +kubebuilder:validation:Minimum=0
	MemoryFreeBytes int64 `json:"memoryFreeBytes"`
	// cpuUtilizationPercent is the busy share of the node's online CPUs over
	// the last interval, 0 to 100.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	CPUUtilizationPercent *int32 `json:"cpuUtilizationPercent,omitempty"`
	// distances are the ACPI SLIT distances from this node to each node,
	// indexed by node id (10 is local).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=255
	Distances []int32 `json:"distances,omitempty"`
	// allocatedExclusiveCPUs is how many of the node's CPUs the kubelet has
	// allocated exclusively to containers (static CPU manager policy), from
	// the kubelet pod-resources API. Absent when that API is not available.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65536
	AllocatedExclusiveCPUs *int32 `json:"allocatedExclusiveCPUs,omitempty"`
}

// GPUThrottleReason is a decoded NVML clock-event (throttle) reason.
// +kubebuilder:validation:Enum=GpuIdle;ApplicationsClocksSetting;SwPowerCap;HwSlowdown;SyncBoost;SwThermalSlowdown;HwThermalSlowdown;HwPowerBrakeSlowdown;DisplayClockSetting
type GPUThrottleReason string

// The NVML clock-event reasons.
const (
	GPUThrottleIdle                 GPUThrottleReason = "GpuIdle"
	GPUThrottleApplicationsClocks   GPUThrottleReason = "ApplicationsClocksSetting"
	GPUThrottleSwPowerCap           GPUThrottleReason = "SwPowerCap"
	GPUThrottleHwSlowdown           GPUThrottleReason = "HwSlowdown"
	GPUThrottleSyncBoost            GPUThrottleReason = "SyncBoost"
	GPUThrottleSwThermalSlowdown    GPUThrottleReason = "SwThermalSlowdown"
	GPUThrottleHwThermalSlowdown    GPUThrottleReason = "HwThermalSlowdown"
	GPUThrottleHwPowerBrakeSlowdown GPUThrottleReason = "HwPowerBrakeSlowdown"
	GPUThrottleDisplayClockSetting  GPUThrottleReason = "DisplayClockSetting"
)

// GPUStatus is one GPU, read through NVML. Values NVML does not support on a
// GPU are absent.
//
// +kubebuilder:validation:XValidation:rule="self.memoryUsedBytes <= self.memoryTotalBytes",message="memoryUsedBytes must not exceed memoryTotalBytes"
type GPUStatus struct {
	// index is the NVML device index.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	Index int32 `json:"index"`
	// uuid is the GPU's UUID, e.g. "GPU-5ab4f5d1-...".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	UUID string `json:"uuid"`
	// model is the product name, e.g. "NVIDIA H100 80GB HBM3".
	// +required
	// +kubebuilder:validation:MaxLength=96
	Model string `json:"model"`
	// pciBusID is the PCI bus id, e.g. "00000000:07:00.0".
	// +optional
	// +kubebuilder:validation:MaxLength=32
	PCIBusID string `json:"pciBusID,omitempty"`
	// numaNode is the NUMA node the GPU is attached to, from sysfs. Absent
	// when the platform reports none.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1023
	NUMANode *int32 `json:"numaNode,omitempty"`
	// memoryTotalBytes is the GPU's framebuffer memory.
	// +required
	// +kubebuilder:validation:Minimum=0
	MemoryTotalBytes int64 `json:"memoryTotalBytes"`
	// memoryUsedBytes is framebuffer memory in use.
	// +required
	// +kubebuilder:validation:Minimum=0
	MemoryUsedBytes int64 `json:"memoryUsedBytes"`
	// utilizationPercent is the share of the last sample period in which a
	// kernel ran on the GPU, 0 to 100.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	UtilizationPercent *int32 `json:"utilizationPercent,omitempty"`
	// temperatureMilliCelsius is the GPU die temperature.
	// +optional
	// +kubebuilder:validation:Minimum=-273150
	// +kubebuilder:validation:Maximum=1000000
	TemperatureMilliCelsius *int64 `json:"temperatureMilliCelsius,omitempty"`
	// slowdownMilliCelsius is the temperature at which the GPU slows down.
	// +optional
	// +kubebuilder:validation:Minimum=-273150
	// +kubebuilder:validation:Maximum=1000000
	SlowdownMilliCelsius *int64 `json:"slowdownMilliCelsius,omitempty"`
	// shutdownMilliCelsius is the temperature at which the GPU shuts down.
	// +optional
	// +kubebuilder:validation:Minimum=-273150
	// +kubebuilder:validation:Maximum=1000000
	ShutdownMilliCelsius *int64 `json:"shutdownMilliCelsius,omitempty"`
	// powerWatts is the GPU's power draw.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	PowerWatts *int32 `json:"powerWatts,omitempty"`
	// powerLimitWatts is the enforced power limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	PowerLimitWatts *int32 `json:"powerLimitWatts,omitempty"`
	// energyJoules is the GPU's energy counter since the driver loaded.
	// +optional
	// +kubebuilder:validation:Minimum=0
	EnergyJoules *int64 `json:"energyJoules,omitempty"`
	// health is the GPU's error state.
	// +required
	Health GPUHealth `json:"health"`
	// throttleReasons are the active clock-event reasons, decoded.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	ThrottleReasons []GPUThrottleReason `json:"throttleReasons,omitempty"`
	// migEnabled is whether MIG mode is on. Absent on GPUs without MIG.
	// +optional
	MIGEnabled *bool `json:"migEnabled,omitempty"`
	// mig is the GPU's MIG layout: its MIG devices by profile. Present when
	// MIG mode is on and NVML lists the devices. A GPU in MIG mode runs no
	// pod of its own: its MIG devices do, and NVML reports no utilization
	// for it.
	// +optional
	MIG *GPUMIG `json:"mig,omitempty"`
	// allocated is whether the kubelet has allocated the whole GPU to a
	// pod (a device plugin's nvidia.com/gpu, or a DRA claim), from the
	// kubelet pod-resources API. Absent when that API is not available or
	// the GPU is in MIG mode (see mig.profiles[].allocated).
	// +optional
	Allocated *bool `json:"allocated,omitempty"`
	// pcieRoot is the PCIe root complex above the GPU, named as the DRA
	// standard attribute resource.kubernetes.io/pcieRoot names it, e.g.
	// "pci0000:00". GPUs under one root talk without crossing the CPU
	// interconnect.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	PCIeRoot string `json:"pcieRoot,omitempty"`
	// nvlink is the GPU's NVLink connectivity. Absent when the GPU has no
	// active NVLink or NVML cannot report it.
	// +optional
	NVLink *GPUNVLink `json:"nvlink,omitempty"`
}

// GPUMIG is a GPU's MIG layout.
type GPUMIG struct {
	// computeSlicesTotal is how many compute slices the GPU divides into
	// (7 on an A100 or H100): a "1g" profile takes one of them, a "7g" all.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	ComputeSlicesTotal int32 `json:"computeSlicesTotal"`
	// profiles are the GPU's MIG devices, counted by profile.
	// +optional
	// +listType=map
	// +listMapKey=profile
	// +kubebuilder:validation:MaxItems=8
	Profiles []MIGProfile `json:"profiles,omitempty"`
}

// MIGProfile is a GPU's MIG devices of one profile.
type MIGProfile struct {
	// profile is the profile's name, e.g. "1g.10gb", "3g.40gb" or
	// "1g.10gb+me". NVIDIA's device plugin names its resource
	// nvidia.com/mig-<profile> with each "+" made a "."
	// (nvidia.com/mig-1g.10gb.me). Its leading number is the compute
	// slices each device takes.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=24
	Profile string `json:"profile"`
	// count is how many MIG devices of the profile the GPU has.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Count int32 `json:"count"`
	// memoryBytes is each device's memory.
	// +required
	// +kubebuilder:validation:Minimum=0
	MemoryBytes int64 `json:"memoryBytes"`
	// allocated is how many of them the kubelet has allocated to pods,
	// from the pod-resources API. Absent when that API is not available.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	Allocated *int32 `json:"allocated,omitempty"`
}

// GPUNVLink is a GPU's NVLink connectivity.
type GPUNVLink struct {
	// activeLinks is how many of the GPU's NVLinks are up.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	ActiveLinks int32 `json:"activeLinks"`
	// nvSwitch is true when the links go to NVSwitches: the GPU reaches
	// every other GPU on the switch fabric over NVLink.
	// +optional
	NVSwitch bool `json:"nvSwitch,omitempty"`
	// peers are the NVML indexes of the GPUs this one reaches over a
	// direct NVLink. Empty with nvSwitch.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	Peers []int32 `json:"peers,omitempty"`
	// group is the GPU's link group: the lowest index of the GPUs it
	// reaches over NVLink, directly, through NVSwitch or through other
	// GPUs. GPUs of one group can run one job over NVLink.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	Group int32 `json:"group"`
}

// GPUHealth is a GPU's error state.
type GPUHealth struct {
	// healthy is false when the GPU should not be given new work: an
	// uncorrected ECC error since boot, a failed or pending row remap, or a
	// critical XID event. The fields below say which.
	// +required
	Healthy bool `json:"healthy"`
	// eccUncorrectedErrors is the volatile count of uncorrected ECC errors.
	// Absent when ECC is off or unsupported.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ECCUncorrectedErrors *int64 `json:"eccUncorrectedErrors,omitempty"`
	// rowRemapPending is true when a row remap waits for a GPU reset.
	// +optional
	RowRemapPending bool `json:"rowRemapPending,omitempty"`
	// rowRemapFailed is true when a row remap failed.
	// +optional
	RowRemapFailed bool `json:"rowRemapFailed,omitempty"`
	// xidCriticalEvents is the number of critical XID events seen since the
	// agent started.
	// +optional
	// +kubebuilder:validation:Minimum=0
	XIDCriticalEvents int64 `json:"xidCriticalEvents,omitempty"`
}

// The condition types of NodeTelemetry.
const (
	// ConditionReady is True when the agent's last sample was taken and
	// published.
	ConditionReady = "Ready"
	// ConditionOverheating is True when the node is at or near a thermal
	// limit, or thermally throttled.
	ConditionOverheating = "Overheating"
)
