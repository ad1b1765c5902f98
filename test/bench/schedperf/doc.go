// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package schedperf runs Kubernetes' own scheduler benchmark,
// k8s.io/kubernetes/test/integration/scheduler_perf, on its own workload
// files, once with the default profile and once with telesched's profile
// (deploy/scheduler/scheduler-config.yaml's telesched profile, named
// default-scheduler so that upstream's pods use it), with NodeTelemetry
// for every node and a share of it changing while pods are measured.
//
// Its benchmark is behind the build tag schedperf, so go test ./... and
// make bench-go neither build nor run it: make bench-scheduler-perf does
// (docs/benchmarks.md, "scheduler_perf: Kubernetes' own workloads with
// telesched's plugins"). Its compare command prints each workload's
// throughput ratio from the data-items files the runs write.
package schedperf
