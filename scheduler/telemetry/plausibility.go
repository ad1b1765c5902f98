// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// DefaultMaxNodeWatts is the most a node may draw before its published
// watts or power curve read as implausible: above the nameplate of an
// 8-GPU H100 or H200 server (about 10.2 kW) with a margin, far below the
// API's bound of 1 MW. Change it with --telemetry-max-node-watts.
const DefaultMaxNodeWatts = 15_000

// envelopeFactor is how far above its own plausible model (the curve's
// full-load watts, plus its GPUs busy) a node's measured watts may go
// before they read as implausible: fans, turbo and a curve learned short
// of full load all push readings above the model, never by half again.
const envelopeFactor = 1.5

// DefaultPowerHold is how long a node whose samples lack power (no power
// section, or watts refused as implausible) keeps counting its last
// measured watts, in its racks' sums and as a base for its pods' watts, as
// if they were fresh. Change it with --telemetry-power-hold.
const DefaultPowerHold = 2 * time.Minute

// vet refuses, in a view the cache is about to store, what breaks physics:
// a power curve that falls as load rises, is negative or exceeds the
// largest node (read as no curve), a GPU model beyond it (no GPU model),
// and watts beyond the node's envelope (read as missing). It carries the
// node's last plausible watts over from old, counts what it refused and
// logs when a node's refusals change. One node's data can then hurt only
// its own placement: its pods' estimates fall back to none, and its racks
// count its last plausible watts. The caller holds c.mu, or owns n.
func (c *Cache) vet(n, old *Node, report bool) {
	var why []string
	maxW := float64(c.maxNodeWatts)
	if m := n.Models; m != nil {
		if m.CurveBasis != BasisNone {
			if err := m.Watts.Check(maxW); err != nil {
				m.CurveBasis, m.Watts, m.Uncertainty = BasisNone, [CurveKnots]float64{}, [CurveKnots]float64{}
				why = append(why, "power curve: "+err.Error())
				c.countRejected(report, "power_curve")
			}
		}
		if m.GPUBasis != BasisNone && (m.GPUIdleWatts < 0 || m.GPUBusyWatts*float64(max(1, len(n.GPUs))) > maxW) {
			why = append(why, fmt.Sprintf("GPU power model: %.0f W busy for each of %d GPUs exceeds %.0f W", m.GPUBusyWatts, len(n.GPUs), maxW))
			m.GPUBasis, m.GPUIdleWatts, m.GPUBusyWatts = BasisNone, 0, 0
			c.countRejected(report, "gpu_model")
		}
		if m.CurveBasis == BasisNone && m.GPUBasis == BasisNone && !m.HasThermal {
			n.Models = nil
		}
	}
	if n.HasPower {
		if env := n.Envelope(maxW); float64(n.Watts) > env || n.GPUWatts > n.Watts {
			why = append(why, fmt.Sprintf("watts: %d W (GPUs %d W) beyond the node's envelope of %.0f W", n.Watts, n.GPUWatts, env))
			n.HasPower, n.Watts, n.GPUWatts = false, 0, 0
			c.countRejected(report, "watts")
		}
	}
	n.Rejected = strings.Join(why, "; ")
	switch {
	case n.HasPower:
		n.HasLastWatts, n.LastWatts, n.LastWattsObserved = true, n.Watts, n.Observed
	case old != nil && old.HasLastWatts:
		n.HasLastWatts, n.LastWatts, n.LastWattsObserved = true, old.LastWatts, old.LastWattsObserved
	}
	if report && (old == nil || old.Rejected != n.Rejected) {
		switch {
		case n.Rejected != "":
			klog.InfoS("ignoring implausible node telemetry", "node", n.Name, "rejected", n.Rejected)
		case old != nil:
			klog.InfoS("node telemetry plausible again", "node", n.Name)
		}
	}
}

func (c *Cache) countRejected(report bool, what string) {
	if report {
		rejected.WithLabelValues(what).Inc()
	}
}

// Envelope is the most the node may plausibly draw, by its own models: its
// curve's full-load watts plus its GPUs busy, times envelopeFactor, and
// never above maxNodeWatts (which is the envelope of a node without a
// curve, or with GPUs but no GPU model).
func (n *Node) Envelope(maxNodeWatts float64) float64 {
	m := n.Models
	if m == nil || m.CurveBasis == BasisNone || (len(n.GPUs) > 0 && m.GPUBasis == BasisNone) {
		return maxNodeWatts
	}
	own := m.Watts[CurveKnots-1] + m.GPUBusyWatts*float64(len(n.GPUs))
	return min(maxNodeWatts, own*envelopeFactor)
}

// PowerAt is the node's watts for its racks and its pods' estimates at
// now: its measured watts while fresh (true), else, within hold of the
// cache seeing them, its last plausible watts (true); false otherwise.
// held is true for the latter.
func (n *Node) PowerAt(now time.Time, maxAge, hold time.Duration) (watts int32, held, ok bool) {
	switch {
	case n.HasPower && n.Fresh(now, maxAge):
		return n.Watts, false, true
	case n.HasLastWatts && now.Sub(n.LastWattsObserved) <= hold && n.Fresh(now, maxAge):
		return n.LastWatts, true, true
	}
	return 0, false, false
}
