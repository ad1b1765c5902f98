// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"testing"
	"time"
)

// k10temp on Zen exposes Tctl and Tccd* without max or crit
// (Documentation/hwmon/k10temp.rst); a listed part gets AMD's Tjmax, an
// unlisted one (here an EPYC, whose pages publish none) gets no limit, and a
// channel that does report a limit keeps its own.
func TestVendorLimits(t *testing.T) {
	hwmon := map[string]string{
		"/sys/class/hwmon/hwmon0/name":        "k10temp\n",
		"/sys/class/hwmon/hwmon0/temp1_input": "61250\n",
		"/sys/class/hwmon/hwmon0/temp1_label": "Tctl\n",
		"/sys/class/hwmon/hwmon0/temp3_input": "58000\n",
		"/sys/class/hwmon/hwmon0/temp3_label": "Tccd1\n",
		"/sys/class/hwmon/hwmon1/name":        "nvme\n",
		"/sys/class/hwmon/hwmon1/temp1_input": "40850\n",
		"/sys/class/hwmon/hwmon1/temp1_label": "Composite\n",
		"/sys/class/hwmon/hwmon1/temp1_crit":  "84850\n",
	}
	for _, tc := range []struct {
		model string
		want  int64 // 0: no vendor limit
	}{
		{"AMD Ryzen 9 5950X 16-Core Processor", 90_000},
		{"AMD Ryzen 9 7950X 16-Core Processor", 95_000},
		{"AMD EPYC 7763 64-Core Processor", 0},
		{"", 0},
	} {
		files := map[string]string{}
		for k, v := range hwmon {
			files[k] = v
		}
		if tc.model != "" {
			files["/proc/cpuinfo"] = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel name\t: " + tc.model + "\n\n"
		}
		s := &Sample{Time: time.Unix(100, 0)}
		if err := NewThermalCollector(writeTree(t, files)).Collect(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		for _, sn := range s.Thermal.Sensors {
			switch sn.Name {
			case "k10temp/Tctl", "k10temp/Tccd1":
				got := int64(0)
				if sn.VendorMilliCelsius != nil {
					got = *sn.VendorMilliCelsius
				}
				if got != tc.want {
					t.Errorf("%q: %s vendor limit %d, want %d", tc.model, sn.Name, got, tc.want)
				}
			case "nvme/Composite":
				if sn.VendorMilliCelsius != nil || sn.CritMilliCelsius == nil || *sn.CritMilliCelsius != 84_850 {
					t.Errorf("%q: nvme limits %+v, want its own crit only", tc.model, sn)
				}
			}
		}
	}
}
