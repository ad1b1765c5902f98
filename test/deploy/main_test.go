// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package deploy tests the installable manifests under deploy/: it renders
// every kustomization with the kustomize API, checks the workloads'
// security settings, and applies every object to a real kube-apiserver by
// server-side dry run. `go test -short` runs only the checks that need no
// control plane.
//
// These tests are a package of their own, not part of test/integration,
// because the kustomize API links Go's plugin package, which makes the
// linker bind every dynamic symbol at start (BIND_NOW); the integration
// tests link go-nvml, whose NVML symbols are resolved only when
// libnvidia-ml.so.1 is loaded, so a binary holding both fails to start
// ("undefined symbol: nvmlDeviceSetDriverModel").
package deploy

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/telesched/telesched/sandbox/controlplane"
)

// cfg is an administrator's config for the control plane TestMain started.
var cfg *rest.Config

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "deploy: %v\n", err)
		os.Exit(1)
	}
	cfg = cp.Config
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "deploy: stopping control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// needControlPlane skips the test in -short mode.
func needControlPlane(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the control plane; skipped in -short mode")
	}
}

// waitFor polls cond every 100ms until it holds, failing the test after
// timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
