// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

const (
	psRAPL  = telemetryv1alpha1.PowerSourceRAPL
	psHwmon = telemetryv1alpha1.PowerSourceHwmon
	psACPI  = telemetryv1alpha1.PowerSourceACPI
	psNVML  = telemetryv1alpha1.PowerSourceNVML

	raplPkg0   = "/sys/class/powercap/intel-rapl:0/energy_uj"
	raplCore0  = "/sys/class/powercap/intel-rapl:0:0/energy_uj"
	raplDram0  = "/sys/class/powercap/intel-rapl:0:2/energy_uj"
	raplPkg1   = "/sys/class/powercap/intel-rapl:1/energy_uj"
	raplDram1  = "/sys/class/powercap/intel-rapl:1:1/energy_uj"
	raplPsys   = "/sys/class/powercap/intel-rapl:2/energy_uj"
	raplMMIO0  = "/sys/class/powercap/intel-rapl-mmio:0/energy_uj"
	acpiPower1 = "/sys/class/hwmon/hwmon1/device/power1_average"
)

// serverWithoutACPIMeter is the two-socket server's tree without its ACPI
// power meter, so RAPL measures it.
func serverWithoutACPIMeter(t testing.TB) hostfs.Root {
	root := copyFixture(t, "power/server-2s")
	removePaths(t, root, "/sys/class/hwmon/hwmon1", "/sys/devices/LNXSYSTM:00")
	return root
}

// powerStep is one call of Collect: the files written before it, the GPUs
// the GPU collector left in the sample, and what the call should give.
type powerStep struct {
	at    time.Duration // Sample.Time after the first call
	files map[string]string
	gpus  []telemetryv1alpha1.GPUStatus

	want    *Power
	wantErr *SourceError // nil: no SourceError
	wantIs  error        // an error err must wrap (ErrWarmingUp, a syscall error)
}

// powerWarmingUp is a step that only records a baseline.
func powerWarmingUp(at time.Duration, files map[string]string, gpus ...telemetryv1alpha1.GPUStatus) powerStep {
	return powerStep{at: at, files: files, gpus: gpus, wantIs: ErrWarmingUp}
}

// gpuPower is a GPU as the GPU collector reports it.
func gpuPower(index int32, watts *int32, joules *int64) telemetryv1alpha1.GPUStatus {
	return telemetryv1alpha1.GPUStatus{Index: index, UUID: fmt.Sprintf("GPU-%d", index), PowerWatts: watts, EnergyJoules: joules}
}

// raplTree is one RAPL package zone with its counter and, when max > 0,
// its wrap range.
func raplTree(t *testing.T, energy, max uint64) hostfs.Root {
	files := map[string]string{
		"/sys/class/powercap/intel-rapl:0/name":      "package-0",
		"/sys/class/powercap/intel-rapl:0/energy_uj": fmt.Sprint(energy),
	}
	if max > 0 {
		files["/sys/class/powercap/intel-rapl:0/max_energy_range_uj"] = fmt.Sprint(max)
	}
	return sysTree(t, files, nil)
}

var raplPermissionDenied = &SourceError{
	State:   telemetryv1alpha1.SourceFailed,
	Reason:  "PermissionDenied",
	Message: "energy_uj is readable by root only since CVE-2020-8694; read it through the powercap relay (the powercap-relay container of the shipped DaemonSets, the agent's --powercap-relay-socket), or run the agent as root",
}

func TestPowerCollector(t *testing.T) {
	const chip = "/sys/class/hwmon/hwmon0"
	server := func(t *testing.T) hostfs.Root { return copyFixture(t, "power/server-2s") }
	// Denying every RAPL counter of the server.
	raplDenied := map[string]error{raplPkg0: syscall.EACCES, raplCore0: syscall.EACCES, raplDram0: syscall.EACCES, raplPkg1: syscall.EACCES, raplDram1: syscall.EACCES, raplPsys: syscall.EACCES, raplMMIO0: syscall.EACCES}

	tests := []struct {
		name   string
		root   func(t *testing.T) hostfs.Root
		faults map[string]error
		steps  []powerStep
		// wantRAPLErr is the Reason of RAPLError() after the last
		// step; "" for nil.
		wantRAPLErr string
	}{
		{
			name: "RAPL without an ACPI power meter: packages and dram; core, uncore, psys and the mmio copy not added",
			root: func(t *testing.T) hostfs.Root { return serverWithoutACPIMeter(t) },
			steps: []powerStep{
				powerWarmingUp(0, map[string]string{raplPkg0: "1000000", raplDram0: "500000", raplPkg1: "2000000", raplDram1: "300000", raplCore0: "0", raplPsys: "0", raplMMIO0: "1000000"}),
				{
					at: 5 * time.Second,
					// core +80 J, raplPsys +400 J and mmio +100 J change
					// nothing.
					files: map[string]string{raplPkg0: "101000000", raplDram0: "10500000", raplPkg1: "152000000", raplDram1: "5300000", raplCore0: "80000000", raplPsys: "400000000", raplMMIO0: "101000000"},
					want: &Power{
						Watts:        53, // 20 + 2 + 30 + 1
						Sources:      []telemetryv1alpha1.PowerSource{psRAPL},
						EnergyJoules: 265, // 100 + 10 + 150 + 5
						Zones: []PowerZone{
							{Name: "package-0", Source: psRAPL, Watts: 20, EnergyJoules: 100}, // (101_000_000 - 1_000_000) µJ / 5 s = 20 W
							{Name: "dram-0", Source: psRAPL, Watts: 2, EnergyJoules: 10},      // (10_500_000 - 500_000) µJ / 5 s = 2 W
							{Name: "package-1", Source: psRAPL, Watts: 30, EnergyJoules: 150}, // (152_000_000 - 2_000_000) µJ / 5 s = 30 W
							{Name: "dram-1", Source: psRAPL, Watts: 1, EnergyJoules: 5},       // (5_300_000 - 300_000) µJ / 5 s = 1 W
						},
					},
				},
				{
					at:    15 * time.Second, // 10 s after the previous call
					files: map[string]string{raplPkg0: "351000000", raplDram0: "30500000", raplPkg1: "452000000", raplDram1: "15300000"},
					want: &Power{
						Watts:        58, // 25 + 2 + 30 + 1
						Sources:      []telemetryv1alpha1.PowerSource{psRAPL},
						EnergyJoules: 845, // 265 + 250 + 20 + 300 + 10
						Zones: []PowerZone{
							{Name: "package-0", Source: psRAPL, Watts: 25, EnergyJoules: 350}, // (351_000_000 - 101_000_000) µJ / 10 s = 25 W; 100 + 250 J
							{Name: "dram-0", Source: psRAPL, Watts: 2, EnergyJoules: 30},      // (30_500_000 - 10_500_000) µJ / 10 s = 2 W; 10 + 20 J
							{Name: "package-1", Source: psRAPL, Watts: 30, EnergyJoules: 450}, // (452_000_000 - 152_000_000) µJ / 10 s = 30 W; 150 + 300 J
							{Name: "dram-1", Source: psRAPL, Watts: 1, EnergyJoules: 15},      // (15_300_000 - 5_300_000) µJ / 10 s = 1 W; 5 + 10 J
						},
					},
				},
			},
		},
		{
			// Documentation/power/powercap/powercap.rst: RAPL's domains
			// are the CPU packages and their DRAM; the ACPI power meter
			// (Documentation/hwmon/acpi_power_meter.rst, ACPI 10.4)
			// measures the whole server: fans, disks, NICs, PSU losses
			// and GPUs too. Where both read, the node's power is the
			// meter's.
			name: "RAPL and the ACPI power meter both read: the whole-server meter",
			root: server,
			steps: []powerStep{
				{
					// The gauge needs no baseline; RAPL is not read.
					at:   0,
					gpus: []telemetryv1alpha1.GPUStatus{gpuPower(0, ptr.To[int32](150), nil)},
					want: &Power{
						Watts:    412, // the meter's 412_000_000 µW, the GPU inside it
						Sources:  []telemetryv1alpha1.PowerSource{psACPI, psNVML},
						GPUWatts: ptr.To(150.0),
						Zones: []PowerZone{
							{Name: "power_meter/power1", Source: psACPI, Watts: 412},
							{Name: "gpu-0", Source: psNVML, Watts: 150},
						},
					},
				},
				{
					at:    5 * time.Second,
					files: map[string]string{acpiPower1: "402000000", raplPkg0: "101000000", raplDram0: "10500000", raplPkg1: "152000000", raplDram1: "5300000"},
					want: &Power{
						Watts:        402,
						Sources:      []telemetryv1alpha1.PowerSource{psACPI},
						EnergyJoules: 2035, // (412 + 402) / 2 W * 5 s
						Zones:        []PowerZone{{Name: "power_meter/power1", Source: psACPI, Watts: 402, EnergyJoules: 2035}},
					},
				},
			},
		},
		{
			name:   "ACPI power meter fails to read: RAPL measures",
			root:   server,
			faults: map[string]error{acpiPower1: syscall.EIO},
			steps: []powerStep{
				powerWarmingUp(0, map[string]string{raplPkg0: "1000000", raplDram0: "500000", raplPkg1: "2000000", raplDram1: "300000"}),
				{
					at:    5 * time.Second,
					files: map[string]string{raplPkg0: "101000000", raplDram0: "10500000", raplPkg1: "152000000", raplDram1: "5300000"},
					want: &Power{
						Watts:        53, // 20 + 2 + 30 + 1, as without the meter
						Sources:      []telemetryv1alpha1.PowerSource{psRAPL},
						EnergyJoules: 265,
						Zones: []PowerZone{
							{Name: "package-0", Source: psRAPL, Watts: 20, EnergyJoules: 100},
							{Name: "dram-0", Source: psRAPL, Watts: 2, EnergyJoules: 10},
							{Name: "package-1", Source: psRAPL, Watts: 30, EnergyJoules: 150},
							{Name: "dram-1", Source: psRAPL, Watts: 1, EnergyJoules: 5},
						},
					},
				},
			},
		},
		{
			// The ACPI meter's failure comes first in readBase's order,
			// but RAPL's is the one an operator can fix.
			name:   "ACPI power meter fails and RAPL denied: RAPL's failure",
			root:   server,
			faults: map[string]error{acpiPower1: syscall.EIO, raplPkg0: syscall.EACCES, raplDram0: syscall.EACCES, raplPkg1: syscall.EACCES, raplDram1: syscall.EACCES},
			steps: []powerStep{
				{at: 0, wantErr: raplPermissionDenied, wantIs: fs.ErrPermission},
			},
			wantRAPLErr: "PermissionDenied",
		},
		{
			// The package limits come from powercap's constraint files,
			// so the power model's prior has them whichever meter
			// measures the node.
			name: "ACPI power meter with RAPL package limits: the limits kept",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					"/sys/class/powercap/intel-rapl:0/name":                      "package-0",
					"/sys/class/powercap/intel-rapl:0/energy_uj":                 "0",
					"/sys/class/powercap/intel-rapl:0/constraint_0_max_power_uw": "205000000",
					chip + "/name":           "power_meter",
					chip + "/power1_average": "310000000",
				}, nil)
			},
			steps: []powerStep{{
				want: &Power{
					Watts:             310,
					Sources:           []telemetryv1alpha1.PowerSource{psACPI},
					Zones:             []PowerZone{{Name: "power_meter/power1", Source: psACPI, Watts: 310}},
					PackageLimitWatts: []float64{205}, // 205_000_000 µW
				},
			}},
		},
		{
			name: "RAPL counter wraps at max_energy_range_uj",
			root: func(t *testing.T) hostfs.Root { return raplTree(t, 262_100_000_000, 262_143_328_850) },
			steps: []powerStep{
				powerWarmingUp(0, nil),
				{
					at:    10 * time.Second,
					files: map[string]string{raplPkg0: "56671150"},
					want: &Power{
						// (56_671_150 + 262_143_328_850 - 262_100_000_000) µJ = 100 J; / 10 s = 10 W
						Watts:        10,
						Sources:      []telemetryv1alpha1.PowerSource{psRAPL},
						EnergyJoules: 100,
						Zones:        []PowerZone{{Name: "package-0", Source: psRAPL, Watts: 10, EnergyJoules: 100}},
					},
				},
			},
		},
		{
			name: "a counter going back without a wrap range is a reset: new baseline",
			root: func(t *testing.T) hostfs.Root { return raplTree(t, 5_000_000, 0) },
			steps: []powerStep{
				powerWarmingUp(0, nil),
				powerWarmingUp(5*time.Second, map[string]string{raplPkg0: "1000000"}),
				{
					at:    10 * time.Second,
					files: map[string]string{raplPkg0: "6000000"},
					want: &Power{
						Watts:        1, // (6_000_000 - 1_000_000) µJ / 5 s = 1 W
						Sources:      []telemetryv1alpha1.PowerSource{psRAPL},
						EnergyJoules: 5,
						Zones:        []PowerZone{{Name: "package-0", Source: psRAPL, Watts: 1, EnergyJoules: 5}},
					},
				},
			},
		},
		{
			name: "RAPL mmio zone counts when there is no MSR zone",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					"/sys/class/powercap/intel-rapl-mmio:0/name":                "package-0",
					"/sys/class/powercap/intel-rapl-mmio:0/energy_uj":           "0",
					"/sys/class/powercap/intel-rapl-mmio:0/max_energy_range_uj": "262143328850",
				}, nil)
			},
			steps: []powerStep{
				powerWarmingUp(0, nil),
				{
					at:    2 * time.Second,
					files: map[string]string{raplMMIO0: "30000000"},
					want: &Power{
						Watts:        15, // 30_000_000 µJ / 2 s = 15 W
						Sources:      []telemetryv1alpha1.PowerSource{psRAPL},
						EnergyJoules: 30,
						Zones:        []PowerZone{{Name: "package-0", Source: psRAPL, Watts: 15, EnergyJoules: 30}},
					},
				},
			},
		},
		{
			name: "AMD: package zones with core subzones, multi-die package names",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					"/sys/class/powercap/intel-rapl:0/name":        "package-0-die-0",
					"/sys/class/powercap/intel-rapl:0/energy_uj":   "0",
					"/sys/class/powercap/intel-rapl:0:0/name":      "core",
					"/sys/class/powercap/intel-rapl:0:0/energy_uj": "0",
					"/sys/class/powercap/intel-rapl:0:1/name":      "dram",
					"/sys/class/powercap/intel-rapl:0:1/energy_uj": "0",
				}, nil)
			},
			steps: []powerStep{
				powerWarmingUp(0, nil),
				{
					at:    4 * time.Second,
					files: map[string]string{raplPkg0: "200000000", raplCore0: "150000000", "/sys/class/powercap/intel-rapl:0:1/energy_uj": "8000000"},
					want: &Power{
						Watts:        52, // 50 + 2
						Sources:      []telemetryv1alpha1.PowerSource{psRAPL},
						EnergyJoules: 208,
						Zones: []PowerZone{
							{Name: "package-0-die-0", Source: psRAPL, Watts: 50, EnergyJoules: 200}, // 200_000_000 µJ / 4 s = 50 W
							{Name: "dram-0-die-0", Source: psRAPL, Watts: 2, EnergyJoules: 8},       // 8_000_000 µJ / 4 s = 2 W
						},
					},
				},
			},
		},
		{
			name:   "RAPL permission denied, no fallback: Failed, even with GPUs",
			root:   func(t *testing.T) hostfs.Root { return raplTree(t, 1_000_000, 262_143_328_850) },
			faults: map[string]error{raplPkg0: syscall.EACCES},
			steps: []powerStep{
				{at: 0, wantErr: raplPermissionDenied, wantIs: fs.ErrPermission},
				{at: 5 * time.Second, gpus: []telemetryv1alpha1.GPUStatus{gpuPower(0, ptr.To[int32](300), nil)}, wantErr: raplPermissionDenied, wantIs: fs.ErrPermission},
			},
			wantRAPLErr: "PermissionDenied",
		},
		{
			name:   "RAPL read fails with EIO, no fallback",
			root:   func(t *testing.T) hostfs.Root { return raplTree(t, 1_000_000, 262_143_328_850) },
			faults: map[string]error{raplPkg0: syscall.EIO},
			steps: []powerStep{
				{at: 0, wantErr: &SourceError{State: telemetryv1alpha1.SourceFailed, Reason: "ReadError"}, wantIs: syscall.EIO},
			},
			wantRAPLErr: "ReadError",
		},
		{
			name: "RAPL permission denied, hwmon power sensor used",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					"/sys/class/powercap/intel-rapl:0/name":      "package-0",
					"/sys/class/powercap/intel-rapl:0/energy_uj": "1000000",
					chip + "/name":         "ina226",
					chip + "/power1_input": "12500000",
				}, nil)
			},
			faults: map[string]error{raplPkg0: syscall.EACCES},
			steps: []powerStep{
				{
					// A gauge needs no baseline.
					at: 0,
					want: &Power{
						Watts:   12.5, // 12_500_000 µW
						Sources: []telemetryv1alpha1.PowerSource{psHwmon},
						Zones:   []PowerZone{{Name: "ina226/power1", Source: psHwmon, Watts: 12.5}},
					},
				},
				{
					at:    2 * time.Second,
					files: map[string]string{chip + "/power1_input": "13500000"},
					want: &Power{
						Watts:        13.5,
						Sources:      []telemetryv1alpha1.PowerSource{psHwmon},
						EnergyJoules: 26, // (12.5 + 13.5) / 2 W * 2 s
						Zones:        []PowerZone{{Name: "ina226/power1", Source: psHwmon, Watts: 13.5, EnergyJoules: 26}},
					},
				},
			},
			wantRAPLErr: "PermissionDenied",
		},
		{
			// RAPL is not read where the ACPI meter reads, so its
			// permissions do not matter.
			name:   "ACPI power meter (legacy device/ layout), GPUs inside it; RAPL denied but not needed",
			root:   server,
			faults: raplDenied,
			steps: []powerStep{
				{
					at:   0,
					gpus: []telemetryv1alpha1.GPUStatus{gpuPower(0, ptr.To[int32](300), nil), gpuPower(1, ptr.To[int32](250), nil)},
					want: &Power{
						// The ACPI meter measures the whole platform,
						// GPUs included: Watts is the meter's 412 W,
						// of which 300 + 250 W are GPUs.
						Watts:    412,
						Sources:  []telemetryv1alpha1.PowerSource{psACPI, psNVML},
						GPUWatts: ptr.To(550.0),
						Zones: []PowerZone{
							{Name: "power_meter/power1", Source: psACPI, Watts: 412}, // 412_000_000 µW
							{Name: "gpu-0", Source: psNVML, Watts: 300},
							{Name: "gpu-1", Source: psNVML, Watts: 250},
						},
					},
				},
				{
					at:    10 * time.Second,
					files: map[string]string{acpiPower1: "432000000"},
					gpus:  []telemetryv1alpha1.GPUStatus{gpuPower(0, ptr.To[int32](310), nil), gpuPower(1, ptr.To[int32](250), nil)},
					want: &Power{
						Watts:        432,
						Sources:      []telemetryv1alpha1.PowerSource{psACPI, psNVML},
						GPUWatts:     ptr.To(560.0),
						EnergyJoules: 4220, // (412 + 432) / 2 W * 10 s, the meter's alone
						Zones: []PowerZone{
							{Name: "power_meter/power1", Source: psACPI, Watts: 432, EnergyJoules: 4220},
							{Name: "gpu-0", Source: psNVML, Watts: 310, EnergyJoules: 3050}, // (300 + 310) / 2 W * 10 s
							{Name: "gpu-1", Source: psNVML, Watts: 250, EnergyJoules: 2500}, // 250 W * 10 s
						},
					},
				},
			},
			wantRAPLErr: "",
		},
		{
			name: "powerN_average is read rather than powerN_input",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					chip + "/name":           "xgene_hwmon",
					chip + "/power1_average": "35000000",
					chip + "/power1_input":   "40000000",
					chip + "/power2_input":   "5000000",
				}, nil)
			},
			steps: []powerStep{{
				want: &Power{
					Watts:   40, // 35 + 5
					Sources: []telemetryv1alpha1.PowerSource{psHwmon},
					Zones: []PowerZone{
						{Name: "xgene_hwmon/power1", Source: psHwmon, Watts: 35},
						{Name: "xgene_hwmon/power2", Source: psHwmon, Watts: 5},
					},
				},
			}},
		},
		{
			name: "PMBus power supplies: inputs counted, outputs not",
			root: func(t *testing.T) hostfs.Root {
				files := map[string]string{}
				for i, pin := range []string{"400000000", "380000000"} {
					h := fmt.Sprintf("/sys/class/hwmon/hwmon%d", i+1)
					files[h+"/name"] = "pmbus"
					files[h+"/power1_label"] = "pin"
					files[h+"/power1_input"] = pin
					files[h+"/power2_label"] = "pout1"
					files[h+"/power2_input"] = "360000000"
				}
				return sysTree(t, files, nil)
			},
			steps: []powerStep{{
				want: &Power{
					Watts:   780, // 400 + 380
					Sources: []telemetryv1alpha1.PowerSource{psHwmon},
					Zones: []PowerZone{
						{Name: "pmbus.0/pin", Source: psHwmon, Watts: 400},
						{Name: "pmbus.1/pin", Source: psHwmon, Watts: 380},
					},
				},
			}},
		},
		{
			name: "hwmon energy counters: amd_energy sockets, not cores",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					chip + "/name":          "amd_energy",
					chip + "/energy1_label": "Ecore000",
					chip + "/energy1_input": "0",
					chip + "/energy2_label": "Esocket0",
					chip + "/energy2_input": "1000000",
					chip + "/energy3_label": "Esocket1",
					chip + "/energy3_input": "2000000",
				}, nil)
			},
			steps: []powerStep{
				powerWarmingUp(0, nil),
				{
					at:    2 * time.Second,
					files: map[string]string{chip + "/energy1_input": "90000000", chip + "/energy2_input": "101000000", chip + "/energy3_input": "62000000"},
					want: &Power{
						Watts:        80, // 50 + 30
						Sources:      []telemetryv1alpha1.PowerSource{psHwmon},
						EnergyJoules: 160,
						Zones: []PowerZone{
							{Name: "amd_energy/Esocket0", Source: psHwmon, Watts: 50, EnergyJoules: 100}, // (101_000_000 - 1_000_000) µJ / 2 s = 50 W
							{Name: "amd_energy/Esocket1", Source: psHwmon, Watts: 30, EnergyJoules: 60},  // (62_000_000 - 2_000_000) µJ / 2 s = 30 W
						},
					},
				},
			},
		},
		{
			name: "GPUs only",
			root: func(t *testing.T) hostfs.Root { return hostfs.New(t.TempDir()) },
			steps: []powerStep{
				{
					// gpuPower-2 reports no power: left out.
					gpus: []telemetryv1alpha1.GPUStatus{gpuPower(0, ptr.To[int32](300), nil), gpuPower(1, ptr.To[int32](100), ptr.To[int64](5000)), gpuPower(2, nil, nil)},
					want: &Power{
						Watts:    400,
						Sources:  []telemetryv1alpha1.PowerSource{psNVML},
						GPUWatts: ptr.To(400.0),
						Zones: []PowerZone{
							{Name: "gpu-0", Source: psNVML, Watts: 300},
							{Name: "gpu-1", Source: psNVML, Watts: 100},
						},
					},
				},
				{
					at:   4 * time.Second,
					gpus: []telemetryv1alpha1.GPUStatus{gpuPower(0, ptr.To[int32](320), nil), gpuPower(1, ptr.To[int32](100), ptr.To[int64](5400)), gpuPower(2, nil, nil)},
					want: &Power{
						Watts:        420,
						Sources:      []telemetryv1alpha1.PowerSource{psNVML},
						GPUWatts:     ptr.To(420.0),
						EnergyJoules: 1640, // 1240 + 400
						Zones: []PowerZone{
							{Name: "gpu-0", Source: psNVML, Watts: 320, EnergyJoules: 1240}, // (300 + 320) / 2 W * 4 s
							{Name: "gpu-1", Source: psNVML, Watts: 100, EnergyJoules: 400},  // 100 W * 4 s
						},
					},
				},
			},
		},
		{
			name: "GPU with an energy counter only",
			root: func(t *testing.T) hostfs.Root { return hostfs.New(t.TempDir()) },
			steps: []powerStep{
				powerWarmingUp(0, nil, gpuPower(0, nil, ptr.To[int64](10_000))),
				{
					at:   5 * time.Second,
					gpus: []telemetryv1alpha1.GPUStatus{gpuPower(0, nil, ptr.To[int64](11_250))},
					want: &Power{
						Watts:        250, // (11_250 - 10_000) J / 5 s
						Sources:      []telemetryv1alpha1.PowerSource{psNVML},
						GPUWatts:     ptr.To(250.0),
						EnergyJoules: 1250,
						Zones:        []PowerZone{{Name: "gpu-0", Source: psNVML, Watts: 250, EnergyJoules: 1250}},
					},
				},
			},
		},
		{
			name: "RAPL and GPUs add up",
			root: func(t *testing.T) hostfs.Root { return raplTree(t, 1_000_000, 262_143_328_850) },
			steps: []powerStep{
				powerWarmingUp(0, nil, gpuPower(0, ptr.To[int32](200), nil)),
				{
					at:    5 * time.Second,
					files: map[string]string{raplPkg0: "51000000"},
					gpus:  []telemetryv1alpha1.GPUStatus{gpuPower(0, ptr.To[int32](200), nil)},
					want: &Power{
						Watts:        210, // 10 + 200
						Sources:      []telemetryv1alpha1.PowerSource{psRAPL, psNVML},
						GPUWatts:     ptr.To(200.0),
						EnergyJoules: 1050, // 50 + 1000
						Zones: []PowerZone{
							{Name: "package-0", Source: psRAPL, Watts: 10, EnergyJoules: 50}, // (51_000_000 - 1_000_000) µJ / 5 s = 10 W
							{Name: "gpu-0", Source: psNVML, Watts: 200, EnergyJoules: 1000},  // 200 W * 5 s
						},
					},
				},
			},
		},
		{
			// Defect 6: a RAPL counter that does not move over a whole
			// interval (firmware that exposes but never updates the zone)
			// is a named failure, never 0 W: a real package draws power
			// all the time (Documentation/power/powercap/powercap.rst:
			// energy_uj is the energy counter of the zone).
			name: "RAPL counter does not advance, no fallback: NoProgress",
			root: func(t *testing.T) hostfs.Root { return raplTree(t, 1_000_000, 262_143_328_850) },
			steps: []powerStep{
				powerWarmingUp(0, nil),
				{at: 5 * time.Second, files: map[string]string{raplPkg0: "1000000"},
					wantErr: &SourceError{State: telemetryv1alpha1.SourceFailed, Reason: "NoProgress"}},
				// It moves again: power is back.
				{at: 10 * time.Second, files: map[string]string{raplPkg0: "51000000"}, want: &Power{
					Watts: 10, Sources: []telemetryv1alpha1.PowerSource{psRAPL}, EnergyJoules: 50,
					Zones: []PowerZone{{Name: "package-0", Source: psRAPL, Watts: 10, EnergyJoules: 50}},
				}},
			},
		},
		{
			name: "empty root",
			root: func(t *testing.T) hostfs.Root { return hostfs.New(t.TempDir()) },
			steps: []powerStep{
				{wantErr: &SourceError{State: telemetryv1alpha1.SourceUnavailable, Reason: "NoPowerMeter", Message: "no powercap (RAPL), hwmon power sensor or ACPI power meter (typical in VMs)"}},
				{at: 10 * time.Second, wantErr: &SourceError{State: telemetryv1alpha1.SourceUnavailable, Reason: "NoPowerMeter"}},
			},
		},
		{
			name: "powercap control type without zones, hwmon without power",
			root: func(t *testing.T) hostfs.Root {
				return sysTree(t, map[string]string{
					"/sys/class/powercap/intel-rapl/enabled": "1",
					chip + "/name":                           "coretemp",
					chip + "/temp1_input":                    "40000",
				}, nil)
			},
			steps: []powerStep{{wantErr: &SourceError{State: telemetryv1alpha1.SourceUnavailable, Reason: "NoPowerMeter"}}},
		},
	}
	approx := cmpopts.EquateApprox(0, 1e-9)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := tc.root(t)
			t0 := time.Unix(1_700_000_000, 0)
			clk := clocktesting.NewFakePassiveClock(t0)
			c := NewPowerCollector(root.WithFaults(tc.faults)).WithClock(clk)
			for i, st := range tc.steps {
				setFiles(t, root, st.files)
				clk.SetTime(t0.Add(st.at))
				s := &Sample{Time: t0.Add(st.at), GPUs: st.gpus}
				err := c.Collect(context.Background(), s)
				t.Run(fmt.Sprintf("step %d at %v", i, st.at), func(t *testing.T) {
					if st.wantErr == nil && st.wantIs != nil {
						if !errors.Is(err, st.wantIs) {
							t.Fatalf("err = %v, want %v", err, st.wantIs)
						}
					} else {
						checkSourceError(t, st.wantErr, st.wantIs, err)
					}
					if diff := cmp.Diff(st.want, s.Power, approx); diff != "" {
						t.Errorf("Power (-want +got):\n%s", diff)
					}
				})
			}
			gotReason := ""
			var se *SourceError
			if err := c.RAPLError(); errors.As(err, &se) {
				gotReason = se.Reason
			} else if err != nil {
				t.Errorf("RAPLError() = %v (%T), want a *SourceError", err, err)
			}
			if gotReason != tc.wantRAPLErr {
				t.Errorf("RAPLError() reason = %q, want %q", gotReason, tc.wantRAPLErr)
			}
		})
	}
}

// TestPowerSourceStatus checks what the node's source list says when RAPL
// is denied and nothing else measures power.
func TestPowerSourceStatus(t *testing.T) {
	root := raplTree(t, 1_000_000, 0).WithFaults(map[string]error{raplPkg0: syscall.EACCES})
	s, _ := Run(context.Background(), []Collector{NewPowerCollector(root)}, time.Unix(1_700_000_000, 0))
	got := s.Sources[0]
	want := telemetryv1alpha1.SourceStatus{Name: telemetryv1alpha1.SourcePower, State: telemetryv1alpha1.SourceFailed, Reason: "PermissionDenied"}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(telemetryv1alpha1.SourceStatus{}, "Message")); diff != "" {
		t.Errorf("source (-want +got):\n%s", diff)
	}
	if len(got.Message) > 256 || !strings.Contains(got.Message, "CVE-2020-8694") || !strings.Contains(got.Message, "run the agent as root") {
		t.Errorf("message = %q, want the CVE and the fix within 256 bytes", got.Message)
	}
	if s.Power != nil {
		t.Errorf("Power = %+v, want nil", s.Power)
	}
}

// TestPowerRediscovery checks that a meter that disappears makes the
// collector list the meters again, and that the meters that stay keep
// their baselines.
func TestPowerRediscovery(t *testing.T) {
	root := serverWithoutACPIMeter(t)
	t0 := time.Unix(1_700_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	c := NewPowerCollector(root).WithClock(clk)
	collect := func(at time.Duration, files map[string]string) (*Power, error) {
		setFiles(t, root, files)
		clk.SetTime(t0.Add(at))
		s := &Sample{Time: t0.Add(at)}
		err := c.Collect(context.Background(), s)
		return s.Power, err
	}
	if _, err := collect(0, map[string]string{raplPkg0: "0", raplDram0: "0", raplPkg1: "0", raplDram1: "0"}); !errors.Is(err, ErrWarmingUp) {
		t.Fatalf("first call: err = %v, want ErrWarmingUp", err)
	}
	// Package 1 goes away (its RAPL domain unregistered).
	removePaths(t, root, "/sys/class/powercap/intel-rapl:1", "/sys/class/powercap/intel-rapl:1:0", "/sys/class/powercap/intel-rapl:1:1")
	p, err := collect(5*time.Second, map[string]string{raplPkg0: "100000000", raplDram0: "10000000"})
	if err != nil {
		t.Fatalf("after removal: %v", err)
	}
	want := &Power{
		Watts:        22, // 20 + 2
		Sources:      []telemetryv1alpha1.PowerSource{psRAPL},
		EnergyJoules: 110,
		Zones: []PowerZone{
			{Name: "package-0", Source: psRAPL, Watts: 20, EnergyJoules: 100}, // 100_000_000 µJ / 5 s: the baseline survived
			{Name: "dram-0", Source: psRAPL, Watts: 2, EnergyJoules: 10},      // 10_000_000 µJ / 5 s
		},
		PackageLimitWatts: []float64{165}, // intel-rapl:0/constraint_0_max_power_uw
	}
	if diff := cmp.Diff(want, p, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("after removal (-want +got):\n%s", diff)
	}
}

// TestPowerIntervalIsTheReads: a sample due at 1 s intervals whose reads
// fall 50 ms late, then on time, measures its counters over the time
// between the reads. Divided by the due interval, the 20 W the package
// drew read 21 W and then 19 W (the failure before reads were
// timed: "the agent measures 211.3 W, the model draws 200.9 W" on a
// loaded CI host).
func TestPowerIntervalIsTheReads(t *testing.T) {
	root := raplTree(t, 0, 0)
	t0 := time.Unix(1_700_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	c := NewPowerCollector(root).WithClock(clk)
	energyAt := func(d time.Duration) string { // 20 W since t0, in µJ
		return fmt.Sprint(int64(20 * d.Seconds() * 1e6))
	}
	for i, read := range []time.Duration{0, 1050 * time.Millisecond, 2 * time.Second, 3 * time.Second} {
		setFiles(t, root, map[string]string{raplPkg0: energyAt(read)})
		clk.SetTime(t0.Add(read))
		s := &Sample{Time: t0.Add(time.Duration(i) * time.Second)} // when it was due
		err := c.Collect(context.Background(), s)
		if i == 0 {
			if !errors.Is(err, ErrWarmingUp) {
				t.Fatalf("first read: err = %v, want ErrWarmingUp", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("read %d at %v: %v", i, read, err)
		}
		if math.Abs(s.Power.Watts-20) > 1e-6 {
			t.Errorf("read %d at %v (due at %v): %.3f W, want 20", i, read, s.Time.Sub(t0), s.Power.Watts)
		}
	}
}

// BenchmarkPowerCollect is one collection cycle over the server tree
// without its ACPI meter (four RAPL counters), after discovery.
func BenchmarkPowerCollect(b *testing.B) {
	root := serverWithoutACPIMeter(b)
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	c := NewPowerCollector(root).WithClock(clk)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		clk.SetTime(t0.Add(time.Duration(i) * time.Second))
		s := &Sample{Time: t0.Add(time.Duration(i) * time.Second)}
		if err := c.Collect(ctx, s); err != nil && !errors.Is(err, ErrWarmingUp) {
			b.Fatal(err)
		}
	}
}

// TestRAPLLimit reads the package power limit the prior is built from on
// node_exporter's powercap fixture (a real Intel machine, see
// agent/testdata/corpus/README.md): constraint_0_max_power_uw is 95000000
// (the part's 95 W TDP) while constraint_0_power_limit_uw is 4090000000,
// firmware's "no limit", which must not be taken for one.
func TestRAPLLimit(t *testing.T) {
	root := hostfs.New("../testdata/corpus/node-exporter-fixture/root")
	if got := raplLimitWatts(root, "/sys/class/powercap/intel-rapl:0"); got != 95 {
		t.Errorf("package limit = %v W, want 95 W (constraint_0_max_power_uw)", got)
	}
	// AMD's powercap zones have no constraint files: no limit.
	amd := hostfs.New("../testdata/corpus/amd-epyc-7313-2socket-nps4/root")
	if got := raplLimitWatts(amd, "/sys/class/powercap/intel-rapl:0"); got != 0 {
		t.Errorf("AMD package limit = %v W, want none", got)
	}
}

// TestPowerPrefersWholeServerMeter reads a real machine's tree (the Xeon
// E5-2695 v4 of agent/testdata/corpus, with RAPL package-0 and its
// subzone and an ACPI power meter) as root reads it, RAPL's energy_uj
// included: the node's power is the ACPI meter's, which measures the
// whole server (Documentation/hwmon/acpi_power_meter.rst), not RAPL's
// packages and DRAM (Documentation/power/powercap/powercap.rst), and the
// sources say so.
func TestPowerPrefersWholeServerMeter(t *testing.T) {
	const machine = "../../testdata/corpus/intel-xeon-e5-2695v4-p100-acpi-meter"
	const meter = "/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI000D:00/hwmon/hwmon0/power1_average"
	root := copyFixture(t, machine+"/root")
	second, err := os.ReadFile(filepath.Join("testdata", machine, "second", meter))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	c := NewPowerCollector(root).WithClock(clk)
	var got []*Power
	for i, files := range []map[string]string{nil, {meter: strings.TrimSpace(string(second))}} {
		setFiles(t, root, files)
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		clk.SetTime(at)
		s := &Sample{Time: at}
		if err := c.Collect(context.Background(), s); err != nil {
			t.Fatalf("reading %d: %v", i, err)
		}
		got = append(got, s.Power)
	}
	want := []*Power{
		{
			Watts:   412, // 412000000 µW; a gauge, so the first reading counts
			Sources: []telemetryv1alpha1.PowerSource{psACPI},
			Zones:   []PowerZone{{Name: "power_meter/power1", Source: psACPI, Watts: 412}},
		},
		{
			Watts:        418.4, // 418400000 µW
			Sources:      []telemetryv1alpha1.PowerSource{psACPI},
			EnergyJoules: 4152, // (412 + 418.4) / 2 W * 10 s
			Zones:        []PowerZone{{Name: "power_meter/power1", Source: psACPI, Watts: 418.4, EnergyJoules: 4152}},
		},
	}
	opts := []cmp.Option{cmpopts.EquateApprox(0, 1e-9), cmpopts.IgnoreFields(Power{}, "CPUModel")}
	if diff := cmp.Diff(want, got, opts...); diff != "" {
		t.Errorf("Power (-want +got):\n%s", diff)
	}
	if err := c.RAPLError(); err != nil {
		t.Errorf("RAPLError() = %v, want nil: RAPL is not read while the ACPI meter reads", err)
	}
}
