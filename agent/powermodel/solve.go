// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powermodel

import (
	"math"

	"github.com/telesched/telesched/internal/powercurve"
)

// The curve is solved for as one penalized least-squares problem whose
// unknowns are the watts at the knots, c[0] … c[10]. Each segment k
// (between knots k and k+1) has a local scale, its step over the shape's
// step there, (c[k+1] − c[k]) / (s[k+1] − s[k]): the watts the curve would
// span from 0 % to 100 % if it had the shape s throughout. Two kinds of
// terms:
//
//   - each bin pulls the curve at its mean utilization towards its mean
//     watts, weighed by 1/se², se being the standard error of its mean;
//   - each pair of adjacent segments pulls their local scales together,
//     weighed by 1/σ², σ being ShapeDrift times the curve's scale: the
//     curve may bend away from the shape, a little at every knot.
//
// With a prior, one more term pulls the curve's span c[10] − c[0] towards
// the prior's, loosely (one standard deviation is twice the prior's span:
// a RAPL limit bounds the node's power, it does not measure it), so that
// a node whose samples have no spread yet still has a scale.
//
// Where samples are many the bins decide every knot, as before; where they
// are few and noisy (a ramp's three samples a level) a segment's slope
// rests on the bins of its neighbours too, through the shape, not on two
// noisy bins; where there are none (below the lowest bin, above the
// highest) the curve continues with the shape at the local scale of the
// nearest segment the samples reach: the shape relative to the node's own
// slope where it runs, not the prior's absolute watts, nor a line through
// the two outermost bins, which flattens the climb from idle. The knots'
// uncertainty is the solution's standard error (the diagonal of the
// inverted normal matrix): about the bins' standard errors where they
// are, growing by σ times the shape's steps with every segment beyond.
//
// The solution is kept non-decreasing by solving again with knots that
// fall tied together (an active set: the least-squares counterpart of
// pool-adjacent-violators), so noise in a few bins neither pools them
// away nor makes the curve fall.

// ShapeDrift is how far the local scale of a segment may differ from its
// neighbour's (one standard deviation), as a fraction of the curve's
// span. Against Shape (the R740's), the other current servers of the
// SPECpower tests (R640, R830, R940) change their local scale by at most
// 0.35 of their span from one segment to the next (once 0.55, the R830's
// top), except from the climb from idle to the next segment (0.40-0.56);
// the 2008 machines by up to 0.55, and by 2 there, which their samples
// must show. In the sandbox's loop (the nodes and read timings of
// sandbox/sim's TestLearnedSlopeAtOperatingPoint, ten runs each) 0.25
// kept the slope and the marginal watts where the node runs within 11 %;
// 0.15 held the R830 too close to Shape (14 %), 0.35 and 0.5 let noisy
// ramps take the R940 to 14 % and 18 %.
const ShapeDrift = 0.25

// IdleShapeDrift is the drift the knots' uncertainty allows between the
// first two segments (the climb from idle and the segment above it),
// where the servers differ most: the R640's, R830's and R940's climbs
// from idle have 0.63-0.69 of their next segment's local scale, Shape's
// the same. The knots themselves follow ShapeDrift there too, which keeps
// a node whose hardware Shape describes close to its idle.
const IdleShapeDrift = 0.6

// point is a bin as the solve takes it.
type point struct {
	util, watts float64
	// weight is the samples behind it; se is the standard error of its
	// mean watts.
	weight, se float64
}

// shapeOf is the prior's normalized shape (0 at 0 %, 1 at 100 %), or
// Shape without a prior or with one that does not rise. No step is let
// below a tenth of the mean step, so every segment has a local scale.
func shapeOf(p *PriorCurve) powercurve.Curve {
	s := Shape
	if p != nil && p.Watts[Knots-1] > p.Watts[0] {
		for k := range s {
			s[k] = (p.Watts[k] - p.Watts[0]) / (p.Watts[Knots-1] - p.Watts[0])
		}
	}
	const minStep = 0.1 / (Knots - 1)
	for k := 1; k < Knots; k++ {
		s[k] = math.Max(s[k], s[k-1]+minStep)
	}
	return s
}

// term is w·(g·c − y)², g having up to three non-zero entries: v[i]
// at knot k[i].
type term struct {
	k    [3]int
	v    [3]float64
	y, w float64
}

// fitCurve fits the knots to the points (at least one) under the shape
// s; span > 0 is the prior's c[10] − c[0]. It returns the knots,
// non-decreasing and not negative, and their standard errors; ok is false
// when the problem could not be solved.
func fitCurve(pts []point, s powercurve.Curve, span float64) (watts, se powercurve.Curve, ok bool) {
	scale := pilotScale(pts, s, span)
	var groups []int // groups[k]: the unknown knot k is tied to
	// σ scales with the curve's span, which the first pass finds from
	// the pilot's.
	for range 2 {
		terms := curveTerms(pts, s, span, scale, ShapeDrift, ShapeDrift)
		groups = identity()
		for range Knots { // each round ties at least one more pair
			x, inv, solved := solveGroups(terms, groups)
			if !solved {
				return watts, se, false
			}
			for k := range watts {
				watts[k] = x[groups[k]]
				se[k] = math.Sqrt(math.Max(0, inv[groups[k]]))
			}
			k, fall := steepestFall(watts, groups)
			if fall <= 0 {
				break
			}
			tie(groups, k)
		}
		scale = math.Max(watts[Knots-1]-watts[0], 0.1*pilotScale(pts, s, span))
	}
	// The knots follow Shape's climb from idle as closely as its other
	// segments (the best guess), but their uncertainty allows the spread
	// the servers show there.
	if _, inv, solved := solveGroups(curveTerms(pts, s, span, scale, ShapeDrift, IdleShapeDrift), groups); solved {
		for k := range se {
			se[k] = math.Max(se[k], math.Sqrt(math.Max(0, inv[groups[k]])))
		}
	}
	if watts[0] < 0 { // steep shape, noisy low bins: never below 0 W
		for k := range watts {
			watts[k] = math.Max(0, watts[k])
		}
	}
	return watts, se, true
}

// curveTerms are the least-squares terms for the points, with the
// shape's drift σ taken from scale.
func curveTerms(pts []point, s powercurve.Curve, span, scale, drift, idleDrift float64) []term {
	var terms []term
	for _, p := range pts {
		i, t := segment(p.util)
		terms = append(terms, term{k: [3]int{i, i + 1}, v: [3]float64{1 - t, t}, y: p.watts, w: 1 / (p.se * p.se)})
	}
	for k := range Knots - 2 {
		sigma := drift*scale + 1
		if k == 0 {
			sigma = idleDrift*scale + 1
		}
		a, b := s[k+1]-s[k], s[k+2]-s[k+1]
		// (c[k+2] − c[k+1])/b − (c[k+1] − c[k])/a, in watts of span.
		terms = append(terms, term{k: [3]int{k, k + 1, k + 2}, v: [3]float64{1 / a, -1/a - 1/b, 1 / b}, w: 1 / (sigma * sigma)})
	}
	if span > 0 {
		terms = append(terms, term{k: [3]int{0, Knots - 1}, v: [3]float64{-1, 1}, y: span, w: 1 / (4 * span * span)})
	}
	// A whisper towards the pilot keeps a single bin solvable; any two
	// bins apart outweigh it.
	terms = append(terms, term{k: [3]int{0, Knots - 1}, v: [3]float64{-1, 1}, y: pilotScale(pts, s, span), w: 1e-12})
	return terms
}

// pilotScale is the span to start from: the prior's when there is one,
// else the rise from the lowest bin to the highest over the shape's rise
// between them, else (bins too close) a tenth of their watts.
func pilotScale(pts []point, s powercurve.Curve, span float64) float64 {
	if span > 0 {
		return span
	}
	if len(pts) >= 2 {
		lo, hi := pts[0], pts[len(pts)-1]
		if ds := s.At(hi.util) - s.At(lo.util); ds > 0.05 && hi.watts > lo.watts {
			return (hi.watts - lo.watts) / ds
		}
	}
	var w float64
	for _, p := range pts {
		w = math.Max(w, p.watts)
	}
	return 0.1*w + 1
}

// segment is the segment u lies in and where in it, in [0, 1].
func segment(u float64) (int, float64) {
	x := math.Min(1, math.Max(0, u)) * (Knots - 1)
	i := min(int(x), Knots-2)
	return i, x - float64(i)
}

func identity() []int {
	g := make([]int, Knots)
	for k := range g {
		g[k] = k
	}
	return g
}

// steepestFall is the knot k where the curve falls most to k+1 between
// two groups, and by how much.
func steepestFall(watts powercurve.Curve, groups []int) (int, float64) {
	at, fall := -1, 0.0
	for k := 0; k+1 < Knots; k++ {
		if groups[k] != groups[k+1] && watts[k]-watts[k+1] > fall {
			at, fall = k, watts[k]-watts[k+1]
		}
	}
	return at, fall
}

// tie merges the group of knot k+1 into k's and renumbers the groups
// 0, 1, … in order.
func tie(groups []int, k int) {
	from, to := groups[k+1], groups[k]
	for i := range groups {
		if groups[i] == from {
			groups[i] = to
		}
	}
	next, last := -1, -1
	for i := range groups {
		if groups[i] != last {
			next++
			last = groups[i]
		}
		groups[i] = next
	}
}

// solveGroups solves the normal equations with the knots tied in groups,
// returning each group's value and the diagonal of the inverse normal
// matrix; ok is false when it is singular.
func solveGroups(terms []term, groups []int) (x []float64, invDiag []float64, ok bool) {
	n := groups[len(groups)-1] + 1
	m := make([][]float64, n)
	for i := range m {
		m[i] = make([]float64, n)
	}
	r := make([]float64, n)
	gg := make([]float64, n)
	for _, t := range terms {
		clear(gg)
		for i, k := range t.k {
			gg[groups[k]] += t.v[i]
		}
		for i := range n {
			if gg[i] == 0 {
				continue
			}
			r[i] += t.w * gg[i] * t.y
			for j := range n {
				m[i][j] += t.w * gg[i] * gg[j]
			}
		}
	}
	x, inv, ok := gaussJordan(m, r)
	if !ok {
		return nil, nil, false
	}
	invDiag = make([]float64, n)
	for i := range n {
		invDiag[i] = inv[i][i]
	}
	return x, invDiag, true
}

// gaussJordan solves m·x = r with partial pivoting and returns m's
// inverse too; ok is false when m is singular. m and r are overwritten.
func gaussJordan(m [][]float64, r []float64) (x []float64, inv [][]float64, ok bool) {
	n := len(m)
	inv = make([][]float64, n)
	for i := range inv {
		inv[i] = make([]float64, n)
		inv[i][i] = 1
	}
	for col := range n {
		piv := col
		for i := col + 1; i < n; i++ {
			if math.Abs(m[i][col]) > math.Abs(m[piv][col]) {
				piv = i
			}
		}
		if m[piv][col] == 0 || math.IsNaN(m[piv][col]) {
			return nil, nil, false
		}
		m[col], m[piv] = m[piv], m[col]
		inv[col], inv[piv] = inv[piv], inv[col]
		r[col], r[piv] = r[piv], r[col]
		d := m[col][col]
		for j := range n {
			m[col][j] /= d
			inv[col][j] /= d
		}
		r[col] /= d
		for i := range n {
			if i == col || m[i][col] == 0 {
				continue
			}
			f := m[i][col]
			for j := range n {
				m[i][j] -= f * m[col][j]
				inv[i][j] -= f * inv[col][j]
			}
			r[i] -= f * r[col]
		}
	}
	return r, inv, true
}
