// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestPublishToARegistryOfItsOwn: images listed in images.json, as
// make images-local writes it, go to <registry>/telesched-<name>:<the
// chart's appVersion> with their own digests (the node test's pause image
// stays behind), and the chart to oci://<registry>/charts, from where
// helm reads it back at its version.
func TestPublishToARegistryOfItsOwn(t *testing.T) {
	// bin/ of the checkout, or TELESCHED_BIN_DIR as for the other tests.
	bin := os.Getenv("TELESCHED_BIN_DIR")
	if bin == "" {
		bin = filepath.Join("..", "..", "..", "..", "bin")
	}
	helm := filepath.Join(bin, "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("%v (make test builds bin/helm)", err)
	}
	dir := t.TempDir()
	var list []built
	digests := map[string]v1.Hash{}
	for _, n := range append(append([]string{}, Products...), "telesched-pause") {
		img, err := random.Image(512, 2)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.NewTag("ghcr.io/telesched/" + n + ":v0.0.0-dev")
		if err != nil {
			t.Fatal(err)
		}
		file := n + ".tar"
		if err := tarball.MultiRefWriteToFile(filepath.Join(dir, file), map[name.Reference]v1.Image{ref: img}); err != nil {
			t.Fatal(err)
		}
		if digests[n], err = img.Digest(); err != nil {
			t.Fatal(err)
		}
		list = append(list, built{Ref: ref.String(), File: file})
	}
	data, _ := json.Marshal(list)
	if err := os.WriteFile(filepath.Join(dir, "images.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	addr, _, err := Serve(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	chartDir := filepath.Join("..", "..", "..", "..", "deploy", "helm", "telesched")
	meta, err := chartMeta(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Publish(t.Context(), Options{Images: dir, Chart: chartDir, Registry: addr + "/telesched", Helm: helm, PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Images) != len(Products) {
		t.Errorf("published %v, want the %d products only", p.Images, len(Products))
	}
	for _, n := range Products {
		got := p.Images[n]
		if want := addr + "/telesched/" + n + ":" + meta.AppVersion; got.Ref != want || got.Digest != digests[n].String() {
			t.Errorf("%s: published %+v, want %s at %s", n, got, want, digests[n])
		}
		ref, err := name.ParseReference(got.Ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(ref, remote.WithContext(t.Context()))
		if err != nil {
			t.Fatalf("%s is not in the registry: %v", got.Ref, err)
		}
		if desc.Digest != digests[n] {
			t.Errorf("%s in the registry is %s, want %s", got.Ref, desc.Digest, digests[n])
		}
	}
	if want := "oci://" + addr + "/telesched/charts/telesched"; p.Chart != want || p.ChartVersion != meta.Version || !strings.HasPrefix(p.ChartDigest, "sha256:") {
		t.Errorf("chart %s %s %s, want %s at %s with a digest", p.Chart, p.ChartVersion, p.ChartDigest, want, meta.Version)
	}
	out, err := exec.CommandContext(t.Context(), helm, "show", "chart", p.Chart, "--version", p.ChartVersion, "--plain-http").CombinedOutput()
	if err != nil {
		t.Fatalf("helm show chart %s: %v\n%s", p.Chart, err, out)
	}
	if !strings.Contains(string(out), "appVersion: "+meta.AppVersion) {
		t.Errorf("the chart read back from the registry:\n%s\nwant appVersion %s", out, meta.AppVersion)
	}
}

// TestPublishSaysWhatIsMissing: an images.json without one of the
// products is refused, naming it.
func TestPublishSaysWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "images.json"), []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Publish(t.Context(), Options{Images: dir, Chart: filepath.Join("..", "..", "..", "..", "deploy", "helm", "telesched"), Registry: "127.0.0.1:1/x"})
	if err == nil || !strings.Contains(err.Error(), "telesched-agent") || !strings.Contains(err.Error(), "make images-local") {
		t.Errorf("err %v, want it to name the missing image and make images-local", err)
	}
}
