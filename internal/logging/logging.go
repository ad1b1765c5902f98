// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package logging sets up the logs of telesched's own binaries (the agent,
// its relays and the descheduler) as Kubernetes components set up theirs
// (k8s.io/component-base/logs/api/v1, as telesched-scheduler, which is
// kube-scheduler, does): --logging-format text (klog's) or json (one JSON
// object a line, for log pipelines), -v and --vmodule.
package logging

import (
	"fmt"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
	// The json format, as kube-scheduler registers it.
	_ "k8s.io/component-base/logs/json/register"
)

// AddFlags adds the logging flags to fs and returns the configuration
// they set; call Apply after parsing.
func AddFlags(fs *pflag.FlagSet) *logsapi.LoggingConfiguration {
	c := logsapi.NewLoggingConfiguration()
	logsapi.AddFlags(c, fs)
	return c
}

// Apply validates c and makes it the process's logging.
func Apply(c *logsapi.LoggingConfiguration) error {
	if err := logsapi.ValidateAndApply(c, nil); err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	return nil
}
