// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Results of an eviction a plugin chose, the result label of
// telesched_descheduler_evictions_total.
const (
	// ResultEvicted: the Eviction API accepted it.
	ResultEvicted = "evicted"
	// ResultWouldEvict: --dry-run; it would have been evicted.
	ResultWouldEvict = "would_evict"
	// ResultRefusedPDB: the Eviction API refused it (429: a
	// PodDisruptionBudget allows no disruption now).
	ResultRefusedPDB = "refused_pdb"
	// ResultNoDestination: no node passes telesched's filters for it now.
	ResultNoDestination = "no_destination"
	// ResultRateLimited: --max-evictions-per-node-per-cycle or
	// --max-evictions-per-cycle reached.
	ResultRateLimited = "rate_limited"
	// ResultError: any other failure of the Eviction API.
	ResultError = "error"
)

var (
	evictionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "telesched_descheduler_evictions_total",
		Help:           "Evictions telesched's descheduler plugins chose, by plugin and result (evicted, would_evict, refused_pdb, no_destination, rate_limited, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"plugin", "result"})
	cycleSeconds = metrics.NewHistogram(&metrics.HistogramOpts{
		Name:           "telesched_descheduler_cycle_duration_seconds",
		Help:           "How long a descheduling cycle took.",
		Buckets:        metrics.ExponentialBuckets(0.001, 4, 10),
		StabilityLevel: metrics.ALPHA,
	})
	hotNodes = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "telesched_descheduler_hot_nodes",
		Help:           "Nodes TeleschedThermal found at or past limit - margin (measured or predicted) at its last cycle, sustained or not.",
		StabilityLevel: metrics.ALPHA,
	})
	leader = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "telesched_descheduler_leader",
		Help:           "1 while this replica runs descheduling cycles (holds the leader Lease, or runs with --leader-elect=false), else 0.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

// RegisterMetrics registers the descheduler's metrics with the legacy
// registry; later calls do nothing.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(evictionsTotal, cycleSeconds, hotNodes, leader)
	})
}

// SetHotNodes sets telesched_descheduler_hot_nodes.
func SetHotNodes(n int) { hotNodes.Set(float64(n)) }

// ObserveCycle records a cycle's duration.
func ObserveCycle(d time.Duration) { cycleSeconds.Observe(d.Seconds()) }

// SetLeader sets telesched_descheduler_leader.
func SetLeader(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	leader.Set(v)
}
