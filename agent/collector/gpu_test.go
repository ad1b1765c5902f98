// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/telesched/telesched/agent/nvml/nvmltest"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/nvml"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// gpuTree unpacks testdata/gpu/<name>.txtar, a sysfs tree, into a new
// temporary root. Its format: a comment, then "-- host/path --" lines each
// followed by the file's content.
func gpuTree(t *testing.T, name string) hostfs.Root {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "gpu", name+".txtar"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var file string
	var content bytes.Buffer
	flush := func() {
		if file == "" {
			return
		}
		full := filepath.Join(dir, filepath.FromSlash(file))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, content.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "-- "); ok && strings.HasSuffix(rest, " --") {
			flush()
			file, _ = strings.CutSuffix(rest, " --")
			if !filepath.IsLocal(file) {
				t.Fatalf("%s: %q escapes the root", name, file)
			}
			content.Reset()
			continue
		}
		if file != "" {
			content.WriteString(line + "\n")
		}
	}
	flush()
	return hostfs.New(dir)
}

// dgxA100Buses are the PCI buses of a DGX A100's GPUs, by index, as in
// testdata/gpu/dgxa100.txtar.
var dgxA100Buses = [8]uint8{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd}

func a100(s *dgxa100.Server, i int) *dgxa100.Device { return nvmltest.Device(s, i) }

func a100UUID(i int) string { return nvmltest.UUID(i) }

// newA100Server returns go-nvml's DGX A100 mock with fixed UUIDs, PCI bus
// ids as NVML writes them, and the telemetry it leaves unset filled in. GPU
// i reads:
//
//	memory used        (i+1) GiB of 40 GiB
//	utilization        10*i %
//	temperature        30+i °C; slowdown 89 °C, shutdown 92 °C
//	power              60499+1000*i+(i%2) mW; limit 400000 mW
//	energy             123456789+1000000*i mJ
//	ECC                on, no uncorrected error; no row remapped
//	clock events       GpuIdle
//	MIG                off
//
// Critical XID events come from the returned queue.
func newA100Server(t *testing.T) (*dgxa100.Server, *nvmltest.EventQueue) {
	t.Helper()
	s, q := nvmltest.NewDGXA100()
	for i := range s.Devices {
		d := a100(s, i)
		d.PciBusID = fmt.Sprintf("00000000:%02X:00.0", dgxA100Buses[i])
		d.MemoryInfo = gonvml.Memory{Total: 40 << 30, Used: uint64(i+1) << 30, Free: uint64(39-i) << 30}
		d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
			var busID [32]int8
			for j := range len(d.PciBusID) {
				busID[j] = int8(d.PciBusID[j])
			}
			return gonvml.PciInfo{BusId: busID, Bus: uint32(dgxA100Buses[i]), PciDeviceId: 0x20B010DE}, gonvml.SUCCESS
		}
		d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{Gpu: uint32(10 * i), Memory: 5}, gonvml.SUCCESS
		}
		d.GetTemperatureFunc = func(sensor gonvml.TemperatureSensors) (uint32, gonvml.Return) {
			if sensor != gonvml.TEMPERATURE_GPU {
				return 0, gonvml.ERROR_INVALID_ARGUMENT
			}
			return uint32(30 + i), gonvml.SUCCESS
		}
		d.GetTemperatureThresholdFunc = func(th gonvml.TemperatureThresholds) (uint32, gonvml.Return) {
			switch th {
			case gonvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
				return 89, gonvml.SUCCESS
			case gonvml.TEMPERATURE_THRESHOLD_SHUTDOWN:
				return 92, gonvml.SUCCESS
			}
			return 0, gonvml.ERROR_INVALID_ARGUMENT
		}
		d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return uint32(60499 + 1000*i + i%2), gonvml.SUCCESS }
		d.GetEnforcedPowerLimitFunc = func() (uint32, gonvml.Return) { return 400000, gonvml.SUCCESS }
		d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) { return uint64(123456789 + 1000000*i), gonvml.SUCCESS }
		d.GetEccModeFunc = func() (gonvml.EnableState, gonvml.EnableState, gonvml.Return) {
			return gonvml.FEATURE_ENABLED, gonvml.FEATURE_ENABLED, gonvml.SUCCESS
		}
		d.GetTotalEccErrorsFunc = func(gonvml.MemoryErrorType, gonvml.EccCounterType) (uint64, gonvml.Return) {
			return 0, gonvml.SUCCESS
		}
		d.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) { return 0, 0, false, false, gonvml.SUCCESS }
		d.GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) {
			return gonvml.ClocksEventReasonGpuIdle, gonvml.SUCCESS
		}
	}
	return s, q
}

// logSink collects log lines, to count what a collector logs.
type logSink struct{ lines []string }

func (l *logSink) context() context.Context {
	logger := funcr.New(func(prefix, args string) { l.lines = append(l.lines, args) }, funcr.Options{})
	return klog.NewContext(context.Background(), logger)
}

func collectGPUs(t *testing.T, ctx context.Context, c *GPUCollector) ([]telemetryv1alpha1.GPUStatus, error) {
	t.Helper()
	s := &Sample{}
	err := c.Collect(ctx, s)
	return s.GPUs, err
}

func TestGPUCollectorDGXA100(t *testing.T) {
	srv, _ := newA100Server(t)
	c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100"))
	t.Cleanup(c.Close)
	gpus, err := collectGPUs(t, context.Background(), c)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if len(gpus) != 8 {
		t.Fatalf("got %d GPUs, want 8", len(gpus))
	}

	wantGPU0 := telemetryv1alpha1.GPUStatus{
		Index:    0,
		UUID:     "GPU-00000000-0000-0000-0000-000000000000",
		Model:    "Mock NVIDIA A100-SXM4-40GB",
		PCIBusID: "00000000:07:00.0",
		// sysfs 0000:07:00.0/numa_node = 3
		NUMANode:         ptr.To[int32](3),
		MemoryTotalBytes: 42949672960, // 40 << 30
		MemoryUsedBytes:  1073741824,  // (0+1) << 30
		// 10*0 = 0
		UtilizationPercent: ptr.To[int32](0),
		// (30+0) °C * 1000 = 30000 m°C
		TemperatureMilliCelsius: ptr.To[int64](30000),
		SlowdownMilliCelsius:    ptr.To[int64](89000),
		ShutdownMilliCelsius:    ptr.To[int64](92000),
		// (60499 mW + 500) / 1000 = 60 W
		PowerWatts: ptr.To[int32](60),
		// 400000 mW / 1000 = 400 W
		PowerLimitWatts: ptr.To[int32](400),
		// 123456789 mJ / 1000 = 123456 J, truncated
		EnergyJoules: ptr.To[int64](123456),
		Health: telemetryv1alpha1.GPUHealth{
			Healthy:              true,
			ECCUncorrectedErrors: ptr.To[int64](0),
		},
		ThrottleReasons: []telemetryv1alpha1.GPUThrottleReason{telemetryv1alpha1.GPUThrottleIdle},
		MIGEnabled:      ptr.To(false),
	}
	if diff := cmp.Diff(wantGPU0, gpus[0]); diff != "" {
		t.Errorf("GPU 0 (-want +got):\n%s", diff)
	}

	// Every GPU, in index order, with its own values.
	type summary struct {
		Index    int32
		UUID     string
		PCIBusID string
		NUMANode *int32
		UsedGiB  int64
		Power    *int32
		Energy   *int64
		Healthy  bool
	}
	want := []summary{
		// power: (60499+1000*i+i%2 + 500) / 1000 W; odd GPUs read 500 over the watt and round up
		// energy: (123456789+1000000*i) / 1000 J
		{0, a100UUID(0), "00000000:07:00.0", ptr.To[int32](3), 1, ptr.To[int32](60), ptr.To[int64](123456), true},
		{1, a100UUID(1), "00000000:0F:00.0", ptr.To[int32](3), 2, ptr.To[int32](62), ptr.To[int64](124456), true},
		{2, a100UUID(2), "00000000:47:00.0", ptr.To[int32](1), 3, ptr.To[int32](62), ptr.To[int64](125456), true},
		{3, a100UUID(3), "00000000:4E:00.0", ptr.To[int32](1), 4, ptr.To[int32](64), ptr.To[int64](126456), true},
		{4, a100UUID(4), "00000000:87:00.0", ptr.To[int32](7), 5, ptr.To[int32](64), ptr.To[int64](127456), true},
		{5, a100UUID(5), "00000000:90:00.0", ptr.To[int32](7), 6, ptr.To[int32](66), ptr.To[int64](128456), true},
		{6, a100UUID(6), "00000000:B7:00.0", ptr.To[int32](5), 7, ptr.To[int32](66), ptr.To[int64](129456), true},
		{7, a100UUID(7), "00000000:BD:00.0", ptr.To[int32](5), 8, ptr.To[int32](68), ptr.To[int64](130456), true},
	}
	var got []summary
	for _, g := range gpus {
		got = append(got, summary{g.Index, g.UUID, g.PCIBusID, g.NUMANode, g.MemoryUsedBytes >> 30, g.PowerWatts, g.EnergyJoules, g.Health.Healthy})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GPUs (-want +got):\n%s", diff)
	}
}

func TestGPUCollectorHealth(t *testing.T) {
	healthy := telemetryv1alpha1.GPUHealth{Healthy: true, ECCUncorrectedErrors: ptr.To[int64](0)}
	allHealthy := func() []telemetryv1alpha1.GPUHealth {
		h := make([]telemetryv1alpha1.GPUHealth, 8)
		for i := range h {
			h[i] = healthy
		}
		return h
	}
	tests := []struct {
		name  string
		setup func(s *dgxa100.Server, q *nvmltest.EventQueue)
		// events are queued before the second of two collects.
		events func(s *dgxa100.Server) []gonvml.EventData
		want   func() []telemetryv1alpha1.GPUHealth
	}{
		{
			name: "uncorrected ECC errors",
			setup: func(s *dgxa100.Server, _ *nvmltest.EventQueue) {
				a100(s, 1).GetTotalEccErrorsFunc = func(typ gonvml.MemoryErrorType, counter gonvml.EccCounterType) (uint64, gonvml.Return) {
					return 2, gonvml.SUCCESS
				}
			},
			want: func() []telemetryv1alpha1.GPUHealth {
				h := allHealthy()
				h[1] = telemetryv1alpha1.GPUHealth{Healthy: false, ECCUncorrectedErrors: ptr.To[int64](2)}
				return h
			},
		},
		{
			name: "row remap pending and row remap failed",
			setup: func(s *dgxa100.Server, _ *nvmltest.EventQueue) {
				a100(s, 2).GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) { return 0, 1, true, false, gonvml.SUCCESS }
				a100(s, 3).GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) { return 0, 512, false, true, gonvml.SUCCESS }
			},
			want: func() []telemetryv1alpha1.GPUHealth {
				h := allHealthy()
				h[2] = telemetryv1alpha1.GPUHealth{Healthy: false, ECCUncorrectedErrors: ptr.To[int64](0), RowRemapPending: true}
				h[3] = telemetryv1alpha1.GPUHealth{Healthy: false, ECCUncorrectedErrors: ptr.To[int64](0), RowRemapFailed: true}
				return h
			},
		},
		{
			name: "critical XID events are counted per GPU",
			events: func(s *dgxa100.Server) []gonvml.EventData {
				return []gonvml.EventData{
					{Device: s.Devices[4], EventType: gonvml.EventTypeXidCriticalError, EventData: 79}, // fallen off the bus
					{Device: s.Devices[4], EventType: gonvml.EventTypeXidCriticalError, EventData: 48}, // double-bit ECC
					{Device: s.Devices[6], EventType: gonvml.EventTypeXidCriticalError, EventData: 94}, // contained ECC error
				}
			},
			want: func() []telemetryv1alpha1.GPUHealth {
				h := allHealthy()
				h[4] = telemetryv1alpha1.GPUHealth{Healthy: false, ECCUncorrectedErrors: ptr.To[int64](0), XIDCriticalEvents: 2}
				h[6] = telemetryv1alpha1.GPUHealth{Healthy: false, ECCUncorrectedErrors: ptr.To[int64](0), XIDCriticalEvents: 1}
				return h
			},
		},
		{
			name: "application XIDs do not make a GPU unhealthy",
			events: func(s *dgxa100.Server) []gonvml.EventData {
				return []gonvml.EventData{
					{Device: s.Devices[0], EventType: gonvml.EventTypeXidCriticalError, EventData: 13}, // graphics engine exception
					{Device: s.Devices[0], EventType: gonvml.EventTypeXidCriticalError, EventData: 31}, // page fault
					{Device: s.Devices[0], EventType: gonvml.EventTypeXidCriticalError, EventData: 43}, // stopped processing
				}
			},
			want: allHealthy,
		},
		{
			name: "an XID event tied to no GPU counts against every GPU",
			events: func(*dgxa100.Server) []gonvml.EventData {
				return []gonvml.EventData{{Device: nil, EventType: gonvml.EventTypeXidCriticalError, EventData: 79}}
			},
			want: func() []telemetryv1alpha1.GPUHealth {
				h := make([]telemetryv1alpha1.GPUHealth, 8)
				for i := range h {
					h[i] = telemetryv1alpha1.GPUHealth{Healthy: false, ECCUncorrectedErrors: ptr.To[int64](0), XIDCriticalEvents: 1}
				}
				return h
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, q := newA100Server(t)
			if tc.setup != nil {
				tc.setup(srv, q)
			}
			c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100"))
			t.Cleanup(c.Close)
			if _, err := collectGPUs(t, context.Background(), c); err != nil {
				t.Fatalf("first Collect: %v", err)
			}
			if tc.events != nil {
				q.Queue = tc.events(srv)
			}
			// The second collect drains the events; the third, with an
			// empty queue, still counts them: since the agent started.
			for _, round := range []string{"second", "third"} {
				gpus, err := collectGPUs(t, context.Background(), c)
				if err != nil {
					t.Fatalf("%s Collect: %v", round, err)
				}
				var got []telemetryv1alpha1.GPUHealth
				for _, g := range gpus {
					got = append(got, g.Health)
				}
				if diff := cmp.Diff(tc.want(), got); diff != "" {
					t.Errorf("%s Collect: health by GPU index (-want +got):\n%s", round, diff)
				}
			}
		})
	}
}

func TestDecodeThrottleReasons(t *testing.T) {
	tests := []struct {
		name string
		bits nvml.ClocksEventReasons
		want []telemetryv1alpha1.GPUThrottleReason
	}{
		{name: "none", bits: 0, want: nil},
		{name: "idle", bits: 0x1, want: []telemetryv1alpha1.GPUThrottleReason{"GpuIdle"}},
		{
			// 0x4 | 0x20 | 0x40 = 0x64
			name: "power cap and thermal",
			bits: 0x64,
			want: []telemetryv1alpha1.GPUThrottleReason{"SwPowerCap", "SwThermalSlowdown", "HwThermalSlowdown"},
		},
		{
			// 0x100 | 0x80 | 0x8: NVML's bit order, not the order of the bits in the literal
			name: "hardware slowdowns and display clock",
			bits: 0x100 | 0x80 | 0x8,
			want: []telemetryv1alpha1.GPUThrottleReason{"HwSlowdown", "HwPowerBrakeSlowdown", "DisplayClockSetting"},
		},
		{
			// 0x1ff: all nine bits
			name: "all",
			bits: 0x1ff,
			want: []telemetryv1alpha1.GPUThrottleReason{
				"GpuIdle", "ApplicationsClocksSetting", "SwPowerCap", "HwSlowdown", "SyncBoost",
				"SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown", "DisplayClockSetting",
			},
		},
		{
			// 0x200 and above have no API name
			name: "unknown bits are left out",
			bits: 0x200 | 0x10,
			want: []telemetryv1alpha1.GPUThrottleReason{"SyncBoost"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decodeThrottleReasons(tc.bits)); diff != "" {
				t.Errorf("decodeThrottleReasons(%#x) (-want +got):\n%s", tc.bits, diff)
			}
		})
	}
}

func TestGPUCollectorThrottleReasons(t *testing.T) {
	srv, _ := newA100Server(t)
	a100(srv, 5).GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) {
		return gonvml.ClocksEventReasonSwPowerCap | gonvml.ClocksThrottleReasonHwThermalSlowdown, gonvml.SUCCESS
	}
	a100(srv, 6).GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) { return 0, gonvml.SUCCESS }
	c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100"))
	t.Cleanup(c.Close)
	gpus, err := collectGPUs(t, context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32][]telemetryv1alpha1.GPUThrottleReason{}
	for _, g := range gpus {
		got[g.Index] = g.ThrottleReasons
	}
	idle := []telemetryv1alpha1.GPUThrottleReason{telemetryv1alpha1.GPUThrottleIdle}
	want := map[int32][]telemetryv1alpha1.GPUThrottleReason{
		0: idle, 1: idle, 2: idle, 3: idle, 4: idle,
		// 0x4 | 0x40
		5: {telemetryv1alpha1.GPUThrottleSwPowerCap, telemetryv1alpha1.GPUThrottleHwThermalSlowdown},
		// 0: no reason, no list
		6: nil,
		7: idle,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("throttle reasons by GPU index (-want +got):\n%s", diff)
	}
}

func TestGPUCollectorNotSupported(t *testing.T) {
	notSupported := func(d *dgxa100.Device) {
		d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) { return gonvml.PciInfo{}, gonvml.ERROR_NOT_SUPPORTED }
		d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
		}
		d.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
		d.GetTemperatureThresholdFunc = func(gonvml.TemperatureThresholds) (uint32, gonvml.Return) {
			return 0, gonvml.ERROR_NOT_SUPPORTED
		}
		d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
		d.GetEnforcedPowerLimitFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
		d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
		d.GetEccModeFunc = func() (gonvml.EnableState, gonvml.EnableState, gonvml.Return) {
			return 0, 0, gonvml.ERROR_NOT_SUPPORTED
		}
		d.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) { return 0, 0, false, false, gonvml.ERROR_NOT_SUPPORTED }
		d.GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
		d.GetMigModeFunc = func() (int, int, gonvml.Return) { return 0, 0, gonvml.ERROR_NOT_SUPPORTED }
	}
	tests := []struct {
		name  string
		setup func(d *dgxa100.Device)
		want  telemetryv1alpha1.GPUStatus
	}{
		{
			name:  "nothing optional supported",
			setup: notSupported,
			// Only the required fields; nothing reads as zero.
			want: telemetryv1alpha1.GPUStatus{
				Index: 0, UUID: a100UUID(0), Model: "Mock NVIDIA A100-SXM4-40GB",
				MemoryTotalBytes: 42949672960, MemoryUsedBytes: 1073741824,
				Health: telemetryv1alpha1.GPUHealth{Healthy: true},
			},
		},
		{
			name: "ECC switched off",
			setup: func(d *dgxa100.Device) {
				d.GetEccModeFunc = func() (gonvml.EnableState, gonvml.EnableState, gonvml.Return) {
					return gonvml.FEATURE_DISABLED, gonvml.FEATURE_DISABLED, gonvml.SUCCESS
				}
				// What a driver may still count with ECC off must not show.
				d.GetTotalEccErrorsFunc = func(gonvml.MemoryErrorType, gonvml.EccCounterType) (uint64, gonvml.Return) {
					return 7, gonvml.SUCCESS
				}
			},
			want: telemetryv1alpha1.GPUStatus{
				Index: 0, UUID: a100UUID(0), Model: "Mock NVIDIA A100-SXM4-40GB", PCIBusID: "00000000:07:00.0",
				NUMANode: ptr.To[int32](3), MemoryTotalBytes: 42949672960, MemoryUsedBytes: 1073741824,
				UtilizationPercent: ptr.To[int32](0), TemperatureMilliCelsius: ptr.To[int64](30000),
				SlowdownMilliCelsius: ptr.To[int64](89000), ShutdownMilliCelsius: ptr.To[int64](92000),
				PowerWatts: ptr.To[int32](60), PowerLimitWatts: ptr.To[int32](400), EnergyJoules: ptr.To[int64](123456),
				Health:          telemetryv1alpha1.GPUHealth{Healthy: true},
				ThrottleReasons: []telemetryv1alpha1.GPUThrottleReason{telemetryv1alpha1.GPUThrottleIdle},
				MIGEnabled:      ptr.To(false),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newA100Server(t)
			tc.setup(a100(srv, 0))
			var logs logSink
			c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100"))
			t.Cleanup(c.Close)
			gpus, err := collectGPUs(t, logs.context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, gpus[0]); diff != "" {
				t.Errorf("GPU 0 (-want +got):\n%s", diff)
			}
			// Not supported is not a problem worth a log line.
			if len(logs.lines) != 0 {
				t.Errorf("logged %q, want nothing", logs.lines)
			}
		})
	}
}

func TestGPUCollectorNUMA(t *testing.T) {
	tests := []struct {
		name  string
		tree  string // under testdata/gpu; "" for an empty root
		buses []uint8
		want  []*int32
	}{
		{
			name:  "numa_node of each GPU",
			tree:  "dgxa100",
			buses: dgxA100Buses[:],
			want:  []*int32{ptr.To[int32](3), ptr.To[int32](3), ptr.To[int32](1), ptr.To[int32](1), ptr.To[int32](7), ptr.To[int32](7), ptr.To[int32](5), ptr.To[int32](5)},
		},
		{
			// 0000:07:00.0 has -1, 0000:0f:00.0 has 1; -1 on two nodes cannot be placed
			name:  "no affinity on a two-node machine is absent",
			tree:  "two-node",
			buses: []uint8{0x07, 0x0f},
			want:  []*int32{nil, ptr.To[int32](1)},
		},
		{
			// -1 on a machine whose only node is node0
			name:  "no affinity on a one-node machine is node 0",
			tree:  "one-node",
			buses: []uint8{0x07},
			want:  []*int32{ptr.To[int32](0)},
		},
		{
			name:  "GPU not in sysfs",
			tree:  "one-node",
			buses: []uint8{0x07, 0x08},
			want:  []*int32{ptr.To[int32](0), nil},
		},
		{
			name:  "empty root",
			buses: []uint8{0x07},
			want:  []*int32{nil},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newA100Server(t)
			srv.DeviceGetCountFunc = func() (int, gonvml.Return) { return len(tc.buses), gonvml.SUCCESS }
			for i, bus := range tc.buses {
				a100(srv, i).PciBusID = fmt.Sprintf("00000000:%02X:00.0", bus)
			}
			root := hostfs.New(t.TempDir())
			if tc.tree != "" {
				root = gpuTree(t, tc.tree)
			}
			c := NewGPUCollector(nvml.NewWith(srv), root)
			t.Cleanup(c.Close)
			gpus, err := collectGPUs(t, context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			var got []*int32
			for _, g := range gpus {
				got = append(got, g.NUMANode)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NUMA node by GPU index (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGPUCollectorNoDriver(t *testing.T) {
	for _, ret := range []gonvml.Return{gonvml.ERROR_LIBRARY_NOT_FOUND, gonvml.ERROR_DRIVER_NOT_LOADED} {
		t.Run(ret.Error(), func(t *testing.T) {
			srv, _ := newA100Server(t)
			srv.InitFunc = func() gonvml.Return { return ret }
			var logs logSink
			ctx := logs.context()
			c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100"))
			for round := range 3 {
				s := &Sample{}
				err := c.Collect(ctx, s)
				var se *SourceError
				if !errors.As(err, &se) {
					t.Fatalf("Collect %d: error %v, want a *SourceError", round, err)
				}
				got := SourceStatus(c.Name(), err)
				got.Message = ""
				want := telemetryv1alpha1.SourceStatus{Name: "gpu", State: telemetryv1alpha1.SourceUnavailable, Reason: "NVMLNotAvailable"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("Collect %d: source status (-want +got):\n%s", round, diff)
				}
				if s.GPUs != nil {
					t.Errorf("Collect %d: GPUs = %v, want none", round, s.GPUs)
				}
			}
			// Three collects: NVML tried once, logged once.
			got := []int{len(srv.InitCalls()), len(logs.lines)}
			if diff := cmp.Diff([]int{1, 1}, got); diff != "" {
				t.Errorf("[Init calls, log lines] (-want +got):\n%s\nlogs: %q", diff, logs.lines)
			}
			c.Close()
			if n := len(srv.ShutdownCalls()); n != 0 {
				t.Errorf("Close called nvmlShutdown %d times, want none", n)
			}
		})
	}
}

// A node without the driver pays nothing per sample once NVML is known to
// be missing: no goroutine, no timer, no allocation.
func TestGPUCollectorNoDriverAllocatesNothing(t *testing.T) {
	srv, _ := newA100Server(t)
	srv.InitFunc = func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }
	var logs logSink
	ctx := logs.context()
	c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100"))
	t.Cleanup(c.Close)
	s := &Sample{}
	_ = c.Collect(ctx, s) // finds no driver
	if got := testing.AllocsPerRun(100, func() { _ = c.Collect(ctx, s) }); got != 0 {
		t.Errorf("allocations per Collect without a driver: %v, want 0", got)
	}
}

func TestGPUCollectorInitFailureIsRetried(t *testing.T) {
	srv, _ := newA100Server(t)
	ret := gonvml.ERROR_NO_PERMISSION
	srv.InitFunc = func() gonvml.Return { return ret }
	c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100"))
	t.Cleanup(c.Close)

	_, err := collectGPUs(t, context.Background(), c)
	st := SourceStatus(c.Name(), err)
	if st.State != telemetryv1alpha1.SourceFailed || st.Reason != "NVMLInitFailed" {
		t.Errorf("first Collect: source status %+v, want Failed NVMLInitFailed", st)
	}
	ret = gonvml.SUCCESS
	gpus, err := collectGPUs(t, context.Background(), c)
	if err != nil || len(gpus) != 8 {
		t.Errorf("second Collect = %d GPUs, %v; want 8, nil", len(gpus), err)
	}
	if n := len(srv.InitCalls()); n != 2 {
		t.Errorf("nvmlInit called %d times, want 2", n)
	}
}

func TestGPUCollectorNoGPUs(t *testing.T) {
	srv, _ := newA100Server(t)
	srv.DeviceGetCountFunc = func() (int, gonvml.Return) { return 0, gonvml.SUCCESS }
	var logs logSink
	c := NewGPUCollector(nvml.NewWith(srv), hostfs.New(t.TempDir()))
	t.Cleanup(c.Close)
	gpus, err := collectGPUs(t, logs.context(), c)
	if err != nil {
		t.Fatalf("Collect: %v, want Available", err)
	}
	if diff := cmp.Diff([]telemetryv1alpha1.GPUStatus{}, gpus); diff != "" {
		t.Errorf("GPUs (-want +got):\n%s", diff)
	}
	if len(logs.lines) != 0 {
		t.Errorf("logged %q, want nothing", logs.lines)
	}
}

func TestGPUCollectorPartialFailure(t *testing.T) {
	srv, _ := newA100Server(t)
	// GPU 3 is lost: not even its UUID reads. GPU 5's power meter fails.
	a100(srv, 3).GetUUIDFunc = func() (string, gonvml.Return) { return "", gonvml.ERROR_GPU_IS_LOST }
	a100(srv, 5).GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_UNKNOWN }
	var logs logSink
	ctx := logs.context()
	c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100"))
	t.Cleanup(c.Close)

	for round := range 2 {
		gpus, err := collectGPUs(t, ctx, c)
		if err != nil {
			t.Fatalf("Collect %d: %v, want Available with the GPUs that read", round, err)
		}
		var indexes []int32
		power := map[int32]*int32{}
		for _, g := range gpus {
			indexes = append(indexes, g.Index)
			power[g.Index] = g.PowerWatts
		}
		// 8 GPUs less GPU 3
		if diff := cmp.Diff([]int32{0, 1, 2, 4, 5, 6, 7}, indexes); diff != "" {
			t.Errorf("Collect %d: GPU indexes (-want +got):\n%s", round, diff)
		}
		if power[5] != nil || power[4] == nil {
			t.Errorf("Collect %d: power of GPU 5 = %v, of GPU 4 = %v; want absent, present", round, power[5], power[4])
		}
	}
	// One line per problem over both collects.
	if len(logs.lines) != 2 || !strings.Contains(logs.lines[0], "ERROR_GPU_IS_LOST") || !strings.Contains(logs.lines[1], "ERROR_UNKNOWN") {
		t.Errorf("logs = %q, want one line for GPU 3 then one for GPU 5", logs.lines)
	}

	// Once GPU 5's meter recovers, that is logged, once.
	a100(srv, 5).GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 70000, gonvml.SUCCESS }
	for range 2 {
		if _, err := collectGPUs(t, ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if len(logs.lines) != 3 || !strings.Contains(logs.lines[2], "cleared") {
		t.Errorf("logs = %q, want a third line saying GPU 5 cleared", logs.lines)
	}
}

func TestGPUCollectorEveryGPUFails(t *testing.T) {
	srv, _ := newA100Server(t)
	for i := range srv.Devices {
		a100(srv, i).GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) { return gonvml.Memory{}, gonvml.ERROR_GPU_IS_LOST }
	}
	c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100"))
	t.Cleanup(c.Close)
	s := &Sample{}
	err := c.Collect(context.Background(), s)
	got := SourceStatus(c.Name(), err)
	got.Message = ""
	want := telemetryv1alpha1.SourceStatus{Name: "gpu", State: telemetryv1alpha1.SourceFailed, Reason: "GPUReadFailed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("source status (-want +got):\n%s", diff)
	}
	if s.GPUs != nil {
		t.Errorf("GPUs = %v, want none", s.GPUs)
	}
}

func TestGPUCollectorClose(t *testing.T) {
	srv, q := newA100Server(t)
	c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100"))
	if _, err := collectGPUs(t, context.Background(), c); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close()
	// Two Closes: NVML and the event set released once.
	got := []int{len(srv.ShutdownCalls()), len(q.FreeCalls())}
	if diff := cmp.Diff([]int{1, 1}, got); diff != "" {
		t.Errorf("[nvmlShutdown calls, event set frees] (-want +got):\n%s", diff)
	}
}

// waitUntil polls cond until it holds. The bound only stops a test whose
// code never gets there; a correct run is never near it.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after a minute", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGPUCollectorHungNVMLCallTimesOut pins what a call into NVML that
// never returns (GPU 3's power reading here, as a GPU fallen off the bus
// can hang) does to the GPU source: the collection is given up after the
// timeout, the source is Failed with reason NVMLTimeout naming the timeout
// and what was stuck; the next collection does not call NVML again while
// the call is stuck, and says it still is; once the call returns, GPUs are
// read afresh. The timeout runs on a fake clock.
func TestGPUCollectorHungNVMLCallTimesOut(t *testing.T) {
	srv, _ := newA100Server(t)
	entered, release := make(chan struct{}, 8), make(chan struct{})
	a100(srv, 3).GetPowerUsageFunc = func() (uint32, gonvml.Return) {
		entered <- struct{}{}
		<-release
		return 63499, gonvml.SUCCESS
	}
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	c := NewGPUCollector(nvml.NewWith(srv), gpuTree(t, "dgxa100")).WithTimeout(10 * time.Second)
	c.clock = clk
	t.Cleanup(c.Close)
	t.Cleanup(unblock) // before Close: cleanups run last first

	type result struct {
		GPUs   []telemetryv1alpha1.GPUStatus
		Source telemetryv1alpha1.SourceStatus
	}
	collect := func() <-chan result {
		out := make(chan result, 1)
		go func() {
			s := &Sample{Time: clk.Now()}
			err := c.Collect(context.Background(), s)
			out <- result{GPUs: s.GPUs, Source: SourceStatus(c.Name(), err)}
		}()
		return out
	}
	receive := func(what string, ch <-chan result) result {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(time.Minute):
			t.Fatalf("%s: Collect has not returned after a minute", what)
			return result{}
		}
	}
	powerCalls := func() int { return len(a100(srv, 3).GetPowerUsageCalls()) }

	// First collection: stuck in GPU 3's power reading until the 10s
	// timeout passes on the clock.
	first := collect()
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("GPU 3's power reading was never called")
	}
	waitUntil(t, "Collect waiting on its timeout", clk.HasWaiters)
	clk.Step(10 * time.Second)
	got := receive("first Collect", first)
	want := result{Source: telemetryv1alpha1.SourceStatus{Name: "gpu", State: telemetryv1alpha1.SourceFailed, Reason: "NVMLTimeout",
		Message: "NVML did not return within 10s (--nvml-timeout), reading GPU 3, since 2025-01-01T00:00:00Z; NVML is not called again until it returns"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first Collect (-want +got):\n%s", diff)
	}

	// Second collection, 1s later: the call is still stuck; NVML is not
	// entered again, and no timeout is waited for.
	clk.Step(time.Second)
	got = receive("second Collect", collect())
	want.Source.Message = "an NVML call is still stuck, reading GPU 3, since 2025-01-01T00:00:00Z (--nvml-timeout 10s); NVML is not called again until it returns"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("second Collect (-want +got):\n%s", diff)
	}
	if n := powerCalls(); n != 1 {
		t.Errorf("GPU 3's power read %d times while stuck, want 1", n)
	}
	if n := len(srv.InitCalls()); n != 1 {
		t.Errorf("nvmlInit called %d times, want 1", n)
	}

	// The call returns: the next collection reads all 8 GPUs afresh.
	unblock()
	waitUntil(t, "the stuck call to return", func() bool {
		c.callMu.Lock()
		defer c.callMu.Unlock()
		return returned(c.call)
	})
	got = receive("third Collect", collect())
	if got.Source.State != telemetryv1alpha1.SourceAvailable || len(got.GPUs) != 8 {
		t.Errorf("third Collect: %d GPUs, source %+v; want 8, Available", len(got.GPUs), got.Source)
	}
	if n := powerCalls(); n != 2 {
		t.Errorf("GPU 3's power read %d times in all, want 2", n)
	}
}
