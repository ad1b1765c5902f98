// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package scheduler embeds telesched-scheduler's default configuration, so
// the sandbox runs the scheduler exactly as deployed.
package scheduler

import _ "embed"

// Config is scheduler-config.yaml: a KubeSchedulerConfiguration with the
// telesched profile and every plugin arg at its default.
//
//go:embed scheduler-config.yaml
var Config []byte
