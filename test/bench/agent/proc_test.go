// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The benchmark's RSS figures come from /proc/<pid>/status and
// smaps_rollup, whose lines are "Key: N kB" (proc(5)).
func TestKiBFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status")
	data := "Name:\tagent\nVmHWM:\t   29440 kB\nVmRSS:\t   28672 kB\nThreads:\t9\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := kibFields(path, "VmRSS:", "VmHWM:", "VmSwap:")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{28672 << 10, 29440 << 10, 0}, got); diff != "" {
		t.Errorf("kibFields (-want +got):\n%s", diff)
	}
	rss, hwm, err := memory(os.Getpid())
	if err != nil || rss <= 0 || hwm < rss {
		t.Errorf("memory(self) = %d, %d, %v; want 0 < RSS <= HWM", rss, hwm, err)
	}
	anon, file, err := rollup(os.Getpid())
	if err != nil || anon <= 0 || file <= 0 {
		t.Errorf("rollup(self) = %d, %d, %v; want both above 0", anon, file, err)
	}
}
