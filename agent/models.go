package agent

import (
	"fmt"
	"strings"
	"time"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/status"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// Restore takes the models this node's agent published before it
// restarted (its NodeTelemetry's status), so the new agent publishes a
// usable model from its first sample and goes on learning from where the
// old one stopped.
func (s *Sampler) Restore(st *telemetryv1alpha1.NodeTelemetryStatus) {
	if st == nil {
		return
	}
	if p := st.Power; p != nil && p.Model != nil {
		bins, samples := status.PowerBins(p.Model)
		s.model.Restore(bins, samples)
		if g := p.Model.GPU; g != nil {
			s.gpuPower.restore(g)
		}
	}
	if t := st.Thermal; t != nil && t.Model != nil {
		s.thermalModel.Restore(status.ThermalParams(t.Model))
	}
}

// addThermal feeds the thermal model the sensor closest to its limit and
// the node's power without its GPUs. The model keeps its sensor while that
// sensor stays within stickyHeadroom of the closest one, so two sensors
// that take turns (the packages of a two-socket node) do not restart it.
func (s *Sampler) addThermal(now time.Time, th *telemetryv1alpha1.ThermalStatus, watts float64) {
	if th == nil || th.HeadroomSensor == "" || th.HeadroomMilliCelsius == nil {
		return
	}
	name := th.HeadroomSensor
	if cur := s.thermalModel.Sensor(); cur != "" && cur != name {
		for _, sensor := range th.Sensors {
			if sensor.Name == cur && sensor.LimitMilliCelsius != nil &&
				*sensor.LimitMilliCelsius-sensor.MilliCelsius <= *th.HeadroomMilliCelsius+stickyHeadroomMilli {
				name = cur
			}
		}
	}
	for _, sensor := range th.Sensors {
		if sensor.Name == name {
			s.thermalModel.Add(now, s.interval, sensor.Name, float64(sensor.MilliCelsius)/1000, watts)
			return
		}
	}
}

// stickyHeadroomMilli is how much less close to its limit the modelled
// sensor may be than the closest before the model moves to that one.
const stickyHeadroomMilli = 3000

// sensorLimit is a listed sensor's effective limit.
func sensorLimit(th *telemetryv1alpha1.ThermalStatus, name string) (int64, bool) {
	for _, sensor := range th.Sensors {
		if sensor.Name == name && sensor.LimitMilliCelsius != nil {
			return *sensor.LimitMilliCelsius, true
		}
	}
	return 0, false
}

// priorIdleShare is the share of the RAPL limits the prior takes as idle
// power. Once the node has samples only the prior's shape beyond them is
// used, not this level.
const priorIdleShare = 0.2

// cpuPrior is what the hardware's identity says of the node's CPU-side
// power: full load at the sum of its RAPL package limits (constraint_0,
// the parts' TDP on Intel), with a current server's shape
// (powermodel.Shape). Nil when RAPL gives no limits, as on AMD, whose
// powercap zones have none: the model then waits for its samples.
func cpuPrior(p *collector.Power) *powermodel.PriorCurve {
	if len(p.PackageLimitWatts) == 0 {
		return nil
	}
	var full float64
	parts := make([]string, len(p.PackageLimitWatts))
	for i, w := range p.PackageLimitWatts {
		full += w
		parts[i] = fmt.Sprintf("%.0fW", w)
	}
	src := "RAPL package limits " + strings.Join(parts, "+")
	if p.CPUModel != "" {
		src += "; " + p.CPUModel
	}
	return powermodel.ShapePrior(priorIdleShare*full, full, src)
}

// GPU utilization bounds: a GPU at most idleGPUPercent busy counts as idle,
// one at least busyGPUPercent busy as busy.
const (
	idleGPUPercent = 5
	busyGPUPercent = 80
	// gpuMemory is the weight, in readings, of a GPU mean's past.
	gpuMemory = 200
)

// gpuPower learns what one of the node's GPUs draws idle and busy.
type gpuPower struct {
	idle, busy   float64
	idleN, busyN int
}

func (g *gpuPower) add(gpus []telemetryv1alpha1.GPUStatus) {
	for _, gpu := range gpus {
		if gpu.PowerWatts == nil || gpu.UtilizationPercent == nil {
			continue
		}
		w, u := float64(*gpu.PowerWatts), *gpu.UtilizationPercent
		switch {
		case u <= idleGPUPercent:
			g.idleN = min(g.idleN+1, gpuMemory)
			g.idle += (w - g.idle) / float64(g.idleN)
		case u >= busyGPUPercent:
			g.busyN = min(g.busyN+1, gpuMemory)
			g.busy += (w - g.busy) / float64(g.busyN)
		}
	}
}

func (g *gpuPower) restore(m *telemetryv1alpha1.GPUPowerModel) {
	if m.IdleSamples > 0 {
		g.idle, g.idleN = float64(m.IdleWatts), min(int(m.IdleSamples), gpuMemory)
	}
	if m.BusySamples > 0 {
		g.busy, g.busyN = float64(m.BusyWatts), min(int(m.BusySamples), gpuMemory)
	}
}

// model is the GPUs' model: fitted once idle and busy GPUs were seen;
// before that, prior, with the GPUs' enforced power limit for busy and a
// tenth of it for idle where they were not seen. Nil without GPUs, or
// without readings and limits to say anything.
func (g *gpuPower) model(gpus []telemetryv1alpha1.GPUStatus) *telemetryv1alpha1.GPUPowerModel {
	if len(gpus) == 0 {
		return nil
	}
	m := &telemetryv1alpha1.GPUPowerModel{Basis: telemetryv1alpha1.PowerModelFitted, IdleSamples: int32(g.idleN), BusySamples: int32(g.busyN)}
	var limit float64
	var n int
	for _, gpu := range gpus {
		if gpu.PowerLimitWatts != nil {
			limit += float64(*gpu.PowerLimitWatts)
			n++
		}
	}
	if n > 0 {
		limit /= float64(n)
	}
	idle, busy := g.idle, g.busy
	if g.busyN == 0 {
		if n == 0 {
			return nil
		}
		busy, m.Basis = limit, telemetryv1alpha1.PowerModelPrior
	}
	if g.idleN == 0 {
		if n == 0 {
			return nil
		}
		idle, m.Basis = limit/10, telemetryv1alpha1.PowerModelPrior
	}
	m.IdleWatts, m.BusyWatts = roundWatts(idle), roundWatts(max(busy, idle))
	return m
}

func roundWatts(w float64) int32 { return int32(min(100000, max(0, w+0.5))) }
