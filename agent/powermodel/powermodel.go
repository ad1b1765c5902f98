// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package powermodel learns a node's power curve online: power (GPUs
// excluded) as a monotone piecewise-linear function of CPU utilization, with
// a measure of its uncertainty at every point, so the scheduler can estimate
// the marginal watts of a pod as curve(load with it) − curve(load without).
//
// Samples are kept as exponentially weighted means in utilization bins (5 %
// wide by default), so the thousands of samples an idle node produces at 2 %
// cannot drown the few it takes at 70 %, and a machine whose curve drifts is
// followed. A bin's noise is what its samples scatter about the line they
// climb along within it, not the climb itself. The curve is read at 11
// knots (0 %, 10 % … 100 %, the load levels SPECpower_ssj2008 publishes;
// internal/powercurve), fitted to the bins in one least-squares problem
// (solve.go):
//
//   - each bin pulls the curve at its mean utilization towards its mean
//     watts, weighed by its precision (samples over variance);
//   - the prior's shape (Prior, from the hardware's identity; Shape without
//     a prior) is the curve's expected form: each segment's slope over the
//     shape's slope there, its local scale, may drift from its neighbour's
//     by ShapeDrift of the curve's span. Where samples are many the bins
//     decide; where they are few and noisy (a calibration ramp's three a
//     level) a segment's slope leans on its neighbours', so the slope
//     where the node runs rests on every bin around it; where there are
//     none, below the lowest bin and above the highest, the curve goes on
//     along the shape at the local scale of the nearest segment the samples
//     reach: the shape relative to the node's own slope, not the prior's
//     watts (a RAPL limit bounds the power, it does not measure it) nor a
//     line through the two outermost bins, which flattened the climb from
//     idle to 10 % and put the 0 % knot far above the true idle;
//   - the knots never fall (knots that would are tied and fitted together)
//     and are never negative;
//   - a knot's uncertainty is its standard error in that fit: about the
//     bins' where they are, growing a segment at a time beyond them, most
//     across the climb from idle (IdleShapeDrift), where servers differ
//     most.
//
// The model is Fitted once it has MinSamples samples over MinSpreadPercent
// of utilization; before that it is published as Prior when a prior exists
// (the prior's shape anchored to whatever samples there are), and not at
// all otherwise. Its bins are its whole state: State and Restore carry them
// across agent restarts.
package powermodel

import (
	"fmt"
	"math"

	"github.com/telesched/telesched/internal/powercurve"
)

// Defaults for Config.
const (
	DefaultBinWidthPercent  = 5
	DefaultMinSamples       = 60
	DefaultMinSpreadPercent = 30
	// DefaultBinMemory is how many samples a bin's mean weighs before new
	// samples start to push old ones out (an exponential moving mean), so
	// the model follows a machine whose power curve drifts.
	DefaultBinMemory = 100
)

// Knots is how many points the published curve has: 0 %, 10 % … 100 %
// (powercurve.Knots; agent/status reads it from here).
const Knots = powercurve.Knots

// Config sets the fit's thresholds.
type Config struct {
	// BinWidthPercent is the width of a utilization bin, 1 to 50.
	BinWidthPercent int
	// MinSamples is how many samples the model needs to be Fitted.
	MinSamples int
	// MinSpreadPercent is the utilization range the model needs to be
	// Fitted, measured between the mean utilization of the lowest and the
	// highest bin with samples (so one stray sample moves it little).
	MinSpreadPercent int
	// BinMemory caps the weight of a bin's past samples in its mean.
	BinMemory int
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		BinWidthPercent:  DefaultBinWidthPercent,
		MinSamples:       DefaultMinSamples,
		MinSpreadPercent: DefaultMinSpreadPercent,
		BinMemory:        DefaultBinMemory,
	}
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	switch {
	case c.BinWidthPercent < 1 || c.BinWidthPercent > 50:
		return fmt.Errorf("power model bin width %d%% must be within 1-50", c.BinWidthPercent)
	case c.MinSamples < 2:
		return fmt.Errorf("power model minimum samples %d must be at least 2", c.MinSamples)
	case c.MinSpreadPercent < 1 || c.MinSpreadPercent > 100:
		return fmt.Errorf("power model minimum spread %d%% must be within 1-100", c.MinSpreadPercent)
	case c.BinMemory < 1:
		return fmt.Errorf("power model bin memory %d must be at least 1", c.BinMemory)
	}
	return nil
}

// Basis is what a curve rests on.
type Basis string

const (
	// None: no samples over enough spread and no prior; no curve.
	None Basis = ""
	// Fitted: the samples cover enough of the utilization range.
	Fitted Basis = "fitted"
	// Prior: the prior's shape, anchored to the samples there are.
	Prior Basis = "prior"
)

// PriorCurve is what the hardware's identity says of the node's power
// before any sample: watts at the 11 knots, and how far off it may be, as
// a fraction of the watts it moves by (0.5: the shape may be off by half).
// Once the node has samples, only its shape is followed, at the scale the
// samples show, and its span (full load − idle) weighs as one loose guess
// of theirs.
type PriorCurve struct {
	Watts powercurve.Curve
	// Uncertainty is the fraction of a prior-based step that is uncertain,
	// for the prior published before any sample.
	Uncertainty float64
	// Source says where it came from, for people.
	Source string
}

// ShapePrior is a prior curve from idle and full-load watts with a
// server's typical shape (see Shape).
func ShapePrior(idle, full float64, source string) *PriorCurve {
	p := &PriorCurve{Uncertainty: 0.5, Source: source}
	for k := range Knots {
		p.Watts[k] = idle + (full-idle)*Shape[k]
	}
	return p
}

// Shape is the normalized power curve, (watts − active idle) / (full −
// active idle), at 0 %, 10 % … 100 % load, of the Dell PowerEdge R740's
// SPECpower_ssj2008 result power_ssj2008-20170829-00780 (52.3, 129, 147,
// 170, 195, 224, 255, 292, 344, 408, 457 W): idle well below the 10 % level
// and a steeper climb above 70 %, as most current two-socket servers show.
var Shape = func() powercurve.Curve {
	w := powercurve.Curve{52.3, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457}
	var s powercurve.Curve
	for k := range w {
		s[k] = (w[k] - w[0]) / (w[Knots-1] - w[0])
	}
	return s
}()

// Bin is one utilization bin's state.
type Bin struct {
	// Samples is the bin's weight, capped at BinMemory.
	Samples int
	// Utilization and Watts are the bin's means, utilization in [0, 1].
	Utilization, Watts float64
	// Variance is the exponentially weighted variance of its watts.
	Variance float64
	// UtilizationVariance and Covariance are the exponentially weighted
	// variance of its utilization and covariance of utilization and
	// watts, with the same weights: what of Variance the curve's slope
	// across the bin explains.
	UtilizationVariance float64 `json:",omitempty"`
	Covariance          float64 `json:",omitempty"`
}

// Model is an online fit. It is not safe for concurrent use.
type Model struct {
	cfg     Config
	bins    []Bin
	samples int
	prior   *PriorCurve
}

// New returns an empty model; cfg must be valid.
func New(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Model{cfg: cfg, bins: make([]Bin, 100/cfg.BinWidthPercent+1)}, nil
}

// SetPrior sets (nil: clears) the prior.
func (m *Model) SetPrior(p *PriorCurve) { m.prior = p }

// Add records one sample: utilization in [0, 1] and the power drawn at it.
// Non-finite or out-of-range values are ignored.
func (m *Model) Add(utilization, watts float64) {
	if math.IsNaN(utilization) || math.IsNaN(watts) || math.IsInf(watts, 0) || utilization < 0 || utilization > 1 || watts < 0 {
		return
	}
	b := &m.bins[m.binOf(utilization)]
	if b.Samples < m.cfg.BinMemory {
		b.Samples++
	}
	n := float64(b.Samples)
	du := utilization - b.Utilization
	b.Utilization += du / n
	d := watts - b.Watts
	b.Watts += d / n
	// West's weighted incremental variance with the same weights.
	b.Variance += (d*(watts-b.Watts) - b.Variance) / n
	b.UtilizationVariance += (du*(utilization-b.Utilization) - b.UtilizationVariance) / n
	b.Covariance += (du*(watts-b.Watts) - b.Covariance) / n
	m.samples++
}

func (m *Model) binOf(u float64) int {
	return min(len(m.bins)-1, int(u*100)/m.cfg.BinWidthPercent)
}

// State is the model's bins with samples, by utilization, and how many
// samples it has taken in all.
func (m *Model) State() (bins []Bin, samples int) {
	for _, b := range m.bins {
		if b.Samples > 0 {
			bins = append(bins, b)
		}
	}
	return bins, m.samples
}

// Restore replaces the model's state with one State returned (by this
// agent before a restart): each bin goes where its mean utilization falls,
// bins that fall together are merged, and values out of range are dropped.
func (m *Model) Restore(bins []Bin, samples int) {
	for i := range m.bins {
		m.bins[i] = Bin{}
	}
	m.samples = 0
	for _, b := range bins {
		if b.Samples <= 0 || b.Utilization < 0 || b.Utilization > 1 || b.Watts < 0 || math.IsNaN(b.Watts) || math.IsInf(b.Watts, 0) || !(b.Variance >= 0) || math.IsInf(b.Variance, 0) {
			continue
		}
		// The climb along the bin: none when it does not add up (a state
		// from an agent that did not keep it has neither).
		if !(b.UtilizationVariance > 0) || math.IsInf(b.UtilizationVariance, 0) || math.IsNaN(b.Covariance) || b.Covariance*b.Covariance > b.Variance*b.UtilizationVariance*(1+1e-9) {
			b.UtilizationVariance, b.Covariance = 0, 0
		}
		dst := &m.bins[m.binOf(b.Utilization)]
		n := min(dst.Samples+b.Samples, m.cfg.BinMemory)
		if dst.Samples == 0 {
			*dst = b
			dst.Samples = n
		} else {
			w := float64(b.Samples) / float64(dst.Samples+b.Samples)
			dst.Utilization += (b.Utilization - dst.Utilization) * w
			dst.Watts += (b.Watts - dst.Watts) * w
			dst.Variance += (b.Variance - dst.Variance) * w
			dst.UtilizationVariance += (b.UtilizationVariance - dst.UtilizationVariance) * w
			dst.Covariance += (b.Covariance - dst.Covariance) * w
			dst.Samples = n
		}
		m.samples += b.Samples
	}
	m.samples = max(m.samples, samples)
}

// Point is the curve at one knot.
type Point struct {
	UtilizationPercent int
	Watts              float64
	// Uncertainty is how far off Watts may be, in watts.
	Uncertainty float64
}

// Fit is the model's current state.
type Fit struct {
	Basis Basis
	// Samples is how many samples were added.
	Samples int
	// SpreadPercent is the utilization range the samples cover.
	SpreadPercent int
	// Curve is the power at the 11 knots, non-decreasing; nil when Basis
	// is None.
	Curve []Point
	// R2 is the coefficient of determination of the curve over the bins'
	// means (1 when there is nothing to explain); 0 without samples.
	R2 float64
	// Prior is the prior in use, if any.
	Prior *PriorCurve
}

// Ready reports whether the curve can be used.
func (f Fit) Ready() bool { return f.Basis != None }

// IdleWatts and FullLoadWatts are the curve's ends.
func (f Fit) IdleWatts() float64     { return f.Curve[0].Watts }
func (f Fit) FullLoadWatts() float64 { return f.Curve[Knots-1].Watts }

// At is the curve at utilization u in [0, 1], interpolated between knots,
// and its uncertainty there; 0, 0 without a curve.
func (f Fit) At(u float64) (watts, uncertainty float64) {
	if len(f.Curve) != Knots {
		return 0, 0
	}
	w, unc := f.PowerCurve()
	return w.At(u), unc.At(u)
}

// PowerCurve is the curve's watts and their uncertainties at the knots,
// as the scheduler reads them (zero without a curve).
func (f Fit) PowerCurve() (watts, uncertainty powercurve.Curve) {
	if len(f.Curve) != Knots {
		return watts, uncertainty
	}
	for k, p := range f.Curve {
		watts[k], uncertainty[k] = p.Watts, p.Uncertainty
	}
	return watts, uncertainty
}

// Fit returns the model's curve.
func (m *Model) Fit() Fit {
	f := Fit{Samples: m.samples, Prior: m.prior}
	pts := m.points()
	if len(pts) >= 2 {
		f.SpreadPercent = int(math.Round((pts[len(pts)-1].util - pts[0].util) * 100))
	}
	fitted := m.samples >= m.cfg.MinSamples && f.SpreadPercent >= m.cfg.MinSpreadPercent
	switch {
	case fitted:
		f.Basis = Fitted
	case m.prior != nil:
		f.Basis = Prior
	default:
		return f
	}
	f.Curve = make([]Point, Knots)
	if len(pts) == 0 { // a prior and nothing else
		for k := range f.Curve {
			w := m.prior.Watts[k]
			f.Curve[k] = Point{UtilizationPercent: k * 100 / (Knots - 1), Watts: w, Uncertainty: m.prior.Uncertainty * w}
		}
		return f
	}
	var span float64
	if m.prior != nil {
		span = math.Max(0, m.prior.Watts[Knots-1]-m.prior.Watts[0])
	}
	watts, se, ok := fitCurve(pts, shapeOf(m.prior), span)
	if !ok { // not seen: the shape's terms and one bin make it solvable
		return Fit{Samples: m.samples, SpreadPercent: f.SpreadPercent, Prior: m.prior}
	}
	for k := range f.Curve {
		f.Curve[k] = Point{UtilizationPercent: k * 100 / (Knots - 1), Watts: watts[k], Uncertainty: se[k]}
	}
	f.R2 = r2(pts, watts)
	return f
}

// points are the bins with samples, by utilization, each with the
// standard error of its mean. A bin's variance is its residual, what the
// curve's climb across the bin leaves (samples spread along the curve
// are not noise), raised towards the bins' pooled residual as if
// priorVarianceSamples of the pooled had joined its own (a bin of one
// sample has none of its own, one of two no residual), never lowered,
// and at least a fifth of a percent of its watts.
func (m *Model) points() []point {
	var sw, sv float64
	for _, b := range m.bins {
		sw += float64(b.Samples)
		sv += float64(b.Samples) * b.residual()
	}
	var pts []point
	for _, b := range m.bins {
		if b.Samples == 0 {
			continue
		}
		n := float64(b.Samples)
		r := b.residual()
		v := math.Max(r, (n*r+priorVarianceSamples*sv/sw)/(n+priorVarianceSamples))
		v = math.Max(v, math.Pow(0.002*b.Watts, 2)+1e-4)
		pts = append(pts, point{util: b.Utilization, watts: b.Watts, weight: n, se: math.Sqrt(v / n)})
	}
	return pts
}

// residual is the variance of the bin's watts about the line its samples
// climb along (all of Variance when its utilization did not vary).
func (b Bin) residual() float64 {
	if b.UtilizationVariance <= 0 {
		return b.Variance
	}
	return math.Max(0, b.Variance-b.Covariance*b.Covariance/b.UtilizationVariance)
}

// priorVarianceSamples is how many samples' worth the pooled variance
// weighs in a bin's.
const priorVarianceSamples = 2

// r2 is the share of the points' variance in watts the curve explains,
// each point weighed by its samples.
func r2(pts []point, curve powercurve.Curve) float64 {
	if len(pts) == 0 {
		return 0
	}
	var sw, mean float64
	for _, p := range pts {
		sw += p.weight
		mean += p.weight * p.watts
	}
	mean /= sw
	var res, tot float64
	for _, p := range pts {
		w := curve.At(p.util)
		res += p.weight * (p.watts - w) * (p.watts - w)
		tot += p.weight * (p.watts - mean) * (p.watts - mean)
	}
	if tot == 0 {
		return 1
	}
	return math.Max(0, 1-res/tot)
}
