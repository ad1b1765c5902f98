package hostfs

import (
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
