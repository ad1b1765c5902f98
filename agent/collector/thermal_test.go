// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// sysTree builds a host tree under a new temporary directory: files maps
// host paths to contents (a newline is added, as sysfs writes one), links
// maps host paths to symbolic-link targets.
func sysTree(t testing.TB, files, links map[string]string) hostfs.Root {
	t.Helper()
	root := hostfs.New(t.TempDir())
	setFiles(t, root, files)
	for p, target := range links {
		full := root.Path(p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// setFiles writes or overwrites files under root, each ending in a newline
// as sysfs writes it.
func setFiles(t testing.TB, root hostfs.Root, files map[string]string) {
	t.Helper()
	withNewline := make(map[string]string, len(files))
	for p, content := range files {
		withNewline[p] = content + "\n"
	}
	updateTree(t, root, withNewline)
}

// removePaths removes host paths (files, links or trees) under root.
func removePaths(t testing.TB, root hostfs.Root, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.RemoveAll(root.Path(p)); err != nil {
			t.Fatal(err)
		}
	}
}

// copyFixture copies testdata/<dir> into a new temporary root, symbolic
// links as links, so a test can change it.
func copyFixture(t testing.TB, dir string) hostfs.Root {
	t.Helper()
	src := filepath.Join("testdata", dir)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return hostfs.New(dst)
}

// checkSourceError checks that err is the *SourceError want (nil: that err
// is nil) wrapping wantIs. Message is compared only where want has one.
func checkSourceError(t *testing.T, want *SourceError, wantIs, err error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		return
	}
	var got *SourceError
	if !errors.As(err, &got) {
		t.Fatalf("err = %v (%T), want a *SourceError", err, err)
	}
	opts := []cmp.Option{cmpopts.IgnoreFields(SourceError{}, "Err")}
	if want.Message == "" {
		opts = append(opts, cmpopts.IgnoreFields(SourceError{}, "Message"))
		if got.Message == "" {
			t.Error("SourceError has no message")
		}
	}
	if diff := cmp.Diff(want, got, opts...); diff != "" {
		t.Errorf("SourceError (-want +got):\n%s", diff)
	}
	if wantIs != nil && !errors.Is(err, wantIs) {
		t.Errorf("err = %v, want it to wrap %v", err, wantIs)
	}
}

func TestThermalCollector(t *testing.T) {
	const zone = "/sys/class/thermal/thermal_zone0"
	const chip = "/sys/class/hwmon/hwmon0"
	tests := []struct {
		name    string
		root    func(t *testing.T) hostfs.Root
		faults  map[string]error
		want    *Thermal
		wantErr *SourceError
		wantIs  error
	}{
		{
			name:   "workstation",
			root:   func(t *testing.T) hostfs.Root { return hostfs.New("testdata/thermal/workstation") },
			faults: map[string]error{"/sys/class/thermal/thermal_zone2/temp": syscall.EIO},
			// thermal_zone2 and thermal_zone3 are named in the
			// message.
			wantErr: &SourceError{State: telemetryv1alpha1.SourceAvailable, Reason: "Degraded",
				Message: "2 of 16 temperature sensors unreadable: iwlwifi_1/thermal_zone2: temp: input/output error; no earlier reading to hold; " +
					"pch_cannonlake/thermal_zone3: temperature out of range: -274000 m°C; no earlier reading to hold"},
			wantIs: syscall.EIO,
			want: &Thermal{Sensors: []TempSensor{
				{Name: "acpitz/thermal_zone0", Source: "thermal_zone", MilliCelsius: 27800, CritMilliCelsius: ptr.To[int64](119000)},
				// Trips: passive 95000 and active 60000 are no
				// limits; hot 98000 is the max; critical is the
				// lower of 110000 and 105000.
				{Name: "x86_pkg_temp/thermal_zone1", Source: "thermal_zone", MilliCelsius: 45000, MaxMilliCelsius: ptr.To[int64](98000), CritMilliCelsius: ptr.To[int64](105000)},
				// thermal_zone2 fails with EIO and thermal_zone3
				// reads -274000 (below absolute zero): both left
				// out, not reported as 0, and named. hwmon0
				// repeats thermal_zone0: left out.
				//
				// coretemp.0 is hwmon2 (device coretemp.0),
				// coretemp.1 is hwmon1: numbered by device path,
				// not by hwmonN.
				{Name: "coretemp.0/Package id 0", Source: "hwmon", MilliCelsius: 48000, MaxMilliCelsius: ptr.To[int64](85000), CritMilliCelsius: ptr.To[int64](95000)},
				{Name: "coretemp.0/Core 0", Source: "hwmon", MilliCelsius: 47000, MaxMilliCelsius: ptr.To[int64](85000), CritMilliCelsius: ptr.To[int64](95000)},
				{Name: "coretemp.1/Package id 1", Source: "hwmon", MilliCelsius: 52000, MaxMilliCelsius: ptr.To[int64](85000), CritMilliCelsius: ptr.To[int64](95000)},
				// temp2_crit_alarm is 1.
				{Name: "coretemp.1/Core 0", Source: "hwmon", MilliCelsius: 50000, MaxMilliCelsius: ptr.To[int64](85000), CritMilliCelsius: ptr.To[int64](95000), Alarm: true},
				{Name: "coretemp.1/Core 1", Source: "hwmon", MilliCelsius: 51000, MaxMilliCelsius: ptr.To[int64](85000), CritMilliCelsius: ptr.To[int64](95000)},
				// AUXTIN0 (temp3) has temp3_fault 1: left out,
				// though its temp3_input reads 127000.
				{Name: "nct6798/SYSTIN", Source: "hwmon", MilliCelsius: 35000, MaxMilliCelsius: ptr.To[int64](80000)},
				{Name: "nct6798/CPUTIN", Source: "hwmon", MilliCelsius: 40000, MaxMilliCelsius: ptr.To[int64](80000)},
				// temp1_alarm is 1 (82850 > max 81850).
				{Name: "nvme/Composite", Source: "hwmon", MilliCelsius: 82850, MaxMilliCelsius: ptr.To[int64](81850), CritMilliCelsius: ptr.To[int64](84850), Alarm: true},
				// temp2_max 65261850 is the driver's "none".
				{Name: "nvme/Sensor 1", Source: "hwmon", MilliCelsius: 38850},
				// Legacy chip: name and attributes in
				// hwmon5/device; no labels.
				{Name: "w83627hf/temp1", Source: "hwmon", MilliCelsius: 36000, MaxMilliCelsius: ptr.To[int64](60000)},
				{Name: "w83627hf/temp2", Source: "hwmon", MilliCelsius: 41000, MaxMilliCelsius: ptr.To[int64](60000)},
			}},
		},
		{
			name:    "empty root",
			root:    func(t *testing.T) hostfs.Root { return hostfs.New(t.TempDir()) },
			wantErr: &SourceError{State: telemetryv1alpha1.SourceUnavailable, Reason: "NoSensors", Message: "no thermal zones or hwmon temperature sensors (typical in VMs)"},
		},
		{
			name: "thermal class without zones, hwmon without temperatures",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					"/sys/class/thermal/cooling_device0/type": "Processor",
					chip + "/name":       "acpi_fan",
					chip + "/fan1_input": "1200",
				}, nil)
			},
			wantErr: &SourceError{State: telemetryv1alpha1.SourceUnavailable, Reason: "NoSensors"},
		},
		{
			name: "the only zone fails with EIO",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{zone + "/type": "acpitz", zone + "/temp": "40000"}, nil)
			},
			faults:  map[string]error{zone + "/temp": syscall.EIO},
			wantErr: &SourceError{State: telemetryv1alpha1.SourceFailed, Reason: "ReadError"},
			wantIs:  syscall.EIO,
		},
		{
			name: "zones failing with ENODATA and EAGAIN are left out and named, hwmon read",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					zone + "/type":                          "iwlwifi_1",
					zone + "/temp":                          "40000",
					"/sys/class/thermal/thermal_zone1/type": "INT3400 Thermal",
					"/sys/class/thermal/thermal_zone1/temp": "20000",
					chip + "/name":                          "k10temp",
					chip + "/temp1_label":                   "Tctl",
					chip + "/temp1_input":                   "61250",
				}, nil)
			},
			faults: map[string]error{zone + "/temp": syscall.ENODATA, "/sys/class/thermal/thermal_zone1/temp": syscall.EAGAIN},
			wantErr: &SourceError{State: telemetryv1alpha1.SourceAvailable, Reason: "Degraded",
				Message: "2 of 3 temperature sensors unreadable: iwlwifi_1/thermal_zone0: temp: no data available; no earlier reading to hold; " +
					"INT3400 Thermal/thermal_zone1: temp: resource temporarily unavailable; no earlier reading to hold"},
			wantIs: syscall.EAGAIN,
			want:   &Thermal{Sensors: []TempSensor{{Name: "k10temp/Tctl", Source: "hwmon", MilliCelsius: 61250}}},
		},
		{
			name: "an hwmon channel switched off is no sensor",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					chip + "/name":         "lm90",
					chip + "/temp1_input":  "45125",
					chip + "/temp1_enable": "1",
					chip + "/temp2_input":  "0",
					chip + "/temp2_enable": "0",
				}, nil)
			},
			// sysfs-interface.rst: a disabled channel's reads
			// return -ENODATA.
			faults: map[string]error{chip + "/temp2_input": syscall.ENODATA},
			want:   &Thermal{Sensors: []TempSensor{{Name: "lm90/temp1", Source: "hwmon", MilliCelsius: 45125}}},
		},
		{
			name: "values that do not parse or are out of range are left out and named",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					zone + "/type":                          "acpitz",
					zone + "/temp":                          "",
					"/sys/class/thermal/thermal_zone1/type": "acpitz",
					"/sys/class/thermal/thermal_zone1/temp": "41.5",
					"/sys/class/thermal/thermal_zone2/type": "acpitz",
					"/sys/class/thermal/thermal_zone2/temp": "1000001",
					"/sys/class/thermal/thermal_zone3/type": "acpitz",
					"/sys/class/thermal/thermal_zone3/temp": "-5000",
				}, nil)
			},
			// Only -5000 (-5 °C) is a temperature.
			wantErr: &SourceError{State: telemetryv1alpha1.SourceAvailable, Reason: "Degraded"},
			wantIs:  errOutOfRange,
			want:    &Thermal{Sensors: []TempSensor{{Name: "acpitz/thermal_zone3", Source: "thermal_zone", MilliCelsius: -5000}}},
		},
		{
			name: "every sensor flags a fault",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					chip + "/name":        "lm90",
					chip + "/temp1_input": "0",
					chip + "/temp1_fault": "1",
				}, nil)
			},
			wantErr: &SourceError{State: telemetryv1alpha1.SourceFailed, Reason: "SensorFault"},
		},
		{
			name: "fault 0 and alarms 0 read as flags, not temperatures",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					chip + "/name":            "lm90",
					chip + "/temp1_input":     "45125",
					chip + "/temp1_fault":     "0",
					chip + "/temp1_alarm":     "0",
					chip + "/temp1_max_alarm": "0",
					chip + "/temp1_crit":      "85000",
				}, nil)
			},
			want: &Thermal{Sensors: []TempSensor{{Name: "lm90/temp1", Source: "hwmon", MilliCelsius: 45125, CritMilliCelsius: ptr.To[int64](85000)}}},
		},
		{
			name: "permission denied on every sensor",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{chip + "/name": "nvme", chip + "/temp1_input": "30850"}, nil)
			},
			faults:  map[string]error{chip + "/temp1_input": syscall.EACCES},
			wantErr: &SourceError{State: telemetryv1alpha1.SourceFailed, Reason: "PermissionDenied"},
			wantIs:  fs.ErrPermission,
		},
		{
			name: "labels: shared ones fall back to the channel, white space cleaned, long ones cut",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					chip + "/name":        "it8728",
					chip + "/temp1_label": "CPU",
					chip + "/temp1_input": "40000",
					chip + "/temp2_label": "CPU",
					chip + "/temp2_input": "41000",
					chip + "/temp3_label": "  Sys\ttem \n",
					chip + "/temp3_input": "42000",
					chip + "/temp4_label": strings.Repeat("x", 40),
					chip + "/temp4_input": "43000",
					chip + "/temp5_label": "temp6",
					chip + "/temp5_input": "44000",
					chip + "/temp6_input": "45000",
					chip + "/temp7_label": "",
					chip + "/temp7_input": "46000",
				}, nil)
			},
			want: &Thermal{Sensors: []TempSensor{
				{Name: "it8728/temp1", Source: "hwmon", MilliCelsius: 40000}, // "CPU" twice
				{Name: "it8728/temp2", Source: "hwmon", MilliCelsius: 41000},
				{Name: "it8728/Sys tem", Source: "hwmon", MilliCelsius: 42000},
				{Name: "it8728/" + strings.Repeat("x", 32), Source: "hwmon", MilliCelsius: 43000}, // cut to 32 bytes
				{Name: "it8728/temp5", Source: "hwmon", MilliCelsius: 44000},                      // "temp6" names another channel
				{Name: "it8728/temp6", Source: "hwmon", MilliCelsius: 45000},
				{Name: "it8728/temp7", Source: "hwmon", MilliCelsius: 46000}, // empty label
			}},
		},
		{
			name: "chips sharing a name without device links are numbered by hwmonN",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					"/sys/class/hwmon/hwmon10/name":        "nvme",
					"/sys/class/hwmon/hwmon10/temp1_label": "Composite",
					"/sys/class/hwmon/hwmon10/temp1_input": "40850",
					"/sys/class/hwmon/hwmon2/name":         "nvme",
					"/sys/class/hwmon/hwmon2/temp1_label":  "Composite",
					"/sys/class/hwmon/hwmon2/temp1_input":  "35850",
					"/sys/class/hwmon/hwmon3/temp1_input":  "30000", // no name at all
				}, nil)
			},
			want: &Thermal{Sensors: []TempSensor{
				{Name: "hwmon3/temp1", Source: "hwmon", MilliCelsius: 30000},
				{Name: "nvme.0/Composite", Source: "hwmon", MilliCelsius: 35850}, // hwmon2
				{Name: "nvme.1/Composite", Source: "hwmon", MilliCelsius: 40850}, // hwmon10
			}},
		},
		{
			name: "chips sharing a name are numbered in natural device path order",
			root: func(t *testing.T) hostfs.Root {
				files := map[string]string{}
				links := map[string]string{}
				// nvme10 was probed first (hwmon1), nvme2 second.
				for i, dev := range []string{"nvme10", "nvme2"} {
					h := "/sys/devices/pci0000:00/nvme/" + dev + "/hwmon" + string(rune('1'+i))
					files[h+"/name"] = "nvme"
					files[h+"/temp1_label"] = "Composite"
					files[h+"/temp1_input"] = []string{"50850", "30850"}[i]
					links["/sys/class/hwmon/hwmon"+string(rune('1'+i))] = "../.." + strings.TrimPrefix(h, "/sys")
				}
				return sysTree(t, files, links)
			},
			want: &Thermal{Sensors: []TempSensor{
				{Name: "nvme.0/Composite", Source: "hwmon", MilliCelsius: 30850}, // nvme2
				{Name: "nvme.1/Composite", Source: "hwmon", MilliCelsius: 50850}, // nvme10
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := tc.root(t).WithFaults(tc.faults)
			c := NewThermalCollector(root)
			s := &Sample{Time: time.Unix(1_700_000_000, 0)}
			err := c.Collect(context.Background(), s)
			checkSourceError(t, tc.wantErr, tc.wantIs, err)
			if diff := cmp.Diff(tc.want, s.Thermal); diff != "" {
				t.Errorf("Thermal (-want +got):\n%s", diff)
			}
		})
	}
}

// TestThermalSourceStatus checks how the collector's errors reach the
// sample's source list.
func TestThermalSourceStatus(t *testing.T) {
	root := hostfs.New(t.TempDir())
	s, _ := Run(context.Background(), []Collector{NewThermalCollector(root)}, time.Unix(1_700_000_000, 0))
	want := []telemetryv1alpha1.SourceStatus{{
		Name:    telemetryv1alpha1.SourceThermal,
		State:   telemetryv1alpha1.SourceUnavailable,
		Reason:  "NoSensors",
		Message: "no thermal zones or hwmon temperature sensors (typical in VMs)",
	}}
	if diff := cmp.Diff(want, s.Sources); diff != "" {
		t.Errorf("Sources (-want +got):\n%s", diff)
	}
	if s.Thermal != nil {
		t.Errorf("Thermal = %+v, want nil", s.Thermal)
	}
}

// TestThermalRediscovery checks that the collector lists sensors again when
// one disappears, and finds new ones at the next periodic discovery.
func TestThermalRediscovery(t *testing.T) {
	root := copyFixture(t, "thermal/workstation")
	c := NewThermalCollector(root)
	t0 := time.Unix(1_700_000_000, 0)
	names := func(at time.Duration) []string {
		t.Helper()
		s := &Sample{Time: t0.Add(at)}
		// pch_cannonlake/thermal_zone3 reads -274000: Degraded.
		if err := c.Collect(context.Background(), s); err != nil && !IsDegraded(err) {
			t.Fatalf("Collect at %v: %v", at, err)
		}
		var out []string
		for _, sn := range s.Thermal.Sensors {
			out = append(out, sn.Name)
		}
		return out
	}
	// No fault is injected here: iwlwifi_1 reads its file's 0.
	all := []string{
		"acpitz/thermal_zone0", "x86_pkg_temp/thermal_zone1", "iwlwifi_1/thermal_zone2",
		"coretemp.0/Package id 0", "coretemp.0/Core 0",
		"coretemp.1/Package id 1", "coretemp.1/Core 0", "coretemp.1/Core 1",
		"nct6798/SYSTIN", "nct6798/CPUTIN", "nvme/Composite", "nvme/Sensor 1",
		"w83627hf/temp1", "w83627hf/temp2",
	}
	if diff := cmp.Diff(all, names(0)); diff != "" {
		t.Fatalf("first cycle (-want +got):\n%s", diff)
	}

	// The NVMe drive and coretemp.0 go away; the next cycle sees a file
	// missing and lists the sensors again. coretemp.1 is now the only
	// coretemp chip.
	removePaths(t, root, "/sys/class/hwmon/hwmon3", "/sys/class/hwmon/hwmon2")
	want := []string{
		"acpitz/thermal_zone0", "x86_pkg_temp/thermal_zone1", "iwlwifi_1/thermal_zone2",
		"coretemp/Package id 1", "coretemp/Core 0", "coretemp/Core 1",
		"nct6798/SYSTIN", "nct6798/CPUTIN",
		"w83627hf/temp1", "w83627hf/temp2",
	}
	if diff := cmp.Diff(want, names(10*time.Second)); diff != "" {
		t.Errorf("after removal (-want +got):\n%s", diff)
	}

	// A drive appears: seen at the next periodic discovery, not before.
	setFiles(t, root, map[string]string{
		"/sys/class/hwmon/hwmon6/name":        "drivetemp",
		"/sys/class/hwmon/hwmon6/temp1_input": "33000",
	})
	if diff := cmp.Diff(want, names(20*time.Second)); diff != "" {
		t.Errorf("before periodic discovery (-want +got):\n%s", diff)
	}
	want = []string{
		"acpitz/thermal_zone0", "x86_pkg_temp/thermal_zone1", "iwlwifi_1/thermal_zone2",
		"coretemp/Package id 1", "coretemp/Core 0", "coretemp/Core 1",
		"drivetemp/temp1",
		"nct6798/SYSTIN", "nct6798/CPUTIN",
		"w83627hf/temp1", "w83627hf/temp2",
	}
	if diff := cmp.Diff(want, names(10*time.Second+defaultRediscoverEvery)); diff != "" {
		t.Errorf("after periodic discovery (-want +got):\n%s", diff)
	}
}

// BenchmarkThermalCollect is one collection cycle over the workstation
// tree (16 sensor files), after discovery.
func BenchmarkThermalCollect(b *testing.B) {
	c := NewThermalCollector(hostfs.New("testdata/thermal/workstation"))
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		s := &Sample{Time: now}
		// Two of its zones are unreadable: Degraded.
		if err := c.Collect(ctx, s); err != nil && !IsDegraded(err) {
			b.Fatal(err)
		}
	}
}

// TestThermalUnreadableSensorIsHeldThenLeftOut pins how the collector fails
// closed on a sensor whose temperature read fails (EIO from tempN_input, as
// a dead sensor's driver returns): the source turns Degraded naming the
// sensor and its error, and the sensor's last good reading stands in for it
// for the hold time from when it was read, so a node last seen hot is not
// reported cool. After the hold the sensor is left out, and the source stays
// Degraded naming it until the sensor reads again.
func TestThermalUnreadableSensorIsHeldThenLeftOut(t *testing.T) {
	const chip = "/sys/class/hwmon/hwmon0"
	const nvme = "/sys/class/hwmon/hwmon1"
	root := sysTree(t, map[string]string{
		chip + "/name":        "coretemp",
		chip + "/temp1_label": "Package id 0",
		chip + "/temp1_input": "92000",
		chip + "/temp1_crit":  "100000",
		chip + "/temp1_fault": "0",
		nvme + "/name":        "nvme",
		nvme + "/temp1_label": "Composite",
		nvme + "/temp1_input": "40850",
		nvme + "/temp1_crit":  "84850",
	}, nil)
	var faults hostfs.Faults
	c := NewThermalCollector(root.WithFaultSet(&faults)).WithSensorHold(time.Minute)
	t0 := time.Unix(1_700_000_000, 0) // 2023-11-14T22:13:20Z

	pkg := func(milli int64, held bool) TempSensor {
		return TempSensor{Name: "coretemp/Package id 0", Source: "hwmon", MilliCelsius: milli, CritMilliCelsius: ptr.To[int64](100000), Held: held}
	}
	composite := TempSensor{Name: "nvme/Composite", Source: "hwmon", MilliCelsius: 40850, CritMilliCelsius: ptr.To[int64](84850)}
	available := telemetryv1alpha1.SourceStatus{Name: telemetryv1alpha1.SourceThermal, State: telemetryv1alpha1.SourceAvailable}
	degraded := func(msg string) telemetryv1alpha1.SourceStatus {
		return telemetryv1alpha1.SourceStatus{Name: telemetryv1alpha1.SourceThermal, State: telemetryv1alpha1.SourceAvailable, Reason: "Degraded", Message: msg}
	}
	// The steps run in order on one collector.
	steps := []struct {
		name       string
		at         time.Duration
		fault      error  // of the package sensor's temp1_input
		faultFlag  string // its temp1_fault
		want       []TempSensor
		wantSource telemetryv1alpha1.SourceStatus
	}{
		{
			name:       "both sensors read",
			at:         0,
			want:       []TempSensor{pkg(92000, false), composite},
			wantSource: available,
		},
		{
			name:  "the hottest sensor fails with EIO: its 92 °C reading of t0 is held",
			at:    10 * time.Second,
			fault: syscall.EIO,
			want:  []TempSensor{pkg(92000, true), composite},
			wantSource: degraded("1 of 2 temperature sensors unreadable: coretemp/Package id 0: temp1_input: input/output error; " +
				"holding its last reading, 92.0°C read at 2023-11-14T22:13:20Z, until 2023-11-14T22:14:20Z"),
		},
		{
			name:  "still held at the end of the hold: t0 + 1m",
			at:    time.Minute,
			fault: syscall.EIO,
			want:  []TempSensor{pkg(92000, true), composite},
			wantSource: degraded("1 of 2 temperature sensors unreadable: coretemp/Package id 0: temp1_input: input/output error; " +
				"holding its last reading, 92.0°C read at 2023-11-14T22:13:20Z, until 2023-11-14T22:14:20Z"),
		},
		{
			name:  "past the hold the sensor is left out, and still named",
			at:    time.Minute + time.Second,
			fault: syscall.EIO,
			want:  []TempSensor{composite},
			wantSource: degraded("1 of 2 temperature sensors unreadable: coretemp/Package id 0: temp1_input: input/output error; " +
				"left out since 2023-11-14T22:14:20Z (its last reading, 92.0°C read at 2023-11-14T22:13:20Z, was held 1m0s)"),
		},
		{
			name:       "the sensor reads again",
			at:         2 * time.Minute,
			want:       []TempSensor{pkg(92000, false), composite},
			wantSource: available,
		},
		{
			name:  "a new failure holds the new last reading",
			at:    2*time.Minute + 5*time.Second,
			fault: syscall.ENODATA,
			want:  []TempSensor{pkg(92000, true), composite},
			wantSource: degraded("1 of 2 temperature sensors unreadable: coretemp/Package id 0: temp1_input: no data available; " +
				"holding its last reading, 92.0°C read at 2023-11-14T22:15:20Z, until 2023-11-14T22:16:20Z"),
		},
		{
			name:      "a sensor that read and now flags a fault is held the same way",
			at:        2*time.Minute + 10*time.Second,
			faultFlag: "1",
			want:      []TempSensor{pkg(92000, true), composite},
			wantSource: degraded("1 of 2 temperature sensors unreadable: coretemp/Package id 0: temp1_fault: the sensor flags a fault; " +
				"holding its last reading, 92.0°C read at 2023-11-14T22:15:20Z, until 2023-11-14T22:16:20Z"),
		},
	}
	for _, step := range steps {
		faults.Set(chip+"/temp1_input", step.fault)
		flag := "0"
		if step.faultFlag != "" {
			flag = step.faultFlag
		}
		setFiles(t, root, map[string]string{chip + "/temp1_fault": flag})
		s, _ := Run(context.Background(), []Collector{c}, t0.Add(step.at))
		var got []TempSensor
		if s.Thermal != nil {
			got = s.Thermal.Sensors
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("%s: sensors (-want +got):\n%s", step.name, diff)
		}
		if diff := cmp.Diff([]telemetryv1alpha1.SourceStatus{step.wantSource}, s.Sources); diff != "" {
			t.Errorf("%s: sources (-want +got):\n%s", step.name, diff)
		}
	}
}

// TestThermalUnreadableSensorWithoutHold checks that a zero hold leaves an
// unreadable sensor out at once, the source still Degraded naming it, and
// that an unreadable sensor with no earlier reading is named too.
func TestThermalUnreadableSensorWithoutHold(t *testing.T) {
	const chip = "/sys/class/hwmon/hwmon0"
	root := sysTree(t, map[string]string{
		chip + "/name":        "k10temp",
		chip + "/temp1_label": "Tctl",
		chip + "/temp1_input": "61500",
		chip + "/temp2_label": "Tccd1",
		chip + "/temp2_input": "55000",
	}, nil)
	var faults hostfs.Faults
	faults.Set(chip+"/temp2_input", syscall.EIO)
	c := NewThermalCollector(root.WithFaultSet(&faults)).WithSensorHold(0)
	t0 := time.Unix(1_700_000_000, 0)
	for _, step := range []struct {
		at      time.Duration
		faulted string
		want    []TempSensor
		wantMsg string
	}{
		{
			at: 0, faulted: chip + "/temp2_input",
			want:    []TempSensor{{Name: "k10temp/Tctl", Source: "hwmon", MilliCelsius: 61500}},
			wantMsg: "1 of 2 temperature sensors unreadable: k10temp/Tccd1: temp2_input: input/output error; no earlier reading to hold",
		},
		{
			at: time.Second, faulted: chip + "/temp1_input",
			want:    []TempSensor{{Name: "k10temp/Tccd1", Source: "hwmon", MilliCelsius: 55000}},
			wantMsg: "1 of 2 temperature sensors unreadable: k10temp/Tctl: temp1_input: input/output error; left out since 2023-11-14T22:13:20Z (its last reading, 61.5°C read at 2023-11-14T22:13:20Z, was held 0s)",
		},
	} {
		faults.Set(chip+"/temp1_input", nil)
		faults.Set(chip+"/temp2_input", nil)
		faults.Set(step.faulted, syscall.EIO)
		s := &Sample{Time: t0.Add(step.at)}
		err := c.Collect(context.Background(), s)
		checkSourceError(t, &SourceError{State: telemetryv1alpha1.SourceAvailable, Reason: "Degraded", Message: step.wantMsg}, syscall.EIO, err)
		if diff := cmp.Diff(&Thermal{Sensors: step.want}, s.Thermal); diff != "" {
			t.Errorf("at %v: Thermal (-want +got):\n%s", step.at, diff)
		}
	}
}
