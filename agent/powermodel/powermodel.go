// Package powermodel fits node power as a linear function of CPU
// utilization, online, so the scheduler can estimate the marginal watts of
// placing a pod: watts = idle + (full - idle) * utilization.
//
// Samples are kept as running means in utilization bins, and the line is
// fitted through the bins with equal weight, so the thousands of samples an
// idle node produces at 2% cannot drown the few it takes at 70%. The model
// says it is not ready, and carries no watts, until it has enough samples
// over a wide enough utilization spread.
package powermodel

import (
	"fmt"
	"math"
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

// Config sets the fit's thresholds.
type Config struct {
	// BinWidthPercent is the width of a utilization bin, 1 to 50.
	BinWidthPercent int
	// MinSamples is how many samples the model needs to be ready.
	MinSamples int
	// MinSpreadPercent is the utilization range the model needs to be
	// ready, measured between the mean utilization of the lowest and the
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

type bin struct {
	n     int     // samples, capped at BinMemory
	util  float64 // mean utilization in [0, 1]
	watts float64 // mean watts
}

// Model is an online fit. It is not safe for concurrent use.
type Model struct {
	cfg     Config
	bins    []bin
	samples int
}

// New returns an empty model; cfg must be valid.
func New(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Model{cfg: cfg, bins: make([]bin, 100/cfg.BinWidthPercent+1)}, nil
}

// Add records one sample: utilization in [0, 1] and the power drawn at it.
// Non-finite or out-of-range values are ignored.
func (m *Model) Add(utilization, watts float64) {
	if math.IsNaN(utilization) || math.IsNaN(watts) || math.IsInf(watts, 0) || utilization < 0 || utilization > 1 || watts < 0 {
		return
	}
	b := &m.bins[int(utilization*100)/m.cfg.BinWidthPercent]
	if b.n < m.cfg.BinMemory {
		b.n++
	}
	b.util += (utilization - b.util) / float64(b.n)
	b.watts += (watts - b.watts) / float64(b.n)
	m.samples++
}

// Fit is the model's current state.
type Fit struct {
	Ready bool
	// Samples is how many samples were added.
	Samples int
	// SpreadPercent is the utilization range the samples cover.
	SpreadPercent int
	// IdleWatts and FullLoadWatts are the fitted power at 0% and 100% CPU,
	// and R2 the coefficient of determination over the bins; all zero
	// unless Ready.
	IdleWatts, FullLoadWatts float64
	R2                       float64
}

// Fit returns the fitted line, or a Fit that is not Ready.
func (m *Model) Fit() Fit {
	f := Fit{Samples: m.samples}
	lo, hi := math.Inf(1), math.Inf(-1)
	var n, sx, sy float64
	for _, b := range m.bins {
		if b.n == 0 {
			continue
		}
		lo, hi = math.Min(lo, b.util), math.Max(hi, b.util)
		n++
		sx += b.util
		sy += b.watts
	}
	if n < 2 {
		return f
	}
	f.SpreadPercent = int(math.Round((hi - lo) * 100))
	if m.samples < m.cfg.MinSamples || f.SpreadPercent < m.cfg.MinSpreadPercent {
		return f
	}
	mx, my := sx/n, sy/n
	var sxx, sxy, syy float64
	for _, b := range m.bins {
		if b.n == 0 {
			continue
		}
		dx, dy := b.util-mx, b.watts-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 {
		return f
	}
	slope := sxy / sxx
	idle := my - slope*mx
	f.Ready = true
	f.IdleWatts = idle
	f.FullLoadWatts = idle + slope
	f.R2 = 1
	if syy > 0 {
		f.R2 = sxy * sxy / (sxx * syy)
	}
	return f
}
