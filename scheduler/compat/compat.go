// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package compat checks, before the scheduler starts its informers, that
// the API server is a version this scheduler supports. Against an older
// server kube-scheduler's informers wait forever for APIs it does not
// serve (resource.k8s.io/v1 before 1.34, for one), so the scheduler would
// hang without a word; it stops instead, naming both versions.
package compat

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// KubernetesMinor is the minor version of the k8s.io/kubernetes module the
// scheduler is built from (go.mod; TestKubernetesMinorMatchesGoMod keeps
// them equal).
const KubernetesMinor = 37

// Kubernetes' version skew policy
// (https://kubernetes.io/releases/version-skew-policy/): kube-scheduler
// must not be newer than kube-apiserver, and may be up to one minor
// version older. These are the API server minors this scheduler supports,
// and the README's compatibility matrix.
const (
	MinServerMinor = KubernetesMinor
	MaxServerMinor = KubernetesMinor + 1
)

// SkipFlag is the flag that starts the scheduler against any server.
const SkipFlag = "--skip-server-version-check"

// Check asks the API server of cfg for its version and returns an error
// naming it when it is outside MinServerMinor..MaxServerMinor.
func Check(cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("checking the API server's version: %w", err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("checking the API server's version: %w", err)
	}
	minor, err := parseMinor(info.Major, info.Minor)
	if err != nil {
		return fmt.Errorf("checking the API server's version %s: %w; %s starts the scheduler anyway", info.GitVersion, err, SkipFlag)
	}
	// A build from source without Kubernetes' release stamping says
	// v0.0.0-master; the major and minor are always its own.
	server := fmt.Sprintf("1.%d", minor)
	if info.GitVersion != "" && !strings.HasPrefix(info.GitVersion, "v0.0.0") {
		server += " (" + info.GitVersion + ")"
	}
	switch {
	case minor < MinServerMinor:
		return fmt.Errorf("the API server is Kubernetes %s, older than this scheduler (1.%d): kube-scheduler must not be newer than its API server (Kubernetes' version skew policy), and it would wait forever for APIs that server may not serve; supported API servers are 1.%d and 1.%d (README, Compatibility); %s starts it anyway",
			server, KubernetesMinor, MinServerMinor, MaxServerMinor, SkipFlag)
	case minor > MaxServerMinor:
		return fmt.Errorf("the API server is Kubernetes %s, more than one minor version newer than this scheduler (1.%d), outside Kubernetes' version skew policy and untested; supported API servers are 1.%d and 1.%d (README, Compatibility); %s starts it anyway",
			server, KubernetesMinor, MinServerMinor, MaxServerMinor, SkipFlag)
	}
	return nil
}

// parseMinor reads a /version major and minor ("1", "36" or "36+", as
// some distributions write it).
func parseMinor(major, minor string) (int, error) {
	if major != "1" {
		return 0, fmt.Errorf("major version %q, want 1", major)
	}
	m, err := strconv.Atoi(strings.TrimSuffix(minor, "+"))
	if err != nil {
		return 0, fmt.Errorf("minor version %q: %w", minor, err)
	}
	return m, nil
}
