// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package thermalmodel learns how a node's temperature answers its power:
// a first-order thermal model, fitted online from the agent's samples,
//
//	dT/dt = (ambient + R·P − T) / τ
//
// with T the temperature of the sensor closest to its limit, P the node's
// power without its GPUs, R the steady-state rise in °C per watt (what the
// heatsink, fans and airflow make of a watt, leakage included) and τ the
// time constant. Sampled every interval Δ it is the linear recurrence
//
//	T[k] = a·T[k−1] + b·P[k] + c,   a = e^(−Δ/τ), b = (1−a)·R, c = (1−a)·ambient
//
// which the model fits by exponentially weighted least squares (recent
// samples count most, so a failed fan or a blocked filter is learned), and
// turns back into ambient, R and τ. With it the scheduler predicts where a
// node settles with a pod's extra watts: ambient + R·(P + ΔP).
package thermalmodel

import (
	"fmt"
	"math"
	"time"
)

// Defaults for Config.
const (
	DefaultMinSamples         = 60
	DefaultMinPowerStdDevWatt = 5
	DefaultMinPowerVariation  = 0.1
	DefaultMemory             = 600
	// DefaultMaxAmbientCelsius is the warmest 0 W temperature a model may
	// have: ASHRAE TC 9.9's class A4, the widest of its data-centre
	// classes, allows inlet air up to 45 °C, and a package at 0 W settles
	// near its inlet air. 5 °C more for a sensor downstream of others.
	DefaultMaxAmbientCelsius = 50
	// DefaultMinAmbientCelsius is the coldest 0 W temperature a model may
	// have: ASHRAE's allowable inlet air starts at 5 °C (classes A3 and
	// A4; 15 °C for A1), a package at 0 W settles at or above its inlet,
	// and 5 °C less covers a sensor that reads a little low.
	DefaultMinAmbientCelsius = 0
)

// Config sets the fit's thresholds.
type Config struct {
	// MinSamples is how many sample pairs the fit needs to be Ready.
	MinSamples int
	// MinPowerStdDevWatts is how much the power must have varied
	// (standard deviation over the fit's memory) for R and τ to be told
	// apart from the ambient: a node at constant power shows none of them.
	MinPowerStdDevWatts float64
	// MinPowerVariation is the same as a share of the mean power: a node
	// whose power wanders a few percent around one load (its own noise,
	// small pods) shows too little of R against its sensor's noise and
	// rounding, and the fit then puts R anywhere, near zero among them
	// (an ambient just below the sensor's temperature: no pod can heat
	// the node).
	MinPowerVariation float64
	// MaxAmbientCelsius bounds the model's ambient (its 0 W temperature).
	// Noise in the power the fit regresses on (samples timed late on a
	// busy host) flattens R, and the fit, which must pass through where
	// the node runs, raises its ambient to match: the sandbox's degenerate
	// models had 0.015-0.12 °C/W against 0.18-0.25 with ambients of
	// 59-65 °C, and let through pods that took their nodes to the limit.
	MaxAmbientCelsius float64
	// MinAmbientCelsius bounds the ambient from below. A fit over a
	// ramp, where the power and the temperature rise together, can trade
	// a low ambient for a high R and a long τ: the sandbox's nodes
	// published ambients of −27 to 11 °C with τ of 40 to 59 s against
	// 6 s; such a model predicts far more heat than a pod brings.
	MinAmbientCelsius float64
	// Memory is the weight, in samples, of the fit's past: each new sample
	// discounts the old ones by 1 − 1/Memory.
	Memory int
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{MinSamples: DefaultMinSamples, MinPowerStdDevWatts: DefaultMinPowerStdDevWatt, MinPowerVariation: DefaultMinPowerVariation,
		MaxAmbientCelsius: DefaultMaxAmbientCelsius, MinAmbientCelsius: DefaultMinAmbientCelsius, Memory: DefaultMemory}
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	switch {
	case c.MinSamples < 4:
		return fmt.Errorf("thermal model minimum samples %d must be at least 4", c.MinSamples)
	case c.MinPowerStdDevWatts <= 0 || math.IsNaN(c.MinPowerStdDevWatts):
		return fmt.Errorf("thermal model minimum power standard deviation %v W must be positive", c.MinPowerStdDevWatts)
	case c.MinPowerVariation < 0 || c.MinPowerVariation >= 1 || math.IsNaN(c.MinPowerVariation):
		return fmt.Errorf("thermal model minimum power variation %v must be within [0, 1)", c.MinPowerVariation)
	case !(c.MaxAmbientCelsius > -40 && c.MaxAmbientCelsius <= 80):
		return fmt.Errorf("thermal model maximum ambient %v °C must be within (-40, 80]", c.MaxAmbientCelsius)
	case !(c.MinAmbientCelsius >= -40 && c.MinAmbientCelsius < c.MaxAmbientCelsius):
		return fmt.Errorf("thermal model minimum ambient %v °C must be within [-40, the maximum ambient %v °C)", c.MinAmbientCelsius, c.MaxAmbientCelsius)
	case c.Memory < c.MinSamples:
		return fmt.Errorf("thermal model memory %d must be at least its minimum samples %d", c.Memory, c.MinSamples)
	}
	return nil
}

// Params is a fitted (or restored) model.
type Params struct {
	// Sensor is the sensor whose temperature the model predicts.
	Sensor string
	// AmbientCelsius is where the sensor settles at 0 W.
	AmbientCelsius float64
	// CelsiusPerWatt is the steady-state rise per watt (R).
	CelsiusPerWatt float64
	// TimeConstant is τ.
	TimeConstant time.Duration
	// Samples is how many sample pairs the fit rests on.
	Samples int
	// ResidualCelsius is the root-mean-square one-step error of the fit.
	ResidualCelsius float64
}

// Steady is where the sensor settles at watts.
func (p Params) Steady(watts float64) float64 {
	return p.AmbientCelsius + p.CelsiusPerWatt*watts
}

// Model is an online fit. It is not safe for concurrent use.
type Model struct {
	cfg Config
	// sensor is the sensor the fit follows; a new one starts it afresh.
	sensor string
	// Weighted sums of x = (T[k−1], P[k], 1) and y = T[k].
	xx       [3][3]float64
	xy       [3]float64
	yy       float64
	pairs    int
	interval time.Duration
	// prev is the last sample, for the next pair; prevAt its time.
	prevT  float64
	prevAt time.Time
	// restored is a model published before a restart, used until the fit
	// is ready again.
	restored *Params
	// misses counts consecutive samples the model mispredicted (see
	// missCelsius); MaxMisses of them in a row withdraw it.
	misses int
	// held are the pairs the model mispredicted in a row, held out of
	// the fit; when they withdraw it, the new fit starts from them.
	held []pair
	// dropped says why the last fit was dropped; "" before any was.
	dropped string
	// good is the last fit that passed every check, kept while it
	// predicts the sensor: a node whose load then holds steady shows no
	// power move, and its fit, with nothing to tell R from the ambient,
	// stops passing them, but the heatsink and fans it measured have not
	// changed.
	good *Params
}

// pair is one step of the recurrence: T[k−1], P[k] and T[k].
type pair struct{ prevT, watts, celsius float64 }

// A model that mispredicts the next sample by more than missCelsius (or
// missResiduals times its own residual, or missShareOfMove of the move it
// predicted) MaxMisses times in a row no longer
// describes the node (a fan failed or was repaired, a filter clogged): it
// is dropped and learned afresh, from the samples it mispredicted on, and
// the node is judged on its temperature until then. Those samples are the
// node's answer to whatever changed: often a step in its power (a burst of
// pods ending), the one thing that tells R from the ambient. A fit started
// after them, at a load that then holds, would see no power move and
// publish nothing (MinPowerVariation) for as long as the load holds; the
// sandbox's warm-row nodes, whose models were withdrawn as the calibration
// ramp ended, went the whole scenario without one.
const (
	missCelsius     = 2
	missResiduals   = 5
	missShareOfMove = 0.5
	MaxMisses       = 5
)

// New returns an empty model; cfg must be valid.
func New(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Model{cfg: cfg}, nil
}

// Sensor is the sensor the model follows, "" before the first sample.
func (m *Model) Sensor() string { return m.sensor }

// Restore takes a model this agent published before it restarted; Fit
// returns it until the new samples are enough. An implausible one is
// dropped.
func (m *Model) Restore(p Params) {
	if !m.plausible(p) || p.Sensor == "" {
		return
	}
	m.restored = &p
	if m.sensor == "" {
		m.sensor = p.Sensor
	}
}

// Add records a sample taken at now: the sensor's temperature and the
// power over the interval that ended then. interval is the agent's sampling
// interval; a pair of samples further apart than 1.5 intervals (a missed
// sample) is not used, because the recurrence assumes a fixed step.
func (m *Model) Add(now time.Time, interval time.Duration, sensor string, celsius, watts float64) {
	if sensor == "" || math.IsNaN(celsius) || math.IsNaN(watts) || math.IsInf(celsius, 0) || math.IsInf(watts, 0) || watts < 0 {
		return
	}
	if sensor != m.sensor {
		why := ""
		if m.sensor != "" {
			why = fmt.Sprintf("the sensor closest to its limit changed from %s to %s", m.sensor, sensor)
		}
		*m = Model{cfg: m.cfg, sensor: sensor, dropped: why}
	}
	prevT, prevAt := m.prevT, m.prevAt
	m.prevT, m.prevAt = celsius, now
	if prevAt.IsZero() {
		return
	}
	if gap := now.Sub(prevAt); gap <= 0 || gap > interval*3/2 {
		return
	}
	cur := pair{prevT, watts, celsius}
	if p, ok := m.Fit(); ok {
		switch miss, drop, predicted := m.mispredicts(p, prevT, celsius, watts); {
		case drop:
			// Start afresh from the samples the model could not describe.
			held := append(m.held, cur)
			why := fmt.Sprintf("it mispredicted %d samples in a row (the last: %.1f°C predicted at %.0f W, %.1f°C read)", len(held), predicted, watts, celsius)
			*m = Model{cfg: m.cfg, sensor: sensor, prevT: celsius, prevAt: now, dropped: why}
			for _, h := range held {
				m.add(h, interval)
			}
			m.keepGood()
			return
		case miss:
			// Held out: a model is not bent toward a change it does not
			// describe.
			m.held = append(m.held, cur)
			return
		}
	}
	m.held = m.held[:0]
	m.add(cur, interval)
	m.keepGood()
}

// keepGood records the fit as the last good one when it passes every
// check.
func (m *Model) keepGood() {
	if p, ok := m.fit(); ok {
		m.good = &p
	}
}

// add puts one pair into the fit's weighted sums.
func (m *Model) add(p pair, interval time.Duration) {
	keep := 1 - 1/float64(m.cfg.Memory)
	x := [3]float64{p.prevT, p.watts, 1}
	for i := range 3 {
		for j := range 3 {
			m.xx[i][j] = keep*m.xx[i][j] + x[i]*x[j]
		}
		m.xy[i] = keep*m.xy[i] + x[i]*p.celsius
	}
	m.yy = keep*m.yy + p.celsius*p.celsius
	m.pairs++
	m.interval = interval
}

// mispredicts reports whether the model p predicted this sample badly
// from the one before (miss), and whether MaxMisses came in a row (drop),
// with what it predicted.
func (m *Model) mispredicts(p Params, prevT, celsius, watts float64) (miss, drop bool, predicted float64) {
	if m.interval <= 0 || p.TimeConstant <= 0 {
		return false, false, 0
	}
	a := math.Exp(-m.interval.Seconds() / p.TimeConstant.Seconds())
	predicted = a*prevT + (1-a)*p.Steady(watts)
	// Half the predicted move is tolerated too: while the sensor moves
	// fast, a sample a little early or late is off by a share of the move,
	// not because the model is wrong.
	tolerance := max(missCelsius, missResiduals*p.ResidualCelsius, missShareOfMove*math.Abs(predicted-prevT))
	if math.Abs(celsius-predicted) <= tolerance {
		m.misses = 0
		return false, false, predicted
	}
	m.misses++
	return true, m.misses >= MaxMisses, predicted
}

// powerSpread is the standard deviation of the power over the fit's
// memory, and the least the fit needs (MinPowerStdDevWatts, and
// MinPowerVariation of the mean power).
func (m *Model) powerSpread() (std, minStd float64) {
	w := m.xx[2][2] // the weights' sum
	meanP := m.xx[1][2] / w
	std = math.Sqrt(math.Max(0, m.xx[1][1]/w-meanP*meanP))
	return std, math.Max(m.cfg.MinPowerStdDevWatts, m.cfg.MinPowerVariation*meanP)
}

// NotReady says why Fit returns no model, for a log: why the last fit was
// dropped, if one was, and what the fit lacks now; "" when Fit has one.
func (m *Model) NotReady() string {
	if _, ok := m.Fit(); ok {
		return ""
	}
	var lacks string
	switch {
	case m.sensor == "":
		lacks = "no sensor sampled yet"
	case m.pairs < m.cfg.MinSamples:
		lacks = fmt.Sprintf("%d of %d samples", m.pairs, m.cfg.MinSamples)
	default:
		if std, minStd := m.powerSpread(); std < minStd {
			lacks = fmt.Sprintf("power varied by %.1f W (standard deviation), %.1f W needed", std, minStd)
		} else {
			lacks = "the fit is not physical (a warming sensor, a time constant within a day, an ambient within bounds)"
		}
	}
	if m.dropped == "" {
		return lacks
	}
	return m.dropped + "; now " + lacks
}

// Fit returns the model and whether it can be used: the fit's own once it
// has MinSamples pairs with enough power variation and plausible values,
// else the last fit that had them (while it predicts the sensor), else a
// restored one for the same sensor, else false.
func (m *Model) Fit() (Params, bool) {
	// good is the fit as of the last sample added whenever it passed
	// (keepGood runs after every change to the sums).
	if m.good != nil {
		return *m.good, true
	}
	if m.restored != nil && m.restored.Sensor == m.sensor {
		return *m.restored, true
	}
	return Params{}, false
}

func (m *Model) fit() (Params, bool) {
	if m.pairs < m.cfg.MinSamples || m.interval <= 0 {
		return Params{}, false
	}
	if std, minStd := m.powerSpread(); std < minStd {
		return Params{}, false
	}
	w := m.xx[2][2] // the weights' sum
	theta, ok := solve3(m.xx, m.xy)
	if !ok {
		return Params{}, false
	}
	a, b, c := theta[0], theta[1], theta[2]
	if a <= 0 || a >= 1 {
		return Params{}, false
	}
	sse := m.yy - (theta[0]*m.xy[0] + theta[1]*m.xy[1] + theta[2]*m.xy[2])
	p := Params{
		Sensor:          m.sensor,
		AmbientCelsius:  c / (1 - a),
		CelsiusPerWatt:  b / (1 - a),
		TimeConstant:    time.Duration(-m.interval.Seconds() / math.Log(a) * float64(time.Second)),
		Samples:         m.pairs,
		ResidualCelsius: math.Sqrt(math.Max(0, sse) / w),
	}
	return p, m.plausible(p)
}

// minCelsiusPerWatt is the least steady-state rise a modelled sensor can
// have: 10 m°C per watt, 20°C at 2 kW. A fit below it found no link
// between the node's power and the sensor.
const minCelsiusPerWatt = 0.01

// plausible bounds a model to physics: a sensor that warms with power,
// settles within a day, and an ambient a data centre can have.
func (m *Model) plausible(p Params) bool {
	return p.CelsiusPerWatt >= minCelsiusPerWatt && p.CelsiusPerWatt <= 10 &&
		p.TimeConstant > 0 && p.TimeConstant <= 24*time.Hour &&
		p.AmbientCelsius >= m.cfg.MinAmbientCelsius && p.AmbientCelsius <= m.cfg.MaxAmbientCelsius &&
		!math.IsNaN(p.ResidualCelsius)
}

// solve3 solves the 3×3 system a·x = b by Gaussian elimination with
// partial pivoting; false when it is singular.
func solve3(a [3][3]float64, b [3]float64) ([3]float64, bool) {
	for col := range 3 {
		piv := col
		for r := col + 1; r < 3; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[piv][col]) {
				piv = r
			}
		}
		if math.Abs(a[piv][col]) < 1e-12 {
			return [3]float64{}, false
		}
		a[col], a[piv] = a[piv], a[col]
		b[col], b[piv] = b[piv], b[col]
		for r := col + 1; r < 3; r++ {
			f := a[r][col] / a[col][col]
			for c := col; c < 3; c++ {
				a[r][c] -= f * a[col][c]
			}
			b[r] -= f * b[col]
		}
	}
	var x [3]float64
	for r := 2; r >= 0; r-- {
		s := b[r]
		for c := r + 1; c < 3; c++ {
			s -= a[r][c] * x[c]
		}
		x[r] = s / a[r][r]
	}
	return x, true
}
