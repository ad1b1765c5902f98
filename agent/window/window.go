// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package window keeps a node's recent samples and summarizes them as the
// NodeTelemetry status.windows: percentiles of CPU and memory utilization,
// of the thermal margin and of node watts over the agent's --window.
package window

import (
	"fmt"
	"slices"
	"time"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/heat"
)

// DefaultDuration is the default --window.
const DefaultDuration = 5 * time.Minute

// MaxSamples bounds the ring: a window holds at most this many samples, so
// its memory is at most MaxSamples entries of a few words whatever the
// flags say (--window / --sample-interval may not exceed it).
const MaxSamples = 3600

// MaxDuration is the longest window the API's durationSeconds takes.
const MaxDuration = 24 * time.Hour

// The series a window keeps; one bit each in entry.has.
const (
	cpu = iota
	memory
	margin
	watts
	numSeries
)

// entry is one sample's values; has says which series it carries.
type entry struct {
	at  time.Time
	val [numSeries]int32
	has [numSeries]bool
}

// Window is a ring of the last Capacity samples. It is not safe for
// concurrent use.
type Window struct {
	duration time.Duration
	// ring holds the samples, oldest at next once full.
	ring []entry
	next int
	full bool
	// minSamples is how many samples a series needs to be published.
	minSamples int
	// scratch is reused to sort one series.
	scratch []int32
}

// New returns a window of duration for samples taken every interval: a ring
// of duration/interval samples. The window must hold at least two samples
// and at most MaxSamples.
func New(duration, interval time.Duration) (*Window, error) {
	if err := Validate(duration, interval); err != nil {
		return nil, err
	}
	n := int(duration / interval)
	return &Window{
		duration:   duration,
		ring:       make([]entry, n),
		minSamples: MinSamples(n),
		scratch:    make([]int32, 0, n),
	}, nil
}

// MinSamples is how many samples of a series a window of capacity n needs
// before it publishes the series: half a full window, and at least 2. A
// percentile over a few samples after a restart would read one spike as the
// node's p90.
func MinSamples(n int) int {
	return max(2, (n+1)/2)
}

// Validate reports a window that holds fewer than two samples of interval,
// more than MaxSamples, or is longer than MaxDuration.
func Validate(duration, interval time.Duration) error {
	switch {
	case interval <= 0:
		return fmt.Errorf("sample interval %v: must be positive", interval)
	case duration < 2*interval:
		return fmt.Errorf("window %v: must hold at least two samples of %v (at least %v)", duration, interval, 2*interval)
	case duration > MaxDuration:
		return fmt.Errorf("window %v: must be at most %v", duration, MaxDuration)
	case duration/interval > MaxSamples:
		return fmt.Errorf("window %v: holds %d samples of %v, more than %d; lengthen the sample interval or shorten the window", duration, duration/interval, interval, MaxSamples)
	}
	return nil
}

// Capacity is how many samples the ring holds.
func (w *Window) Capacity() int { return len(w.ring) }

// Add records the status sampled at now. The thermal margin is the node's
// effective headroom (internal/heat, the rule the Overheating condition
// uses), a sensor without a limit held against absoluteMilli.
func (w *Window) Add(now time.Time, st *telemetryv1alpha1.NodeTelemetryStatus, absoluteMilli int64) {
	e := entry{at: now}
	if st.CPU != nil {
		e.val[cpu], e.has[cpu] = st.CPU.UtilizationPercent, true
	}
	if st.Memory != nil {
		e.val[memory], e.has[memory] = st.Memory.UtilizationPercent, true
	}
	if h := heat.OfStatus(st.Thermal, absoluteMilli); h.Known {
		e.val[margin], e.has[margin] = floorCelsius(h.MilliCelsius), true
	}
	if st.Power != nil {
		e.val[watts], e.has[watts] = st.Power.Watts, true
	}
	w.ring[w.next] = e
	w.next++
	if w.next == len(w.ring) {
		w.next, w.full = 0, true
	}
}

// floorCelsius is millidegrees in whole degrees, rounded down (-0.5°C is
// -1), clamped to the API's ±2000°C: a margin reads no larger than it is.
func floorCelsius(milli int64) int32 {
	c := milli / 1000
	if milli%1000 < 0 {
		c--
	}
	return int32(min(max(c, -2000), 2000))
}

// Summary summarizes the samples taken within the window before now; nil
// when no series has enough samples. A series with fewer than MinSamples
// samples (its source missing, or the agent just started) is absent.
func (w *Window) Summary(now time.Time) *telemetryv1alpha1.WindowsStatus {
	since := now.Add(-w.duration)
	samples := 0
	for i := range w.entries() {
		if w.ring[i].at.After(since) {
			samples++
		}
	}
	s := &telemetryv1alpha1.WindowsStatus{
		DurationSeconds: int32(w.duration / time.Second),
		Samples:         int32(samples),
	}
	if v := w.series(cpu, since); v != nil {
		s.CPUPercent = usage(v)
	}
	if v := w.series(memory, since); v != nil {
		s.MemoryPercent = usage(v)
	}
	if v := w.series(margin, since); v != nil {
		s.ThermalMarginCelsius = &telemetryv1alpha1.MarginWindow{Min: v[0], P10: Percentile(v, 10), P50: Percentile(v, 50)}
	}
	if v := w.series(watts, since); v != nil {
		s.Watts = usage(v)
	}
	if s.CPUPercent == nil && s.MemoryPercent == nil && s.ThermalMarginCelsius == nil && s.Watts == nil {
		return nil
	}
	return s
}

// entries ranges over the ring's filled indexes.
func (w *Window) entries() func(yield func(int) bool) {
	n := w.next
	if w.full {
		n = len(w.ring)
	}
	return func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
}

// series returns the values of series k sampled after since, sorted, in
// the window's scratch buffer; nil when there are fewer than minSamples.
func (w *Window) series(k int, since time.Time) []int32 {
	v := w.scratch[:0]
	for i := range w.entries() {
		if e := &w.ring[i]; e.has[k] && e.at.After(since) {
			v = append(v, e.val[k])
		}
	}
	if len(v) < w.minSamples {
		return nil
	}
	slices.Sort(v)
	return v
}

func usage(sorted []int32) *telemetryv1alpha1.UsageWindow {
	return &telemetryv1alpha1.UsageWindow{P50: Percentile(sorted, 50), P90: Percentile(sorted, 90), Max: sorted[len(sorted)-1]}
}

// Percentile is the nearest-rank p-th percentile of sorted values: the
// smallest value with at least p% of the values at or below it. sorted must
// not be empty.
func Percentile(sorted []int32, p int) int32 {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 × n)
	return sorted[max(rank, 1)-1]
}
