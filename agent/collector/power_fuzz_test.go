// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// FuzzParseRAPLZone: a parsed powercap zone name writes back as the same
// name, and the name it counts under is "" or non-empty without panics.
func FuzzParseRAPLZone(f *testing.F) {
	for _, s := range []string{"intel-rapl:0", "intel-rapl:0:2", "intel-rapl-mmio:0", "intel-rapl", "intel-rapl:", "intel-rapl:0:", "intel-rapl:00", "intel-rapl:0:1:2", "intel-rapl:-1", "intel-rapl-mmio:1:0"} {
		f.Add(s, "package-0")
	}
	f.Add("intel-rapl:1:0", "dram")
	f.Add("intel-rapl:2", "psys")
	f.Fuzz(func(t *testing.T, base, name string) {
		mmio, pkg, sub, ok := parseRAPLZone(base)
		if !ok {
			return
		}
		back := "intel-rapl:"
		if mmio {
			back = "intel-rapl-mmio:"
		}
		back += strconv.Itoa(pkg)
		if sub >= 0 {
			back += ":" + strconv.Itoa(sub)
		}
		if back != base || pkg < 0 || sub < -1 {
			t.Fatalf("parseRAPLZone(%q) = %v, %d, %d, which writes back as %q", base, mmio, pkg, sub, back)
		}
		z := raplZone{dir: "/sys/class/powercap/" + base, mmio: mmio, pkg: pkg, sub: sub, name: cleanName([]byte(name), maxChipNameLen)}
		got := raplMeterName(z, z.name)
		if sub >= 0 && z.name != "dram" && got != "" {
			t.Fatalf("subzone %q named %q counts as %q", base, z.name, got)
		}
		if sub < 0 && z.name != "psys" && got == "" {
			t.Fatalf("top-level zone %q named %q does not count", base, z.name)
		}
	})
}

// FuzzEnergyDelta: the delta of an energy counter is its advance without
// wrap, the way around the range with one, and a reset otherwise; it never
// exceeds the range when it wraps.
func FuzzEnergyDelta(f *testing.F) {
	f.Add(uint64(1_000_000), uint64(101_000_000), uint64(262_143_328_850))
	f.Add(uint64(262_100_000_000), uint64(56_671_150), uint64(262_143_328_850))
	f.Add(uint64(5_000_000), uint64(1_000_000), uint64(0))
	f.Add(uint64(300), uint64(100), uint64(200))
	f.Add(uint64(math.MaxUint64), uint64(0), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, prev, cur, maxRange uint64) {
		d, ok := energyDelta(prev, cur, maxRange)
		switch {
		case cur >= prev:
			if !ok || d != cur-prev {
				t.Fatalf("energyDelta(%d, %d, %d) = %d, %v; want %d", prev, cur, maxRange, d, ok, cur-prev)
			}
		case maxRange == 0 || prev > maxRange:
			if ok {
				t.Fatalf("energyDelta(%d, %d, %d) = %d, want a reset", prev, cur, maxRange, d)
			}
		default:
			// prev + d wraps at maxRange to cur.
			if !ok || d > maxRange || d != cur+(maxRange-prev) || prev+d-maxRange != cur {
				t.Fatalf("energyDelta(%d, %d, %d) = %d, %v", prev, cur, maxRange, d, ok)
			}
		}
	})
}

// FuzzMeterCounter feeds a RAPL-like counter three readings at fuzzed
// times: the power is never negative or NaN, and the energy it adds up
// is the sum of the deltas it reported.
func FuzzMeterCounter(f *testing.F) {
	f.Add(uint64(0), uint64(100_000_000), uint64(50_000_000), uint64(262_143_328_850), int64(5_000), int64(10_000))
	f.Add(uint64(262_100_000_000), uint64(56_671_150), uint64(56_671_150), uint64(262_143_328_850), int64(10_000), int64(0))
	f.Add(uint64(5), uint64(1), uint64(2), uint64(0), int64(-1), int64(1))
	f.Fuzz(func(t *testing.T, v0, v1, v2, maxRange uint64, dt1ms, dt2ms int64) {
		m := &meter{name: "package-0", counter: true, maxRange: maxRange}
		t0 := time.Unix(1_700_000_000, 0)
		t1 := t0.Add(time.Duration(dt1ms) * time.Millisecond)
		t2 := t1.Add(time.Duration(dt2ms) * time.Millisecond)
		if _, _, ready := m.update(v0, t0, 1); ready {
			t.Fatal("first reading is ready")
		}
		var sum float64
		for i, r := range []struct {
			v         uint64
			now, last time.Time
		}{{v1, t1, t0}, {v2, t2, t1}} {
			w, j, ready := m.update(r.v, r.now, uint64(i)+2)
			if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 || j < 0 {
				t.Fatalf("update(%d) = %v W, %v J", r.v, w, j)
			}
			if ready && !r.now.After(r.last) {
				t.Fatalf("ready over a non-positive interval %v", r.now.Sub(r.last))
			}
			sum += j
		}
		if math.Abs(m.energyJ-sum) > 1e-6*math.Max(1, sum) {
			t.Fatalf("energy %v, want %v", m.energyJ, sum)
		}
	})
}
