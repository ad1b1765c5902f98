// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

// SectionSource is the telemetry source behind a section of the status, by
// the section's JSON name ("gpus" -> gpu); false for a field that is no
// source's section (sampleTime, conditions, ...).
func SectionSource(section string) (SourceName, bool) {
	s, ok := sectionSources[section]
	return s, ok
}

var sectionSources = map[string]SourceName{
	"cpu": SourceCPU, "memory": SourceMemory, "thermal": SourceThermal,
	"power": SourcePower, "numa": SourceNUMA, "gpus": SourceGPU,
}
