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

// The envelope of a node without a power curve is built from what its
// agent shows of it: DefaultBaseWatts, plus DefaultWattsPerCore for each
// online logical CPU, plus DefaultWattsPerGPU for each GPU NVML lists, and
// never above --telemetry-max-node-watts. They are ceilings, not
// estimates: a true reading must never reach them.
//
//   - DefaultWattsPerCore, 20 W a logical CPU, holds the fastest few-core
//     server parts with SMT off: AMD EPYC 72F3 is 8 cores at 180 W TDP
//     (22.5 W a core, AMD's product page), Intel Xeon Gold 6434 8 cores
//     at 195 W (24 W; Intel ARK); with SMT on, 11-12 W a logical CPU.
//     Many-core parts are far below it: EPYC 9654, 192 threads at 360 W
//     (1.9 W); Xeon Platinum 8480+, 112 threads at 350 W (3.1 W).
//   - DefaultBaseWatts, 600 W, is what does not scale with cores: up to
//     32 DIMMs of DDR5 at about 10-15 W each, fans at full speed, disks,
//     NICs, the board and the power supplies' losses. With it, a dual
//     EPYC 72F3 with SMT off (16 CPUs, 360 W of packages) has 920 W.
//   - DefaultWattsPerGPU, 1200 W, is above the TDP of any data-centre GPU
//     board NVIDIA lists for an 8-GPU server: H100 and H200 SXM up to
//     700 W, B200 up to 1000 W (datasheets), leaving a GPU's share of its
//     NVSwitches and NICs. A DGX H100 (224 CPUs, 8 GPUs; 10.2 kW maximum,
//     NVIDIA's DGX H100 user guide) gets 600 + 224 x 20 + 8 x 1200 =
//     14680 W, a DGX B200 (14.3 kW maximum) the same.
//
// A node that reports no CPU count keeps --telemetry-max-node-watts: what
// it draws beyond its GPUs is unknown. GPUs the agent cannot see (no NVML
// on the node) count for nothing: a GPU node needs the agent's GPU
// variant, or a power curve, for its whole-node meter to be believed.
// Change them with --telemetry-max-node-base-watts,
// --telemetry-max-watts-per-core and --telemetry-max-watts-per-gpu.
const (
	DefaultBaseWatts    = 600
	DefaultWattsPerCore = 20
	DefaultWattsPerGPU  = 1200
)

// DefaultIdleFloorPercent is the share of its own idle watts below which
// a node's reading, GPUs aside, reads as implausible: its power curve at
// 0 % CPU, less idleUncertainties times that point's uncertainty. Idle
// power is what no idle state turns off (power supplies' losses, fans at
// their lowest, DRAM refresh, the board), and the curve's idle point was
// learned with the deepest idle states the node reaches; a reading half of
// it is a meter that stopped counting (or lost a source), not a node that
// drew less. 0 turns the check off. Change it with
// --telemetry-idle-floor-percent.
const DefaultIdleFloorPercent = 50

// idleUncertainties is how many of the curve's uncertainties at idle (the
// standard error of the samples there, plus half any step taken beyond
// them) the idle floor allows below the curve: three leaves a true idle
// mean below the floor with a chance of about one in a thousand.
const idleUncertainties = 3

// Limits bound what a node may plausibly publish (vet).
type Limits struct {
	// MaxNodeWatts: the most any node may draw (--telemetry-max-node-watts).
	MaxNodeWatts int32
	// BaseWatts, WattsPerCore, WattsPerGPU: the envelope of a node
	// without a power curve (DefaultBaseWatts).
	BaseWatts, WattsPerCore, WattsPerGPU int32
	// IdleFloorPercent: see DefaultIdleFloorPercent.
	IdleFloorPercent int32
}

// DefaultLimits are the defaults of Limits.
func DefaultLimits() Limits {
	return Limits{
		MaxNodeWatts: DefaultMaxNodeWatts, BaseWatts: DefaultBaseWatts, WattsPerCore: DefaultWattsPerCore,
		WattsPerGPU: DefaultWattsPerGPU, IdleFloorPercent: DefaultIdleFloorPercent,
	}
}

// Validate checks the limits; the errors name the flags.
func (l Limits) Validate() error {
	switch {
	case l.MaxNodeWatts < 100 || l.MaxNodeWatts > 1_000_000:
		return fmt.Errorf("--telemetry-max-node-watts must be within 100-1000000, got %d", l.MaxNodeWatts)
	case l.BaseWatts < 0 || l.BaseWatts > l.MaxNodeWatts:
		return fmt.Errorf("--telemetry-max-node-base-watts must be within 0 and --telemetry-max-node-watts (%d), got %d", l.MaxNodeWatts, l.BaseWatts)
	case l.WattsPerCore < 1 || l.WattsPerCore > l.MaxNodeWatts:
		return fmt.Errorf("--telemetry-max-watts-per-core must be within 1 and --telemetry-max-node-watts (%d), got %d", l.MaxNodeWatts, l.WattsPerCore)
	case l.WattsPerGPU < 1 || l.WattsPerGPU > l.MaxNodeWatts:
		return fmt.Errorf("--telemetry-max-watts-per-gpu must be within 1 and --telemetry-max-node-watts (%d), got %d", l.MaxNodeWatts, l.WattsPerGPU)
	case l.IdleFloorPercent < 0 || l.IdleFloorPercent > 100:
		return fmt.Errorf("--telemetry-idle-floor-percent must be within 0-100, got %d", l.IdleFloorPercent)
	}
	return nil
}

// SetLimits sets what a node may plausibly publish (DefaultLimits); call
// it before Start.
func (c *Cache) SetLimits(l Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limits = l
	return nil
}

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
// and watts beyond the node's envelope or below its idle floor (read as
// missing). It carries the node's last plausible watts over from old,
// counts what it refused and logs when a node's refusals change. One
// node's data can then hurt only its own placement: its pods' estimates
// fall back to none, and its racks count its last plausible watts. The
// caller holds c.mu, or owns n.
func (c *Cache) vet(n, old *Node, report bool) {
	var why []string
	maxW := float64(c.limits.MaxNodeWatts)
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
		env, floor := n.Envelope(c.limits), n.IdleFloor(c.limits)
		switch {
		case float64(n.Watts) > env || n.GPUWatts > n.Watts:
			why = append(why, fmt.Sprintf("watts: %d W (GPUs %d W) beyond the node's envelope of %.0f W", n.Watts, n.GPUWatts, env))
			n.HasPower, n.Watts, n.GPUWatts = false, 0, 0
			c.countRejected(report, "watts")
		case floor > 0 && float64(n.Watts-n.GPUWatts) < floor:
			why = append(why, fmt.Sprintf("watts: %d W (GPUs %d W) below the node's idle floor of %.0f W (%d%% of its curve's %.0f W at 0%% CPU less %d x its uncertainty %.0f W)",
				n.Watts, n.GPUWatts, floor, c.limits.IdleFloorPercent, n.Models.Watts[0], idleUncertainties, n.Models.Uncertainty[0]))
			n.HasPower, n.Watts, n.GPUWatts = false, 0, 0
			c.countRejected(report, "watts_below_idle")
		}
	}
	n.Rejected = strings.Join(why, "; ")
	switch {
	case n.HasPower:
		n.HasLastWatts, n.LastWatts, n.LastWattsObserved, n.LastPowerSources = true, n.Watts, n.Observed, n.PowerSources
	case old != nil && old.HasLastWatts:
		n.HasLastWatts, n.LastWatts, n.LastWattsObserved, n.LastPowerSources = true, old.LastWatts, old.LastWattsObserved, old.LastPowerSources
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

// Envelope is the most the node may plausibly draw, by its own models and
// what it is, never above the limits' MaxNodeWatts: its curve's full-load
// watts times envelopeFactor, or without a curve the limits' BaseWatts
// plus WattsPerCore for each online logical CPU; plus, for its GPUs, its
// GPU model's busy watts times envelopeFactor, or without one WattsPerGPU
// each. A node without a curve that reports no CPU count gets
// MaxNodeWatts.
func (n *Node) Envelope(l Limits) float64 {
	maxW := float64(l.MaxNodeWatts)
	m := n.Models
	var own float64
	switch {
	case m != nil && m.CurveBasis != BasisNone:
		own = m.Watts[CurveKnots-1] * envelopeFactor
	case n.HasCPU && n.LogicalCores > 0:
		own = float64(l.BaseWatts) + float64(l.WattsPerCore)*float64(n.LogicalCores)
	default:
		return maxW
	}
	if k := float64(len(n.GPUs)); k > 0 {
		if m != nil && m.GPUBasis != BasisNone {
			own += m.GPUBusyWatts * k * envelopeFactor
		} else {
			own += float64(l.WattsPerGPU) * k
		}
	}
	return min(maxW, own)
}

// IdleFloor is the least the node may plausibly draw, GPUs aside (its
// curve leaves them out): the limits' IdleFloorPercent of its curve at
// 0 % CPU less idleUncertainties times the curve's uncertainty there; 0
// without a curve.
func (n *Node) IdleFloor(l Limits) float64 {
	m := n.Models
	if m == nil || m.CurveBasis == BasisNone {
		return 0
	}
	return max(0, (m.Watts[0]-idleUncertainties*m.Uncertainty[0])*float64(l.IdleFloorPercent)/100)
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
