// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command node runs the one-node cluster of test/node/cluster on this
// machine (make node-up) and removes what one left behind (make
// node-down).
//
//	go run ./hack/node up   [-dir DIR] [-bin-dir DIR] [-images DIR] [-sandbox-image REF]
//	go run ./hack/node down [-dir DIR] [-bin-dir DIR]
//
// up starts the cluster, imports every *.tar in -images into its
// containerd, prints the administrator's kubeconfig and runs until
// interrupted, then stops the cluster and removes -dir.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/telesched/telesched/test/node/cluster"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: node up|down [flags] (-h for the flags)")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", "_output/node", "The cluster's state, certificates, configs and logs.")
	binDir := fs.String("bin-dir", "bin", "Where the cluster's binaries are (make node-binaries).")
	images := fs.String("images", "_output/images", "Image tarballs (*.tar) to import into containerd (make images-local).")
	sandbox := fs.String("sandbox-image", "", "The pod sandbox (pause) image, which must be among -images; empty means the telesched-pause image images.json in -images lists.")
	_ = fs.Parse(os.Args[2:])
	bin, err := filepath.Abs(*binDir)
	if err != nil {
		fail(err)
	}
	if os.Args[1] == "down" {
		if err := cluster.Cleanup(*dir, bin, false, os.Stderr); err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "node: %s removed\n", *dir)
		return
	}
	if *sandbox == "" {
		if *sandbox, err = pauseImage(*images); err != nil {
			fail(err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := cluster.Start(ctx, cluster.Options{Dir: *dir, BinDir: bin, SandboxImage: *sandbox, Progress: os.Stderr})
	if err != nil {
		if c != nil {
			_ = cluster.Cleanup(c.Dir, bin, true, os.Stderr)
		}
		fail(err)
	}
	tars, _ := filepath.Glob(filepath.Join(*images, "*.tar"))
	for _, t := range tars {
		fmt.Fprintf(os.Stderr, "node: importing %s\n", t)
		if err := c.ImportImage(ctx, t); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	fmt.Printf("node %s is Ready. In another shell:\n  export KUBECONFIG=%s\n  bin/kubectl get nodes -o wide\nInterrupt (Ctrl-C) to stop it.\n", c.NodeName, c.Kubeconfig)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "node: stopping")
	if err := c.Stop(); err != nil {
		fail(err)
	}
}

// pauseImage is the ref of the telesched-pause image that images.json in
// dir lists.
func pauseImage(dir string) (string, error) {
	refs, _, err := cluster.Images(dir)
	if err != nil {
		return "", fmt.Errorf("%w (or set -sandbox-image)", err)
	}
	ref, ok := refs["telesched-pause"]
	if !ok {
		return "", fmt.Errorf("%s lists no telesched-pause image (set -sandbox-image)", filepath.Join(dir, "images.json"))
	}
	return ref, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "node:", err)
	os.Exit(1)
}
