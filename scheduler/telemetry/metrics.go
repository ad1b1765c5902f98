package telemetry

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// skewedNodes is served on the scheduler's /metrics with kube-scheduler's
// own metrics.
var skewedNodes = metrics.NewGauge(&metrics.GaugeOpts{
	Name: "telesched_scheduler_telemetry_skewed_nodes",
	Help: "Nodes whose latest NodeTelemetry sampleTime was more than the clock skew tolerance " +
		"(--telemetry-clock-skew-tolerance) from the scheduler's clock when the scheduler saw it. " +
		"Their freshness is judged by the scheduler's clock; fix the agent's time source.",
	StabilityLevel: metrics.ALPHA,
})

var registerOnce sync.Once

// RegisterMetrics registers the cache's metrics with kube-scheduler's
// registry; calls after the first do nothing.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(skewedNodes) })
}
