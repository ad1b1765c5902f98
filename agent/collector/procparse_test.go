// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCPUList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "0-3,8,10-11\n", want: []int{0, 1, 2, 3, 8, 10, 11}},
		{in: "5", want: []int{5}},
		{in: "", want: nil},
		{in: "3-1", wantErr: true},
		{in: "0-4000000000", wantErr: true}, // a corrupt range must not allocate billions
		{in: "a-b", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+2,0003-0004", want: []int{2, 3, 4}},
		{in: "1,,2", wantErr: true},
		{in: "00000000000000000000007", want: []int{7}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseCPUList([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseCPUList(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if n, cerr := countCPUList([]byte(tc.in)); (cerr != nil) != tc.wantErr || n != len(got) {
				t.Errorf("countCPUList(%q) = %d, %v; want %d and an error as parseCPUList's", tc.in, n, cerr, len(got))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseCPUList(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
	if got := formatCPUList([]int{0, 1, 2, 3, 8, 10, 11}); got != "0-3,8,10-11" {
		t.Errorf("formatCPUList = %q, want 0-3,8,10-11", got)
	}
}

func TestParseFixed(t *testing.T) {
	for _, tc := range []struct {
		in    string
		scale int64
		want  int64
		ok    bool
	}{
		{"1.23", 100, 123, true},
		{"0.5", 1000, 500, true},
		{"12", 100, 1200, true},
		{"1.239", 100, 123, true}, // extra digits round down
		{"-1.0", 100, 0, false},
		{"1.2x", 100, 0, false},
		{".5", 100, 0, false},
	} {
		got, err := parseFixed([]byte(tc.in), tc.scale)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseFixed(%q, %d) = %d, %v; want %d, ok=%v", tc.in, tc.scale, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte(stat("cpu0 100 0 0 900 0 0 0 0 0 0", "cpu1 1 2 3 4 5 6 7 8 9 10")))
	f.Add([]byte("cpu0 1 2 3 4 5 6 7\ncpu 1\n"))
	f.Add([]byte("cpu99999999999999999999 1 2 3 4 5 6 7 8\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cpus, err := parseProcStat(data, nil)
		if err != nil {
			return
		}
		for _, c := range cpus {
			if c.id < 0 {
				t.Fatalf("negative cpu id %d", c.id)
			}
		}
	})
}

func FuzzParseLoadAvg(f *testing.F) {
	f.Add([]byte("1.25 0.50 0.05 1/100 12345\n"))
	f.Add([]byte("0 0 0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := parseLoadAvg(data)
		if err == nil && (l.load1 < 0 || l.load5 < 0 || l.load15 < 0) {
			t.Fatalf("negative load %+v from %q", l, data)
		}
	})
}

func FuzzParsePressure(f *testing.F) {
	f.Add([]byte("some avg10=1.23 avg60=0.50 avg300=0.10 total=456789\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
	f.Add([]byte("some avg10=100.00 avg60=0 avg300=0 total=0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parsePressure(data)
		if err != nil {
			return
		}
		if p.someAvg10 < 0 || p.someAvg10 > 10000 || p.fullAvg10 < 0 || p.fullAvg10 > 10000 || p.someTotalUS < 0 {
			t.Fatalf("out of range %+v from %q", p, data)
		}
	})
}

func FuzzParseMeminfo(f *testing.F) {
	f.Add([]byte("MemTotal:       65921280 kB\nMemFree:        59854264 kB\nMemAvailable:   63844924 kB\n"))
	f.Add([]byte("Node 0 MemTotal:       32980312 kB\nNode 0 MemFree:        29193784 kB\n"))
	f.Add([]byte("MemTotal: 9223372036854775807 kB\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseMeminfo(data)
		if err == nil && (m.total < -1 || m.free < -1 || m.available < -1) {
			t.Fatalf("negative value %+v from %q", m, data)
		}
	})
}

func FuzzParseCPUList(f *testing.F) {
	f.Add([]byte("0-3,8,10-11"))
	f.Add([]byte("0"))
	f.Add([]byte("1-0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ids, err := parseCPUList(data)
		if n, cerr := countCPUList(data); (cerr != nil) != (err != nil) || n != len(ids) {
			t.Fatalf("countCPUList(%q) = %d, %v; parseCPUList: %d ids, %v", data, n, cerr, len(ids), err)
		}
		if err != nil {
			return
		}
		if len(ids) > maxCPUListSize {
			t.Fatalf("%d ids, over the bound %d", len(ids), maxCPUListSize)
		}
		// What the kernel writes (sorted, unique) survives a round trip.
		if slices.IsSorted(ids) && len(slices.Compact(slices.Clone(ids))) == len(ids) {
			back, err := parseCPUList([]byte(formatCPUList(ids)))
			if err != nil || !slices.Equal(back, ids) {
				t.Fatalf("round trip of %v: %v, %v", ids, back, err)
			}
		}
	})
}

// parseProcStat runs every sample over one line per CPU: with room in dst
// it allocates nothing.
func TestParseProcStatAllocatesNothing(t *testing.T) {
	var b strings.Builder
	b.WriteString("cpu  6400 0 0 57600 0 0 0 0 0 0\n")
	for i := range 64 {
		fmt.Fprintf(&b, "cpu%d 100 0 0 900 0 0 0 0 0 0\n", i)
	}
	b.WriteString("intr 1 2 3\nctxt 4\n")
	data := []byte(b.String())
	dst := make([]perCPUTimes, 0, 64)
	got := testing.AllocsPerRun(50, func() {
		var err error
		if dst, err = parseProcStat(data, dst[:0]); err != nil || len(dst) != 64 {
			t.Fatalf("parseProcStat: %d CPUs, %v; want 64, nil", len(dst), err)
		}
	})
	if got != 0 {
		t.Errorf("allocations per parse of 64 CPUs: %v, want 0", got)
	}
}
