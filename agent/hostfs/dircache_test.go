// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func kept(r Root) int {
	r.dirs.mu.Lock()
	defer r.dirs.mu.Unlock()
	return len(r.dirs.fds)
}

func readString(t *testing.T, r Root, p string) string {
	t.Helper()
	var buf [64]byte
	b, err := r.ReadInto(p, buf[:])
	if err != nil {
		t.Fatalf("ReadInto(%s): %v", p, err)
	}
	return string(b)
}

// A root that keeps its directories open reads what one that opens every
// path reads, as the files are at each read: replaced by a rename (as the
// sandbox's host trees advance), absent, or in a directory removed and
// made again (a hwmon device unbound and bound), and it keeps a directory
// once, however many of its files it reads.
func TestDirCacheReadsFilesAsTheyAreNow(t *testing.T) {
	defer SetDirFDLimit(DefaultDirFDLimit)
	SetDirFDLimit(DefaultDirFDLimit)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"/sys/class/hwmon/hwmon0/temp1_input": "41000\n",
		"/sys/class/hwmon/hwmon0/temp2_input": "42000\n",
		"/proc/loadavg":                       "0.5 0.4 0.3 1/100 42\n",
	})
	r := New(dir).WithDirCache()
	defer r.Close()
	if got := readString(t, r, "/sys/class/hwmon/hwmon0/temp1_input"); got != "41000\n" {
		t.Errorf("temp1_input = %q", got)
	}
	if got := readString(t, r, "/sys/class/hwmon/hwmon0/temp2_input"); got != "42000\n" {
		t.Errorf("temp2_input = %q", got)
	}
	if got := readString(t, r, "/proc/loadavg"); got != "0.5 0.4 0.3 1/100 42\n" {
		t.Errorf("loadavg = %q", got)
	}
	if n := kept(r); n != 2 {
		t.Errorf("kept %d directories, want 2 (hwmon0, /proc)", n)
	}

	// Replaced by a rename: read as it is now.
	hwmon := filepath.Join(dir, "sys/class/hwmon/hwmon0")
	if err := os.WriteFile(filepath.Join(hwmon, "tmp"), []byte("55000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(hwmon, "tmp"), filepath.Join(hwmon, "temp1_input")); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, r, "/sys/class/hwmon/hwmon0/temp1_input"); got != "55000\n" {
		t.Errorf("temp1_input after a rename over it = %q, want 55000", got)
	}

	// Absent: the error a full path gives, and the directory stays kept.
	var buf [64]byte
	if _, err := r.ReadInto("/sys/class/hwmon/hwmon0/temp9_input", buf[:]); !IsAbsent(err) {
		t.Errorf("ReadInto of an absent file: %v, want it absent", err)
	} else if want := filepath.Join(hwmon, "temp9_input"); !strings.Contains(err.Error(), want) {
		t.Errorf("ReadInto of an absent file: %v, want the error to name %s", err, want)
	}
	if n := kept(r); n != 2 {
		t.Errorf("kept %d directories after an absent file, want 2", n)
	}

	// The directory removed and made again: the new one's files.
	if err := os.RemoveAll(hwmon); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadInto("/sys/class/hwmon/hwmon0/temp1_input", buf[:]); !IsAbsent(err) {
		t.Errorf("ReadInto in a removed directory: %v, want it absent", err)
	}
	writeTree(t, dir, map[string]string{"/sys/class/hwmon/hwmon0/temp1_input": "60000\n"})
	if got := readString(t, r, "/sys/class/hwmon/hwmon0/temp1_input"); got != "60000\n" {
		t.Errorf("temp1_input in the directory made again = %q, want 60000", got)
	}
	if got := readString(t, r, "/sys/class/hwmon/hwmon0/temp1_input"); got != "60000\n" {
		t.Errorf("temp1_input read again = %q, want 60000", got)
	}

	// Paths that do not name a file in a directory by its components
	// are read by their full path.
	for _, p := range []string{"/sys/class/hwmon/../hwmon/hwmon0/temp1_input", "/sys//class/hwmon/hwmon0/temp1_input", "sys/class/hwmon/hwmon0/temp1_input"} {
		if got := readString(t, r, p); got != "60000\n" {
			t.Errorf("ReadInto(%s) = %q, want 60000", p, got)
		}
	}
	r.Close()
	if n := kept(r); n != 0 {
		t.Errorf("kept %d directories after Close, want 0", n)
	}
	if got := readString(t, r, "/proc/loadavg"); got != "0.5 0.4 0.3 1/100 42\n" {
		t.Errorf("loadavg after Close = %q", got)
	}
}

// The process keeps at most SetDirFDLimit directories, over all its
// roots; past it, files are read by their full paths.
func TestDirCacheLimit(t *testing.T) {
	defer SetDirFDLimit(DefaultDirFDLimit)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"/a/x": "1\n", "/b/x": "2\n", "/c/x": "3\n"})
	before := dirFDsOpen.Load()
	if got := SetDirFDLimit(int(before) + 2); got != before+2 {
		t.Fatalf("SetDirFDLimit = %d, want %d", got, before+2)
	}
	r1, r2 := New(dir).WithDirCache(), New(dir).WithDirCache()
	defer r1.Close()
	defer r2.Close()
	for _, r := range []Root{r1, r2} {
		for i, p := range []string{"/a/x", "/b/x", "/c/x"} {
			if got, want := readString(t, r, p), string(rune('1'+i))+"\n"; got != want {
				t.Errorf("%s = %q, want %q", p, got, want)
			}
		}
	}
	if k1, k2 := kept(r1), kept(r2); k1 != 2 || k2 != 0 {
		t.Errorf("kept %d and %d directories, want 2 and 0 (the limit reached by the first root)", k1, k2)
	}
	if got := dirFDsOpen.Load() - before; got != 2 {
		t.Errorf("%d directories kept in the process, want 2", got)
	}
	if got := SetDirFDLimit(1 << 40); got > 1<<40 {
		t.Errorf("SetDirFDLimit(1<<40) = %d", got)
	}
}

// ReadInt through a kept directory allocates at most the file name's C
// string: not the root-prefixed path.
func TestDirCacheReadIntAllocations(t *testing.T) {
	defer SetDirFDLimit(DefaultDirFDLimit)
	SetDirFDLimit(DefaultDirFDLimit)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"/sys/class/powercap/intel-rapl:0/energy_uj": "123456\n"})
	r := New(dir).WithDirCache()
	defer r.Close()
	got := testing.AllocsPerRun(100, func() {
		if v, err := r.ReadInt("/sys/class/powercap/intel-rapl:0/energy_uj"); err != nil || v != 123456 {
			t.Fatalf("ReadInt = %d, %v; want 123456, nil", v, err)
		}
	})
	if got > 1 {
		t.Errorf("allocations per ReadInt: %v, want at most 1 (the name's C string)", got)
	}
}
