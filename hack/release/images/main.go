// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command build-images builds the telesched images without a Docker engine
// or a registry (hack/release/internal/ociimage): the agent, the scheduler and the
// descheduler as their Dockerfiles do, and the node test's pause and
// workload images. Each is one docker-archive tarball, tagged with its
// reference so that
// `ctr -n k8s.io images import FILE` names it, and images.json lists
// every image's ref, digest, file and size.
//
//	bin/build-images -out _output/images -version v0.2.0 [-registry ghcr.io/telesched] [-module .]
//
// (`make images-local` builds it from this module, hack/release, and runs
// it in the checkout.) Binaries are built from the checkout (-module) into
// OUT/bin/; progress goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/telesched/telesched/hack/release/internal/ociimage"
)

// Image is one line of images.json.
type Image struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	File   string `json:"file"`
	Size   int64  `json:"size"`
}

func main() {
	out := flag.String("out", "_output/images", "directory for the tarballs, images.json and bin/")
	version := flag.String("version", "dev", "version the binaries carry (--version) and the images' tag")
	registry := flag.String("registry", "ghcr.io/telesched", "registry and path of the image references")
	only := flag.String("images", "", "comma-separated image names to build (default all: "+names()+")")
	goarch := flag.String("goarch", runtime.GOARCH, "architecture of the binaries and images (amd64, arm64); the agent's glibc is this host's libc6:<goarch>")
	module := flag.String("module", ".", "the telesched checkout the binaries are built from")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *out, *version, *registry, *only, *goarch, *module); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func names() string {
	var n []string
	for _, r := range ociimage.All {
		n = append(n, r.Name)
	}
	return strings.Join(n, ",")
}

func run(ctx context.Context, out, version, registry, only, goarch, module string) error {
	if _, ok := ociimage.Triplets[goarch]; !ok {
		return fmt.Errorf("-goarch %q: want amd64 or arm64", goarch)
	}
	recipes, err := selectRecipes(only)
	if err != nil {
		return err
	}
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	binDir := filepath.Join(out, "bin", "linux-"+goarch)
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	absModule, err := filepath.Abs(module)
	if err != nil {
		return err
	}
	var listed []Image
	for _, r := range recipes {
		ref, err := name.NewTag(registry + "/" + r.Name + ":" + version)
		if err != nil {
			return fmt.Errorf("-registry %q / -version %q: image reference: %w", registry, version, err)
		}
		bins := map[string]string{}
		for _, c := range r.Copies {
			bin, err := filepath.Abs(filepath.Join(binDir, filepath.Base(c.Dest)))
			if err != nil {
				return err
			}
			start := time.Now()
			if err := ociimage.GoBuild(ctx, absModule, c, version, goarch, bin); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "built %s (CGO_ENABLED=%s GOARCH=%s) -> %s in %s\n", c.Package, cgoEnv(c.CGO), goarch, bin, time.Since(start).Round(100*time.Millisecond))
			bins[c.Dest] = bin
		}
		r.Labels = map[string]string{
			"org.opencontainers.image.title":   r.Name,
			"org.opencontainers.image.version": version,
		}
		start := time.Now()
		img, err := ociimage.Build(r, ociimage.Options{Binaries: bins, GOARCH: goarch, Created: created})
		if err != nil {
			return err
		}
		file := filepath.Join(out, r.Name+".tar")
		if err := tarball.MultiRefWriteToFile(file, map[name.Reference]v1.Image{ref: img}); err != nil {
			return fmt.Errorf("writing %s: %w", file, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fi, err := os.Stat(file)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s %s -> %s (%d bytes) in %s\n", ref, digest, file, fi.Size(), time.Since(start).Round(100*time.Millisecond))
		listed = append(listed, Image{Ref: ref.String(), Digest: digest.String(), File: filepath.Base(file), Size: fi.Size()})
	}
	b, err := json.MarshalIndent(listed, "", "  ")
	if err != nil {
		return err
	}
	manifest := filepath.Join(out, "images.json")
	if err := os.WriteFile(manifest, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s; load with: ctr -n k8s.io images import %s/<file>\n", manifest, out)
	return nil
}

func selectRecipes(only string) ([]ociimage.Recipe, error) {
	if only == "" {
		return ociimage.All, nil
	}
	var rs []ociimage.Recipe
	for _, n := range strings.Split(only, ",") {
		found := false
		for _, r := range ociimage.All {
			if r.Name == n {
				rs = append(rs, r)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("-images: no image %q (have %s)", n, names())
		}
	}
	return rs, nil
}

// sourceDateEpoch is SOURCE_DATE_EPOCH (seconds since 1970) when set, the
// reproducible-builds convention for a build's time; else the zero time,
// which Build makes ociimage.Epoch.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

func cgoEnv(on bool) string {
	if on {
		return "1"
	}
	return "0"
}
