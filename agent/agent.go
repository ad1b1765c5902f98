// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package agent is the telesched node agent: it samples the node's
// telemetry sources once per interval and turns each Sample into the one
// NodeTelemetry status that the publisher, the metrics and the events all
// read, so they never disagree.
package agent

import (
	"context"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/speed"
	"github.com/telesched/telesched/agent/status"
	"github.com/telesched/telesched/agent/thermalmodel"
	"github.com/telesched/telesched/agent/window"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// Observation is the outcome of one sampling cycle.
type Observation struct {
	Sample  *collector.Sample
	Results []collector.Result
	Status  telemetryv1alpha1.NodeTelemetryStatus
	Heat    status.HeatState
	// AbsoluteLimitMilliCelsius is the limit the heat state held sensors
	// without a limit against.
	AbsoluteLimitMilliCelsius int64
	// GPUsStartedThrottling are the GPUs whose thermal throttling episodes
	// started since the last report, when one is due
	// (status.GPUThrottleTracker): one Event names them all.
	GPUsStartedThrottling []telemetryv1alpha1.GPUStatus
}

// Sampler runs the collectors and keeps the state that spans cycles: the
// power model, the heat state and the previous conditions. It is not safe
// for concurrent use.
type Sampler struct {
	collectors   []collector.Collector
	interval     time.Duration
	agentVersion string
	model        *powermodel.Model
	thermalModel *thermalmodel.Model
	heat         *status.HeatTracker
	heatCfg      status.HeatConfig
	gpuThrottle  status.GPUThrottleTracker
	// window keeps the recent samples status.windows summarizes; nil
	// when windows are off.
	window     *window.Window
	conditions []metav1.Condition
	// adjusted is what Fit last changed, logged when it changes.
	adjusted string
	// hadThermalModel is whether the last sample published a thermal
	// model; its coming and going are logged.
	hadThermalModel bool
	// speed resolves status.speed, for cpuModel; lastSpeed is the last
	// one, kept while the GPUs' models stay those of speedGPUs.
	speed     speed.Resolver
	cpuModel  string
	lastSpeed *telemetryv1alpha1.SpeedStatus
	speedGPUs []string
}

// SamplerConfig configures a Sampler.
type SamplerConfig struct {
	Collectors   []collector.Collector
	Interval     time.Duration
	AgentVersion string
	PowerModel   powermodel.Config
	ThermalModel thermalmodel.Config
	Heat         status.HeatConfig
	// Window is how far back status.windows looks, a ring of
	// Window/Interval samples; 0 publishes no windows.
	Window time.Duration
	// Speed resolves the node's CPU and GPU speeds (status.speed); its
	// zero value publishes every figure as the reference, unknown.
	Speed speed.Resolver
	// CPUModel is /proc/cpuinfo's model name, which Speed looks up.
	CPUModel string
}

// NewSampler returns a Sampler; the configs must be valid.
func NewSampler(cfg SamplerConfig) (*Sampler, error) {
	if err := cfg.Heat.Validate(); err != nil {
		return nil, err
	}
	model, err := powermodel.New(cfg.PowerModel)
	if err != nil {
		return nil, err
	}
	if cfg.ThermalModel == (thermalmodel.Config{}) {
		cfg.ThermalModel = thermalmodel.DefaultConfig()
	}
	thermal, err := thermalmodel.New(cfg.ThermalModel)
	if err != nil {
		return nil, err
	}
	var w *window.Window
	if cfg.Window > 0 {
		if w, err = window.New(cfg.Window, cfg.Interval); err != nil {
			return nil, err
		}
	}
	return &Sampler{
		window:       w,
		collectors:   cfg.Collectors,
		interval:     cfg.Interval,
		agentVersion: cfg.AgentVersion,
		model:        model,
		thermalModel: thermal,
		heat:         status.NewHeatTracker(cfg.Heat),
		heatCfg:      cfg.Heat,
		gpuThrottle:  status.GPUThrottleTracker{Quiet: cfg.Heat.GPUThrottleQuiet, MinInterval: cfg.Heat.GPUThrottleMinInterval},
		speed:        cfg.Speed,
		cpuModel:     cfg.CPUModel,
	}, nil
}

// Observe runs one cycle at now.
func (s *Sampler) Observe(ctx context.Context, now time.Time) Observation {
	sample, results := collector.Run(ctx, s.collectors, now)

	thermal := status.Thermal(sample, s.heatCfg.AbsoluteLimitMilliCelsius)
	var powerModel *telemetryv1alpha1.PowerModel
	if p := sample.Power; p != nil {
		w, ok := cpuSideWatts(p)
		if ok && sample.CPU != nil {
			s.model.Add(sample.CPUBusy, w)
		}
		if ok {
			s.addThermal(now, sample.Thermal, thermal, w)
		}
		s.model.SetPrior(cpuPrior(p))
		powerModel = status.PowerModel(s.model.Fit())
	}
	if thermal != nil {
		if p, ok := s.thermalModel.Fit(); ok {
			if limit, ok := sensorLimit(sample.Thermal, p.Sensor); ok {
				thermal.Model = status.ThermalModel(p, limit)
			}
		}
	}
	if has := thermal != nil && thermal.Model != nil; has != s.hadThermalModel {
		if has {
			m := thermal.Model
			klog.FromContext(ctx).Info("thermal model published", "sensor", m.Sensor, "ambientMilliCelsius", m.AmbientMilliCelsius,
				"milliCelsiusPerWatt", m.MilliCelsiusPerWatt, "timeConstantSeconds", m.TimeConstantSeconds, "samples", m.Samples)
		} else {
			why := s.thermalModel.NotReady()
			if why == "" {
				why = "the modelled sensor reports no limit in this sample"
			}
			klog.FromContext(ctx).Info("thermal model withdrawn; relearning", "why", why)
		}
		s.hadThermalModel = has
	}
	heat := s.heat.Update(thermal, sample.CPU)
	st := status.Build(status.Input{
		Sample:             sample,
		Interval:           s.interval,
		AgentVersion:       s.agentVersion,
		PowerModel:         powerModel,
		Heat:               heat,
		Thermal:            thermal,
		Speed:              s.speedOf(sample.GPUs),
		PreviousConditions: s.conditions,
	})
	s.conditions = st.Conditions
	if s.window != nil {
		s.window.Add(now, &st, s.heatCfg.AbsoluteLimitMilliCelsius)
		st.Windows = s.window.Summary(now)
	}
	adjusted := status.Fit(&st)
	s.logAdjustments(ctx, adjusted)
	return Observation{
		Sample:                    sample,
		Results:                   results,
		Status:                    st,
		Heat:                      heat,
		AbsoluteLimitMilliCelsius: s.heatCfg.AbsoluteLimitMilliCelsius,
		GPUsStartedThrottling:     s.gpuThrottle.Update(now, sample.GPUs),
	}
}

// speedOf is the node's speed section for a sample with gpus: resolved
// again only when the GPUs' models change, and copied, so that each
// status owns its section.
func (s *Sampler) speedOf(gpus []telemetryv1alpha1.GPUStatus) *telemetryv1alpha1.SpeedStatus {
	same := s.lastSpeed != nil && len(gpus) == len(s.speedGPUs)
	for i := 0; same && i < len(gpus); i++ {
		same = gpus[i].Model == s.speedGPUs[i]
	}
	if !same {
		s.lastSpeed = s.speed.Status(s.cpuModel, gpus)
		s.speedGPUs = s.speedGPUs[:0]
		for _, g := range gpus {
			s.speedGPUs = append(s.speedGPUs, g.Model)
		}
	}
	return s.lastSpeed.DeepCopy()
}

// SetCPUCoreSpeed gives this node's CPU core speed as the operator's,
// above every table, with basis saying where it comes from (the Node's
// label). Call it before the sampling loop: the Sampler is not safe for
// concurrent use.
func (s *Sampler) SetCPUCoreSpeed(milli int32, basis string) {
	s.speed.CPUCoreMilli, s.speed.CPUCoreBasis = milli, basis
	s.lastSpeed = nil
}

// logAdjustments logs what Fit changed to bring the status within the
// API's bounds, when that differs from the previous sample. The sections'
// sources say it in the published object too.
func (s *Sampler) logAdjustments(ctx context.Context, adj []status.Adjustment) {
	msgs := make([]string, len(adj))
	for i, a := range adj {
		msgs[i] = a.Message
	}
	joined := strings.Join(msgs, "; ")
	if joined != s.adjusted && joined != "" {
		klog.FromContext(ctx).Info("status cut to fit the NodeTelemetry API's bounds", "changes", msgs)
	}
	s.adjusted = joined
}

// cpuSideWatts is the node's power without its GPUs: what CPU utilization
// can explain. RAPL and hwmon CPU meters exclude the GPUs, so their zones
// are that power. The ACPI power meter measures the whole platform, GPUs
// included (ACPI 6.5, 10.4 "Power Meters"), so the GPUs' NVML watts come
// off it, down to 0 when the two meters disagree. False when only GPUs are
// metered.
func cpuSideWatts(p *collector.Power) (float64, bool) {
	var w float64
	var any, acpi bool
	for _, z := range p.Zones {
		if z.Source != telemetryv1alpha1.PowerSourceNVML {
			w += z.Watts
			any = true
			acpi = acpi || z.Source == telemetryv1alpha1.PowerSourceACPI
		}
	}
	if acpi && p.GPUWatts != nil {
		w = max(0, w-*p.GPUWatts)
	}
	return w, any
}
