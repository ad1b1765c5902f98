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
			want: &Thermal{Sensors: []TempSensor{
				{Name: "acpitz/thermal_zone0", Source: "thermal_zone", MilliCelsius: 27800, CritMilliCelsius: ptr.To[int64](119000)},
				// Trips: passive 95000 and active 60000 are no
				// limits; hot 98000 is the max; critical is the
				// lower of 110000 and 105000.
				{Name: "x86_pkg_temp/thermal_zone1", Source: "thermal_zone", MilliCelsius: 45000, MaxMilliCelsius: ptr.To[int64](98000), CritMilliCelsius: ptr.To[int64](105000)},
				// thermal_zone2 fails with EIO and thermal_zone3
				// reads -274000 (below absolute zero): both left
				// out, not reported as 0. hwmon0 repeats
				// thermal_zone0: left out.
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
			name: "zones failing with ENODATA and EAGAIN are skipped, hwmon read",
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
			want:   &Thermal{Sensors: []TempSensor{{Name: "k10temp/Tctl", Source: "hwmon", MilliCelsius: 61250}}},
		},
		{
			name: "values that do not parse or are out of range are skipped",
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
			want: &Thermal{Sensors: []TempSensor{{Name: "acpitz/thermal_zone3", Source: "thermal_zone", MilliCelsius: -5000}}},
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
		if err := c.Collect(context.Background(), s); err != nil {
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
		if err := c.Collect(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
}
