// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package publisher

import (
	"fmt"
	"math"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// Defaults for Deadbands.
const (
	DefaultUtilizationPoints       = 5
	DefaultTemperatureMilliCelsius = 2_000
	DefaultPowerPercent            = 10
)

// Deadbands are how far a signal must move from its last published value
// for the move to be worth a write before the heartbeat.
type Deadbands struct {
	// UtilizationPoints applies to CPU, memory, NUMA and GPU utilization,
	// and to GPU and NUMA memory in use as a share of their total.
	UtilizationPoints int32
	// TemperatureMilliCelsius applies to the hottest sensor, the thermal
	// headroom and GPU temperatures.
	TemperatureMilliCelsius int64
	// PowerPercent applies to node, GPU and power-model watts, relative to
	// the last published value.
	PowerPercent int32
}

// DefaultDeadbands returns the documented defaults.
func DefaultDeadbands() Deadbands {
	return Deadbands{
		UtilizationPoints:       DefaultUtilizationPoints,
		TemperatureMilliCelsius: DefaultTemperatureMilliCelsius,
		PowerPercent:            DefaultPowerPercent,
	}
}

// Validate reports negative deadbands.
func (d Deadbands) Validate() error {
	if d.UtilizationPoints < 0 || d.TemperatureMilliCelsius < 0 || d.PowerPercent < 0 {
		return fmt.Errorf("deadbands must not be negative: %+v", d)
	}
	return nil
}

// Change says why cur differs meaningfully from prev, the last published
// status, or returns "" when every signal is within its deadband. Any change
// of a source's state, a condition's status, health, topology or throttling
// counts, whatever its size.
func Change(prev, cur *telemetryv1alpha1.NodeTelemetryStatus, d Deadbands) string {
	for _, c := range []func(prev, cur *telemetryv1alpha1.NodeTelemetryStatus, d Deadbands) string{
		changedSources, changedConditions, changedCPU, changedMemory, changedThermal, changedPower, changedNUMA, changedGPUs, changedWindows,
	} {
		if why := c(prev, cur, d); why != "" {
			return why
		}
	}
	return ""
}

// StateChange says why cur differs from prev in something no deadband
// applies to, or returns "" when only measured values moved: a source's
// state, a condition, topology, health, throttling, a section or an optional
// value appearing or going away. Such a change is news at once; a measured
// value may still be on its way to where it settles. A move of watts from
// zero, which no percentage measures, counts as a state change too.
func StateChange(prev, cur *telemetryv1alpha1.NodeTelemetryStatus) string {
	return Change(prev, cur, unreachable)
}

// unreachable are deadbands no measured move can reach: percentages and
// shares of a total stay within 0..100 points, temperatures within a few
// hundred degrees, and watts would have to move by more than 21 million
// times their previous value. The points stay small: shareMoved multiplies
// them by a total in bytes.
var unreachable = Deadbands{
	UtilizationPoints:       101,
	TemperatureMilliCelsius: math.MaxInt64,
	PowerPercent:            math.MaxInt32,
}

func changedSources(prev, cur *telemetryv1alpha1.NodeTelemetryStatus, _ Deadbands) string {
	if len(prev.Sources) != len(cur.Sources) {
		return "the set of sources changed"
	}
	for i := range cur.Sources {
		p, c := prev.Sources[i], cur.Sources[i]
		if p.Name != c.Name || p.State != c.State || p.Reason != c.Reason {
			return fmt.Sprintf("source %s is now %s %s", c.Name, c.State, c.Reason)
		}
	}
	return ""
}

func changedConditions(prev, cur *telemetryv1alpha1.NodeTelemetryStatus, _ Deadbands) string {
	for _, c := range cur.Conditions {
		i := slices.IndexFunc(prev.Conditions, func(p metav1.Condition) bool { return p.Type == c.Type })
		if i < 0 || prev.Conditions[i].Status != c.Status || prev.Conditions[i].Reason != c.Reason {
			return fmt.Sprintf("condition %s is now %s (%s)", c.Type, c.Status, c.Reason)
		}
	}
	if len(prev.Conditions) != len(cur.Conditions) {
		return "the set of conditions changed"
	}
	return ""
}

func changedCPU(prev, cur *telemetryv1alpha1.NodeTelemetryStatus, d Deadbands) string {
	p, c := prev.CPU, cur.CPU
	if (p == nil) != (c == nil) {
		return "cpu section appeared or went away"
	}
	if c == nil {
		return ""
	}
	switch {
	case p.LogicalCores != c.LogicalCores || p.OnlineCores != c.OnlineCores:
		return fmt.Sprintf("cpu count changed to %d online of %d", c.OnlineCores, c.LogicalCores)
	case moved(p.UtilizationPercent, c.UtilizationPercent, d.UtilizationPoints):
		return fmt.Sprintf("cpu utilization %d%% -> %d%%", p.UtilizationPercent, c.UtilizationPercent)
	case throttling(p) != throttling(c):
		return fmt.Sprintf("cpu thermal throttling is now %v", throttling(c))
	}
	return ""
}

func throttling(c *telemetryv1alpha1.CPUStatus) bool {
	return c.ThermalThrottle != nil && c.ThermalThrottle.Throttling
}

func changedMemory(prev, cur *telemetryv1alpha1.NodeTelemetryStatus, d Deadbands) string {
	p, c := prev.Memory, cur.Memory
	if (p == nil) != (c == nil) {
		return "memory section appeared or went away"
	}
	if c == nil {
		return ""
	}
	if p.TotalBytes != c.TotalBytes {
		return "memory total changed"
	}
	if moved(p.UtilizationPercent, c.UtilizationPercent, d.UtilizationPoints) {
		return fmt.Sprintf("memory utilization %d%% -> %d%%", p.UtilizationPercent, c.UtilizationPercent)
	}
	return ""
}

func changedThermal(prev, cur *telemetryv1alpha1.NodeTelemetryStatus, d Deadbands) string {
	p, c := prev.Thermal, cur.Thermal
	if (p == nil) != (c == nil) {
		return "thermal section appeared or went away"
	}
	if c == nil {
		return ""
	}
	switch {
	case p.Throttling != c.Throttling:
		return fmt.Sprintf("thermal throttling is now %v", c.Throttling)
	case moved(p.HottestMilliCelsius, c.HottestMilliCelsius, d.TemperatureMilliCelsius):
		return fmt.Sprintf("hottest sensor %d -> %d m°C", p.HottestMilliCelsius, c.HottestMilliCelsius)
	case (p.HeadroomMilliCelsius == nil) != (c.HeadroomMilliCelsius == nil):
		return "thermal headroom appeared or went away"
	case c.HeadroomMilliCelsius != nil && moved(*p.HeadroomMilliCelsius, *c.HeadroomMilliCelsius, d.TemperatureMilliCelsius):
		return fmt.Sprintf("thermal headroom %d -> %d m°C", *p.HeadroomMilliCelsius, *c.HeadroomMilliCelsius)
	case (p.HottestUnlimitedMilliCelsius == nil) != (c.HottestUnlimitedMilliCelsius == nil):
		return "a sensor without a limit appeared or went away"
	case c.HottestUnlimitedMilliCelsius != nil && moved(*p.HottestUnlimitedMilliCelsius, *c.HottestUnlimitedMilliCelsius, d.TemperatureMilliCelsius):
		return fmt.Sprintf("hottest sensor without a limit %d -> %d m°C", *p.HottestUnlimitedMilliCelsius, *c.HottestUnlimitedMilliCelsius)
	case p.Alarms != c.Alarms:
		return fmt.Sprintf("sensor alarms %d -> %d", p.Alarms, c.Alarms)
	case thermalModelMoved(p.Model, c.Model, d):
		return "thermal model moved"
	}
	return ""
}

func changedPower(prev, cur *telemetryv1alpha1.NodeTelemetryStatus, d Deadbands) string {
	p, c := prev.Power, cur.Power
	if (p == nil) != (c == nil) {
		return "power section appeared or went away"
	}
	if c == nil {
		return ""
	}
	switch {
	case !slices.Equal(p.Sources, c.Sources):
		return fmt.Sprintf("power sources are now %v", c.Sources)
	case wattsMoved(p.Watts, c.Watts, d):
		return fmt.Sprintf("node power %dW -> %dW", p.Watts, c.Watts)
	case (p.Model == nil) != (c.Model == nil):
		return "power model appeared or went away"
	}
	if pm, cm := p.Model, c.Model; cm != nil {
		switch {
		case pm.Ready != cm.Ready:
			return fmt.Sprintf("power model ready is now %v", cm.Ready)
		case pm.Basis != cm.Basis:
			return fmt.Sprintf("power model basis is now %q", cm.Basis)
		case cm.Ready && curveMoved(pm.CurveWatts, cm.CurveWatts, d):
			return "power model moved"
		}
	}
	return ""
}

// curveMoved reports a power curve point that moved by the power
// deadband; a curve that moves less is written with the next change that
// matters, or the heartbeat.
func curveMoved(prev, cur []int32, d Deadbands) bool {
	if len(prev) != len(cur) {
		return true
	}
	for i := range cur {
		if wattsMoved(prev[i], cur[i], d) {
			return true
		}
	}
	return false
}

// thermalModelMoved reports a thermal model that appeared, went away,
// changed sensor, or whose prediction at 100 W above its ambient moved by
// the temperature deadband.
func thermalModelMoved(prev, cur *telemetryv1alpha1.ThermalModel, d Deadbands) bool {
	if (prev == nil) != (cur == nil) {
		return true
	}
	if cur == nil {
		return false
	}
	return prev.Sensor != cur.Sensor || moved(prev.AmbientMilliCelsius, cur.AmbientMilliCelsius, d.TemperatureMilliCelsius) ||
		moved(int64(prev.MilliCelsiusPerWatt)*100, int64(cur.MilliCelsiusPerWatt)*100, d.TemperatureMilliCelsius)
}

// wattsMoved reports a change of at least PowerPercent of the previous
// value, and of at least one watt.
func wattsMoved(prev, cur int32, d Deadbands) bool {
	diff := absDiff(prev, cur)
	return diff >= 1 && int64(diff)*100 >= int64(d.PowerPercent)*int64(prev)
}

func changedNUMA(prev, cur *telemetryv1alpha1.NodeTelemetryStatus, d Deadbands) string {
	if len(prev.NUMA) != len(cur.NUMA) {
		return "NUMA nodes changed"
	}
	for i, c := range cur.NUMA {
		p := prev.NUMA[i]
		switch {
		case p.ID != c.ID || p.CPUs != c.CPUs || !slices.Equal(p.Distances, c.Distances) || p.MemoryTotalBytes != c.MemoryTotalBytes:
			return fmt.Sprintf("NUMA node %d topology changed", c.ID)
		case !equalPtr(p.AllocatedExclusiveCPUs, c.AllocatedExclusiveCPUs):
			return fmt.Sprintf("NUMA node %d exclusive CPU allocations changed", c.ID)
		case ptrMoved(p.CPUUtilizationPercent, c.CPUUtilizationPercent, d.UtilizationPoints):
			return fmt.Sprintf("NUMA node %d cpu utilization moved", c.ID)
		case shareMoved(p.MemoryTotalBytes-p.MemoryFreeBytes, c.MemoryTotalBytes-c.MemoryFreeBytes, c.MemoryTotalBytes, d.UtilizationPoints):
			return fmt.Sprintf("NUMA node %d memory use moved", c.ID)
		}
	}
	return ""
}

func changedGPUs(prev, cur *telemetryv1alpha1.NodeTelemetryStatus, d Deadbands) string {
	if len(prev.GPUs) != len(cur.GPUs) {
		return "GPUs changed"
	}
	for i, c := range cur.GPUs {
		p := prev.GPUs[i]
		switch {
		case p.UUID != c.UUID || p.Model != c.Model || !equalPtr(p.NUMANode, c.NUMANode) || p.MemoryTotalBytes != c.MemoryTotalBytes || !equalPtr(p.MIGEnabled, c.MIGEnabled):
			return fmt.Sprintf("GPU %d identity or topology changed", c.Index)
		case p.PCIeRoot != c.PCIeRoot || !equality.Semantic.DeepEqual(p.NVLink, c.NVLink):
			return fmt.Sprintf("GPU %d links changed", c.Index)
		case !equality.Semantic.DeepEqual(p.MIG, c.MIG):
			return fmt.Sprintf("GPU %d MIG layout or MIG allocation changed", c.Index)
		case !equalPtr(p.Allocated, c.Allocated):
			return fmt.Sprintf("GPU %d allocation changed", c.Index)
		case p.Health.Healthy != c.Health.Healthy || p.Health.RowRemapPending != c.Health.RowRemapPending ||
			p.Health.RowRemapFailed != c.Health.RowRemapFailed || p.Health.XIDCriticalEvents != c.Health.XIDCriticalEvents ||
			!equalPtr(p.Health.ECCUncorrectedErrors, c.Health.ECCUncorrectedErrors):
			return fmt.Sprintf("GPU %d health changed (healthy %v)", c.Index, c.Health.Healthy)
		case !slices.Equal(p.ThrottleReasons, c.ThrottleReasons):
			return fmt.Sprintf("GPU %d throttle reasons are now %v", c.Index, c.ThrottleReasons)
		case ptrMoved(p.UtilizationPercent, c.UtilizationPercent, d.UtilizationPoints):
			return fmt.Sprintf("GPU %d utilization moved", c.Index)
		case ptrMoved(p.TemperatureMilliCelsius, c.TemperatureMilliCelsius, d.TemperatureMilliCelsius):
			return fmt.Sprintf("GPU %d temperature moved", c.Index)
		case (p.PowerWatts == nil) != (c.PowerWatts == nil) || (c.PowerWatts != nil && wattsMoved(*p.PowerWatts, *c.PowerWatts, d)):
			return fmt.Sprintf("GPU %d power moved", c.Index)
		case shareMoved(p.MemoryUsedBytes, c.MemoryUsedBytes, c.MemoryTotalBytes, d.UtilizationPoints):
			return fmt.Sprintf("GPU %d memory use moved", c.Index)
		}
	}
	return ""
}

// changedWindows applies to the window summary the deadbands of the values
// it summarizes: utilization points to cpu and memory percentiles, the
// temperature deadband to the thermal margin's, the power deadband to
// watts'. The sample count and duration are not news.
func changedWindows(prev, cur *telemetryv1alpha1.NodeTelemetryStatus, d Deadbands) string {
	p, c := prev.Windows, cur.Windows
	if (p == nil) != (c == nil) {
		return "windows appeared or went away"
	}
	if c == nil {
		return ""
	}
	switch {
	case usageWindowMoved(p.CPUPercent, c.CPUPercent, func(a, b int32) bool { return moved(a, b, d.UtilizationPoints) }):
		return "cpu window moved"
	case usageWindowMoved(p.MemoryPercent, c.MemoryPercent, func(a, b int32) bool { return moved(a, b, d.UtilizationPoints) }):
		return "memory window moved"
	case usageWindowMoved(p.Watts, c.Watts, func(a, b int32) bool { return wattsMoved(a, b, d) }):
		return "watts window moved"
	case (p.ThermalMarginCelsius == nil) != (c.ThermalMarginCelsius == nil):
		return "thermal margin window appeared or went away"
	}
	if pm, cm := p.ThermalMarginCelsius, c.ThermalMarginCelsius; cm != nil {
		for _, v := range [][2]int32{{pm.Min, cm.Min}, {pm.P10, cm.P10}, {pm.P50, cm.P50}} {
			if moved(int64(v[0])*1000, int64(v[1])*1000, d.TemperatureMilliCelsius) {
				return fmt.Sprintf("thermal margin window moved (min %d -> %d °C)", pm.Min, cm.Min)
			}
		}
	}
	return ""
}

// usageWindowMoved reports a window that appeared, went away, or one of
// whose figures moved by its deadband.
func usageWindowMoved(prev, cur *telemetryv1alpha1.UsageWindow, moved func(prev, cur int32) bool) bool {
	if (prev == nil) != (cur == nil) {
		return true
	}
	return cur != nil && (moved(prev.P50, cur.P50) || moved(prev.P90, cur.P90) || moved(prev.Max, cur.Max))
}

// shareMoved reports whether used moved by at least points percent of total.
func shareMoved(prev, cur, total int64, points int32) bool {
	if total <= 0 {
		return prev != cur
	}
	diff := absDiff(prev, cur)
	return diff > 0 && diff*100 >= int64(points)*total
}

// ptrMoved reports an optional value appearing, going away, or moving by at
// least band.
func ptrMoved[T int32 | int64](prev, cur *T, band T) bool {
	if (prev == nil) != (cur == nil) {
		return true
	}
	return cur != nil && moved(*prev, *cur, band)
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// moved reports a change of at least band; with band 0, any change.
func moved[T int32 | int64](prev, cur, band T) bool {
	diff := absDiff(prev, cur)
	return diff > 0 && diff >= band
}

func absDiff[T int32 | int64](a, b T) T {
	if a > b {
		return a - b
	}
	return b - a
}
