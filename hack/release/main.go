// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command publish publishes the images make images-local built and the
// Helm chart to an OCI registry (internal/release), and prints what it
// pushed, digests included, as JSON:
//
//	bin/publish -images _output/images -registry registry.example.com/telesched
//	bin/publish -images _output/images -serve 127.0.0.1:5000
//
// (`make release-tools` builds it from this module, hack/release; run it
// in the checkout, where -chart's default, deploy/helm/telesched, is.)
//
// With -serve it runs a registry of its own on that address (in memory,
// plain HTTP), publishes to it under <address>/telesched, prints how to
// install from it, and serves until interrupted (`make release-local`).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/telesched/telesched/hack/release/internal/release"
)

func main() {
	images := flag.String("images", "_output/images", "the directory make images-local wrote (images.json and its tarballs)")
	chart := flag.String("chart", "deploy/helm/telesched", "the chart's directory")
	registry := flag.String("registry", "", "registry and path to publish to (registry.example.com/telesched); with -serve, <address>/telesched")
	helm := flag.String("helm", "bin/helm", "the helm binary that packages and pushes the chart")
	plainHTTP := flag.Bool("plain-http", false, "speak HTTP to the registry")
	serve := flag.String("serve", "", "run a registry of its own on this address (host:port), publish to it and serve until interrupted")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, release.Options{Images: *images, Chart: *chart, Registry: *registry, Helm: *helm, PlainHTTP: *plainHTTP, Log: os.Stderr}, *serve); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o release.Options, serve string) error {
	var done <-chan error
	if serve != "" {
		addr, d, err := release.Serve(ctx, serve)
		if err != nil {
			return fmt.Errorf("-serve %s: %w", serve, err)
		}
		done = d
		o.Registry, o.PlainHTTP = addr+"/telesched", true
		fmt.Fprintf(os.Stderr, "serving a registry on %s (in memory, plain HTTP)\n", addr)
	}
	if o.Registry == "" {
		return fmt.Errorf("-registry or -serve is required")
	}
	p, err := release.Publish(ctx, o)
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	if done == nil {
		return nil
	}
	plain := ""
	if o.PlainHTTP {
		plain = " --plain-http"
	}
	fmt.Fprintf(os.Stderr, "\ninstall from it (containerd pulls from a localhost registry over HTTP):\n\n  helm install telesched %s --version %s%s \\\n    --namespace telesched-system --create-namespace --set image.registry=%s\n\nserving until interrupted\n",
		p.Chart, p.ChartVersion, plain, o.Registry)
	return <-done
}
