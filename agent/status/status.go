// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package status turns one collector.Sample into the NodeTelemetry status
// the agent publishes: thermal aggregation (hottest sensor, headroom), power
// in API units with the fitted power model, the display summary and the
// Ready and Overheating conditions.
package status

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/speed"
	"github.com/telesched/telesched/agent/thermalmodel"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/text"
)

// MaxSensors is how many sensors the status lists (the API allows 8).
const MaxSensors = 8

// Condition reasons.
const (
	ReasonSampleCollected   = "SampleCollected"
	ReasonWithinLimits      = "WithinLimits"
	ReasonNearThermalLimit  = "NearThermalLimit"
	ReasonThermalThrottling = "ThermalThrottling"
	ReasonNoThermalData     = "NoThermalData"
)

// Input is everything one status is built from.
type Input struct {
	Sample       *collector.Sample
	Interval     time.Duration
	AgentVersion string
	// PowerModel is the power model as published; nil when there is no
	// power data (see PowerModel).
	PowerModel *telemetryv1alpha1.PowerModel
	// Heat is the node's heat state after this sample.
	Heat HeatState
	// Thermal is the sample's thermal status (Thermal), which the heat
	// state was judged from; nil when the node has no sensors.
	Thermal *telemetryv1alpha1.ThermalStatus
	// Speed is the node's speed section (agent/speed); nil leaves it out.
	Speed *telemetryv1alpha1.SpeedStatus
	// Previous conditions, so unchanged ones keep their transition time.
	PreviousConditions []metav1.Condition
}

// Build returns the status for one sample.
func Build(in Input) telemetryv1alpha1.NodeTelemetryStatus {
	s := in.Sample
	st := telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime:      metav1.NewTime(s.Time.Truncate(time.Second)),
		IntervalSeconds: int32(max(1, in.Interval.Round(time.Second)/time.Second)),
		AgentVersion:    in.AgentVersion,
		Sources:         s.Sources,
		CPU:             s.CPU,
		Memory:          s.Memory,
		Thermal:         in.Thermal,
		Power:           power(s.Power, in.PowerModel),
		NUMA:            s.NUMA,
		GPUs:            s.GPUs,
		Speed:           in.Speed,
	}
	st.Summary = summary(&st)
	st.Conditions = conditions(in, st.SampleTime)
	return st
}

// Thermal aggregates the sensors: the hottest sensor and its effective
// limit, the smallest headroom over sensors with a limit and the sensor it
// belongs to, the hottest sensor without a limit, CPU throttling (a per-CPU
// counter rose), the sensors with an alarm raised, and the sensors closest
// to their limits (see package heat for what the limits mean). absoluteMilli
// is the limit a sensor without one is ranked against.
func Thermal(s *collector.Sample, absoluteMilli int64) *telemetryv1alpha1.ThermalStatus {
	if s.Thermal == nil || len(s.Thermal.Sensors) == 0 {
		return nil
	}
	sensors := s.Thermal.Sensors
	st := &telemetryv1alpha1.ThermalStatus{
		Throttling: s.CPU != nil && s.CPU.ThermalThrottle != nil && s.CPU.ThermalThrottle.Throttling,
	}
	hottest, headroomAt, unlimitedAt := 0, -1, -1
	for i, sn := range sensors {
		if sn.MilliCelsius > sensors[hottest].MilliCelsius {
			hottest = i
		}
		if sn.Alarm {
			st.Alarms++
		}
		limit, _ := EffectiveLimit(sn)
		switch {
		case limit == nil:
			if unlimitedAt < 0 || sn.MilliCelsius > sensors[unlimitedAt].MilliCelsius {
				unlimitedAt = i
			}
		case st.HeadroomMilliCelsius == nil || *limit-sn.MilliCelsius < *st.HeadroomMilliCelsius:
			st.HeadroomMilliCelsius = ptr.To(*limit - sn.MilliCelsius)
			headroomAt = i
		}
	}
	st.HottestSensor = text.Truncate(sensors[hottest].Name, 64)
	st.HottestMilliCelsius = sensors[hottest].MilliCelsius
	st.LimitMilliCelsius, st.LimitType = EffectiveLimit(sensors[hottest])
	if headroomAt >= 0 {
		st.HeadroomSensor = text.Truncate(sensors[headroomAt].Name, 64)
	}
	if unlimitedAt >= 0 {
		st.HottestUnlimitedSensor = text.Truncate(sensors[unlimitedAt].Name, 64)
		st.HottestUnlimitedMilliCelsius = ptr.To(sensors[unlimitedAt].MilliCelsius)
	}
	st.Sensors = listSensors(sensors, absoluteMilli, hottest, headroomAt, unlimitedAt)
	return st
}

// listSensors picks the MaxSensors sensors closest to their effective
// limits (a sensor without one ranked against absoluteMilli), hottest first
// among equals, and makes room for the sensors the status names (the
// hottest, the one with the smallest headroom, the hottest without a limit)
// so a name in the status can always be looked up in the list, then for
// sensors with an alarm raised. Sensors are
// listed by name: a second sensor of the same (truncated) name is skipped.
func listSensors(sensors []collector.TempSensor, absoluteMilli int64, must ...int) []telemetryv1alpha1.ThermalSensor {
	headroom := func(sn collector.TempSensor) int64 {
		if limit, _ := EffectiveLimit(sn); limit != nil {
			return *limit - sn.MilliCelsius
		}
		return absoluteMilli - sn.MilliCelsius
	}
	order := make([]int, len(sensors))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(headroom(sensors[a]), headroom(sensors[b])), cmp.Compare(sensors[b].MilliCelsius, sensors[a].MilliCelsius))
	})
	// The named sensors first (in rank order), then the rest by rank, so a
	// named sensor is never the one cut; the list is then put back in rank
	// order.
	required := func(i int) bool { return slices.Contains(must, i) }
	var picked []int
	seen := map[string]bool{}
	pick := func(keep func(int) bool) {
		for _, i := range order {
			name := text.Truncate(sensors[i].Name, 64)
			if len(picked) == MaxSensors || seen[name] || !keep(i) {
				continue
			}
			seen[name] = true
			picked = append(picked, i)
		}
	}
	pick(required)
	pick(func(i int) bool { return sensors[i].Alarm })
	pick(func(i int) bool { return true })
	rank := make(map[int]int, len(order))
	for r, i := range order {
		rank[i] = r
	}
	slices.SortFunc(picked, func(a, b int) int { return rank[a] - rank[b] })
	out := make([]telemetryv1alpha1.ThermalSensor, 0, len(picked))
	for _, i := range picked {
		sn := sensors[i]
		limit, _ := EffectiveLimit(sn)
		out = append(out, telemetryv1alpha1.ThermalSensor{
			Name: text.Truncate(sn.Name, 64), MilliCelsius: sn.MilliCelsius,
			LimitMilliCelsius: limit, Alarm: sn.Alarm,
		})
	}
	return out
}

// EffectiveLimit is a sensor's critical limit, else its max limit, else its
// vendor's published limit for the part; nil when it has none.
func EffectiveLimit(s collector.TempSensor) (*int64, telemetryv1alpha1.ThermalLimitType) {
	switch {
	case s.CritMilliCelsius != nil:
		return ptr.To(*s.CritMilliCelsius), telemetryv1alpha1.ThermalLimitCritical
	case s.MaxMilliCelsius != nil:
		return ptr.To(*s.MaxMilliCelsius), telemetryv1alpha1.ThermalLimitMax
	case s.VendorMilliCelsius != nil:
		return ptr.To(*s.VendorMilliCelsius), telemetryv1alpha1.ThermalLimitVendor
	}
	return nil, ""
}

func power(p *collector.Power, model *telemetryv1alpha1.PowerModel) *telemetryv1alpha1.PowerStatus {
	if p == nil {
		return nil
	}
	st := &telemetryv1alpha1.PowerStatus{
		Watts:        roundWatts(p.Watts),
		Sources:      p.Sources,
		EnergyJoules: int64(p.EnergyJoules),
		Model:        model,
	}
	if p.GPUWatts != nil {
		st.GPUWatts = ptr.To(roundWatts(*p.GPUWatts))
	}
	return st
}

// PowerModel is the published form of a power model's fit.
func PowerModel(fit powermodel.Fit) *telemetryv1alpha1.PowerModel {
	m := &telemetryv1alpha1.PowerModel{
		Ready:                    fit.Ready(),
		Basis:                    telemetryv1alpha1.PowerModelBasis(fit.Basis),
		Samples:                  int32(min(fit.Samples, math.MaxInt32)),
		UtilizationSpreadPercent: int32(fit.SpreadPercent),
	}
	if fit.Prior != nil {
		m.Prior = text.Truncate(fit.Prior.Source, 128)
	}
	if fit.Ready() {
		m.IdleWatts = ptr.To(roundWatts(fit.IdleWatts()))
		m.FullLoadWatts = ptr.To(roundWatts(fit.FullLoadWatts()))
		if fit.Samples > 0 {
			m.FitQualityBasisPoints = ptr.To(int32(math.Round(10000 * math.Max(0, math.Min(1, fit.R2)))))
		}
		m.CurveWatts = make([]int32, len(fit.Curve))
		m.CurveUncertaintyWatts = make([]int32, len(fit.Curve))
		for i, p := range fit.Curve {
			m.CurveWatts[i] = roundWatts(p.Watts)
			m.CurveUncertaintyWatts[i] = roundWatts(math.Ceil(p.Uncertainty))
		}
	}
	return m
}

// seedMaxUncertaintyWatts: a point this sure was reached by samples.
const seedMaxUncertaintyWatts = 5

// SeedBins turns a published curve into bins to resume from when the
// agent's own state is lost (a new pod on a reimaged node): a bin at every
// point, those the samples reached (uncertainty within 5% of the watts, or
// 5 W) each weighing an equal share of the published samples, the others
// (extrapolated) one sample, each with the point's uncertainty as its
// standard error. Nil without a fitted curve.
func SeedBins(m *telemetryv1alpha1.PowerModel) ([]powermodel.Bin, int) {
	if m == nil || m.Basis != telemetryv1alpha1.PowerModelFitted || len(m.CurveWatts) != powermodel.Knots || len(m.CurveUncertaintyWatts) != powermodel.Knots {
		return nil, 0
	}
	reached := 0
	for k, w := range m.CurveWatts {
		if u := float64(m.CurveUncertaintyWatts[k]); u <= 0.05*float64(w) || u <= seedMaxUncertaintyWatts {
			reached++
		}
	}
	if reached < 2 {
		return nil, 0
	}
	per := max(1, int(m.Samples)/reached)
	bins := make([]powermodel.Bin, 0, powermodel.Knots)
	for k, w := range m.CurveWatts {
		u := float64(m.CurveUncertaintyWatts[k])
		n := 1
		if u <= 0.05*float64(w) || u <= seedMaxUncertaintyWatts {
			n = per
		}
		bins = append(bins, powermodel.Bin{Samples: n, Utilization: float64(k) / (powermodel.Knots - 1), Watts: float64(w), Variance: u * u * float64(n)})
	}
	return bins, int(m.Samples)
}

// ThermalModel is the published form of a thermal model of a sensor
// whose limit is limitMilli.
func ThermalModel(p thermalmodel.Params, limitMilli int64) *telemetryv1alpha1.ThermalModel {
	return &telemetryv1alpha1.ThermalModel{
		Sensor:               p.Sensor,
		LimitMilliCelsius:    limitMilli,
		AmbientMilliCelsius:  int64(math.Round(p.AmbientCelsius * 1000)),
		MilliCelsiusPerWatt:  int32(math.Round(min(p.CelsiusPerWatt, 10) * 1000)),
		TimeConstantSeconds:  int32(max(1, min(86400, math.Round(p.TimeConstant.Seconds())))),
		Samples:              int32(min(p.Samples, math.MaxInt32)),
		ResidualMilliCelsius: int32(math.Round(min(p.ResidualCelsius, 1000) * 1000)),
	}
}

// ThermalParams reads a published thermal model back.
func ThermalParams(m *telemetryv1alpha1.ThermalModel) thermalmodel.Params {
	return thermalmodel.Params{
		Sensor:          m.Sensor,
		AmbientCelsius:  float64(m.AmbientMilliCelsius) / 1000,
		CelsiusPerWatt:  float64(m.MilliCelsiusPerWatt) / 1000,
		TimeConstant:    time.Duration(m.TimeConstantSeconds) * time.Second,
		Samples:         int(m.Samples),
		ResidualCelsius: float64(m.ResidualMilliCelsius) / 1000,
	}
}

// roundWatts rounds to whole watts within the API's range.
func roundWatts(w float64) int32 {
	return int32(math.Round(math.Max(0, math.Min(w, 1_000_000))))
}

// notAvailable is a summary cell for data the agent does not have.
const notAvailable = "n/a"

// maxSummaryCell is the longest summary cell the API takes for TEMP and
// POWER (summary.temperature and summary.power, MaxLength 16).
const maxSummaryCell = 16

// missing is the cell for a source that gave nothing: its reason
// (NoPowerMeter, PermissionDenied, NoSensors), so that kubectl get nt says
// why, not only that, a node publishes no watts or degrees; n/a when the
// source gave no reason or one too long for the cell (status.sources has it
// whole).
func missing(sources []telemetryv1alpha1.SourceStatus, name telemetryv1alpha1.SourceName) string {
	for _, s := range sources {
		if s.Name == name && s.State != telemetryv1alpha1.SourceAvailable && s.Reason != "" && len(s.Reason) <= maxSummaryCell {
			return s.Reason
		}
	}
	return notAvailable
}

func summary(st *telemetryv1alpha1.NodeTelemetryStatus) *telemetryv1alpha1.Summary {
	sum := &telemetryv1alpha1.Summary{CPU: notAvailable, Memory: notAvailable, GPUs: notAvailable,
		Temperature: missing(st.Sources, telemetryv1alpha1.SourceThermal), Power: missing(st.Sources, telemetryv1alpha1.SourcePower)}
	if st.CPU != nil {
		sum.CPU = fmt.Sprintf("%d%%", st.CPU.UtilizationPercent)
	}
	if st.Memory != nil {
		sum.Memory = fmt.Sprintf("%d%%", st.Memory.UtilizationPercent)
	}
	if st.Thermal != nil {
		sum.Temperature = fmt.Sprintf("%d°C", int64(math.Round(float64(st.Thermal.HottestMilliCelsius)/1000)))
	}
	if st.Power != nil {
		sum.Power = fmt.Sprintf("%dW", st.Power.Watts)
	}
	if len(st.GPUs) > 0 {
		healthy := 0
		for _, g := range st.GPUs {
			if g.Health.Healthy {
				healthy++
			}
		}
		sum.GPUs = fmt.Sprintf("%d/%d", healthy, len(st.GPUs))
	} else if sourceAvailable(st.Sources, telemetryv1alpha1.SourceGPU) {
		sum.GPUs = "none"
	}
	sum.Speed = speed.Summary(st.Speed)
	return sum
}

func sourceAvailable(sources []telemetryv1alpha1.SourceStatus, name telemetryv1alpha1.SourceName) bool {
	for _, s := range sources {
		if s.Name == name {
			return s.State == telemetryv1alpha1.SourceAvailable
		}
	}
	return false
}

func conditions(in Input, now metav1.Time) []metav1.Condition {
	conds := slices.Clone(in.PreviousConditions)
	ready := metav1.Condition{
		Type: telemetryv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonSampleCollected,
		Message: sourcesMessage(in.Sample.Sources), LastTransitionTime: now,
	}
	meta.SetStatusCondition(&conds, ready)
	h := in.Heat
	if h.Reason == "" { // no tracker ran (e.g. --once with no thermal data)
		h.Reason, h.Message = ReasonNoThermalData, "no thermal state was computed for this sample"
	}
	heat := metav1.Condition{Type: telemetryv1alpha1.ConditionOverheating, LastTransitionTime: now, Reason: h.Reason, Message: h.Message}
	switch {
	case !h.Known:
		heat.Status = metav1.ConditionUnknown
	case h.Hot:
		heat.Status = metav1.ConditionTrue
	default:
		heat.Status = metav1.ConditionFalse
	}
	meta.SetStatusCondition(&conds, heat)
	return conds
}

// sourcesMessage says which sources were read, which only in part
// (Available with a reason, see collector.Degraded) and which were not.
func sourcesMessage(sources []telemetryv1alpha1.SourceStatus) string {
	var ok, partly, missing []string
	for _, s := range sources {
		switch {
		case s.State == telemetryv1alpha1.SourceAvailable && s.Reason != "":
			ok = append(ok, string(s.Name))
			partly = append(partly, fmt.Sprintf("%s (%s)", s.Name, s.Reason))
		case s.State == telemetryv1alpha1.SourceAvailable:
			ok = append(ok, string(s.Name))
		default:
			missing = append(missing, fmt.Sprintf("%s (%s)", s.Name, s.Reason))
		}
	}
	msg := fmt.Sprintf("read: %v", ok)
	if len(partly) > 0 {
		msg += fmt.Sprintf("; read in part: %v", partly)
	}
	if len(missing) > 0 {
		msg += fmt.Sprintf("; not available: %v", missing)
	}
	return text.Truncate(msg, 1024)
}
