// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package loadaware

import (
	"fmt"
	"strings"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// usage is the node's CPU and memory utilization, in percent, as the args'
// usage reads them: the last sample (Instant), or that percentile of the
// node's window (status.windows). A series the node publishes no window
// for is read from the last sample, as Koordinator's LoadAware falls back
// to the instant usage of a node without aggregated usage.
func (pl *LoadAware) usage(tel *telemetry.Node) (cpu, memory int32) {
	cpu, memory = tel.CPUPercent, tel.MemoryPercent
	if w := tel.Windows; w != nil && pl.windowed() {
		if v, ok := percentile(w.CPU, pl.args.Usage); ok {
			cpu = v
		}
		if v, ok := percentile(w.Memory, pl.args.Usage); ok {
			memory = v
		}
	}
	return cpu, memory
}

// percentile is the figure of p that u names; false for Instant, or when
// p is unknown.
func percentile(p telemetry.Percentiles, u config.UsageType) (int32, bool) {
	if !p.Known {
		return 0, false
	}
	switch u {
	case config.UsageP50:
		return p.P50, true
	case config.UsageP90:
		return p.P90, true
	case config.UsageMax:
		return p.Max, true
	}
	return 0, false
}

// windowed reports whether the args judge a window rather than the last
// sample.
func (pl *LoadAware) windowed() bool {
	switch pl.args.Usage {
	case config.UsageP50, config.UsageP90, config.UsageMax:
		return true
	}
	return false
}

// measured says, for a rejection, which figure v of resource ("cpu",
// "memory") is: "measured 60" for the last sample, "p90 over 5m0s 75" for
// a window, and for a node without that window, that its last sample stood
// in.
func (pl *LoadAware) measured(tel *telemetry.Node, resource string, v int32) string {
	if !pl.windowed() {
		return fmt.Sprintf("measured %d", v)
	}
	name := strings.ToLower(string(pl.args.Usage))
	var p telemetry.Percentiles
	if tel.Windows != nil {
		p = tel.Windows.CPU
		if resource == "memory" {
			p = tel.Windows.Memory
		}
	}
	if !p.Known {
		return fmt.Sprintf("measured %d in the last sample: the node publishes no %s window for %s", v, resource, name)
	}
	return fmt.Sprintf("%s over %v %d", name, tel.Windows.Duration, v)
}
