// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"strings"
	"time"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/status"
	"github.com/telesched/telesched/agent/thermalmodel"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// State is what the agent keeps on the node between restarts
// (--state-file): the power model's bins and the thermal model.
type State struct {
	// Version is stateVersion; a file of another version is not read.
	Version     int                  `json:"version"`
	Node        string               `json:"node"`
	PowerBins   []powermodel.Bin     `json:"powerBins,omitempty"`
	PowerTaken  int                  `json:"powerSamples,omitempty"`
	Thermal     *thermalmodel.Params `json:"thermal,omitempty"`
	Interval    time.Duration        `json:"interval"`
	WrittenUnix int64                `json:"writtenUnix"`
}

const stateVersion = 1

// State returns the models' state of node, to save.
func (s *Sampler) State(node string, now time.Time) State {
	st := State{Version: stateVersion, Node: node, Interval: s.interval, WrittenUnix: now.Unix()}
	st.PowerBins, st.PowerTaken = s.model.State()
	if p, ok := s.thermalModel.Fit(); ok {
		st.Thermal = &p
	}
	return st
}

// RestoreState resumes node's models from a saved State; false when it is
// of another version or another node.
func (s *Sampler) RestoreState(node string, st State) bool {
	if st.Version != stateVersion || st.Node != node {
		return false
	}
	s.model.Restore(st.PowerBins, st.PowerTaken)
	if st.Thermal != nil {
		s.thermalModel.Restore(*st.Thermal)
	}
	return true
}

// Restore resumes the models from what this node's agent last published
// (its NodeTelemetry's status), when the state file is lost: the fitted
// curve's points become bins, and the thermal model is taken as it was.
func (s *Sampler) Restore(st *telemetryv1alpha1.NodeTelemetryStatus) {
	if st == nil {
		return
	}
	if p := st.Power; p != nil {
		if bins, samples := status.SeedBins(p.Model); len(bins) > 0 {
			s.model.Restore(bins, samples)
		}
	}
	if t := st.Thermal; t != nil && t.Model != nil {
		s.thermalModel.Restore(status.ThermalParams(t.Model))
	}
}

// addThermal feeds the thermal model the sensor closest to its limit and
// the node's power without its GPUs, unless that sensor's reading is held
// (see collector.TempSensor.Held). The model keeps its sensor while that
// sensor stays within stickyHeadroom of the closest, so sensors that take
// turns (the packages of a multi-socket node) do not restart it. It reads
// every sensor of the sample, not only the few the status lists.
func (s *Sampler) addThermal(now time.Time, sample *collector.Thermal, th *telemetryv1alpha1.ThermalStatus, watts float64) {
	if sample == nil || th == nil || th.HeadroomSensor == "" || th.HeadroomMilliCelsius == nil {
		return
	}
	name := th.HeadroomSensor
	if cur := s.thermalModel.Sensor(); cur != "" && cur != name {
		if sn, ok := findSensor(sample, cur); ok {
			if limit, _ := status.EffectiveLimit(sn); limit != nil && *limit-sn.MilliCelsius <= *th.HeadroomMilliCelsius+stickyHeadroomMilli {
				name = cur
			}
		}
	}
	// A held reading (the sensor's read failed) is no measurement: the
	// model would learn a temperature that does not follow the power.
	if sn, ok := findSensor(sample, name); ok && !sn.Held {
		s.thermalModel.Add(now, s.interval, sn.Name, float64(sn.MilliCelsius)/1000, watts)
	}
}

// findSensor is the sample's sensor of that name.
func findSensor(t *collector.Thermal, name string) (collector.TempSensor, bool) {
	if t == nil {
		return collector.TempSensor{}, false
	}
	for _, sn := range t.Sensors {
		if sn.Name == name {
			return sn, true
		}
	}
	return collector.TempSensor{}, false
}

// sensorLimit is the sample's sensor's effective limit.
func sensorLimit(t *collector.Thermal, name string) (int64, bool) {
	if sn, ok := findSensor(t, name); ok {
		if limit, _ := status.EffectiveLimit(sn); limit != nil {
			return *limit, true
		}
	}
	return 0, false
}

// stickyHeadroomMilli is how much less close to its limit the modelled
// sensor may be than the closest before the model moves to that one.
const stickyHeadroomMilli = 3000

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
