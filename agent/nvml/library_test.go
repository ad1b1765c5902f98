// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"errors"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/google/go-cmp/cmp"
	"github.com/telesched/telesched/agent/nvml/nvmltest"
)

// newServer returns go-nvml's DGX A100 mock with fixed UUIDs and XID
// events, delivered from the returned queue.
func newServer(t *testing.T) (*dgxa100.Server, *nvmltest.EventQueue) {
	t.Helper()
	return nvmltest.NewDGXA100()
}

func gpu(s *dgxa100.Server, i int) *dgxa100.Device { return nvmltest.Device(s, i) }

func mustInit(t *testing.T, l Library) {
	t.Helper()
	if err := l.Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
}

func TestInitRegistersXIDEvents(t *testing.T) {
	s, q := newServer(t)
	// GPU 3 does not offer XID events; GPU 5 refuses the registration.
	gpu(s, 3).GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) {
		return gonvml.EventTypeAll &^ gonvml.EventTypeXidCriticalError, gonvml.SUCCESS
	}
	gpu(s, 5).RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return { return gonvml.ERROR_NOT_SUPPORTED }
	l := NewWith(s)
	mustInit(t, l)

	type registration struct {
		EventTypes uint64
		SameSet    bool
	}
	got := map[int][]registration{}
	for i := range s.Devices {
		for _, c := range gpu(s, i).RegisterEventsCalls() {
			got[i] = append(got[i], registration{EventTypes: c.V, SameSet: c.EventSet == gonvml.EventSet(q)})
		}
	}
	// Every GPU but 3 is asked once, for XID critical errors (bit 8) only.
	xid := []registration{{EventTypes: gonvml.EventTypeXidCriticalError, SameSet: true}}
	want := map[int][]registration{0: xid, 1: xid, 2: xid, 4: xid, 5: xid, 6: xid, 7: xid}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RegisterEvents calls (-want +got):\n%s", diff)
	}
	if n := len(s.InitCalls()); n != 1 {
		t.Errorf("nvmlInit called %d times, want 1", n)
	}
	// A second Init does nothing.
	if err := l.Init(); err != nil {
		t.Fatalf("second Init: %v", err)
	}
	if n := len(s.InitCalls()); n != 1 {
		t.Errorf("after a second Init, nvmlInit called %d times, want 1", n)
	}
}

func TestXIDEvents(t *testing.T) {
	tests := []struct {
		name   string
		queue  func(s *dgxa100.Server) []gonvml.EventData
		want   []XIDEvent
		wantIs error
	}{
		{
			name:  "empty queue",
			queue: func(*dgxa100.Server) []gonvml.EventData { return nil },
		},
		{
			name: "events by GPU, untied ones with no UUID, other types skipped",
			queue: func(s *dgxa100.Server) []gonvml.EventData {
				return []gonvml.EventData{
					{Device: s.Devices[2], EventType: gonvml.EventTypeXidCriticalError, EventData: 79},
					{Device: nil, EventType: gonvml.EventTypeXidCriticalError, EventData: 48},
					{Device: s.Devices[1], EventType: gonvml.EventTypeSingleBitEccError},
					{Device: s.Devices[0], EventType: gonvml.EventTypeXidCriticalError, EventData: 13},
				}
			},
			want: []XIDEvent{
				{UUID: "GPU-00000000-0000-0000-0000-000000000002", XID: 79},
				{UUID: "", XID: 48},
				{UUID: "GPU-00000000-0000-0000-0000-000000000000", XID: 13},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, q := newServer(t)
			l := NewWith(s)
			mustInit(t, l)
			q.Queue = tc.queue(s)
			got, err := l.XIDEvents()
			if err != nil {
				t.Fatalf("XIDEvents: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("XIDEvents (-want +got):\n%s", diff)
			}
			for _, c := range q.WaitCalls() {
				if c.V != 0 {
					t.Errorf("Wait(%d), want Wait(0): a collect must not block", c.V)
				}
			}
			// The queue is drained: a second call has nothing.
			got, err = l.XIDEvents()
			if err != nil || len(got) != 0 {
				t.Errorf("second XIDEvents = %v, %v; want none", got, err)
			}
		})
	}
}

func TestXIDEventsUnavailable(t *testing.T) {
	tests := []struct {
		name  string
		setup func(s *dgxa100.Server)
	}{
		{
			name: "event sets not supported",
			setup: func(s *dgxa100.Server) {
				s.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) { return nil, gonvml.ERROR_NOT_SUPPORTED }
			},
		},
		{
			name: "no GPU offers XID events",
			setup: func(s *dgxa100.Server) {
				for i := range s.Devices {
					gpu(s, i).GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) { return 0, gonvml.SUCCESS }
				}
			},
		},
		{
			name: "no GPU",
			setup: func(s *dgxa100.Server) {
				s.DeviceGetCountFunc = func() (int, gonvml.Return) { return 0, gonvml.SUCCESS }
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newServer(t)
			tc.setup(s)
			l := NewWith(s)
			mustInit(t, l) // not fatal: XID events are optional
			_, err := l.XIDEvents()
			if !errors.Is(err, ErrNotSupported) {
				t.Errorf("XIDEvents error = %v, want ErrNotSupported", err)
			}
		})
	}
}

func TestInitFailure(t *testing.T) {
	tests := []struct {
		name          string
		ret           gonvml.Return
		wantNoLibrary bool
	}{
		{name: "no library", ret: gonvml.ERROR_LIBRARY_NOT_FOUND, wantNoLibrary: true},
		{name: "no driver", ret: gonvml.ERROR_DRIVER_NOT_LOADED, wantNoLibrary: true},
		{name: "no permission", ret: gonvml.ERROR_NO_PERMISSION},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newServer(t)
			s.InitFunc = func() gonvml.Return { return tc.ret }
			l := NewWith(s)
			err := l.Init()
			if err == nil {
				t.Fatal("Init succeeded, want an error")
			}
			if got := errors.Is(err, ErrLibraryNotFound); got != tc.wantNoLibrary {
				t.Errorf("errors.Is(%v, ErrLibraryNotFound) = %v, want %v", err, got, tc.wantNoLibrary)
			}
			// Nothing to shut down: calling nvmlShutdown on a library that
			// was never loaded would crash.
			if err := l.Shutdown(); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			if n := len(s.ShutdownCalls()); n != 0 {
				t.Errorf("nvmlShutdown called %d times, want 0", n)
			}
			if _, err := l.Devices(); err == nil {
				t.Error("Devices before a successful Init succeeded, want an error")
			}
		})
	}
}

func TestShutdownFreesEvents(t *testing.T) {
	s, q := newServer(t)
	l := NewWith(s)
	if err := l.Init(); err != nil {
		t.Fatal(err)
	}
	if err := l.Shutdown(); err != nil {
		t.Fatal(err)
	}
	got := []int{len(q.FreeCalls()), len(s.ShutdownCalls())}
	want := []int{1, 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("[event set frees, nvmlShutdown calls] (-want +got):\n%s", diff)
	}
}

func TestDevicesPartial(t *testing.T) {
	s, _ := newServer(t)
	inner := s.DeviceGetHandleByIndexFunc
	s.DeviceGetHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) {
		if i == 4 {
			return nil, gonvml.ERROR_GPU_IS_LOST
		}
		return inner(i)
	}
	l := NewWith(s)
	mustInit(t, l)
	devs, err := l.Devices()
	if err == nil || !strings.Contains(err.Error(), "GPU 4") {
		t.Errorf("Devices error = %v, want one naming GPU 4", err)
	}
	var got []int
	for _, d := range devs {
		got = append(got, d.Index())
	}
	// 8 GPUs, 4 lost: 0-3 and 5-7 remain, in index order.
	want := []int{0, 1, 2, 3, 5, 6, 7}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("device indexes (-want +got):\n%s", diff)
	}
}

// busID is a PCI bus id as NVML's C struct holds it.
func busID(s string) [32]int8 {
	var b [32]int8
	for i := range len(s) {
		b[i] = int8(s[i])
	}
	return b
}

// readings is everything a Device reads, errors as strings for cmp.
type readings struct {
	Index                  int
	UUID, Name, PCIBusID   string
	Memory                 Memory
	Utilization            uint32
	Temperature            uint32
	Slowdown, Shutdown     uint32
	Power, PowerLimit      uint32
	Energy                 uint64
	ECC                    uint64
	RemappedRows           RemappedRows
	Clocks                 ClocksEventReasons
	MIG                    bool
	NotSupported, Failures []string
}

func readAll(d Device) readings {
	r := readings{Index: d.Index()}
	check := func(what string, err error) {
		switch {
		case errors.Is(err, ErrNotSupported):
			r.NotSupported = append(r.NotSupported, what)
		case err != nil:
			r.Failures = append(r.Failures, what)
		}
	}
	var err error
	r.UUID, err = d.UUID()
	check("uuid", err)
	r.Name, err = d.Name()
	check("name", err)
	r.PCIBusID, err = d.PCIBusID()
	check("pci", err)
	r.Memory, err = d.Memory()
	check("memory", err)
	r.Utilization, err = d.UtilizationPercent()
	check("utilization", err)
	r.Temperature, err = d.TemperatureCelsius()
	check("temperature", err)
	r.Slowdown, err = d.SlowdownTemperatureCelsius()
	check("slowdown", err)
	r.Shutdown, err = d.ShutdownTemperatureCelsius()
	check("shutdown", err)
	r.Power, err = d.PowerUsageMilliwatts()
	check("power", err)
	r.PowerLimit, err = d.PowerLimitMilliwatts()
	check("power limit", err)
	r.Energy, err = d.TotalEnergyMillijoules()
	check("energy", err)
	r.ECC, err = d.ECCUncorrectedVolatile()
	check("ecc", err)
	r.RemappedRows, err = d.RemappedRows()
	check("remapped rows", err)
	r.Clocks, err = d.ClocksEventReasons()
	check("clocks", err)
	r.MIG, err = d.MIGEnabled()
	check("mig", err)
	return r
}

// fillTelemetry sets the readings the DGX A100 mock leaves unset.
func fillTelemetry(d *dgxa100.Device) {
	d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
		return gonvml.PciInfo{BusId: busID("00000000:07:00.0"), PciDeviceId: 0x20B010DE}, gonvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{Gpu: 87, Memory: 40}, gonvml.SUCCESS
	}
	d.GetTemperatureFunc = func(s gonvml.TemperatureSensors) (uint32, gonvml.Return) {
		if s != gonvml.TEMPERATURE_GPU {
			return 0, gonvml.ERROR_INVALID_ARGUMENT
		}
		return 64, gonvml.SUCCESS
	}
	d.GetTemperatureThresholdFunc = func(th gonvml.TemperatureThresholds) (uint32, gonvml.Return) {
		switch th {
		case gonvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
			return 87, gonvml.SUCCESS
		case gonvml.TEMPERATURE_THRESHOLD_SHUTDOWN:
			return 92, gonvml.SUCCESS
		}
		return 0, gonvml.ERROR_INVALID_ARGUMENT
	}
	d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 312456, gonvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, gonvml.Return) { return 400000, gonvml.SUCCESS }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) { return 987654321, gonvml.SUCCESS }
	d.GetEccModeFunc = func() (gonvml.EnableState, gonvml.EnableState, gonvml.Return) {
		return gonvml.FEATURE_ENABLED, gonvml.FEATURE_ENABLED, gonvml.SUCCESS
	}
	d.GetTotalEccErrorsFunc = func(typ gonvml.MemoryErrorType, counter gonvml.EccCounterType) (uint64, gonvml.Return) {
		if typ != gonvml.MEMORY_ERROR_TYPE_UNCORRECTED || counter != gonvml.VOLATILE_ECC {
			return 1000, gonvml.SUCCESS // a wrong counter shows as a wrong value
		}
		return 2, gonvml.SUCCESS
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) { return 1, 2, true, false, gonvml.SUCCESS }
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) {
		return gonvml.ClocksEventReasonSwPowerCap | gonvml.ClocksEventReasonSwThermalSlowdown, gonvml.SUCCESS
	}
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, gonvml.Return) {
		return gonvml.ClocksThrottleReasonHwSlowdown, gonvml.SUCCESS
	}
	d.MigMode = gonvml.DEVICE_MIG_ENABLE
	d.MemoryInfo = gonvml.Memory{Total: 42949672960, Used: 1073741824, Free: 41875931136}
}

func TestDeviceReadings(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(s *dgxa100.Server, d *dgxa100.Device)
		missing string // symbol the loaded library lacks
		want    readings
	}{
		{
			name: "every reading",
			want: readings{
				UUID: "GPU-00000000-0000-0000-0000-000000000000", Name: "Mock NVIDIA A100-SXM4-40GB",
				PCIBusID: "00000000:07:00.0",
				Memory:   Memory{TotalBytes: 42949672960, UsedBytes: 1073741824},
				// NVML's units pass through: °C, mW, mJ.
				Utilization: 87, Temperature: 64, Slowdown: 87, Shutdown: 92,
				Power: 312456, PowerLimit: 400000, Energy: 987654321,
				ECC:          2,
				RemappedRows: RemappedRows{Corrected: 1, Uncorrected: 2, Pending: true},
				// SwPowerCap 0x4 | SwThermalSlowdown 0x20 = 0x24
				Clocks: ClocksEventSwPowerCap | ClocksEventSwThermalSlowdown,
				MIG:    true,
			},
		},
		{
			name: "ECC disabled is not supported",
			setup: func(_ *dgxa100.Server, d *dgxa100.Device) {
				d.GetEccModeFunc = func() (gonvml.EnableState, gonvml.EnableState, gonvml.Return) {
					return gonvml.FEATURE_DISABLED, gonvml.FEATURE_DISABLED, gonvml.SUCCESS
				}
			},
			want: readings{
				UUID: "GPU-00000000-0000-0000-0000-000000000000", Name: "Mock NVIDIA A100-SXM4-40GB",
				PCIBusID: "00000000:07:00.0", Memory: Memory{TotalBytes: 42949672960, UsedBytes: 1073741824},
				Utilization: 87, Temperature: 64, Slowdown: 87, Shutdown: 92, Power: 312456, PowerLimit: 400000, Energy: 987654321,
				RemappedRows: RemappedRows{Corrected: 1, Uncorrected: 2, Pending: true},
				Clocks:       ClocksEventSwPowerCap | ClocksEventSwThermalSlowdown, MIG: true,
				NotSupported: []string{"ecc"},
			},
		},
		{
			name: "driver before R535: throttle reasons instead of clock events",
			// The mock's event-reasons value would be 0x24; the old call's 0x8 shows which ran.
			missing: "nvmlDeviceGetCurrentClocksEventReasons",
			want: readings{
				UUID: "GPU-00000000-0000-0000-0000-000000000000", Name: "Mock NVIDIA A100-SXM4-40GB",
				PCIBusID: "00000000:07:00.0", Memory: Memory{TotalBytes: 42949672960, UsedBytes: 1073741824},
				Utilization: 87, Temperature: 64, Slowdown: 87, Shutdown: 92, Power: 312456, PowerLimit: 400000, Energy: 987654321,
				ECC: 2, RemappedRows: RemappedRows{Corrected: 1, Uncorrected: 2, Pending: true},
				Clocks: ClocksEventHwSlowdown, MIG: true,
			},
		},
		{
			name:    "driver without the row remapper",
			missing: "nvmlDeviceGetRemappedRows",
			want: readings{
				UUID: "GPU-00000000-0000-0000-0000-000000000000", Name: "Mock NVIDIA A100-SXM4-40GB",
				PCIBusID: "00000000:07:00.0", Memory: Memory{TotalBytes: 42949672960, UsedBytes: 1073741824},
				Utilization: 87, Temperature: 64, Slowdown: 87, Shutdown: 92, Power: 312456, PowerLimit: 400000, Energy: 987654321,
				ECC:    2,
				Clocks: ClocksEventSwPowerCap | ClocksEventSwThermalSlowdown, MIG: true,
				NotSupported: []string{"remapped rows"},
			},
		},
		{
			name: "unsupported and failing readings",
			setup: func(_ *dgxa100.Server, d *dgxa100.Device) {
				d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) { return gonvml.PciInfo{}, gonvml.SUCCESS }
				d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
				d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) { return 0, gonvml.ERROR_UNKNOWN }
				d.GetMigModeFunc = func() (int, int, gonvml.Return) { return 0, 0, gonvml.ERROR_NOT_SUPPORTED }
			},
			want: readings{
				UUID: "GPU-00000000-0000-0000-0000-000000000000", Name: "Mock NVIDIA A100-SXM4-40GB",
				Memory:      Memory{TotalBytes: 42949672960, UsedBytes: 1073741824},
				Utilization: 87, Temperature: 64, Slowdown: 87, Shutdown: 92, PowerLimit: 400000,
				ECC: 2, RemappedRows: RemappedRows{Corrected: 1, Uncorrected: 2, Pending: true},
				Clocks:       ClocksEventSwPowerCap | ClocksEventSwThermalSlowdown,
				NotSupported: []string{"power", "mig"},
				// An empty bus id is a failure, not a made-up address.
				Failures: []string{"pci", "energy"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newServer(t)
			d := gpu(s, 0)
			fillTelemetry(d)
			if tc.setup != nil {
				tc.setup(s, d)
			}
			s.LookupSymbolFunc = func(symbol string) error {
				if symbol == tc.missing {
					return errors.New("undefined symbol")
				}
				return nil
			}
			l := NewWith(s)
			mustInit(t, l)
			devs, err := l.Devices()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, readAll(devs[0])); diff != "" {
				t.Errorf("readings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRealLibrary runs against the machine's own NVML. Without a driver it
// checks that Init says so with ErrLibraryNotFound; with one it reads every
// GPU and only logs what it read.
func TestRealLibrary(t *testing.T) {
	l := New()
	err := l.Init()
	if errors.Is(err, ErrLibraryNotFound) {
		if err := l.Shutdown(); err != nil {
			t.Errorf("Shutdown after a failed Init: %v", err)
		}
		t.Skipf("no NVIDIA driver on this machine (Init: %v)", err)
	}
	if err != nil {
		t.Skipf("NVML is present but does not initialize here: %v", err)
	}
	defer func() {
		if err := l.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}()
	devs, err := l.Devices()
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	for _, d := range devs {
		r := readAll(d)
		if len(r.Failures) > 0 {
			t.Errorf("GPU %d: readings failed: %v", d.Index(), r.Failures)
		}
		t.Logf("GPU %d: %+v", d.Index(), r)
	}
	events, err := l.XIDEvents()
	t.Logf("XID events: %v, %v", events, err)
}
