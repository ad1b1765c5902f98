// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// FuzzParseChannel: a channel number parsed from a file name writes back
// as the same name.
func FuzzParseChannel(f *testing.F) {
	for _, s := range []string{"temp1_input", "temp12_crit_alarm", "temp0_input", "temp01_input", "temp_input", "temp1_input_", "temp-1_input", "temp+1_input", "power3_average", "trip_point_2_type", "temp99999999999999999999_input"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, file string) {
		for _, kv := range [][2]string{{"temp", "input"}, {"temp", "crit_alarm"}, {"power", "average"}, {"trip_point_", "type"}} {
			n, ok := parseChannel(file, kv[0], kv[1])
			if !ok {
				continue
			}
			if n < 0 {
				t.Fatalf("parseChannel(%q) = %d", file, n)
			}
			if back := kv[0] + strconv.Itoa(n) + "_" + kv[1]; back != file {
				t.Fatalf("parseChannel(%q, %q, %q) = %d, which writes back as %q", file, kv[0], kv[1], n, back)
			}
		}
		if n, ok := parseIndex(file, "hwmon"); ok && "hwmon"+strconv.Itoa(n) != file {
			t.Fatalf("parseIndex(%q) = %d", file, n)
		}
	})
}

// FuzzParseFlag: a flag file is set exactly when it holds a non-zero
// integer.
func FuzzParseFlag(f *testing.F) {
	for _, s := range []string{"0\n", "1\n", " 1 ", "", "yes", "2", "-1", "0x1", "1\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseFlag(b)
		v, perr := hostfs.ParseInt(b)
		if (err == nil) != (perr == nil) {
			t.Fatalf("parseFlag(%q) err = %v, ParseInt err = %v", b, err, perr)
		}
		if err == nil && got != (v != 0) {
			t.Fatalf("parseFlag(%q) = %v for %d", b, got, v)
		}
		if err != nil && got {
			t.Fatalf("parseFlag(%q) = true with error %v", b, err)
		}
	})
}

// FuzzCleanName: a cleaned name is valid UTF-8 without control characters,
// trimmed, with single spaces, within the limit, and cleaning it again
// changes nothing.
func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"coretemp\n", "  Package id 0 ", "Core\t\t0", "\xff\xfeabc", "a\x00b", strings.Repeat("é", 40), "\u00a0x\u2028y"} {
		f.Add([]byte(s), 32)
	}
	// Found by fuzzing: the space before a rune that no longer fits was
	// kept.
	f.Add([]byte("00000000000000000000000000000 0"), 30)
	f.Fuzz(func(t *testing.T, b []byte, max int) {
		if max < 1 || max > 256 {
			max = 32
		}
		got := cleanName(b, max)
		if len(got) > max {
			t.Fatalf("cleanName(%q, %d) = %q, longer than %d", b, max, got, max)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("cleanName(%q) = %q, not UTF-8", b, got)
		}
		if got != strings.TrimSpace(got) || strings.Contains(got, "  ") {
			t.Fatalf("cleanName(%q) = %q, not trimmed", b, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) || (unicode.IsSpace(r) && r != ' ') {
				t.Fatalf("cleanName(%q) = %q, holds %U", b, got, r)
			}
		}
		if again := cleanName([]byte(got), max); again != got {
			t.Fatalf("cleanName not idempotent: %q -> %q -> %q", b, got, again)
		}
	})
}

// FuzzParseMilliCelsius: a temperature read is always within what the API
// accepts, and a limit is above 0 °C.
func FuzzParseMilliCelsius(f *testing.F) {
	for _, s := range []string{"45000\n", "-274000", "-273150", "1000000", "1000001", "0", "", "41.5", "+5", "9223372036854775808"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := parseMilliCelsius(b); err == nil && (v < minMilliCelsius || v > maxMilliCelsius) {
			t.Fatalf("parseMilliCelsius(%q) = %d, out of range", b, v)
		}
		if v, ok := parseLimit(b); ok && (v < minPlausibleLimit || v > maxMilliCelsius) {
			t.Fatalf("parseLimit(%q) = %d", b, v)
		}
	})
}

// FuzzZoneLimits: the critical limit is the lowest valid critical trip and
// the max limit the lowest valid hot trip, whatever the files hold.
func FuzzZoneLimits(f *testing.F) {
	f.Add([]byte("critical\n"), []byte("105000\n"), []byte("hot"), []byte("98000"), []byte("critical"), []byte("110000"))
	f.Add([]byte("passive"), []byte("95000"), []byte("active"), []byte("0"), []byte("critical"), []byte("-273150"))
	f.Add([]byte(" critical "), []byte("x"), []byte("hot\n"), []byte("2000000"), []byte(""), []byte(""))
	f.Fuzz(func(t *testing.T, typ1, temp1, typ2, temp2, typ3, temp3 []byte) {
		trips := []tripPoint{{typ1, temp1}, {typ2, temp2}, {typ3, temp3}}
		max, crit := zoneLimits(trips)
		lowest := func(kind string) *int64 {
			var out *int64
			for _, tp := range trips {
				if strings.TrimSpace(string(tp.typ)) != kind {
					continue
				}
				if v, ok := parseLimit(tp.temp); ok && (out == nil || v < *out) {
					out = &v
				}
			}
			return out
		}
		for _, c := range []struct {
			kind string
			got  *int64
		}{{"critical", crit}, {"hot", max}} {
			want := lowest(c.kind)
			if (want == nil) != (c.got == nil) || (want != nil && *want != *c.got) {
				t.Fatalf("%s limit of %q = %v, want %v", c.kind, trips, c.got, want)
			}
		}
	})
}

// FuzzNaturalLess: natural order is a strict total order on distinct
// strings, so chip numbering never depends on input order.
func FuzzNaturalLess(f *testing.F) {
	f.Add("nvme2", "nvme10")
	f.Add("coretemp.0", "coretemp.01")
	f.Add("a0b", "a00b")
	f.Add("", "0")
	f.Fuzz(func(t *testing.T, a, b string) {
		if naturalLess(a, a) {
			t.Fatalf("naturalLess(%q, %q) is true", a, a)
		}
		ab, ba := naturalLess(a, b), naturalLess(b, a)
		if ab && ba {
			t.Fatalf("%q and %q are each less than the other", a, b)
		}
		if a != b && !ab && !ba {
			t.Fatalf("%q and %q are distinct but unordered", a, b)
		}
	})
}

// FuzzThermalSensorFiles writes fuzzed contents into one hwmon channel and
// one thermal zone and checks the collector's promises: no panic, every
// temperature within range, a faulty sensor never reported, and no data
// without a sensor error.
func FuzzThermalSensorFiles(f *testing.F) {
	f.Add("45000", "Package id 0", "85000", "95000", "0", "1", "acpitz", "27800", "critical", "119000")
	f.Add("-274000", "", "0", "", "1", "", "", "", "", "")
	f.Add("x", "\xff", "65261850", "-1", "2", "0\n", "type with spaces", "41.5", "hot", "1e5")
	f.Fuzz(func(t *testing.T, input, label, max, crit, fault, alarm, zoneType, zoneTemp, tripType, tripTemp string) {
		dir := t.TempDir()
		write := func(p, content string) {
			full := filepath.Join(dir, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		h := "sys/class/hwmon/hwmon0/"
		write(h+"name", "lm75")
		write(h+"temp1_input", input)
		write(h+"temp1_label", label)
		write(h+"temp1_max", max)
		write(h+"temp1_crit", crit)
		write(h+"temp1_fault", fault)
		write(h+"temp1_alarm", alarm)
		z := "sys/class/thermal/thermal_zone0/"
		write(z+"type", zoneType)
		write(z+"temp", zoneTemp)
		write(z+"trip_point_0_type", tripType)
		write(z+"trip_point_0_temp", tripTemp)

		s := &Sample{Time: time.Unix(1_700_000_000, 0)}
		err := NewThermalCollector(hostfs.New(dir)).Collect(context.Background(), s)
		switch {
		case IsDegraded(err):
			// One sensor read, the other did not: the one that
			// did is in the sample, the other named.
			if s.Thermal == nil || len(s.Thermal.Sensors) == 0 {
				t.Fatalf("degraded (%v) without sensors", err)
			}
			if SourceStatus(telemetryv1alpha1.SourceThermal, err).Message == "" {
				t.Fatalf("degraded without a message: %v", err)
			}
		case err != nil:
			if s.Thermal != nil {
				t.Fatalf("error %v with Thermal %+v", err, s.Thermal)
			}
			return
		}
		faulty, _ := parseFlag([]byte(fault))
		for _, sn := range s.Thermal.Sensors {
			if sn.MilliCelsius < minMilliCelsius || sn.MilliCelsius > maxMilliCelsius {
				t.Fatalf("sensor %q at %d m°C", sn.Name, sn.MilliCelsius)
			}
			if sn.Source == tempSourceHwmon && faulty {
				t.Fatalf("faulty sensor reported: %+v", sn)
			}
			if len(sn.Name) > 64 || !utf8.ValidString(sn.Name) {
				t.Fatalf("sensor name %q", sn.Name)
			}
			for _, l := range []*int64{sn.MaxMilliCelsius, sn.CritMilliCelsius} {
				if l != nil && (*l <= 0 || *l > maxMilliCelsius) {
					t.Fatalf("sensor %q limit %d", sn.Name, *l)
				}
			}
		}
	})
}
