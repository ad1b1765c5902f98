// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/sandbox/hosttree"
)

// statLine builds a cpuN line: user nice system idle iowait irq softirq steal guest guest_nice.
func stat(lines ...string) string {
	out := "cpu  0 0 0 0 0 0 0 0 0 0\n"
	for _, l := range lines {
		out += l + "\n"
	}
	return out + "intr 12345\nctxt 678\nbtime 1700000000\nprocesses 42\n"
}

func TestCPUCollectorUtilization(t *testing.T) {
	for _, tc := range []struct {
		name         string
		before       string
		after        string
		wantPercent  int32
		wantPerCPU   map[int]float64
		wantCPUBusy  float64
		wantErrState telemetryv1alpha1.SourceState // "" for success
	}{
		{
			name:   "two CPUs",
			before: stat("cpu0 100 0 0 900 0 0 0 0 0 0", "cpu1 0 0 0 1000 0 0 0 0 0 0"),
			after:  stat("cpu0 250 0 50 1500 0 0 0 0 0 0", "cpu1 700 0 100 1000 0 0 0 0 0 0"),
			// cpu0: busy (250-100)+(50-0)=200 of total 1800-1000=800 -> 0.25
			// cpu1: busy 700+100=800 of 800 -> 1.0
			// node: (200+800)/(800+800) = 0.625 -> 63%
			wantPercent: 63,
			wantPerCPU:  map[int]float64{0: 0.25, 1: 1.0},
			wantCPUBusy: 0.625,
		},
		{
			name:   "iowait and steal",
			before: stat("cpu0 0 0 0 0 0 0 0 0 0 0"),
			after:  stat("cpu0 100 0 0 500 300 50 50 100 40 0"),
			// total = 100+500+300+50+50+100 = 1100 (guest 40 is inside user)
			// idle = idle 500 + iowait 300 = 800; busy = 300 -> 300/1100 = 27.27% -> 27%
			wantPercent: 27,
			wantPerCPU:  map[int]float64{0: 300.0 / 1100},
			wantCPUBusy: 300.0 / 1100,
		},
		{
			name:   "counter went backwards",
			before: stat("cpu0 100 0 0 900 0 0 0 0 0 0", "cpu1 0 0 0 1000 50 0 0 0 0 0"),
			after:  stat("cpu0 300 0 0 1500 0 0 0 0 0 0", "cpu1 500 0 0 1200 40 0 0 0 0 0"),
			// cpu1's iowait fell 50 -> 40: it is left out of this interval.
			// cpu0: busy 200 of 800 -> 25%
			wantPercent: 25,
			wantPerCPU:  map[int]float64{0: 0.25},
			wantCPUBusy: 0.25,
		},
		{
			name:   "CPU hotplug",
			before: stat("cpu0 100 0 0 900 0 0 0 0 0 0", "cpu1 0 0 0 1000 0 0 0 0 0 0"),
			after:  stat("cpu0 500 0 0 1300 0 0 0 0 0 0", "cpu2 10 0 0 10 0 0 0 0 0 0"),
			// cpu1 went offline, cpu2 came online: neither has a delta.
			// cpu0: busy 400 of 800 -> 50%
			wantPercent: 50,
			wantPerCPU:  map[int]float64{0: 0.5},
			wantCPUBusy: 0.5,
		},
		{
			name:         "no counter advanced",
			before:       stat("cpu0 100 0 0 900 0 0 0 0 0 0"),
			after:        stat("cpu0 100 0 0 900 0 0 0 0 0 0"),
			wantErrState: telemetryv1alpha1.SourceFailed,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, map[string]string{"/proc/stat": tc.before})
			c := NewCPUCollector(root)
			if err := c.Collect(context.Background(), &Sample{}); !errors.Is(err, ErrWarmingUp) {
				t.Fatalf("first Collect = %v, want ErrWarmingUp", err)
			}
			updateTree(t, root, map[string]string{"/proc/stat": tc.after})
			s := &Sample{}
			err := c.Collect(context.Background(), s)
			if tc.wantErrState != "" {
				var se *SourceError
				if !errors.As(err, &se) || se.State != tc.wantErrState {
					t.Fatalf("Collect = %v, want a %s SourceError", err, tc.wantErrState)
				}
				if s.CPU != nil {
					t.Errorf("CPU = %+v on error, want nil", s.CPU)
				}
				return
			}
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			if s.CPU.UtilizationPercent != tc.wantPercent {
				t.Errorf("UtilizationPercent = %d, want %d", s.CPU.UtilizationPercent, tc.wantPercent)
			}
			if diff := cmp.Diff(tc.wantPerCPU, s.PerCPUBusy); diff != "" {
				t.Errorf("PerCPUBusy (-want +got):\n%s", diff)
			}
			if s.CPUBusy != tc.wantCPUBusy {
				t.Errorf("CPUBusy = %v, want %v", s.CPUBusy, tc.wantCPUBusy)
			}
		})
	}
}

func TestCPUCollectorFullSample(t *testing.T) {
	files := map[string]string{
		"/proc/stat":                      stat("cpu0 100 0 0 900 0 0 0 0 0 0", "cpu1 100 0 0 900 0 0 0 0 0 0", "cpu2 100 0 0 900 0 0 0 0 0 0"),
		"/proc/loadavg":                   "1.25 0.50 0.05 1/100 12345\n",
		"/proc/pressure/cpu":              "some avg10=1.23 avg60=0.50 avg300=0.10 total=456789\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"/sys/devices/system/cpu/present": "0-3\n",
		"/sys/devices/system/cpu/online":  "0-2\n",
	}
	// cpu0 and cpu1 share package 0, whose count each repeats; cpu2 is package 1.
	for cpu, v := range map[string][3]string{"cpu0": {"0", "1", "5"}, "cpu1": {"0", "2", "5"}, "cpu2": {"1", "3", "7"}} {
		files["/sys/devices/system/cpu/"+cpu+"/topology/physical_package_id"] = v[0]
		files["/sys/devices/system/cpu/"+cpu+"/thermal_throttle/core_throttle_count"] = v[1]
		files["/sys/devices/system/cpu/"+cpu+"/thermal_throttle/package_throttle_count"] = v[2]
	}
	root := writeTree(t, files)
	c := NewCPUCollector(root)
	if err := c.Collect(context.Background(), &Sample{}); !errors.Is(err, ErrWarmingUp) {
		t.Fatalf("first Collect = %v, want ErrWarmingUp", err)
	}
	updateTree(t, root, map[string]string{
		"/proc/stat": stat("cpu0 300 0 0 1500 0 0 0 0 0 0", "cpu1 300 0 0 1500 0 0 0 0 0 0", "cpu2 300 0 0 1500 0 0 0 0 0 0"),
	})
	s := &Sample{}
	if err := c.Collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	want := &telemetryv1alpha1.CPUStatus{
		LogicalCores:       4,  // present 0-3
		OnlineCores:        3,  // online 0-2
		UtilizationPercent: 25, // each CPU: busy 200 of 800
		LoadAverage:        &telemetryv1alpha1.LoadAverage{OneMinuteMilli: 1250, FiveMinuteMilli: 500, FifteenMinuteMilli: 50},
		Pressure: &telemetryv1alpha1.PressureStatus{
			SomeAvg10BasisPoints:  123, // 1.23%
			FullAvg10BasisPoints:  ptr.To[int32](0),
			SomeTotalMicroseconds: 456789,
		},
		ThermalThrottle: &telemetryv1alpha1.CPUThrottleStatus{
			Throttling:         false, // the counts are those of the first reading
			CoreEventsTotal:    6,     // 1 + 2 + 3
			PackageEventsTotal: 12,    // package 0 once (5) + package 1 (7)
		},
	}
	if diff := cmp.Diff(want, s.CPU); diff != "" {
		t.Errorf("CPU (-want +got):\n%s", diff)
	}
	if s.IOPressure != nil {
		t.Errorf("IOPressure = %+v with no /proc/pressure/io, want nil", s.IOPressure)
	}

	// A throttle event on cpu2 during the next interval.
	updateTree(t, root, map[string]string{
		"/proc/stat": stat("cpu0 500 0 0 2100 0 0 0 0 0 0", "cpu1 500 0 0 2100 0 0 0 0 0 0", "cpu2 500 0 0 2100 0 0 0 0 0 0"),
		"/sys/devices/system/cpu/cpu2/thermal_throttle/core_throttle_count": "4",
	})
	s = &Sample{}
	if err := c.Collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if got := s.CPU.ThermalThrottle; !got.Throttling || got.CoreEventsTotal != 7 {
		t.Errorf("ThermalThrottle = %+v, want throttling with 7 core events (1+2+4)", got)
	}
}

// TestCPUCollectorPressureNotSupported: with psi=0 the kernel answers
// EOPNOTSUPP; pressure is then absent, not zero.
func TestCPUCollectorPressureNotSupported(t *testing.T) {
	root := writeTree(t, map[string]string{
		"/proc/stat":         stat("cpu0 100 0 0 900 0 0 0 0 0 0"),
		"/proc/pressure/cpu": "some avg10=9.99 avg60=0.00 avg300=0.00 total=1\n",
	}).WithFaults(map[string]error{"/proc/pressure/cpu": syscall.EOPNOTSUPP})
	c := NewCPUCollector(root)
	_ = c.Collect(context.Background(), &Sample{})
	updateTree(t, root, map[string]string{"/proc/stat": stat("cpu0 200 0 0 1800 0 0 0 0 0 0")})
	s := &Sample{}
	if err := c.Collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if s.CPU.Pressure != nil || s.CPU.ThermalThrottle != nil || s.CPU.LoadAverage != nil {
		t.Errorf("CPU = %+v: want pressure, throttle and load absent", s.CPU)
	}
}

// TestEmptyRoot: a root with nothing in it yields every source "absent"
// with a named reason: no error of another kind, no zero, no section.
func TestEmptyRoot(t *testing.T) {
	root := writeTree(t, nil)
	for _, tc := range []struct {
		c          Collector
		wantReason string
	}{
		{NewCPUCollector(root), "NoProcStat"},
		{NewMemoryCollector(root), "NoMeminfo"},
		{NewNUMACollector(root), "NoNUMATopology"},
	} {
		t.Run(string(tc.c.Name()), func(t *testing.T) {
			s, results := Run(context.Background(), []Collector{tc.c}, time.Now())
			want := telemetryv1alpha1.SourceStatus{Name: tc.c.Name(), State: telemetryv1alpha1.SourceUnavailable, Reason: tc.wantReason}
			got := s.Sources[0]
			got.Message = ""
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("source (-want +got):\n%s", diff)
			}
			if s.Sources[0].Message == "" {
				t.Error("no message")
			}
			if s.CPU != nil || s.Memory != nil || s.NUMA != nil {
				t.Errorf("sections filled from an empty root: %+v", s)
			}
			if results[0].Err == nil {
				t.Error("Result.Err is nil")
			}
		})
	}
}

// Defect 3: throttling is a rise of some counter present at both readings
// (Documentation/ABI/testing/sysfs-devices-system-cpu: thermal_throttle/
// core_throttle_count and package_throttle_count count events since boot,
// per CPU and per package). A CPU that goes offline takes its counters with
// it (its cpuN/thermal_throttle directory goes away) and its cpuN line
// leaves /proc/stat, which lists online CPUs only (fs/proc/stat.c,
// show_stat); when it comes back with the same counts, nothing was
// throttled.
func TestThrottleAcrossCPUHotplug(t *testing.T) {
	files := map[string]string{
		"/proc/stat": stat("cpu0 100 0 0 900 0 0 0 0 0 0", "cpu1 100 0 0 900 0 0 0 0 0 0", "cpu2 100 0 0 900 0 0 0 0 0 0"),
	}
	for cpu, v := range map[string][3]string{"cpu0": {"0", "1", "5"}, "cpu1": {"0", "2", "5"}, "cpu2": {"1", "3", "7"}} {
		files["/sys/devices/system/cpu/"+cpu+"/topology/physical_package_id"] = v[0]
		files["/sys/devices/system/cpu/"+cpu+"/thermal_throttle/core_throttle_count"] = v[1]
		files["/sys/devices/system/cpu/"+cpu+"/thermal_throttle/package_throttle_count"] = v[2]
	}
	root := writeTree(t, files)
	c := NewCPUCollector(root)
	ticks := 100
	online := []string{"cpu0", "cpu1", "cpu2"}
	collect := func(what string) *telemetryv1alpha1.CPUThrottleStatus {
		t.Helper()
		ticks += 1000
		v := fmt.Sprintf(" %d 0 0 %d 0 0 0 0 0 0", ticks, 9*ticks)
		var lines []string
		for _, cpu := range online {
			lines = append(lines, cpu+v)
		}
		updateTree(t, root, map[string]string{"/proc/stat": stat(lines...)})
		s := &Sample{}
		if err := c.Collect(context.Background(), s); err != nil && !errors.Is(err, ErrWarmingUp) {
			t.Fatalf("%s: %v", what, err)
		}
		if s.CPU == nil {
			return nil
		}
		return s.CPU.ThermalThrottle
	}
	collect("baseline")
	collect("all CPUs read")
	// cpu1 goes offline, and cpu0's core count cannot be read once.
	cpu1 := root.Path("/sys/devices/system/cpu/cpu1/thermal_throttle")
	if err := os.RemoveAll(cpu1); err != nil {
		t.Fatal(err)
	}
	online = []string{"cpu0", "cpu2"}
	if err := os.Remove(root.Path("/sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count")); err != nil {
		t.Fatal(err)
	}
	if got := collect("cpu1 offline, cpu0 unreadable"); got == nil || got.Throttling {
		t.Errorf("cpu1 offline and cpu0 unreadable: %+v, want counters and no throttling", got)
	}
	// Both come back with the counts they had: nothing rose.
	online = []string{"cpu0", "cpu1", "cpu2"}
	updateTree(t, root, map[string]string{
		"/sys/devices/system/cpu/cpu1/thermal_throttle/core_throttle_count":    "2",
		"/sys/devices/system/cpu/cpu1/thermal_throttle/package_throttle_count": "5",
		"/sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count":    "1",
	})
	if got := collect("cpu1 back, cpu0 readable"); got == nil || got.Throttling {
		t.Errorf("cpu1 back online with the same counts: %+v, want no throttling", got)
	}
	// A real event on cpu1 is seen, and is the only event the agent
	// counts (its counter never went back while the kernel's sum did).
	updateTree(t, root, map[string]string{"/sys/devices/system/cpu/cpu1/thermal_throttle/core_throttle_count": "3"})
	if got := collect("cpu1 throttled"); got == nil || !got.Throttling {
		t.Errorf("cpu1's core count rose: %+v, want throttling", got)
	}
	if c.seenCore != 1 || c.seenPkg != 0 {
		t.Errorf("events seen: core %d, package %d; want 1, 0", c.seenCore, c.seenPkg)
	}
}

// BenchmarkCPUCollect is one sample of a simulated 64-CPU, two-package
// host (sandbox/hosttree, bench-agent's host): /proc/stat, load, pressure
// and the 64 CPUs' thermal_throttle counters.
func BenchmarkCPUCollect(b *testing.B) {
	h, err := hosttree.New(b.TempDir(), hosttree.Spec{CPUs: 64, NUMANodes: 2, Packages: 2, MemoryKiB: 256 << 20, IdleWatts: 100, FullLoadWatts: 400, CritMilliCelsius: 100_000})
	if err != nil {
		b.Fatal(err)
	}
	h.SetUtilization(0.4)
	c := NewCPUCollector(hostfs.New(h.Dir))
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		now = now.Add(time.Second) // the agent's sample interval
		if err := h.AdvanceTo(now); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := c.Collect(ctx, &Sample{}); err != nil && !errors.Is(err, ErrWarmingUp) {
			b.Fatal(err)
		}
	}
}

// The throttle counters are read every --throttle-interval, not every
// sample: a sample in between carries the last reading, and the counters,
// which count events since boot, show a rise that happened between two
// reads at the next one. With 0 they are read every sample.
func TestThrottleReadEveryInterval(t *testing.T) {
	const counter = "/sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count"
	type step struct {
		at      time.Duration // after the baseline
		count   string        // cpu0's core_throttle_count before the sample
		want    bool          // throttling
		wantSum int64         // CoreEventsTotal
	}
	for _, tc := range []struct {
		name  string
		every time.Duration
		steps []step
	}{
		{"every 5s", 5 * time.Second, []step{
			{1 * time.Second, "4", false, 1}, // not due: the baseline's reading
			{5 * time.Second, "4", true, 4},  // due: 1 -> 4 rose
			{6 * time.Second, "4", true, 4},  // carried
			{10 * time.Second, "4", false, 4},
		}},
		{"every sample", 0, []step{
			{1 * time.Second, "4", true, 4},
			{5 * time.Second, "4", false, 4},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, map[string]string{
				"/proc/stat": stat("cpu0 100 0 0 900 0 0 0 0 0 0"),
				"/sys/devices/system/cpu/cpu0/topology/physical_package_id": "0",
				counter: "1",
				"/sys/devices/system/cpu/cpu0/thermal_throttle/package_throttle_count": "0",
			})
			c := NewCPUCollector(root).WithThrottleInterval(tc.every)
			t0 := time.Unix(1_700_000_000, 0)
			if err := c.Collect(context.Background(), &Sample{Time: t0}); !errors.Is(err, ErrWarmingUp) {
				t.Fatalf("baseline: %v, want ErrWarmingUp", err)
			}
			for i, st := range tc.steps {
				ticks := 100 + 1000*(i+1)
				updateTree(t, root, map[string]string{
					"/proc/stat": stat(fmt.Sprintf("cpu0 %d 0 0 %d 0 0 0 0 0 0", ticks, 9*ticks)),
					counter:      st.count,
				})
				s := &Sample{Time: t0.Add(st.at)}
				if err := c.Collect(context.Background(), s); err != nil {
					t.Fatalf("at %v: %v", st.at, err)
				}
				got := s.CPU.ThermalThrottle
				if got == nil || got.Throttling != st.want || got.CoreEventsTotal != st.wantSum {
					t.Errorf("at %v: %+v, want throttling %v, core events %d", st.at, got, st.want, st.wantSum)
				}
			}
		})
	}
}
