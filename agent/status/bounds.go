// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/text"
)

// boundKind is an OpenAPI bound of the NodeTelemetry schema.
type boundKind string

const (
	maxItems  boundKind = "maxItems"
	maxLength boundKind = "maxLength"
	maximum   boundKind = "maximum"
	minimum   boundKind = "minimum"
)

// bound is one bound of the status schema: the JSON path below .status
// ("[]" steps into every item of a list), its kind and its limit.
type bound struct {
	path  string
	kind  boundKind
	limit int64
}

// apiBounds are every maxItems, maxLength, maximum and minimum of the
// status schema in deploy/crds, generated from apis/telemetry/v1alpha1.
// TestBoundsMatchCRD walks the CRD and fails when this list and the schema
// differ, so a bound added to the API cannot go unenforced here.
var apiBounds = []bound{
	{"agentVersion", maxLength, 64},
	{"conditions", maxItems, 8},
	{"conditions[].message", maxLength, 32768},
	{"conditions[].observedGeneration", minimum, 0},
	{"conditions[].reason", maxLength, 1024},
	{"conditions[].type", maxLength, 316},
	{"cpu.loadAverage.fifteenMinuteMilli", minimum, 0},
	{"cpu.loadAverage.fiveMinuteMilli", minimum, 0},
	{"cpu.loadAverage.oneMinuteMilli", minimum, 0},
	{"cpu.logicalCores", maximum, 65536},
	{"cpu.logicalCores", minimum, 0},
	{"cpu.onlineCores", maximum, 65536},
	{"cpu.onlineCores", minimum, 0},
	{"cpu.pressure.fullAvg10BasisPoints", maximum, 10000},
	{"cpu.pressure.fullAvg10BasisPoints", minimum, 0},
	{"cpu.pressure.someAvg10BasisPoints", maximum, 10000},
	{"cpu.pressure.someAvg10BasisPoints", minimum, 0},
	{"cpu.pressure.someTotalMicroseconds", minimum, 0},
	{"cpu.thermalThrottle.coreEventsTotal", minimum, 0},
	{"cpu.thermalThrottle.packageEventsTotal", minimum, 0},
	{"cpu.utilizationPercent", maximum, 100},
	{"cpu.utilizationPercent", minimum, 0},
	{"gpus", maxItems, 16},
	{"gpus[].energyJoules", minimum, 0},
	{"gpus[].health.eccUncorrectedErrors", minimum, 0},
	{"gpus[].health.xidCriticalEvents", minimum, 0},
	{"gpus[].index", maximum, 63},
	{"gpus[].index", minimum, 0},
	{"gpus[].memoryTotalBytes", minimum, 0},
	{"gpus[].memoryUsedBytes", minimum, 0},
	{"gpus[].mig.computeSlicesTotal", maximum, 64},
	{"gpus[].mig.computeSlicesTotal", minimum, 1},
	{"gpus[].mig.profiles", maxItems, 8},
	{"gpus[].mig.profiles[].allocated", maximum, 64},
	{"gpus[].mig.profiles[].allocated", minimum, 0},
	{"gpus[].mig.profiles[].count", maximum, 64},
	{"gpus[].mig.profiles[].count", minimum, 1},
	{"gpus[].mig.profiles[].memoryBytes", minimum, 0},
	{"gpus[].mig.profiles[].profile", maxLength, 24},
	{"gpus[].model", maxLength, 96},
	{"gpus[].numaNode", maximum, 1023},
	{"gpus[].numaNode", minimum, 0},
	{"gpus[].nvlink.activeLinks", maximum, 64},
	{"gpus[].nvlink.activeLinks", minimum, 0},
	{"gpus[].nvlink.group", maximum, 63},
	{"gpus[].nvlink.group", minimum, 0},
	{"gpus[].nvlink.peers", maxItems, 64},
	{"gpus[].pcieRoot", maxLength, 32},
	{"gpus[].pciBusID", maxLength, 32},
	{"gpus[].powerLimitWatts", maximum, 100000},
	{"gpus[].powerLimitWatts", minimum, 0},
	{"gpus[].powerWatts", maximum, 100000},
	{"gpus[].powerWatts", minimum, 0},
	{"gpus[].shutdownMilliCelsius", maximum, 1000000},
	{"gpus[].shutdownMilliCelsius", minimum, -273150},
	{"gpus[].slowdownMilliCelsius", maximum, 1000000},
	{"gpus[].slowdownMilliCelsius", minimum, -273150},
	{"gpus[].temperatureMilliCelsius", maximum, 1000000},
	{"gpus[].temperatureMilliCelsius", minimum, -273150},
	{"gpus[].throttleReasons", maxItems, 16},
	{"gpus[].utilizationPercent", maximum, 100},
	{"gpus[].utilizationPercent", minimum, 0},
	{"gpus[].uuid", maxLength, 64},
	{"intervalSeconds", maximum, 3600},
	{"intervalSeconds", minimum, 1},
	{"memory.availableBytes", minimum, 0},
	{"memory.pressure.fullAvg10BasisPoints", maximum, 10000},
	{"memory.pressure.fullAvg10BasisPoints", minimum, 0},
	{"memory.pressure.someAvg10BasisPoints", maximum, 10000},
	{"memory.pressure.someAvg10BasisPoints", minimum, 0},
	{"memory.pressure.someTotalMicroseconds", minimum, 0},
	{"memory.totalBytes", minimum, 0},
	{"memory.utilizationPercent", maximum, 100},
	{"memory.utilizationPercent", minimum, 0},
	{"numa", maxItems, 64},
	{"numa[].allocatedExclusiveCPUs", maximum, 65536},
	{"numa[].allocatedExclusiveCPUs", minimum, 0},
	{"numa[].cpuUtilizationPercent", maximum, 100},
	{"numa[].cpuUtilizationPercent", minimum, 0},
	{"numa[].cpus", maxLength, 1024},
	{"numa[].distances", maxItems, 64},
	{"numa[].distances[]", maximum, 255},
	{"numa[].distances[]", minimum, 0},
	{"numa[].id", maximum, 1023},
	{"numa[].id", minimum, 0},
	{"numa[].logicalCores", maximum, 65536},
	{"numa[].logicalCores", minimum, 0},
	{"numa[].memoryFreeBytes", minimum, 0},
	{"numa[].memoryTotalBytes", minimum, 0},
	{"power.energyJoules", minimum, 0},
	{"power.gpuWatts", maximum, 1000000},
	{"power.gpuWatts", minimum, 0},
	{"power.model.curveUncertaintyWatts", maxItems, 11},
	{"power.model.curveUncertaintyWatts[]", maximum, 1000000},
	{"power.model.curveUncertaintyWatts[]", minimum, 0},
	{"power.model.curveWatts", maxItems, 11},
	{"power.model.curveWatts[]", maximum, 1000000},
	{"power.model.curveWatts[]", minimum, 0},
	{"power.model.fitQualityBasisPoints", maximum, 10000},
	{"power.model.fitQualityBasisPoints", minimum, 0},
	{"power.model.fullLoadWatts", maximum, 1000000},
	{"power.model.fullLoadWatts", minimum, 0},
	{"power.model.idleWatts", maximum, 1000000},
	{"power.model.idleWatts", minimum, 0},
	{"power.model.prior", maxLength, 128},
	{"power.model.samples", minimum, 0},
	{"power.model.utilizationSpreadPercent", maximum, 100},
	{"power.model.utilizationSpreadPercent", minimum, 0},
	{"power.sources", maxItems, 4},
	{"power.watts", maximum, 1000000},
	{"power.watts", minimum, 0},
	{"sources", maxItems, 16},
	{"speed.cpuBasis", maxLength, 64},
	{"speed.cpuCoreMilli", maximum, 100000},
	{"speed.cpuCoreMilli", minimum, 1},
	{"speed.gpus", maxItems, 2},
	{"speed.gpus[].basis", maxLength, 64},
	{"speed.gpus[].milli", maximum, 100000},
	{"speed.gpus[].milli", minimum, 1},
	{"speed.gpus[].model", maxLength, 96},
	{"sources[].message", maxLength, 256},
	{"sources[].reason", maxLength, 64},
	{"summary.cpu", maxLength, 16},
	{"summary.gpus", maxLength, 16},
	{"summary.memory", maxLength, 16},
	{"summary.power", maxLength, 16},
	{"summary.speed", maxLength, 40},
	{"summary.temperature", maxLength, 16},
	{"thermal.alarms", maximum, 65536},
	{"thermal.alarms", minimum, 0},
	{"thermal.headroomMilliCelsius", maximum, 2000000},
	{"thermal.headroomMilliCelsius", minimum, -2000000},
	{"thermal.headroomSensor", maxLength, 64},
	{"thermal.hottestMilliCelsius", maximum, 1000000},
	{"thermal.hottestMilliCelsius", minimum, -273150},
	{"thermal.hottestSensor", maxLength, 64},
	{"thermal.hottestUnlimitedMilliCelsius", maximum, 1000000},
	{"thermal.hottestUnlimitedMilliCelsius", minimum, -273150},
	{"thermal.hottestUnlimitedSensor", maxLength, 64},
	{"thermal.limitMilliCelsius", maximum, 1000000},
	{"thermal.limitMilliCelsius", minimum, -273150},
	{"thermal.model.ambientMilliCelsius", maximum, 1000000},
	{"thermal.model.ambientMilliCelsius", minimum, -273150},
	{"thermal.model.limitMilliCelsius", maximum, 1000000},
	{"thermal.model.limitMilliCelsius", minimum, -273150},
	{"thermal.model.milliCelsiusPerWatt", maximum, 10000},
	{"thermal.model.milliCelsiusPerWatt", minimum, 0},
	{"thermal.model.residualMilliCelsius", minimum, 0},
	{"thermal.model.samples", minimum, 0},
	{"thermal.model.sensor", maxLength, 64},
	{"thermal.model.timeConstantSeconds", maximum, 86400},
	{"thermal.model.timeConstantSeconds", minimum, 1},
	{"thermal.sensors", maxItems, 8},
	{"thermal.sensors[].limitMilliCelsius", maximum, 1000000},
	{"thermal.sensors[].limitMilliCelsius", minimum, -273150},
	{"thermal.sensors[].milliCelsius", maximum, 1000000},
	{"thermal.sensors[].milliCelsius", minimum, -273150},
	{"thermal.sensors[].name", maxLength, 64},
	{"windows.cpuPercent.max", maximum, 1000000},
	{"windows.cpuPercent.max", minimum, 0},
	{"windows.cpuPercent.p50", maximum, 1000000},
	{"windows.cpuPercent.p50", minimum, 0},
	{"windows.cpuPercent.p90", maximum, 1000000},
	{"windows.cpuPercent.p90", minimum, 0},
	{"windows.durationSeconds", maximum, 86400},
	{"windows.durationSeconds", minimum, 1},
	{"windows.memoryPercent.max", maximum, 1000000},
	{"windows.memoryPercent.max", minimum, 0},
	{"windows.memoryPercent.p50", maximum, 1000000},
	{"windows.memoryPercent.p50", minimum, 0},
	{"windows.memoryPercent.p90", maximum, 1000000},
	{"windows.memoryPercent.p90", minimum, 0},
	{"windows.samples", maximum, 100000},
	{"windows.samples", minimum, 0},
	{"windows.thermalMarginCelsius.min", maximum, 2000},
	{"windows.thermalMarginCelsius.min", minimum, -2000},
	{"windows.thermalMarginCelsius.p10", maximum, 2000},
	{"windows.thermalMarginCelsius.p10", minimum, -2000},
	{"windows.thermalMarginCelsius.p50", maximum, 2000},
	{"windows.thermalMarginCelsius.p50", minimum, -2000},
	{"windows.watts.max", maximum, 1000000},
	{"windows.watts.max", minimum, 0},
	{"windows.watts.p50", maximum, 1000000},
	{"windows.watts.p50", minimum, 0},
	{"windows.watts.p90", maximum, 1000000},
	{"windows.watts.p90", minimum, 0},
}

// clearedNotTruncated are strings that truncation would make wrong rather
// than short: a CPU list cut at its limit names other CPUs. They are
// published empty instead, and the change is said.
var clearedNotTruncated = map[string]bool{"numa[].cpus": true}

// Adjustment is a change Fit made to bring a status within the API's
// bounds.
type Adjustment struct {
	// Source is the telemetry source of the section changed; "" for
	// fields outside the sections (agentVersion, conditions, ...).
	Source  telemetryv1alpha1.SourceName
	Message string
}

// Fit brings st within every bound of apiBounds: lists are cut to their
// maximum length (the first items kept: GPUs by index, NUMA nodes by id),
// strings cut to theirs (or cleared, see clearedNotTruncated), numbers
// clamped. It returns what it changed, so a node's data is never dropped
// silently, and notes each change in the message of the section's source.
func Fit(st *telemetryv1alpha1.NodeTelemetryStatus) []Adjustment {
	var out []Adjustment
	root := reflect.ValueOf(st).Elem()
	// The list indexes of a path, depth first: each level appends to the
	// one before within this array, so no path allocates.
	var idx [4]int
	for i, b := range apiBounds {
		fitPath(root, boundSteps[i], idx[:0], b, &out)
	}
	for _, a := range out {
		for i := range st.Sources {
			if st.Sources[i].Name == a.Source {
				msg := a.Message
				if st.Sources[i].Message != "" {
					msg = st.Sources[i].Message + "; " + msg
				}
				st.Sources[i].Message = text.Truncate(msg, 256)
			}
		}
	}
	return out
}

// step is one step of a bound's path: a struct field, by its index, and
// whether the path goes on into each item of that field's list.
type step struct {
	field int
	each  bool
}

// boundSteps are apiBounds' paths resolved against the status's type once,
// field names to indexes, so that Fit, which runs on every sample, walks
// them without looking a name up. A path that names no field panics here,
// at start (TestFit and every agent test would).
var boundSteps = func() [][]step {
	root := reflect.TypeFor[telemetryv1alpha1.NodeTelemetryStatus]()
	out := make([][]step, len(apiBounds))
	for i, b := range apiBounds {
		t := root
		for _, s := range strings.Split(b.path, ".") {
			name, each := strings.CutSuffix(s, "[]")
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			f, ok := fieldByJSON(t, name)
			if !ok {
				panic(fmt.Sprintf("status bound %s: no field %q in %s", b.path, name, t))
			}
			out[i] = append(out[i], step{f, each})
			if t = t.Field(f).Type; each {
				t = t.Elem()
			}
		}
	}
	return out
}()

// fitPath follows steps from v and applies b where they end. idx are the
// list indexes taken so far; the path is spelled out only for a message.
func fitPath(v reflect.Value, steps []step, idx []int, b bound, out *[]Adjustment) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if len(steps) == 0 {
		apply(v, idx, b, out)
		return
	}
	fv := v.Field(steps[0].field)
	if !steps[0].each {
		fitPath(fv, steps[1:], idx, b, out)
		return
	}
	for i := range fv.Len() {
		if len(steps) == 1 {
			// A bound on every item of a list of scalars (distances[]).
			apply(fv.Index(i), append(idx, i), b, out)
			continue
		}
		fitPath(fv.Index(i), steps[1:], append(idx, i), b, out)
	}
}

// pathOf spells a bound's path with the list indexes taken: "numa[0].cpus".
func pathOf(b bound, idx []int) string {
	var sb strings.Builder
	for _, s := range strings.Split(b.path, ".") {
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		name, each := strings.CutSuffix(s, "[]")
		sb.WriteString(name)
		if each && len(idx) > 0 {
			fmt.Fprintf(&sb, "[%d]", idx[0])
			idx = idx[1:]
		}
	}
	return sb.String()
}

func apply(v reflect.Value, idx []int, b bound, out *[]Adjustment) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	note := func(format string, args ...any) {
		at := pathOf(b, idx)
		source, _ := telemetryv1alpha1.SectionSource(strings.SplitN(strings.SplitN(at, ".", 2)[0], "[", 2)[0])
		*out = append(*out, Adjustment{Source: source, Message: at + ": " + fmt.Sprintf(format, args...)})
	}
	switch b.kind {
	case maxItems:
		if n := int64(v.Len()); n > b.limit {
			v.Set(v.Slice(0, int(b.limit)))
			note("%d items, the API takes %d; the last %d are not published", n, b.limit, n-b.limit)
		}
	case maxLength:
		s := v.String()
		if int64(len(s)) > b.limit { // bytes >= characters: only then can it be too long
			if n := int64(utf8.RuneCountInString(s)); n > b.limit {
				if clearedNotTruncated[b.path] {
					v.SetString("")
					note("%d characters, the API takes %d; published empty", n, b.limit)
				} else {
					v.SetString(text.Truncate(s, int(b.limit)))
					note("%d characters, cut to the API's %d", n, b.limit)
				}
			}
		}
	case maximum:
		if x := v.Int(); x > b.limit {
			v.SetInt(b.limit)
			note("%d is above the API's maximum %d; published as %d", x, b.limit, b.limit)
		}
	case minimum:
		if x := v.Int(); x < b.limit {
			v.SetInt(b.limit)
			note("%d is below the API's minimum %d; published as %d", x, b.limit, b.limit)
		}
	}
}

// fieldByJSON finds a struct field by its JSON name (inline embedded
// structs are not used in the status).
func fieldByJSON(t reflect.Type, name string) (int, bool) {
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); tag == name {
			return i, true
		}
	}
	return 0, false
}
