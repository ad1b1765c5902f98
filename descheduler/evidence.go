// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// SampledAfter reports whether n's sample was taken after t, by its
// agent's clock, and seen after it by the cache's: a sample taken before
// pods left a node shows them still there.
func SampledAfter(n *telemetry.Node, t time.Time) bool {
	return n.Observed.After(t) && (n.SampleTime.IsZero() || n.SampleTime.After(t))
}

// PodFrees is what a pod of demand d (its load on node n:
// estimate.Book.Busy) drops n's power curve by when it leaves, once the
// pods gone, of the same node, have left too: a curve is steeper at high
// load, so a second pod leaving frees less than it would alone. False
// when n has no curve to price it on.
func PodFrees(book *estimate.Book, n *telemetry.Node, d estimate.Demand, gone []*v1.Pod) (float64, bool) {
	less := d.CPUMilli
	for _, g := range gone {
		less += book.Busy(n, g).CPUMilli
	}
	w, ok := book.PodWatts(n, d, estimate.Demand{CPUMilli: -less})
	return w.Mean, ok
}

// SampleTimeLayout is how an eviction's Event names the time of the
// sample it was decided on: RFC 3339 to the millisecond, as a sample a
// moment after an eviction must read as after it.
const SampleTimeLayout = "2006-01-02T15:04:05.000Z07:00"
