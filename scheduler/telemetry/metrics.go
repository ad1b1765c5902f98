// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

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

// rejected counts what the cache refused of published telemetry as
// breaking physics, by what it was.
var rejected = metrics.NewCounterVec(&metrics.CounterOpts{
	Name: "telesched_scheduler_telemetry_rejected_total",
	Help: "NodeTelemetry values the scheduler refused as implausible, by what: power_curve (falling, negative or beyond " +
		"--telemetry-max-node-watts; the node reads as having no curve), gpu_model, watts (beyond the node's envelope: its own curve, " +
		"or without one --telemetry-max-node-base-watts, --telemetry-max-watts-per-core and --telemetry-max-watts-per-gpu), " +
		"watts_below_idle (below --telemetry-idle-floor-percent of the node's own curve at idle, less 3 x its uncertainty there); " +
		"refused watts read as missing and the node's last plausible watts count for --telemetry-power-hold. The scheduler's log names the node.",
	StabilityLevel: metrics.ALPHA,
}, []string{"what"})

// readyAgentNodes is the number of nodes whose agent pod is Ready.
var readyAgentNodes = metrics.NewGauge(&metrics.GaugeOpts{
	Name: "telesched_scheduler_telemetry_ready_agent_nodes",
	Help: "Nodes on which a pod of the agent's DaemonSets (--telemetry-agent-namespace, --telemetry-agent-daemonsets, " +
		"--telemetry-agent-pod-selector) is Ready: their NodeTelemetry is fresh for " +
		"--telemetry-max-age-ready-agent, the others' for the plugins' telemetryMaxAge. Far below the nodes with telemetry: " +
		"the selector does not match the agent's pods, and a quiet node's telemetry goes stale between heartbeats.",
	StabilityLevel: metrics.ALPHA,
})

// ignoredAgentPods is the number of pods with the agent's labels that no
// DaemonSet of the agent's controls.
var ignoredAgentPods = metrics.NewGauge(&metrics.GaugeOpts{
	Name: "telesched_scheduler_telemetry_ignored_agent_pods",
	Help: "Pods in --telemetry-agent-namespace selected by --telemetry-agent-pod-selector whose controller is none of " +
		"--telemetry-agent-daemonsets (by name and UID): they do not keep their node's NodeTelemetry fresh. Above zero: a pod " +
		"imitating the agent, or flags that do not name the agent's DaemonSets; the scheduler's log (-v=2) names each pod.",
	StabilityLevel: metrics.ALPHA,
})

var registerOnce sync.Once

// RegisterMetrics registers the cache's metrics with kube-scheduler's
// registry; calls after the first do nothing.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(skewedNodes, rejected, readyAgentNodes, ignoredAgentPods) })
}
