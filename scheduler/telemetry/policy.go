package telemetry

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/telesched/telesched/apis/config"
)

// What every telesched plugin does the same way with telemetry.

// NoTelemetry marks, in a plugin's Score, a node without fresh telemetry;
// NormalizeMissing then gives it the lowest score of the others, so it is
// neither rejected nor favoured.
const NoTelemetry = -1

// StaleStatus is Filter's answer for a node whose telemetry is missing (n is
// nil) or older than args.TelemetryMaxAge at now: nothing under the Ignore
// policy, Unschedulable with the age under Reject.
func StaleStatus(args config.TelemetryArgs, n *Node, now time.Time) *fwk.Status {
	if args.StaleTelemetryPolicy != config.StaleTelemetryReject {
		return nil
	}
	if n == nil {
		return fwk.NewStatus(fwk.Unschedulable, "node has no NodeTelemetry (staleTelemetryPolicy Reject)")
	}
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node telemetry is %s old > telemetryMaxAge %s (staleTelemetryPolicy Reject)",
		now.Sub(n.SampleTime).Round(time.Second), args.TelemetryMaxAge))
}

// NormalizeMissing replaces NoTelemetry scores with the lowest other score,
// or MinScore when no node has telemetry.
func NormalizeMissing(scores fwk.NodeScoreList) {
	lowest := int64(fwk.MaxScore + 1)
	for _, s := range scores {
		if s.Score != NoTelemetry {
			lowest = min(lowest, s.Score)
		}
	}
	if lowest > fwk.MaxScore {
		lowest = fwk.MinScore
	}
	for i := range scores {
		if scores[i].Score == NoTelemetry {
			scores[i].Score = lowest
		}
	}
}

// ObserveChange decodes the objects of a NodeTelemetry event that a
// QueueingHint receives, stores the new one (see Observe), and returns both;
// prev is nil for an added object.
func (c *Cache) ObserveChange(oldObj, newObj any) (prev, cur *Node, err error) {
	nu, ok := newObj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("NodeTelemetry event with a %T", newObj)
	}
	if cur, err = Decode(nu); err != nil {
		return nil, nil, err
	}
	c.Observe(cur)
	if ou, ok := oldObj.(*unstructured.Unstructured); ok {
		prev, _ = Decode(ou)
	}
	return prev, cur, nil
}
