// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1alpha1 holds the telemetry.telesched.io/v1alpha1 API: the
// NodeTelemetry object the node agent publishes and the scheduler reads,
// and the PowerBudget of a power domain. Its typed client (clientset,
// listers, informers, apply configurations) is generated under
// apis/telemetry/client.
//
// The group name is here, in doc.go, where Kubernetes' code generators
// read it (controller-gen reads any file of the package).
//
// +kubebuilder:object:generate=true
// +groupName=telemetry.telesched.io
package v1alpha1
