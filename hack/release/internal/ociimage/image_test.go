// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package ociimage

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// moduleRoot is telesched's checkout, whose packages (./cmd/…, the fixture
// under test/testdata) the recipes build.
const moduleRoot = "../../../.."

var (
	binsOnce sync.Once
	bins     map[string]string
	binsErr  error
	binsDir  string
)

// testBinaries builds, once per test binary, small programs for the
// recipes' binaries: the cgo-linked and the static fixture for the agent
// and the scheduler (the real ones take minutes to link), and the real
// pause and workload programs, all with GoBuild.
func testBinaries(t *testing.T) map[string]string {
	t.Helper()
	binsOnce.Do(func() {
		binsDir, binsErr = os.MkdirTemp("", "ociimage-test-bin-")
		if binsErr != nil {
			return
		}
		bins = map[string]string{}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for _, b := range []struct {
			key string
			c   Copy
		}{
			{"cgo-fixture", Copy{Package: "./test/testdata/imagefixture", CGO: true}},
			{"static-fixture", Copy{Package: "./test/testdata/imagefixture"}},
			{"/pause", Pause.Copies[0]},
			{"/workload", Workload.Copies[0]},
		} {
			out := filepath.Join(binsDir, strings.TrimPrefix(b.key, "/"))
			if binsErr = GoBuild(ctx, moduleRoot, b.c, "v0.0.0-test", "", out); binsErr != nil {
				return
			}
			bins[b.key] = out
		}
	})
	if binsErr != nil {
		t.Fatal(binsErr)
	}
	return bins
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binsDir != "" {
		os.RemoveAll(binsDir)
	}
	os.Exit(code)
}

// testImage is a recipe with the test's binaries.
type testImage struct {
	recipe   Recipe
	binaries map[string]string
}

func testImages(t *testing.T) []testImage {
	b := testBinaries(t)
	return []testImage{
		{Agent, map[string]string{"/telesched-agent": b["cgo-fixture"]}},
		{Scheduler, map[string]string{"/telesched-scheduler": b["static-fixture"]}},
		{Pause, map[string]string{"/pause": b["/pause"]}},
		{Workload, map[string]string{"/workload": b["/workload"]}},
	}
}

// TestBuildIsReproducible builds each image twice from the same inputs and
// wants the same digest, and a different one when an input changes.
func TestBuildIsReproducible(t *testing.T) {
	for _, ti := range testImages(t) {
		t.Run(ti.recipe.Name, func(t *testing.T) {
			digest := func(r Recipe, o Options) v1.Hash {
				t.Helper()
				img, err := Build(r, o)
				if err != nil {
					t.Fatal(err)
				}
				h, err := img.Digest()
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			o := Options{Binaries: ti.binaries}
			first, second := digest(ti.recipe, o), digest(ti.recipe, o)
			if first != second {
				t.Errorf("same inputs, two digests: %s and %s", first, second)
			}
			later := digest(ti.recipe, Options{Binaries: ti.binaries, Created: time.Unix(1700000000, 0)})
			if later == first {
				t.Errorf("another creation time gave the same digest %s", first)
			}
			other := ti.recipe
			other.User = "1:1"
			if digest(other, o) == first {
				t.Errorf("another user gave the same digest %s", first)
			}
		})
	}
}

// file is what the test checks of one file in an image.
type file struct {
	Type     byte
	Mode     int64
	UID, GID int
	Link     string
}

// imageFiles reads the image's flattened file system.
func imageFiles(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimSuffix(h.Name, "/")] = file{Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Link: h.Linkname}
	}
	return files
}

// TestImageContents reads each image back: its configuration (the
// Dockerfile's user, entrypoint and ports on distroless's env and working
// directory) and the files the binaries and distroless's users rely on,
// with their modes and owners.
func TestImageContents(t *testing.T) {
	reg := file{Type: tar.TypeReg, Mode: 0o644}
	exe := file{Type: tar.TypeReg, Mode: 0o755}
	staticFiles := map[string]file{
		"/etc/passwd":                        reg,
		"/etc/group":                         reg,
		"/etc/nsswitch.conf":                 reg,
		"/etc/os-release":                    reg,
		"/etc/ssl/certs/ca-certificates.crt": reg,
		"/tmp":                               {Type: tar.TypeDir, Mode: 0o1777},
		"/home/nonroot":                      {Type: tar.TypeDir, Mode: 0o700, UID: 65532, GID: 65532},
	}
	with := func(extra map[string]file) map[string]file {
		m := map[string]file{}
		for k, v := range staticFiles {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	tests := map[string]struct {
		config v1.Config
		files  map[string]file
		// absent must not be in the image: the static base has no libc.
		absent []string
	}{
		"telesched-agent": {
			config: v1.Config{User: "48811:48811", Entrypoint: []string{"/telesched-agent"}, Env: env, WorkingDir: "/home/nonroot", ExposedPorts: map[string]struct{}{"9102/tcp": {}}},
			files: with(map[string]file{
				"/telesched-agent":                        exe,
				"/lib64/ld-linux-x86-64.so.2":             {Type: tar.TypeSymlink, Mode: 0o777, Link: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
				"/lib/x86_64-linux-gnu/libc.so.6":         exe, // 0755 in Debian's libc6
				"/lib/x86_64-linux-gnu/libdl.so.2":        reg,
				"/lib/x86_64-linux-gnu/libm.so.6":         reg,
				"/lib/x86_64-linux-gnu/libpthread.so.0":   reg,
				"/etc/ld.so.conf":                         reg,
				"/etc/ld.so.conf.d/x86_64-linux-gnu.conf": reg,
			}),
		},
		"telesched-scheduler": {
			config: v1.Config{User: "48812:48812", Entrypoint: []string{"/telesched-scheduler"}, Env: env, WorkingDir: "/home/nonroot", ExposedPorts: map[string]struct{}{"10259/tcp": {}}},
			files:  with(map[string]file{"/telesched-scheduler": exe}),
			absent: []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"},
		},
		"telesched-pause": {
			config: v1.Config{User: "65535:65535", Entrypoint: []string{"/pause"}, Env: env, WorkingDir: "/home/nonroot"},
			files:  with(map[string]file{"/pause": exe}),
		},
		"telesched-workload": {
			config: v1.Config{User: "65532:65532", Entrypoint: []string{"/workload"}, Env: env, WorkingDir: "/home/nonroot"},
			files:  with(map[string]file{"/workload": exe}),
		},
	}
	for _, ti := range testImages(t) {
		tc := tests[ti.recipe.Name]
		t.Run(ti.recipe.Name, func(t *testing.T) {
			if ti.recipe.Base.Glibc && Triplets[runtime.GOARCH] != "x86_64-linux-gnu" {
				t.Skip("the expected glibc paths are amd64's")
			}
			img, err := Build(ti.recipe, Options{Binaries: ti.binaries})
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.config, cf.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
				t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
			}
			all := imageFiles(t, img)
			got := map[string]file{}
			for p := range tc.files {
				if f, ok := all[p]; ok {
					got[p] = f
				}
			}
			if diff := cmp.Diff(tc.files, got); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			for _, p := range tc.absent {
				if _, ok := all[p]; ok {
					t.Errorf("%s is in the image; the static base has none", p)
				}
			}
		})
	}
}

// TestBuildRefusesWhatTheBaseCannotRun: a dynamically linked binary on the
// static base would fail at start with "no such file or directory" from
// the kernel; Build says why instead.
func TestBuildRefusesWhatTheBaseCannotRun(t *testing.T) {
	b := testBinaries(t)
	_, err := Build(Scheduler, Options{Binaries: map[string]string{"/telesched-scheduler": b["cgo-fixture"]}})
	if err == nil || !strings.Contains(err.Error(), "is dynamically linked") {
		t.Errorf("Build of a cgo binary on the static base: error %v, want one saying it is dynamically linked", err)
	}
	_, err = Build(Agent, Options{Binaries: map[string]string{}})
	if err == nil || !strings.Contains(err.Error(), "no binary given for /telesched-agent") {
		t.Errorf("Build without the agent's binary: error %v, want one naming /telesched-agent", err)
	}
}

// TestLayerIsSortedWithParents: the tar lists parents before children,
// in path order, with the fixed time, whatever order the entries come in.
func TestLayerIsSortedWithParents(t *testing.T) {
	l, err := Layer([]Entry{
		File("/b/c/f", 0o600, []byte("x")),
		Symlink("/a", "b"),
		Dir("/tmp", 0o777|fs.ModeSticky, 0, 0),
	}, Epoch)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(Epoch) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, Epoch)
		}
		got = append(got, h.Name+" "+fs.FileMode(h.Mode).String())
	}
	want := []string{"a -rwxrwxrwx", "b/ -rwxr-xr-x", "b/c/ -rwxr-xr-x", "b/c/f -rw-------", "tmp/ -rwxrwxrwx"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer (-want +got):\n%s", diff)
	}
	if _, err := Layer([]Entry{File("/x", 0o644, nil), File("/x/", 0o644, nil)}, Epoch); err == nil {
		t.Error("two entries for /x: no error")
	}
}
