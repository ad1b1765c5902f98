// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package version is the version of the telesched binaries.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is set at build time by the Makefile:
// -ldflags "-X github.com/telesched/telesched/internal/version.Version=v0.1.0".
var Version = ""

// Get returns Version, else the main module's version from the build info
// (set by `go install module@version`), else "dev".
func Get() string {
	if Version != "" {
		return Version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}

// Line is what a binary prints for --version: its name and version, the
// Kubernetes libraries it was built with (k8s.io/kubernetes for the
// scheduler, k8s.io/client-go for all), Go's version and the platform:
//
//	telesched-scheduler v0.1.0 (k8s.io/kubernetes v1.37.2, k8s.io/client-go v0.37.2, go1.26.0 linux/amd64)
func Line(binary string) string {
	parts := kubernetesModules()
	parts = append(parts, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("%s %s (%s)", binary, Get(), strings.Join(parts, ", "))
}

// kubernetesModules are the versions of the Kubernetes modules linked in,
// as "path version", in a fixed order.
func kubernetesModules() []string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	var out []string
	for _, path := range []string{"k8s.io/kubernetes", "k8s.io/client-go"} {
		for _, d := range info.Deps {
			if d.Path != path {
				continue
			}
			v := d.Version
			if d.Replace != nil && d.Replace.Version != "" {
				v = d.Replace.Version
			}
			out = append(out, path+" "+v)
		}
	}
	return out
}
