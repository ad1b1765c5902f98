// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package metricfam reads series out of parsed Prometheus metric families,
// for the tests and benchmarks that scrape a component's /metrics.
package metricfam

import (
	"slices"

	dto "github.com/prometheus/client_model/go"
)

// Matching is the family's metrics whose labels include want; nil when
// the family is absent.
func Matching(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
next:
	for _, m := range fams[name].GetMetric() {
		for k, v := range want {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// CounterSum is the sum of the matching counters; 0 when there are none.
func CounterSum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range Matching(fams, name, want) {
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// HistogramCount is the sample count of the matching histograms.
func HistogramCount(fams map[string]*dto.MetricFamily, name string, want map[string]string) uint64 {
	var n uint64
	for _, m := range Matching(fams, name, want) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}
