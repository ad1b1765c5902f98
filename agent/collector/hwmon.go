// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/telesched/telesched/agent/hostfs"
)

// hwmonClassDir is where the kernel lists hwmon devices.
const hwmonClassDir = "/sys/class/hwmon"

// Limits on the parts of a sensor name, so that "<chip>.<k>/<label>" stays
// within the 64 bytes the API allows for a sensor name.
const (
	maxChipNameLen = 20 // THERMAL_NAME_LENGTH; hwmon names are shorter still
	maxLabelLen    = 32
)

// hwmonChip is one hwmon device, found at discovery.
type hwmonChip struct {
	// index is N of /sys/class/hwmon/hwmonN.
	index int
	// dir is the host directory that holds the chip's attributes:
	// hwmonN, or hwmonN/device for older drivers that register without a
	// name and keep their attributes on the parent device.
	dir string
	// name is the driver's name attribute ("coretemp"), or "hwmonN" when
	// the chip has none.
	name string
	// id is the chip's part of a sensor name: name when no other chip has
	// the same name, otherwise "<name>.<k>" (see disambiguateChips).
	id string
	// devicePath is where /sys/class/hwmon/hwmonN points (the device's
	// path under /sys/devices), "" when it is not a symbolic link.
	devicePath string
	// thermalZone is true for the hwmon device the thermal core registers
	// for each thermal zone type (thermal_hwmon): its parent is a
	// thermal_zoneN and it repeats that zone's temperature.
	thermalZone bool
	// files is the set of attribute file names in dir.
	files map[string]bool
}

// path returns the host path of one of the chip's attributes.
func (c *hwmonChip) path(attr string) string { return c.dir + "/" + attr }

// has reports whether the chip has an attribute.
func (c *hwmonChip) has(attr string) bool { return c.files[attr] }

// channels returns the channel numbers N of the chip's "<kind>N_<suffix>"
// attributes ("temp", "input" lists temp1_input, temp2_input, ...), sorted.
func (c *hwmonChip) channels(kind, suffix string) []int {
	var ns []int
	for f := range c.files {
		if n, ok := parseChannel(f, kind, suffix); ok {
			ns = append(ns, n)
		}
	}
	sort.Ints(ns)
	return ns
}

// label returns the cleaned "<kind>N_label" of a channel, or "<kind>N" when
// the chip has no label for it or the label is empty.
func (c *hwmonChip) label(r hostfs.Root, kind string, n int) string {
	attr := kind + strconv.Itoa(n) + "_label"
	if c.has(attr) {
		if b, err := r.ReadFile(c.path(attr)); err == nil {
			if l := cleanName(b, maxLabelLen); l != "" {
				return l
			}
		}
	}
	return kind + strconv.Itoa(n)
}

// discoverHwmon lists the node's hwmon chips, each with a unique id, in
// the natural order of their ids. It reads names and directory listings;
// it reads no values.
func discoverHwmon(r hostfs.Root) []*hwmonChip {
	dirs, err := r.Glob(hwmonClassDir + "/hwmon*")
	if err != nil {
		return nil
	}
	var chips []*hwmonChip
	for _, d := range dirs {
		idx, ok := parseIndex(path.Base(d), "hwmon")
		if !ok {
			continue
		}
		c := &hwmonChip{index: idx, dir: d}
		// The hwmon core writes "name" into hwmonN for every chip that
		// registered with one. Chips without it are from drivers that
		// predate that API and keep name and attributes on the parent
		// device (the ACPI power meter did until recently).
		if !r.Exists(d+"/name") && r.Exists(d+"/device/name") {
			c.dir = d + "/device"
		}
		c.name = "hwmon" + strconv.Itoa(idx)
		if b, err := r.ReadFile(c.dir + "/name"); err == nil {
			if n := cleanName(b, maxChipNameLen); n != "" {
				c.name = n
			}
		}
		if target, err := os.Readlink(r.Path(d)); err == nil {
			c.devicePath = target
		}
		if target, err := os.Readlink(r.Path(d + "/device")); err == nil {
			_, c.thermalZone = parseIndex(path.Base(target), "thermal_zone")
		}
		entries, _ := r.Glob(c.dir + "/*")
		c.files = make(map[string]bool, len(entries))
		for _, e := range entries {
			c.files[path.Base(e)] = true
		}
		chips = append(chips, c)
	}
	sort.Slice(chips, func(i, j int) bool { return chips[i].index < chips[j].index })
	disambiguateChips(chips)
	sort.SliceStable(chips, func(i, j int) bool { return naturalLess(chips[i].id, chips[j].id) })
	return chips
}

// disambiguateChips sets each chip's id. A chip whose name no other chip
// has keeps its name ("nvme"). Chips sharing a name (the coretemp chip of
// each CPU package, one nvme chip per drive) are numbered "<name>.0",
// "<name>.1", ... in the natural order of their device paths under
// /sys/devices, which follows the hardware (coretemp.0 before coretemp.1,
// PCI address order) and survives reboots, unlike hwmonN, which follows
// driver probe order. Chips without a device path sort after those with
// one, by hwmonN.
func disambiguateChips(chips []*hwmonChip) {
	byName := make(map[string][]*hwmonChip)
	for _, c := range chips {
		byName[c.name] = append(byName[c.name], c)
	}
	for name, group := range byName {
		if len(group) == 1 {
			group[0].id = name
			continue
		}
		sorted := append([]*hwmonChip(nil), group...)
		sort.SliceStable(sorted, func(i, j int) bool {
			a, b := sorted[i], sorted[j]
			switch {
			case a.devicePath != "" && b.devicePath == "":
				return true
			case a.devicePath == "" && b.devicePath != "":
				return false
			case a.devicePath != b.devicePath:
				return naturalLess(a.devicePath, b.devicePath)
			}
			return a.index < b.index
		})
		for k, c := range sorted {
			c.id = name + "." + strconv.Itoa(k)
		}
	}
}

// parseIndex parses the number of a sysfs entry named "<prefix>N", such as
// "hwmon3" or "thermal_zone12". N is canonical decimal: no sign, no leading
// zeros.
func parseIndex(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	return parseCanonicalUint(rest)
}

// parseChannel parses the channel number of an hwmon attribute file named
// "<kind>N_<suffix>", e.g. parseChannel("temp12_input", "temp", "input")
// = 12.
func parseChannel(file, kind, suffix string) (int, bool) {
	rest, ok := strings.CutPrefix(file, kind)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, "_"+suffix)
	if !ok {
		return 0, false
	}
	return parseCanonicalUint(digits)
}

// parseCanonicalUint parses a non-negative decimal number written the way
// the kernel writes indices: digits only, no leading zeros, at most 9 of
// them.
func parseCanonicalUint(s string) (int, bool) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// parseFlag parses an hwmon boolean attribute (alarm, fault): "0" or "1",
// with surrounding white space. Any non-zero integer reads as set; these
// files are flags, not millidegrees.
func parseFlag(b []byte) (bool, error) {
	v, err := hostfs.ParseInt(b)
	if err != nil {
		return false, err
	}
	return v != 0, nil
}

// cleanName makes a chip name, zone type or label from a sysfs file fit to
// show: surrounding white space trimmed, runs of white space and control
// characters made one space, invalid UTF-8 replaced, and cut to at most max
// bytes on a rune boundary.
func cleanName(b []byte, max int) string {
	var sb strings.Builder
	space := false
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = true
			continue
		}
		if r == utf8.RuneError {
			r = '?'
		}
		sep := space && sb.Len() > 0
		space = false
		need := utf8.RuneLen(r)
		if sep {
			need++
		}
		if sb.Len()+need > max {
			// Cut before the separator too, so the name never
			// ends in a space.
			break
		}
		if sep {
			sb.WriteByte(' ')
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// naturalLess orders strings with runs of digits compared as numbers, so
// "nvme2" sorts before "nvme10".
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			da, ra := splitDigits(a)
			db, rb := splitDigits(b)
			ta, tb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if len(ta) != len(tb) {
				return len(ta) < len(tb)
			}
			if ta != tb {
				return ta < tb
			}
			if len(da) != len(db) {
				return len(da) < len(db)
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func splitDigits(s string) (digits, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}
