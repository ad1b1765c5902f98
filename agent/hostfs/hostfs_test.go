// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadAndFaults(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sys/class/powercap/intel-rapl:0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sys/class/powercap/intel-rapl:0/energy_uj"), []byte("123456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := New(dir)
	if v, err := r.ReadInt("/sys/class/powercap/intel-rapl:0/energy_uj"); err != nil || v != 123456 {
		t.Fatalf("ReadInt = %d, %v; want 123456, nil", v, err)
	}
	if _, err := r.ReadFile("/sys/class/powercap/intel-rapl:1/energy_uj"); !IsAbsent(err) {
		t.Errorf("missing file: err = %v, want absent", err)
	}
	faulty := r.WithFaults(map[string]error{"/sys/class/powercap/intel-rapl:0/energy_uj": syscall.EACCES})
	if _, err := faulty.ReadInt("/sys/class/powercap/intel-rapl:0/energy_uj"); !IsPermission(err) {
		t.Errorf("faulted file: err = %v, want permission denied", err)
	}
	if _, err := r.ReadInt("/sys/class/powercap/intel-rapl:0/energy_uj"); err != nil {
		t.Errorf("WithFaults changed the original root: %v", err)
	}
	got, err := r.Glob("/sys/class/powercap/intel-rapl:*")
	if err != nil || len(got) != 1 || got[0] != "/sys/class/powercap/intel-rapl:0" {
		t.Errorf("Glob = %v, %v; want [/sys/class/powercap/intel-rapl:0]", got, err)
	}
}

// TestFaultSet checks that faults set and cleared while a root reads take
// effect on the next read, as a sensor that dies and recovers.
func TestFaultSet(t *testing.T) {
	dir := t.TempDir()
	const input = "/sys/class/hwmon/hwmon0/temp1_input"
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(input)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, input), []byte("45000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var faults Faults
	r := New(dir).WithFaultSet(&faults)
	for _, step := range []struct {
		set     error
		wantErr error
	}{
		{nil, nil},
		{syscall.EIO, syscall.EIO},
		{syscall.ENODATA, syscall.ENODATA},
		{nil, nil},
	} {
		faults.Set(input, step.set)
		_, err := r.ReadInt(input)
		if !errors.Is(err, step.wantErr) || (step.wantErr == nil) != (err == nil) {
			t.Errorf("with %v set: err = %v, want %v", step.set, err, step.wantErr)
		}
	}
}

// TestReadHook: the hook sees each host path before its file is read, so
// what it writes there is what the read returns.
func TestReadHook(t *testing.T) {
	dir := t.TempDir()
	path := "/proc/stat"
	if err := os.MkdirAll(filepath.Join(dir, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	var seen []string
	r := New(dir).WithReadHook(func(hostPath string) {
		seen = append(seen, hostPath)
		if err := os.WriteFile(filepath.Join(dir, hostPath), []byte("7\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if v, err := r.ReadUint(path); err != nil || v != 7 {
		t.Errorf("ReadUint = %d, %v; want what the hook wrote, 7", v, err)
	}
	if len(seen) != 1 || seen[0] != path {
		t.Errorf("hook saw %v, want [%s]", seen, path)
	}
	if _, err := New(dir).ReadUint(path); err != nil || len(seen) != 1 {
		t.Errorf("a root without the hook called it (%v, %v)", seen, err)
	}
}

// ReadInto reads what ReadFile reads, into the caller's buffer while the
// file fits, whole when it does not, and fails as ReadFile fails.
func TestReadIntoMatchesReadFile(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"/sys/a":      "42\n",
		"/proc/stat":  strings.Repeat("cpu0 1 2 3 4 5 6 7 8 9 10\n", 20), // 520 bytes
		"/sys/empty":  "",
		"/sys/exact8": "1234567\n",
	})
	r := New(dir).WithFaults(map[string]error{"/sys/faulty": syscall.EIO})
	for _, tc := range []struct {
		path    string
		bufLen  int
		wantErr func(error) bool
	}{
		{"/sys/a", 64, nil},
		{"/sys/empty", 64, nil},
		{"/sys/exact8", 8, nil},   // fills the buffer: read whole
		{"/proc/stat", 64, nil},   // longer than the buffer
		{"/proc/stat", 4096, nil}, // fits
		{"/sys/missing", 64, IsAbsent},
		{"/sys/faulty", 64, func(err error) bool { return errors.Is(err, syscall.EIO) }},
		{"/sys", 64, func(err error) bool { return errors.Is(err, syscall.EISDIR) }},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.path, tc.bufLen), func(t *testing.T) {
			got, err := r.ReadInto(tc.path, make([]byte, tc.bufLen))
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("ReadInto: %v, want the error ReadFile gives", err)
				}
				return
			}
			want, werr := r.ReadFile(tc.path)
			if err != nil || werr != nil {
				t.Fatalf("ReadInto: %v, ReadFile: %v", err, werr)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("ReadInto (-want +got):\n%s", diff)
			}
		})
	}
}

// ReadInt, which the agent calls for every throttle counter and RAPL
// energy counter, allocates only the path: not the file, its contents or
// a stat.
func TestReadIntAllocations(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "energy_uj"), []byte("123456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := New(dir)
	got := testing.AllocsPerRun(100, func() {
		if v, err := r.ReadInt("/energy_uj"); err != nil || v != 123456 {
			t.Fatalf("ReadInt = %d, %v; want 123456, nil", v, err)
		}
	})
	if got > 2 {
		t.Errorf("allocations per ReadInt: %v, want at most 2 (the path and its C string)", got)
	}
}

// Exists answers as stat(2) would: a path that resolves, through symbolic
// links, exists; a dangling link or a missing path does not.
func TestExistsFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"sys/class/hwmon/hwmon0/temp1_input"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("42000\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("hwmon0", filepath.Join(dir, "sys/class/hwmon/hwmon1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", filepath.Join(dir, "sys/class/hwmon/hwmon2")); err != nil {
		t.Fatal(err)
	}
	r := New(dir)
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/sys/class/hwmon/hwmon0/temp1_input", true},
		{"/sys/class/hwmon/hwmon0", true},
		{"/sys/class/hwmon/hwmon1/temp1_input", true},
		{"/sys/class/hwmon/hwmon2", false},
		{"/sys/class/hwmon/hwmon0/temp2_input", false},
		{"/var/lib/kubelet/pod-resources/kubelet.sock", false},
	} {
		if got := r.Exists(tc.path); got != tc.want {
			t.Errorf("Exists(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

// Lookup answers as stat(2) would, and says why a path does not resolve.
func TestLookup(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "var/lib/kubelet/pod-resources"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "var/lib/kubelet/pod-resources/kubelet.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := New(dir)
	if err := r.Lookup("/var/lib/kubelet/pod-resources/kubelet.sock"); err != nil {
		t.Errorf("Lookup of a present path: %v", err)
	}
	err := r.Lookup("/var/lib/kubelet/pod-resources/absent.sock")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(dir, "var/lib/kubelet/pod-resources/absent.sock")) {
		t.Errorf("Lookup of an absent path: %v, want fs.ErrNotExist naming the path under the root", err)
	}
	if err := r.Lookup("/var/lib/kubelet/pod-resources/kubelet.sock/x"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("Lookup through a file: %v, want ENOTDIR", err)
	}
}
