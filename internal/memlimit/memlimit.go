// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package memlimit sets the Go runtime's soft memory limit below the
// container's memory limit. At the limit itself (GOMEMLIMIT set from
// limits.memory) the collector starts working hard only when the kernel
// is about to OOM-kill the container, and the memory cgroup also charges
// pages the runtime does not count (the binary's, thread stacks): the
// soft limit needs headroom under the hard one.
package memlimit

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
)

// Environment the manifests set: the container's memory limit in bytes
// (a resourceFieldRef of limits.memory), and the share of it the soft
// limit takes.
const (
	LimitEnv    = "TELESCHED_MEMORY_LIMIT"
	FractionEnv = "TELESCHED_MEMORY_LIMIT_FRACTION"
)

// DefaultFraction is the soft limit's share of the container's limit:
// 10 % left for what the runtime does not count and for the collector to
// catch up.
const DefaultFraction = 0.9

// Apply sets the soft memory limit to the fraction (FractionEnv, else
// DefaultFraction) of LimitEnv, and returns it; 0 when GOMEMLIMIT is set
// (the runtime honors it) or LimitEnv is not. A value that does not parse
// is an error.
func Apply() (int64, error) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return 0, nil
	}
	raw, set := os.LookupEnv(LimitEnv)
	if !set || raw == "" {
		return 0, nil
	}
	limit, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("%s=%q: want the container's memory limit in bytes", LimitEnv, raw)
	}
	fraction := DefaultFraction
	if f, set := os.LookupEnv(FractionEnv); set && f != "" {
		if fraction, err = strconv.ParseFloat(f, 64); err != nil || fraction < 0.5 || fraction > 1 {
			return 0, fmt.Errorf("%s=%q: want a fraction from 0.5 to 1", FractionEnv, f)
		}
	}
	soft := int64(float64(limit) * fraction)
	debug.SetMemoryLimit(soft)
	return soft, nil
}
