// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package descheduler is telesched-descheduler: the Kubernetes
// descheduler's plugin framework (sigs.k8s.io/descheduler) run with
// telesched's plugins (TeleschedThermal, TeleschedPowerBudget) and upstream's DefaultEvictor,
// which honours PodDisruptionBudgets through the Eviction API, the
// priority threshold, DaemonSet pods, pods with local storage and
// mirror/static pods.
//
// It takes the framework with our own wiring of its profile and evictor:
// profile.NewProfile, defaultevictor and evictions.PodEvictor are
// upstream's, and this package's Descheduler builds them and runs one
// cycle per interval, where upstream's run loop (pkg/descheduler) would.
// That loop does not build beside k8s.io/kubernetes 1.37: it imports the
// nodeutilization plugin, written for client_golang v1.23's Prometheus API
// (promv1.API.Query returning 3 values; v1.25, which Kubernetes 1.37
// needs, returns 4). The wiring goes once nodeutilization moves to
// client_golang >= 1.25's promv1 API and upstream's run loop builds here.
//
// Every eviction goes through a Gate: a pod is evicted only when the
// scheduler's own profile, run in process on a snapshot of the cluster
// that holds every move the cycle planned (Simulator), finds it a
// destination, never twice within a cool-down, and the Event on the pod
// names the destination.
package descheduler
