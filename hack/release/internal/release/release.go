// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package release publishes telesched to an OCI registry as an operator
// installs it: the three images that make images-local built
// (hack/images: docker-archive tarballs listed in images.json) and the
// Helm chart. Each image goes to <registry>/telesched-<name>:<appVersion>
// (the chart's appVersion, the tag its values default to), the chart to
// oci://<registry>/charts/telesched:<version>, so that
//
//	helm install telesched oci://<registry>/charts/telesched --version <version> \
//	  --set image.registry=<registry>
//
// installs what was published, with only the registry's name changed.
// Serve runs a registry of its own in process (go-containerregistry's
// pkg/registry) for a machine without one.
package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"
)

// Products are the images a release publishes, by their names in
// images.json (hack/images also builds the node test's pause and
// workload images, which it does not).
var Products = []string{"telesched-agent", "telesched-scheduler", "telesched-descheduler"}

// Options say what to publish where.
type Options struct {
	// Images is the directory make images-local wrote (images.json and
	// its tarballs).
	Images string
	// Chart is the chart's directory (deploy/helm/telesched).
	Chart string
	// Registry is the registry and path to publish to, as image.registry
	// takes it: registry.example.com/telesched.
	Registry string
	// Helm is the helm binary that packages and pushes the chart.
	Helm string
	// PlainHTTP speaks HTTP to the registry (a registry on this machine).
	PlainHTTP bool
	// Log receives progress; nil: none.
	Log io.Writer
}

// Published is what a release put in the registry.
type Published struct {
	// Images are the images' references by tag and their digests, by
	// name (telesched-agent).
	Images map[string]Image `json:"images"`
	// Chart is the chart's reference (oci://…/charts/telesched), Version
	// its version, Digest its manifest's digest.
	Chart        string `json:"chart"`
	ChartVersion string `json:"chartVersion"`
	ChartDigest  string `json:"chartDigest"`
	// AppVersion is the chart's appVersion, the images' tag.
	AppVersion string `json:"appVersion"`
}

// Image is one published image.
type Image struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// built is one line of images.json (hack/images).
type built struct {
	Ref  string `json:"ref"`
	File string `json:"file"`
}

// Publish pushes the images and the chart.
func Publish(ctx context.Context, o Options) (*Published, error) {
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	meta, err := chartMeta(o.Chart)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(o.Images, "images.json"))
	if err != nil {
		return nil, fmt.Errorf("%w (make images-local writes it)", err)
	}
	var list []built
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(o.Images, "images.json"), err)
	}
	var opts []name.Option
	if o.PlainHTTP {
		opts = append(opts, name.Insecure)
	}
	p := &Published{Images: map[string]Image{}, AppVersion: meta.AppVersion, ChartVersion: meta.Version}
	for _, b := range list {
		src, err := name.NewTag(b.Ref)
		if err != nil {
			return nil, fmt.Errorf("images.json: %q: %w", b.Ref, err)
		}
		base := src.RepositoryStr()[strings.LastIndex(src.RepositoryStr(), "/")+1:]
		if !slices.Contains(Products, base) {
			continue
		}
		img, err := tarball.ImageFromPath(filepath.Join(o.Images, b.File), &src)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.File, err)
		}
		dst, err := name.NewTag(strings.TrimSuffix(o.Registry, "/")+"/"+base+":"+meta.AppVersion, opts...)
		if err != nil {
			return nil, fmt.Errorf("registry %q: %w", o.Registry, err)
		}
		// Credentials as docker and crane keep them (a registry on this
		// machine needs none).
		if err := remote.Write(dst, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return nil, fmt.Errorf("pushing %s: %w", dst, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, err
		}
		p.Images[base] = Image{Ref: dst.String(), Digest: digest.String()}
		logf("pushed %s (built as %s) %s", dst, src, digest)
	}
	for _, want := range Products {
		if _, ok := p.Images[want]; !ok {
			return nil, fmt.Errorf("%s lists no %s image: run make images-local", filepath.Join(o.Images, "images.json"), want)
		}
	}

	dir, err := os.MkdirTemp("", "telesched-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if _, err := runHelm(ctx, o.Helm, "package", o.Chart, "--destination", dir); err != nil {
		return nil, err
	}
	tgz := filepath.Join(dir, meta.Name+"-"+meta.Version+".tgz")
	p.Chart = "oci://" + strings.TrimSuffix(o.Registry, "/") + "/charts"
	args := []string{"push", tgz, p.Chart}
	if o.PlainHTTP {
		args = append(args, "--plain-http")
	}
	out, err := runHelm(ctx, o.Helm, args...)
	if err != nil {
		return nil, err
	}
	p.Chart += "/" + meta.Name
	// helm push says "Digest: sha256:…".
	for _, l := range strings.Split(out, "\n") {
		if d, ok := strings.CutPrefix(strings.TrimSpace(l), "Digest: "); ok {
			p.ChartDigest = d
		}
	}
	logf("pushed %s --version %s %s", p.Chart, p.ChartVersion, p.ChartDigest)
	return p, nil
}

// chart is what Publish reads of Chart.yaml.
type chart struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func chartMeta(dir string) (chart, error) {
	var c chart
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return c, err
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%s: %w", filepath.Join(dir, "Chart.yaml"), err)
	}
	if c.Name == "" || c.Version == "" || c.AppVersion == "" {
		return c, fmt.Errorf("%s: name %q, version %q, appVersion %q: want all three", filepath.Join(dir, "Chart.yaml"), c.Name, c.Version, c.AppVersion)
	}
	return c, nil
}

// runHelm runs helm and returns its combined output; an error carries it.
func runHelm(ctx context.Context, helm string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// Serve runs an in-memory OCI registry on addr (host:port; port 0 picks
// one) until ctx ends. It returns the address it listens on and a channel
// that receives its end.
func Serve(ctx context.Context, addr string) (string, <-chan error, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	return l.Addr().String(), done, nil
}
