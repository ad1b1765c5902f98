// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins containerd, whose containerd and ctr commands the
// real-node cluster (make node-up, make test-node) runs as its CRI runtime.
// Kubernetes 1.37's kubelet needs containerd 2.x; Debian 12 ships 1.6.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
