// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package powercurve is telesched's one power-curve type: a node's watts
// (GPUs excluded) at 0 %, 10 % … 100 % CPU utilization, the load levels
// SPECpower_ssj2008 publishes, read between knots by linear interpolation.
// The agent learns and publishes curves of this shape (agent/powermodel);
// the scheduler reads them (scheduler/telemetry) and estimates a pod's
// marginal watts from them (scheduler/estimate). Both read a curve with At
// and Slope, so the watts the agent means are the watts the scheduler uses.
package powercurve

import (
	"fmt"
	"math"
)

// Knots is how many points a curve has: 0 %, 10 % … 100 %.
const Knots = 11

// Curve is watts at the knots.
type Curve [Knots]float64

// At is the curve at utilization u in [0, 1] (clamped), interpolated
// linearly between knots.
func (c *Curve) At(u float64) float64 {
	i, t := locate(u)
	return c[i] + (c[i+1]-c[i])*t
}

// Slope is the curve's slope at utilization u, watts per unit of
// utilization: the slope of the segment u lies in (the right one at a
// knot, the last one at 100 %).
func (c *Curve) Slope(u float64) float64 {
	i, _ := locate(u)
	return (c[i+1] - c[i]) * (Knots - 1)
}

// ConvexFrom reports whether the curve is convex from utilization u to
// 100 %: no segment from the one u lies in onward rises less steeply than
// the one before it. The watts a step of load adds from u then grow at
// least in proportion to the step.
func (c *Curve) ConvexFrom(u float64) bool {
	i, _ := locate(u)
	for ; i < Knots-2; i++ {
		if c[i+2]-c[i+1] < c[i+1]-c[i] {
			return false
		}
	}
	return true
}

// locate is the segment u lies in and where in it, in [0, 1].
func locate(u float64) (int, float64) {
	x := math.Min(1, math.Max(0, u)) * (Knots - 1)
	i := min(int(x), Knots-2)
	return i, x - float64(i)
}

// Check reports a curve that breaks physics: a knot that is not a finite
// number, negative watts, watts that fall as load rises, or watts above
// maxWatts (0: no bound). The error names the first offending knot by its
// load level.
func (c *Curve) Check(maxWatts float64) error {
	for k, w := range c {
		switch {
		case math.IsNaN(w) || math.IsInf(w, 0):
			return fmt.Errorf("watts at %d%% is %v", k*10, w)
		case w < 0:
			return fmt.Errorf("watts at %d%% is negative (%.0f)", k*10, w)
		case k > 0 && w < c[k-1]:
			return fmt.Errorf("watts fall from %.0f at %d%% to %.0f at %d%%", c[k-1], (k-1)*10, w, k*10)
		case maxWatts > 0 && w > maxWatts:
			return fmt.Errorf("watts at %d%% (%.0f) exceed the node's envelope of %.0f W", k*10, w, maxWatts)
		}
	}
	return nil
}
