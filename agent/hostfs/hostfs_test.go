// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
