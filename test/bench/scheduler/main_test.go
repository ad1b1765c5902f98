// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"testing"
)

func TestMedianKeepsAlikeRoundsOnly(t *testing.T) {
	tests := []struct {
		name string
		v    []float64
		keep []bool
		want float64
	}{
		{name: "every round", v: []float64{3, 1, 2}, keep: []bool{true, true, true}, want: 2},
		// rounds 1 and 3: (3+2)/2 = 2.5
		{name: "a round left out", v: []float64{3, 100, 2}, keep: []bool{true, false, true}, want: 2.5},
		// two values a round (1st / 2nd run), round 2 left out: 1, 2, 5, 6 -> (2+5)/2
		{name: "two values a round", v: []float64{1, 2, 90, 91, 5, 6}, keep: []bool{true, false, true}, want: 3.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := median(tc.v, tc.keep); got != tc.want {
				t.Errorf("median(%v, %v) = %v, want %v", tc.v, tc.keep, got, tc.want)
			}
		})
	}
	if got := median([]float64{1, 2}, []bool{false, false}); !math.IsNaN(got) {
		t.Errorf("median of no alike round = %v, want NaN", got)
	}
}

func TestAlikeNeedsTheSameFlush(t *testing.T) {
	tests := []struct {
		name       string
		flushInRun bool
		a, b       float64
		want       bool
	}{
		{name: "neither flushed", a: 0, b: 0, want: true},
		{name: "one flushed", a: 0, b: 23, want: false},
		{name: "both flushed alike", a: 5, b: 5, want: true},
		{name: "unknown count", a: -1, b: 0, want: false},
		{name: "flush in run: both flushed", flushInRun: true, a: 1000, b: 700, want: true},
		{name: "flush in run: one held none", flushInRun: true, a: 0, b: 23, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := flushInRun
			flushInRun = tc.flushInRun
			defer func() { flushInRun = old }()
			if got := alike(tc.a, tc.b); got != tc.want {
				t.Errorf("alike(%v, %v) with -flush-in-run=%v = %v, want %v", tc.a, tc.b, tc.flushInRun, got, tc.want)
			}
		})
	}
}
