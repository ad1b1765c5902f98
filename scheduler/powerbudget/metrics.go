// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powerbudget

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// The domains' numbers, served on the scheduler's /metrics with
// kube-scheduler's own metrics, by every replica (each computes them from
// the same informers): aggregate with max by (budget).
var (
	budgetWatts = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "telesched_power_budget_watts",
		Help:           "A PowerBudget's budgetWatts.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"budget"})
	limitWatts = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "telesched_power_budget_limit_watts",
		Help:           "What pods may fill a PowerBudget's domain up to: budgetWatts - reserveWatts.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"budget"})
	measuredWatts = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name: "telesched_power_budget_measured_watts",
		Help: "A PowerBudget's domain's measured watts: its nodes' fresh watts, and unmeteredNodeWatts " +
			"(or the last watts seen) for nodes without fresh power telemetry.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"budget"})
	reservedWatts = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "telesched_power_budget_reserved_watts",
		Help:           "Estimated watts of the pods placed on a PowerBudget's nodes since their nodes' samples.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"budget"})
	headroomWatts = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "telesched_power_budget_headroom_watts",
		Help:           "budgetWatts - reserveWatts - measured - reserved watts of a PowerBudget; negative when over.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"budget"})
	budgetNodes = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "telesched_power_budget_nodes",
		Help:           "Nodes a PowerBudget's nodeSelector picks.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"budget"})
	nodesWithoutPower = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "telesched_power_budget_nodes_without_power",
		Help:           "Nodes of a PowerBudget without fresh power telemetry.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"budget"})
	// sourceNodes and sourcesWarning have a second label: set and deleted
	// by setSourceMetrics.
	sourceNodes = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name: "telesched_power_budget_source_nodes",
		Help: "Nodes of a PowerBudget whose own watts its measured watts count, by where those watts came from " +
			"(their status.power.sources joined by +, e.g. acpi+nvml). rapl is CPU packages and DRAM only.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"budget", "sources"})
	sourcesWarning = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name: "telesched_power_budget_sources_warning",
		Help: "1 while a PowerBudget's measured watts are not comparable with its feed's limit, by reason: PartialMeters " +
			"(some nodes' watts are RAPL, CPU packages and DRAM only, or NVML alone) or MixedSources (its nodes' meters differ); " +
			"its condition PowerSourcesComparable says which nodes. Absent otherwise.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"budget", "reason"})
	gauges = []*metrics.GaugeVec{budgetWatts, limitWatts, measuredWatts, reservedWatts, headroomWatts, budgetNodes, nodesWithoutPower}
)

var (
	registerOnce sync.Once
	metricsMu    sync.Mutex
	exported     = map[string]bool{}
)

// RegisterMetrics registers the budgets' metrics with kube-scheduler's
// registry; calls after the first do nothing.
func RegisterMetrics() {
	registerOnce.Do(func() {
		for _, g := range gauges {
			legacyregistry.MustRegister(g)
		}
		legacyregistry.MustRegister(sourceNodes, sourcesWarning)
	})
}

// ExportMetrics exports the domains' numbers at now (see Snapshot) and
// returns the snapshot they came from. RegisterMetrics must have been
// called.
func (d *Domains) ExportMetrics(now time.Time, maxAge time.Duration) *Snapshot {
	s := d.Snapshot(now, maxAge)
	setMetrics(s)
	return s
}

// setMetrics exports a snapshot's numbers and drops the series of budgets
// gone since.
func setMetrics(s *Snapshot) {
	metricsMu.Lock()
	defer metricsMu.Unlock()
	seen := map[string]bool{}
	for i := range s.Domains {
		d := &s.Domains[i]
		seen[d.Name] = true
		st := StatusOf(d, s.at)
		budgetWatts.WithLabelValues(d.Name).Set(float64(d.BudgetWatts))
		limitWatts.WithLabelValues(d.Name).Set(float64(d.LimitWatts()))
		measuredWatts.WithLabelValues(d.Name).Set(float64(*st.MeasuredWatts))
		reservedWatts.WithLabelValues(d.Name).Set(float64(*st.ReservedWatts))
		headroomWatts.WithLabelValues(d.Name).Set(float64(*st.HeadroomWatts))
		budgetNodes.WithLabelValues(d.Name).Set(float64(d.Nodes))
		nodesWithoutPower.WithLabelValues(d.Name).Set(float64(d.NodesWithoutPower))
		setSourceMetrics(d)
	}
	for name := range exported {
		if !seen[name] {
			for _, g := range gauges {
				g.DeleteLabelValues(name)
			}
			setSourceMetrics(&Domain{Name: name})
		}
	}
	exported = seen
}

// setSourceMetrics exports a domain's nodes by source and its warning,
// deleting the series that no longer hold (all of them for a domain with
// no nodes).
func setSourceMetrics(d *Domain) {
	for s, k := range d.SourceNodes {
		if s == 0 {
			continue
		}
		name := telemetry.PowerSources(s).String()
		if k > 0 {
			sourceNodes.WithLabelValues(d.Name, name).Set(float64(k))
		} else {
			sourceNodes.DeleteLabelValues(d.Name, name)
		}
	}
	c := SourcesCondition(d)
	for _, reason := range []string{ReasonPartialMeters, ReasonMixedSources} {
		if c.Status == metav1.ConditionFalse && c.Reason == reason {
			sourcesWarning.WithLabelValues(d.Name, reason).Set(1)
		} else {
			sourcesWarning.DeleteLabelValues(d.Name, reason)
		}
	}
}
