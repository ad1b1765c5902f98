// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package ociimage builds container images without a Docker engine or a
// registry: a base tree that stands in for distroless's (from this Debian
// host's files), the binaries, and the configuration of a recipe, in
// layers whose bytes depend only on their inputs.
package ociimage

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Copy puts a binary built from a main package at Dest, root-owned and
// 0755, as a Dockerfile's COPY of a go build output does.
type Copy struct {
	// Package is the main package ("./cmd/telesched-agent").
	Package string
	// Dest is the absolute path in the image.
	Dest string
	// CGO is the package's CGO_ENABLED.
	CGO bool
}

// Recipe is an image: its base, binaries and configuration.
type Recipe struct {
	// Name is the repository's last element ("telesched-agent").
	Name       string
	Base       Base
	Copies     []Copy
	User       string
	Entrypoint []string
	// Expose is the ports as EXPOSE writes them ("9102", "9102/udp").
	Expose []string
	// Env is added to the base's.
	Env    []string
	Labels map[string]string
}

// Options are the inputs a recipe does not fix.
type Options struct {
	// Binaries maps each Copy's Dest to the built file on this host.
	Binaries map[string]string
	// GOARCH of the binaries and the image; runtime.GOARCH when empty.
	GOARCH string
	// Created is the files' and image's time; Epoch when zero.
	Created time.Time
	// HostRoot is where the base's host files are read; "/" when empty.
	HostRoot string
}

// Build builds the recipe's image: the base layer, glibc's layer where the
// base has it, and one layer of the binaries. It refuses a binary whose
// loader or libraries the base lacks.
func Build(r Recipe, o Options) (v1.Image, error) {
	if o.GOARCH == "" {
		o.GOARCH = runtime.GOARCH
	}
	if o.Created.IsZero() {
		o.Created = Epoch
	}
	o.Created = o.Created.UTC().Truncate(time.Second)
	if o.HostRoot == "" {
		o.HostRoot = "/"
	}
	root := strings.TrimSuffix(o.HostRoot, "/")

	base, err := staticEntries(root)
	if err != nil {
		return nil, err
	}
	layers := []struct {
		entries []Entry
		by      string
	}{{base, "telesched ociimage: " + r.Base.Name + " files (users, CA certificates, /tmp, /home/nonroot)"}}
	files := map[string]bool{}
	if r.Base.Glibc {
		libc, err := GlibcEntries(root, o.GOARCH)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", r.Name, err)
		}
		for _, e := range libc {
			files[e.Path] = true
		}
		layers = append(layers, struct {
			entries []Entry
			by      string
		}{libc, "telesched ociimage: glibc (Debian libc6:" + o.GOARCH + " of the build host)"})
	}
	var app []Entry
	for _, c := range r.Copies {
		bin, ok := o.Binaries[c.Dest]
		if !ok {
			return nil, fmt.Errorf("image %s: no binary given for %s (%s)", r.Name, c.Dest, c.Package)
		}
		l, err := ReadLinkage(bin)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", r.Name, err)
		}
		if err := checkLinkage(bin, c.Dest, l, files, Triplets[o.GOARCH]); err != nil {
			return nil, fmt.Errorf("image %s: %w", r.Name, err)
		}
		app = append(app, HostFile(c.Dest, 0o755, bin))
	}
	layers = append(layers, struct {
		entries []Entry
		by      string
	}{app, "telesched ociimage: COPY " + dests(r.Copies)})

	var adds []mutate.Addendum
	for _, l := range layers {
		layer, err := Layer(l.entries, o.Created)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", r.Name, err)
		}
		adds = append(adds, mutate.Addendum{Layer: layer, History: v1.History{
			Created: v1.Time{Time: o.Created}, CreatedBy: l.by,
		}})
	}
	img, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", r.Name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: o.Created}
	cf.OS = "linux"
	cf.Architecture = o.GOARCH
	cf.Config = Config(r)
	return mutate.ConfigFile(img, cf)
}

// Config is the recipe's runtime configuration on its base's.
func Config(r Recipe) v1.Config {
	c := v1.Config{
		User:       r.User,
		Entrypoint: append([]string(nil), r.Entrypoint...),
		Env:        append(append([]string(nil), baseEnv...), r.Env...),
		WorkingDir: baseWorkingDir,
		Labels:     r.Labels,
	}
	if c.User == "" {
		c.User = fmt.Sprint(NonrootUID)
	}
	if len(r.Expose) > 0 {
		c.ExposedPorts = map[string]struct{}{}
		for _, p := range r.Expose {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			c.ExposedPorts[p] = struct{}{}
		}
	}
	return c
}

func dests(cs []Copy) string {
	var d []string
	for _, c := range cs {
		d = append(d, c.Dest)
	}
	sort.Strings(d)
	return strings.Join(d, " ")
}
