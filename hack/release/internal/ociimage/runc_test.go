// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package ociimage

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestImagesRunUnderRunc runs each image's entrypoint in a runc container
// whose root is the image's extracted file system, as its user, in its
// working directory, with its environment: what containerd does with it,
// less the snapshotter. It proves the layout is real: the static binaries
// start on the static base, the cgo-linked one finds its loader and glibc
// (bin/telesched-agent, the real agent, when `make build` has made it),
// and pause and workload exit 0 on SIGTERM.
func TestImagesRunUnderRunc(t *testing.T) {
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Skip("runc is not installed (Debian: apt-get install runc); the image layouts are not run")
	}
	if os.Getuid() != 0 {
		t.Skip("runc needs root to create containers; the image layouts are not run (run the test as root)")
	}
	b := testBinaries(t)
	agentBin, agentWant := b["cgo-fixture"], "fixture v0.0.0-test libc=2."
	if real, err := filepath.Abs(filepath.Join(moduleRoot, "bin", "telesched-agent")); err == nil {
		if _, err := os.Stat(real); err == nil {
			agentBin, agentWant = real, "telesched-agent "
		}
	}
	t.Logf("agent binary: %s", agentBin)
	tests := []struct {
		recipe   Recipe
		binaries map[string]string
		args     []string
		// want is the start of the first line of output.
		want string
		// stop: the process waits for SIGTERM, which must end it with 0.
		stop bool
	}{
		{recipe: Agent, binaries: map[string]string{"/telesched-agent": agentBin}, args: []string{"--version"}, want: agentWant},
		{recipe: Scheduler, binaries: map[string]string{"/telesched-scheduler": b["static-fixture"]}, args: []string{"--version"},
			want: "fixture v0.0.0-test libc=none uid=48812 gid=48812 cwd=/home/nonroot"},
		{recipe: Workload, binaries: map[string]string{"/workload": b["/workload"]},
			want: "telesched-workload v0.0.0-test running: uid=65532 gid=65532", stop: true},
		{recipe: Pause, binaries: map[string]string{"/pause": b["/pause"]}, args: []string{"-v"}, want: "telesched-pause v0.0.0-test"},
		{recipe: Pause, binaries: map[string]string{"/pause": b["/pause"]}, stop: true},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("%s %s", tc.recipe.Name, strings.Join(tc.args, " ")), func(t *testing.T) {
			img, err := Build(tc.recipe, Options{Binaries: tc.binaries})
			if err != nil {
				t.Fatal(err)
			}
			bundle := t.TempDir()
			if err := extract(img, filepath.Join(bundle, "rootfs")); err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if err := writeRuncSpec(bundle, cf.Config, tc.args); err != nil {
				t.Fatal(err)
			}
			state := t.TempDir()
			id := fmt.Sprintf("ociimage-test-%d-%d", os.Getpid(), i)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, runc, "--root", state, "run", "--bundle", bundle, id)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer exec.Command(runc, "--root", state, "delete", "--force", id).Run()
			sc := bufio.NewScanner(stdout)
			first := ""
			if tc.want != "" {
				if sc.Scan() {
					first = sc.Text()
				}
				if !strings.HasPrefix(first, tc.want) {
					t.Errorf("first line %q, want it to start with %q", first, tc.want)
				}
				t.Logf("output: %s", first)
			}
			if tc.stop {
				// runc kill may come before the process has set up its
				// signal handler; try until it takes.
				deadline := time.Now().Add(10 * time.Second)
				for {
					time.Sleep(200 * time.Millisecond)
					out, err := exec.Command(runc, "--root", state, "state", id).Output()
					if err == nil && strings.Contains(string(out), `"status": "running"`) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("container %s not running after 10s: %v %s", id, err, stderr.String())
					}
				}
				time.Sleep(300 * time.Millisecond)
				if out, err := exec.Command(runc, "--root", state, "kill", id, "TERM").CombinedOutput(); err != nil {
					t.Fatalf("runc kill %s TERM: %v: %s", id, err, out)
				}
			}
			io.Copy(io.Discard, stdout)
			if err := cmd.Wait(); err != nil {
				t.Errorf("runc run: %v (want exit 0); stderr: %s", err, stderr.String())
			}
		})
	}
}

// extract writes the image's flattened file system under dir, with
// owners and modes. Extract lists the top layer's files first, so a
// file's parent may come after it.
func extract(img v1.Image, dir string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, h.Name)
		mode := os.FileMode(h.Mode).Perm()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				return err
			}
			continue
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: tar type %c not handled", h.Name, h.Typeflag)
		}
		if err := os.Chown(p, h.Uid, h.Gid); err != nil {
			return err
		}
		// Chmod after Chown, which clears setuid bits; the sticky bit
		// needs os.ModeSticky.
		m := mode
		if h.Mode&0o1000 != 0 {
			m |= os.ModeSticky
		}
		if err := os.Chmod(p, m); err != nil {
			return err
		}
	}
}

// writeRuncSpec writes config.json: runc's default spec (`runc spec`:
// namespaces, /proc, /dev, a read-only root) with the image's process.
func writeRuncSpec(bundle string, c v1.Config, args []string) error {
	if out, err := exec.Command("runc", "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		return fmt.Errorf("runc spec: %v: %s", err, out)
	}
	path := filepath.Join(bundle, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		return err
	}
	uid, gid, err := parseUser(c.User)
	if err != nil {
		return err
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = append(append([]string(nil), c.Entrypoint...), args...)
	proc["env"] = c.Env
	proc["cwd"] = c.WorkingDir
	proc["user"] = map[string]any{"uid": uid, "gid": gid}
	if b, err = json.Marshal(spec); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// parseUser reads the numeric "uid:gid" the recipes use.
func parseUser(u string) (int, int, error) {
	us, gs, _ := strings.Cut(u, ":")
	uid, err := strconv.Atoi(us)
	if err != nil {
		return 0, 0, fmt.Errorf("user %q: want numeric uid:gid", u)
	}
	gid := uid
	if gs != "" {
		if gid, err = strconv.Atoi(gs); err != nil {
			return 0, 0, fmt.Errorf("user %q: want numeric uid:gid", u)
		}
	}
	return uid, gid, nil
}
