// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bufio"
	"bytes"
	"strings"

	"github.com/telesched/telesched/agent/hostfs"
)

// vendorLimit is a temperature limit a sensor does not report but its
// vendor publishes for one exact part.
type vendorLimit struct {
	// model is /proc/cpuinfo's "model name", exactly.
	model string
	milli int64
}

// amdTjmax is AMD's "Max. Operating Temperature (Tjmax)" from each
// processor's specification page on amd.com (Products > Processors >
// Desktops > Ryzen > <model> > Specifications). k10temp exposes Tctl and
// Tccd* with no max or crit on Zen (Documentation/hwmon/k10temp.rst), so
// without this table such a CPU has no limit at all.
//
// Only parts whose Tctl reads the real temperature are listed: the kernel's
// k10temp driver subtracts a Tctl offset (its tctl_offset_table: 20°C on
// the Ryzen 1600X/1700X/1800X, 10°C on the 2700X, 27°C on Threadripper
// 19x0/29x0) and exposes the result as Tdie, so Tjmax would not apply to
// those parts' Tctl. EPYC parts are not listed: AMD's EPYC pages publish no
// Tjmax.
var amdTjmax = []vendorLimit{
	{"AMD Ryzen 5 1600 Six-Core Processor", 95_000},
	{"AMD Ryzen 7 1700 Eight-Core Processor", 95_000},
	{"AMD Ryzen 5 3600 6-Core Processor", 95_000},
	{"AMD Ryzen 7 3700X 8-Core Processor", 95_000},
	{"AMD Ryzen 9 3900X 12-Core Processor", 95_000},
	{"AMD Ryzen 9 3950X 16-Core Processor", 95_000},
	{"AMD Ryzen 5 5600X 6-Core Processor", 95_000},
	{"AMD Ryzen 7 5800X 8-Core Processor", 90_000},
	{"AMD Ryzen 9 5900X 12-Core Processor", 90_000},
	{"AMD Ryzen 9 5950X 16-Core Processor", 90_000},
	{"AMD Ryzen 5 7600X 6-Core Processor", 95_000},
	{"AMD Ryzen 7 7700X 8-Core Processor", 95_000},
	{"AMD Ryzen 9 7900X 12-Core Processor", 95_000},
	{"AMD Ryzen 9 7950X 16-Core Processor", 95_000},
}

// k10tempVendorLabel reports whether a k10temp channel measures the CPU die
// (Tctl, Tdie, Tccd1..8), the channels Tjmax applies to.
func k10tempVendorLabel(label string) bool {
	return label == "Tctl" || label == "Tdie" || strings.HasPrefix(label, "Tccd")
}

// vendorLimitFor returns the known limit of an hwmon channel, or nil.
func vendorLimitFor(chipName, label, cpuModel string) *int64 {
	if chipName != "k10temp" || !k10tempVendorLabel(label) || cpuModel == "" {
		return nil
	}
	for _, v := range amdTjmax {
		if v.model == cpuModel {
			return &v.milli
		}
	}
	return nil
}

// readCPUModel returns the first "model name" of /proc/cpuinfo, "" when
// there is none (arm64 lists no model name, and a tree may lack cpuinfo).
// CPUModel is /proc/cpuinfo's first "model name" under r, "" when it has
// none (arm64 kernels print no model name).
func CPUModel(r hostfs.Root) string { return readCPUModel(r) }

func readCPUModel(r hostfs.Root) string {
	data, err := r.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return ""
}
