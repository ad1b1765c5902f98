// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"fmt"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/internal/heat"
)

// Defect 1: coretemp's tempN_crit_alarm is sticky until reboot
// (Documentation/hwmon/coretemp.rst: "tempX_crit_alarm Set when Out-of-spec
// bit is set, never clears"). A node that once crossed its limit and is cool
// now is neither throttling nor overheating.
func TestStickyAlarmIsNotThrottling(t *testing.T) {
	s := &collector.Sample{Thermal: &collector.Thermal{Sensors: []collector.TempSensor{
		{Name: "coretemp.0/Package id 0", Source: "hwmon", MilliCelsius: 45_000, MaxMilliCelsius: ptr.To[int64](84_000), CritMilliCelsius: ptr.To[int64](100_000), Alarm: true},
		{Name: "coretemp.0/Core 0", Source: "hwmon", MilliCelsius: 43_000, MaxMilliCelsius: ptr.To[int64](84_000), CritMilliCelsius: ptr.To[int64](100_000)},
	}}}
	th := Thermal(s, heat.DefaultAbsoluteLimitMilliCelsius)
	if th.Throttling {
		t.Error("a sticky crit_alarm on a cool sensor marked the node throttling")
	}
	h := NewHeatTracker(DefaultHeatConfig())
	if st := h.Update(th, nil); st.Hot {
		t.Errorf("a sticky crit_alarm on a cool sensor made the node hot: %s", st.Message)
	}
}

// Defect 2: k10temp exposes no max or crit for Tctl/Tccd on Zen
// (Documentation/hwmon/k10temp.rst); an NVMe drive does (crit 84.85°C). The
// 98°C CPU must not hide behind the drive's 44.85°C of headroom.
func TestUnlimitedHotSensorBesideLimitedOne(t *testing.T) {
	s := &collector.Sample{Thermal: &collector.Thermal{Sensors: []collector.TempSensor{
		{Name: "k10temp/Tctl", Source: "hwmon", MilliCelsius: 98_000},
		{Name: "nvme/Composite", Source: "hwmon", MilliCelsius: 40_000, MaxMilliCelsius: ptr.To[int64](81_850), CritMilliCelsius: ptr.To[int64](84_850)},
	}}}
	h := NewHeatTracker(DefaultHeatConfig())
	if st := h.Update(Thermal(s, heat.DefaultAbsoluteLimitMilliCelsius), nil); !st.Hot {
		t.Errorf("a 98°C sensor without a limit beside a cool NVMe did not make the node hot: %s", st.Message)
	}
}

// Defect 8: the hottest sensor is always listed, even when eight sensors are
// closer to their limits.
func TestHottestSensorIsListed(t *testing.T) {
	s := &collector.Sample{Thermal: &collector.Thermal{}}
	for i := range 9 {
		s.Thermal.Sensors = append(s.Thermal.Sensors, collector.TempSensor{Name: fmt.Sprintf("nvme.%d/Composite", i), Source: "hwmon", MilliCelsius: 60_000, CritMilliCelsius: ptr.To[int64](70_000)})
	}
	s.Thermal.Sensors = append(s.Thermal.Sensors, collector.TempSensor{Name: "k10temp/Tctl", Source: "hwmon", MilliCelsius: 80_000})
	th := Thermal(s, heat.DefaultAbsoluteLimitMilliCelsius)
	for _, sn := range th.Sensors {
		if sn.Name == th.HottestSensor {
			return
		}
	}
	t.Errorf("hottest sensor %s is not among the %d listed sensors", th.HottestSensor, len(th.Sensors))
}
