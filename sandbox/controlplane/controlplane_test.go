// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveBinDir(t *testing.T) {
	write := func(t *testing.T, dir, name string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/true\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, dir string)
		wantErr string // empty: the directory resolves
	}{
		{
			name: "both binaries",
			setup: func(t *testing.T, dir string) {
				write(t, dir, "etcd", 0o755)
				write(t, dir, "kube-apiserver", 0o755)
			},
		},
		{
			name:    "kube-apiserver missing",
			setup:   func(t *testing.T, dir string) { write(t, dir, "etcd", 0o755) },
			wantErr: "kube-apiserver not found: run `make control-plane`",
		},
		{
			name: "etcd not executable",
			setup: func(t *testing.T, dir string) {
				write(t, dir, "etcd", 0o644)
				write(t, dir, "kube-apiserver", 0o755)
			},
			wantErr: "etcd is not an executable file",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			got, err := ResolveBinDir(dir)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("ResolveBinDir: %v", err)
			case tc.wantErr == "" && got != dir:
				t.Errorf("ResolveBinDir = %q, want %q", got, dir)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("ResolveBinDir error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestResolveBinDirFromEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(BinDirEnv, dir)
	_, err := ResolveBinDir("")
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "etcd")) {
		t.Errorf("ResolveBinDir(\"\") with %s=%s: error = %v, want one naming %s/etcd", BinDirEnv, dir, err, dir)
	}
}
