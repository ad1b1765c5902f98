// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/telesched/telesched/agent/hostfs"
)

// writeTree writes files (host path -> content) under a new temporary root.
func writeTree(t testing.TB, files map[string]string) hostfs.Root {
	t.Helper()
	dir := t.TempDir()
	updateTree(t, hostfs.New(dir), files)
	return hostfs.New(dir)
}

// updateTree writes or overwrites files under root.
func updateTree(t testing.TB, root hostfs.Root, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := root.Path(p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// unpackSnapshot unpacks testdata/snapshots/<name>.tar.gz, a real machine's
// /proc and /sys, into a new temporary root.
func unpackSnapshot(t testing.TB, name string) hostfs.Root {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "snapshots", name+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			t.Fatalf("snapshot entry %q escapes the root", h.Name)
		}
		target := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
				err = os.Symlink(h.Linkname, target)
			}
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
				var out *os.File
				if out, err = os.Create(target); err == nil {
					_, err = io.Copy(out, tr)
					err = errors.Join(err, out.Close())
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return hostfs.New(dir)
}

// hostfsFromDir is a root over a tree committed under testdata.
func hostfsFromDir(t testing.TB, dir string) hostfs.Root {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return hostfs.New(abs)
}
