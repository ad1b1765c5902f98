// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Parsers of procfs and sysfs files. Each takes the file's bytes, so the
// fuzz tests drive them directly.

// cpuTimes is one cpu line of /proc/stat, in USER_HZ ticks.
type cpuTimes struct {
	user, nice, system, idle, iowait, irq, softirq, steal uint64
}

// total is every tick the CPU spent; guest time is already inside user and
// nice, so it is not added again.
func (t cpuTimes) total() uint64 {
	return t.user + t.nice + t.system + t.idle + t.iowait + t.irq + t.softirq + t.steal
}

// idleTicks is time the CPU had nothing to run, waiting on I/O included.
func (t cpuTimes) idleTicks() uint64 { return t.idle + t.iowait }

// anyBelow reports whether any counter of t is below the one in prev: the
// kernel reset it (CPU hotplug) or a counter went backwards (iowait can).
func (t cpuTimes) anyBelow(prev cpuTimes) bool {
	return t.user < prev.user || t.nice < prev.nice || t.system < prev.system || t.idle < prev.idle ||
		t.iowait < prev.iowait || t.irq < prev.irq || t.softirq < prev.softirq || t.steal < prev.steal
}

// perCPUTimes is a cpuN line of /proc/stat.
type perCPUTimes struct {
	id int
	cpuTimes
}

var errMalformed = errors.New("malformed")

// parseProcStat returns the per-CPU lines of /proc/stat (cpu0, cpu1, ...)
// appended to dst. Lines for offline CPUs are absent from the file. The
// aggregate "cpu" line is not returned: utilization is summed from the
// per-CPU lines so that a CPU going offline cannot skew it.
func parseProcStat(data []byte, dst []perCPUTimes) ([]perCPUTimes, error) {
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		if len(line) < 4 || !bytes.HasPrefix(line, []byte("cpu")) || line[3] < '0' || line[3] > '9' {
			continue
		}
		var buf [11][]byte // the name and at most ten columns
		fields := fieldsInto(line, buf[:0])
		id, ok := parseDecimal(fields[0][3:])
		if !ok || id > math.MaxInt32 {
			return dst, fmt.Errorf("/proc/stat: bad cpu id in %q: %w", fields[0], errMalformed)
		}
		// Kernels since 2.6.33 have 10 columns; steal arrived in 2.6.11.
		if len(fields) < 9 {
			return dst, fmt.Errorf("/proc/stat: %d columns for %s, want at least 8: %w", len(fields)-1, fields[0], errMalformed)
		}
		var v [8]uint64
		for i := range v {
			if v[i], ok = parseDecimal(fields[i+1]); !ok {
				return dst, fmt.Errorf("/proc/stat: %s column %d: %w", fields[0], i+1, errMalformed)
			}
		}
		dst = append(dst, perCPUTimes{id: int(id), cpuTimes: cpuTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}})
	}
	return dst, nil
}

// fieldsInto splits line at spaces and tabs into dst, up to its capacity;
// it does not allocate while dst has room.
func fieldsInto(line []byte, dst [][]byte) [][]byte {
	for len(line) > 0 && len(dst) < cap(dst) {
		i := 0
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		line = line[i:]
		j := 0
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		if j > 0 {
			dst = append(dst, line[:j])
		}
		line = line[j:]
	}
	return dst
}

// parseDecimal parses an unsigned decimal that fits in 64 bits.
func parseDecimal(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// loadAvg is /proc/loadavg in thousandths.
type loadAvg struct {
	load1, load5, load15 int64
}

// parseLoadAvg parses "0.52 0.58 0.59 1/467 12345".
func parseLoadAvg(data []byte) (loadAvg, error) {
	fields := bytes.Fields(data)
	if len(fields) < 3 {
		return loadAvg{}, fmt.Errorf("/proc/loadavg: %d fields: %w", len(fields), errMalformed)
	}
	var out [3]int64
	for i := range out {
		v, err := parseFixed(fields[i], 1000)
		if err != nil || v < 0 {
			return loadAvg{}, fmt.Errorf("/proc/loadavg: field %d %q: %w", i+1, fields[i], errMalformed)
		}
		out[i] = v
	}
	return loadAvg{out[0], out[1], out[2]}, nil
}

// pressure is one /proc/pressure/* file.
type pressure struct {
	someAvg10   int64 // basis points (1.23% is 123)
	someTotalUS int64
	fullAvg10   int64
	hasFull     bool
}

// parsePressure parses
//
//	some avg10=1.23 avg60=0.50 avg300=0.10 total=123456
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// The "full" line is absent for cpu on kernels before 5.13.
func parsePressure(data []byte) (pressure, error) {
	var p pressure
	var haveSome bool
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		kind := string(fields[0])
		if kind != "some" && kind != "full" {
			return pressure{}, fmt.Errorf("pressure: line kind %q: %w", kind, errMalformed)
		}
		var avg10, total int64 = -1, -1
		for _, f := range fields[1:] {
			k, v, ok := bytes.Cut(f, []byte{'='})
			if !ok {
				return pressure{}, fmt.Errorf("pressure: field %q: %w", f, errMalformed)
			}
			var err error
			switch string(k) {
			case "avg10":
				avg10, err = parseFixed(v, 100)
			case "total":
				total, err = strconv.ParseInt(string(v), 10, 64)
			}
			if err != nil {
				return pressure{}, fmt.Errorf("pressure: %s: %w", f, errMalformed)
			}
		}
		if avg10 < 0 || avg10 > 10000 || total < 0 {
			return pressure{}, fmt.Errorf("pressure: %s line without valid avg10 and total: %w", kind, errMalformed)
		}
		if kind == "some" {
			p.someAvg10, p.someTotalUS, haveSome = avg10, total, true
		} else {
			p.fullAvg10, p.hasFull = avg10, true
		}
	}
	if !haveSome {
		return pressure{}, fmt.Errorf("pressure: no some line: %w", errMalformed)
	}
	return p, nil
}

// parseFixed parses a non-negative decimal such as "12.34" into an integer
// scaled by scale (a power of ten), rounding extra digits down.
func parseFixed(b []byte, scale int64) (int64, error) {
	intPart, frac, _ := bytes.Cut(b, []byte{'.'})
	if len(intPart) == 0 || len(intPart) > 15 {
		return 0, errMalformed
	}
	whole, err := strconv.ParseInt(string(intPart), 10, 64)
	if err != nil || whole < 0 {
		return 0, errMalformed
	}
	v := whole * scale
	for unit := scale / 10; unit > 0 && len(frac) > 0; unit /= 10 {
		d := frac[0]
		if d < '0' || d > '9' {
			return 0, errMalformed
		}
		v += int64(d-'0') * unit
		frac = frac[1:]
	}
	for _, d := range frac {
		if d < '0' || d > '9' {
			return 0, errMalformed
		}
	}
	return v, nil
}

// meminfo holds the /proc/meminfo (or nodeN/meminfo) fields the agent uses,
// in bytes; -1 where the file lacks the field.
type meminfo struct {
	total, free, available int64
}

// parseMeminfo parses /proc/meminfo ("MemTotal:  65921280 kB") and the
// per-node files ("Node 0 MemTotal:  32956400 kB").
func parseMeminfo(data []byte) (meminfo, error) {
	m := meminfo{total: -1, free: -1, available: -1}
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		fields := bytes.Fields(line)
		if len(fields) >= 4 && string(fields[0]) == "Node" {
			fields = fields[2:] // drop "Node N"
		}
		if len(fields) < 2 {
			continue
		}
		var dst *int64
		switch string(fields[0]) {
		case "MemTotal:":
			dst = &m.total
		case "MemFree:":
			dst = &m.free
		case "MemAvailable:":
			dst = &m.available
		default:
			continue
		}
		v, err := strconv.ParseInt(string(fields[1]), 10, 64)
		if err != nil || v < 0 {
			return meminfo{}, fmt.Errorf("meminfo: %s %q: %w", fields[0], fields[1], errMalformed)
		}
		mult := int64(1)
		if len(fields) >= 3 {
			if string(fields[2]) != "kB" {
				return meminfo{}, fmt.Errorf("meminfo: %s unit %q: %w", fields[0], fields[2], errMalformed)
			}
			mult = 1024
		}
		if v > math.MaxInt64/mult {
			return meminfo{}, fmt.Errorf("meminfo: %s %d kB overflows: %w", fields[0], v, errMalformed)
		}
		*dst = v * mult
	}
	return m, nil
}

// maxCPUListSize bounds what parseCPUList expands, against a corrupt range
// such as "0-4000000000".
const maxCPUListSize = 1 << 16

// parseCPUList parses the Linux cpulist format ("0-3,8,10-11") into CPU ids.
func parseCPUList(data []byte) ([]int, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, nil
	}
	var ids []int
	for _, part := range bytes.Split(data, []byte{','}) {
		lo, hi, isRange := bytes.Cut(part, []byte{'-'})
		first, err := strconv.Atoi(string(lo))
		if err != nil || first < 0 {
			return nil, fmt.Errorf("cpulist %q: %w", data, errMalformed)
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(string(hi)); err != nil || last < first {
				return nil, fmt.Errorf("cpulist %q: %w", data, errMalformed)
			}
		}
		if last-first >= maxCPUListSize || len(ids)+last-first >= maxCPUListSize {
			return nil, fmt.Errorf("cpulist %q: more than %d CPUs: %w", data, maxCPUListSize, errMalformed)
		}
		for id := first; id <= last; id++ {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// countCPUList counts the CPUs of a cpulist, as len(parseCPUList(data))
// does and failing as it fails, without listing them.
func countCPUList(data []byte) (int, error) {
	data = bytes.TrimSpace(data)
	n := 0
	for rest, more := data, len(data) > 0; more; {
		var part []byte
		part, rest, more = bytes.Cut(rest, []byte{','})
		lo, hi, isRange := bytes.Cut(part, []byte{'-'})
		first, ok := parseCPUID(lo)
		if !ok {
			return 0, fmt.Errorf("cpulist %q: %w", data, errMalformed)
		}
		last := first
		if isRange {
			if last, ok = parseCPUID(hi); !ok || last < first {
				return 0, fmt.Errorf("cpulist %q: %w", data, errMalformed)
			}
		}
		if last-first >= maxCPUListSize || n+last-first >= maxCPUListSize {
			return 0, fmt.Errorf("cpulist %q: more than %d CPUs: %w", data, maxCPUListSize, errMalformed)
		}
		n += last - first + 1
	}
	return n, nil
}

// parseCPUID parses a CPU id of a cpulist: decimal digits, as
// strconv.Atoi takes them (an optional sign; a negative id fails).
func parseCPUID(b []byte) (int, bool) {
	if len(b) > 18 { // past what the loop below takes without overflow
		v, err := strconv.Atoi(string(b))
		return v, err == nil && v >= 0
	}
	if len(b) > 0 && b[0] == '+' {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// formatCPUList renders sorted CPU ids in cpulist format.
func formatCPUList(ids []int) string {
	var b []byte
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(ids[i]), 10)
		if j > i {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(ids[j]), 10)
		}
		i = j + 1
	}
	return string(b)
}
