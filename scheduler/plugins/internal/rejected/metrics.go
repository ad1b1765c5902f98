// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package rejected

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Causes of an activation, the metric's cause label.
const (
	causeTelemetry = "telemetry"
	causeRelease   = "release"
)

// activated counts the pods the plugins move back to the active queue.
var activated = metrics.NewCounterVec(&metrics.CounterOpts{
	Name: "telesched_scheduler_pods_activated_total",
	Help: "Pending pods a telesched plugin moved back to the scheduler's active queue, by plugin and cause: " +
		"telemetry (a NodeTelemetry change let them in by the plugin's Filter predicate), release (a reservation " +
		"given back: expired, or its pod gone). The plugins register no NodeTelemetry event with the scheduling " +
		"queue: these are how the pods they rejected come back before kube-scheduler's flush of unschedulable pods.",
	StabilityLevel: metrics.ALPHA,
}, []string{"plugin", "cause"})

var registerOnce sync.Once

// registerMetrics registers the package's metrics with kube-scheduler's
// registry when the first plugin starts (OnTelemetry); calls after the
// first do nothing.
func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(activated) })
}
