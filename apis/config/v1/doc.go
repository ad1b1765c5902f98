// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1 holds the versioned arguments of telesched's scheduler plugins,
// kubescheduler.config.k8s.io/v1 LoadAwareArgs, TopologyFitArgs and
// EnergyAwareArgs, as written in a KubeSchedulerConfiguration's
// pluginConfig[].args. Fields are pointers so that an unset field can be told
// from a zero one and defaulted (SetDefaults_<Plugin>Args); conversion to the
// internal types in package config follows defaulting.
//
// +kubebuilder:object:generate=true
package v1
