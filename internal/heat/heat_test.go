// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package heat

import (
	"testing"

	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

func TestOfStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		th   *telemetryv1alpha1.ThermalStatus
		want Headroom
		hot  bool // at the default margin
	}{
		{name: "no thermal section", th: nil, want: Headroom{}},
		{
			// k10temp Tctl has no limit (Documentation/hwmon/k10temp.rst);
			// the NVMe's crit is far away: the CPU decides.
			name: "unlimited sensor hotter than the absolute limit",
			th: &telemetryv1alpha1.ThermalStatus{
				HottestSensor: "k10temp/Tctl", HottestMilliCelsius: 98_000,
				HeadroomMilliCelsius: ptr.To[int64](44_850), HeadroomSensor: "nvme/Composite",
				HottestUnlimitedSensor: "k10temp/Tctl", HottestUnlimitedMilliCelsius: ptr.To[int64](98_000),
				Sensors: []telemetryv1alpha1.ThermalSensor{{Name: "k10temp/Tctl", MilliCelsius: 98_000}, {Name: "nvme/Composite", MilliCelsius: 40_000}},
			},
			want: Headroom{Known: true, MilliCelsius: -8_000, Sensor: "k10temp/Tctl", TempMilli: 98_000, LimitMilli: 90_000, Absolute: true},
			hot:  true,
		},
		{
			name: "limited sensor closer than the unlimited one",
			th: &telemetryv1alpha1.ThermalStatus{
				HottestSensor: "coretemp.0/Package id 0", HottestMilliCelsius: 97_000,
				HeadroomMilliCelsius: ptr.To[int64](3_000), HeadroomSensor: "coretemp.0/Package id 0",
				HottestUnlimitedSensor: "acpitz/thermal_zone0", HottestUnlimitedMilliCelsius: ptr.To[int64](50_000),
				Sensors: []telemetryv1alpha1.ThermalSensor{{Name: "coretemp.0/Package id 0", MilliCelsius: 97_000}},
			},
			want: Headroom{Known: true, MilliCelsius: 3_000, Sensor: "coretemp.0/Package id 0", TempMilli: 97_000, LimitMilli: 100_000},
			hot:  true,
		},
		{
			name: "only limited sensors, cool",
			th: &telemetryv1alpha1.ThermalStatus{
				HottestSensor: "nvme/Composite", HottestMilliCelsius: 40_000,
				HeadroomMilliCelsius: ptr.To[int64](44_850), HeadroomSensor: "nvme/Composite",
			},
			// The sensor is not listed: its temperature falls back to the hottest.
			want: Headroom{Known: true, MilliCelsius: 44_850, Sensor: "nvme/Composite", TempMilli: 40_000, LimitMilli: 84_850},
		},
		{
			name: "exactly at the margin is hot",
			th: &telemetryv1alpha1.ThermalStatus{
				HottestSensor: "it8792/temp1", HottestMilliCelsius: 85_000,
				HottestUnlimitedSensor: "it8792/temp1", HottestUnlimitedMilliCelsius: ptr.To[int64](85_000),
			},
			want: Headroom{Known: true, MilliCelsius: 5_000, Sensor: "it8792/temp1", TempMilli: 85_000, LimitMilli: 90_000, Absolute: true},
			hot:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := OfStatus(tc.th, DefaultAbsoluteLimitMilliCelsius)
			if got != tc.want {
				t.Errorf("OfStatus = %+v, want %+v", got, tc.want)
			}
			if hot := got.TooHot(DefaultMarginMilliCelsius); hot != tc.hot {
				t.Errorf("TooHot = %v, want %v (%s)", hot, tc.hot, got)
			}
		})
	}
	h := OfStatus(&telemetryv1alpha1.ThermalStatus{HottestUnlimitedSensor: "k10temp/Tctl", HottestUnlimitedMilliCelsius: ptr.To[int64](95_000)}, 90_000)
	if want := "headroom -5.0°C: k10temp/Tctl at 95.0°C, absolute limit 90.0°C as it reports none"; h.String() != want {
		t.Errorf("String = %q, want %q", h.String(), want)
	}
}
