// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package hosttree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
)

// newHost writes a small host's tree for a test.
func newHost(t *testing.T) *Host {
	t.Helper()
	h, err := New(t.TempDir(), Spec{CPUs: 4, NUMANodes: 1, Packages: 1, MemoryKiB: 16 << 20, IdleWatts: 50, FullLoadWatts: 150, CritMilliCelsius: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// read returns a file of h's tree.
func read(t *testing.T, h *Host, hostPath string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Dir, hostPath))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAdvanceRewritesOnlyWhatChanged checks that Advance replaces the
// counters every time and memory and temperature files only when their
// content changes: a file left alone keeps its inode.
func TestAdvanceRewritesOnlyWhatChanged(t *testing.T) {
	h := newHost(t)
	inode := func(p string) uint64 {
		t.Helper()
		st, err := os.Stat(filepath.Join(h.Dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	const (
		stat    = "/proc/stat"
		energy  = "/sys/class/powercap/intel-rapl:0/energy_uj"
		meminfo = "/proc/meminfo"
		temp    = "/sys/class/hwmon/hwmon0/temp1_input"
	)
	now := time.Now()
	before := map[string]uint64{stat: inode(stat), energy: inode(energy), meminfo: inode(meminfo), temp: inode(temp)}
	statBefore := read(t, h, stat)
	now = now.Add(time.Second)
	if err := h.AdvanceTo(now); err != nil {
		t.Fatal(err)
	}
	if read(t, h, stat) == statBefore || inode(stat) == before[stat] || inode(energy) == before[energy] {
		t.Errorf("after a second, /proc/stat and energy_uj were not rewritten")
	}
	if inode(meminfo) != before[meminfo] || inode(temp) != before[temp] {
		t.Errorf("meminfo or temp1_input rewritten with the same content")
	}
	// An earlier time (a reader that raced another) moves nothing back.
	statNow := read(t, h, stat)
	if err := h.AdvanceTo(now.Add(-500 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if got := read(t, h, stat); got != statNow {
		t.Errorf("AdvanceTo an earlier time rewrote /proc/stat:\n%s\nwas\n%s", got, statNow)
	}

	h.SetUtilization(0.9)
	h.SetTemperature(77_000)
	now = now.Add(time.Second)
	if err := h.AdvanceTo(now); err != nil {
		t.Fatal(err)
	}
	if got := read(t, h, temp); got != "77000\n" {
		t.Errorf("temp1_input = %q, want 77000", got)
	}
	// Used memory is 20 % of MemTotal plus half the utilization: 65 %.
	if got := read(t, h, meminfo); !strings.Contains(got, "MemAvailable:   5872026 kB") {
		t.Errorf("meminfo after utilization 0.9:\n%s\nwant MemAvailable 5872026 kB (35 %% of 16 GiB)", got)
	}
}

// TestBeforeRead checks that a read of a rate counter brings the host up
// to date and a read of anything else does not.
func TestBeforeRead(t *testing.T) {
	h := newHost(t)
	const energy = "/sys/class/powercap/intel-rapl:0/energy_uj"
	stat, uj := read(t, h, "/proc/stat"), read(t, h, energy)
	time.Sleep(20 * time.Millisecond) // past ReadStep, and a tick of USER_HZ
	for _, p := range []string{"/proc/meminfo", "/proc/loadavg", "/sys/class/hwmon/hwmon0/temp1_input"} {
		if RateCounter(p) {
			t.Errorf("RateCounter(%s) = true", p)
		}
		if err := h.BeforeRead(p); err != nil {
			t.Fatal(err)
		}
	}
	if read(t, h, "/proc/stat") != stat || read(t, h, energy) != uj {
		t.Fatalf("reads of files that are not rate counters advanced the host")
	}
	if err := h.BeforeRead("/proc/stat"); err != nil {
		t.Fatal(err)
	}
	if read(t, h, "/proc/stat") == stat || read(t, h, energy) == uj {
		t.Errorf("a read of /proc/stat did not advance the host:\n%s", read(t, h, "/proc/stat"))
	}
	uj = read(t, h, energy)
	time.Sleep(20 * time.Millisecond)
	if err := h.BeforeRead(energy); err != nil {
		t.Fatal(err)
	}
	if read(t, h, energy) == uj {
		t.Errorf("a read of %s did not advance the host", energy)
	}
}

// TestFailTemperatures reads a tree with the agent's own thermal
// collector: while FailTemperatures holds, every sensor fails (its last
// reading held for the hold time, then none), and its readings come back
// when it is lifted.
func TestFailTemperatures(t *testing.T) {
	h := newHost(t)
	start := time.Now().Add(time.Second) // after New's write
	h.SetTemperature(91_000)
	hottest := func(th *collector.Thermal) int64 {
		var m int64
		for _, s := range th.Sensors {
			m = max(m, s.MilliCelsius)
		}
		return m
	}
	c := collector.NewThermalCollector(hostfs.New(h.Dir)).WithSensorHold(10 * time.Second)
	collect := func(at time.Time) (*collector.Thermal, error) {
		t.Helper()
		if err := h.AdvanceTo(at); err != nil {
			t.Fatal(err)
		}
		s := &collector.Sample{Time: at}
		err := c.Collect(context.Background(), s)
		return s.Thermal, err
	}
	if th, err := collect(start); err != nil || th == nil || hottest(th) != 91_000 {
		t.Fatalf("before the failure: %+v, %v; want the package at 91°C", th, err)
	}
	h.FailTemperatures(true)
	th, err := collect(start.Add(5 * time.Second))
	if err == nil || th == nil || hottest(th) != 91_000 {
		t.Fatalf("failed, within the hold: %+v, %v; want the held 91°C and an error", th, err)
	}
	if !strings.Contains(err.Error(), "out of range") {
		t.Errorf("failed, within the hold: error %q does not say the value is out of range", err)
	}
	if th, err := collect(start.Add(11 * time.Second)); err == nil || th != nil {
		t.Fatalf("failed, past the hold: %+v, %v; want no reading and an error", th, err)
	}
	h.FailTemperatures(false)
	h.SetTemperature(60_000)
	if th, err := collect(start.Add(12 * time.Second)); err != nil || th == nil || hottest(th) != 60_000 {
		t.Fatalf("restored: %+v, %v; want 60°C and no error", th, err)
	}
}
