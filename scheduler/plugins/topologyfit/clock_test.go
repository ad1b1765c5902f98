// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import (
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// clock is the scheduler's clock in these tests, at now unless a test
// moves it.
var clock = plugintest.NewClock(now)

func newCache() *telemetry.Cache { return plugintest.NewCache(clock) }
