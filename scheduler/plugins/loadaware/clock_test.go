// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// clock is the scheduler's clock in these tests, at now unless a test
// moves it.
var clock = plugintest.NewClock(now)

func newCache() *telemetry.Cache { return plugintest.NewCache(clock) }

// observe stores st's view as the cache sees a sample from an agent in step
// with the scheduler: at its sampleTime.
func observe(c *telemetry.Cache, name string, st *telemetryv1alpha1.NodeTelemetryStatus) {
	plugintest.Observe(c, clock, name, st)
}
