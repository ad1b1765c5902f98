// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package config holds the internal, unversioned types of the arguments of
// telesched's scheduler plugins (LoadAware, TopologyFit, EnergyAware,
// PowerBudget), the form a plugin's New receives once kube-scheduler has
// decoded, defaulted and converted its configuration. Fields are plain values: every default has
// been applied by the time a plugin sees them. The versioned form users write
// lives in package v1, validation in package validation, and registration
// with kube-scheduler's schemes in package scheme.
//
// +kubebuilder:object:generate=true
package config
