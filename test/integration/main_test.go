// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package integration holds tests that run on a real etcd and kube-apiserver
// (built from source into bin/ by `make control-plane`) with the committed
// CRDs installed. `go test -short` skips them.
package integration

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/telesched/telesched/sandbox/controlplane"
)

// cp is the control plane TestMain started; cfg an administrator's config
// for it.
var (
	cp  *controlplane.ControlPlane
	cfg *rest.Config
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("integration: skipped in -short mode")
		os.Exit(m.Run())
	}
	var err error
	cp, err = controlplane.Start(controlplane.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		os.Exit(1)
	}
	cfg = cp.Config
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: stopping control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// secondControlPlane starts a control plane of the test's own, beside the
// package's, and stops it when the test ends.
func secondControlPlane(t *testing.T, opts controlplane.Options) *controlplane.ControlPlane {
	t.Helper()
	second, err := controlplane.Start(opts)
	if err != nil {
		t.Fatalf("starting a second control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := second.Stop(); err != nil {
			t.Errorf("stopping the second control plane: %v", err)
		}
	})
	return second
}

// needControlPlane skips the test in -short mode.
func needControlPlane(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the control plane; skipped in -short mode")
	}
}
