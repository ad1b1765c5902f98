// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins the node components of the real-node cluster (make
// node-up, make test-node): the kubelet, kube-proxy,
// kube-controller-manager, kube-scheduler (which places the DaemonSet's and
// Deployment's pods, as on any cluster) and kubectl, built from the same k8s.io/kubernetes release
// as bin/kube-apiserver. A module of its own keeps their dependencies
// (cadvisor, netlink, knftables, ...) out of telesched's go.mod.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
