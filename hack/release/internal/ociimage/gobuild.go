// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package ociimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
)

// VersionVar is the variable the version ldflag sets, as in the Makefile
// and the Dockerfiles.
const VersionVar = "github.com/telesched/telesched/internal/version.Version"

// GoBuild builds c's package in the module at dir into out the
// Dockerfiles' way: -trimpath -buildvcs=false, -ldflags "-s -w -X
// <VersionVar>=<version>", CGO_ENABLED as c says, GOOS=linux and goarch;
// cgo for another architecture uses Debian's <triplet>-gcc, as the
// Dockerfile does.
func GoBuild(ctx context.Context, dir string, c Copy, version, goarch, out string) error {
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X "+VersionVar+"="+version, "-o", out, c.Package)
	cmd.Dir = dir
	cgo := "0"
	if c.CGO {
		cgo = "1"
	}
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOOS=linux", "GOARCH="+goarch,
		"CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if c.CGO && goarch != runtime.GOARCH {
		cmd.Env = append(cmd.Env, "CC="+Triplets[goarch]+"-gcc")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s (CGO_ENABLED=%s GOARCH=%s): %w\n%s", c.Package, cgo, goarch, err, b)
	}
	return nil
}
