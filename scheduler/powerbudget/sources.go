// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powerbudget

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// A domain's budget is a feed's limit (a PDU, a breaker), which carries
// everything its nodes draw. What a node's watts count depends on where
// they came from (status.power.sources): an ACPI power meter
// (Documentation/hwmon/acpi_power_meter.rst) or an hwmon power sensor
// reads the node (or the part the firmware meters); RAPL is the energy of
// the CPU packages and DRAM alone (Documentation/power/powercap/powercap.rst:
// "package", "core", "uncore" and "dram" zones), leaving out fans, disks,
// NICs, the board and the power supplies' losses; NVML the GPUs alone. A
// domain that adds up RAPL, or NVML without a node meter, reads below what
// its feed carries, and one whose nodes are metered by different kinds of
// meter adds up numbers that do not mean the same.

// Condition type and reasons of what a domain's watts are made of.
const (
	ConditionPowerSourcesComparable = "PowerSourcesComparable"

	ReasonOneSource       = "OneSource"
	ReasonNoMeasuredWatts = "NoMeasuredWatts"
	ReasonPartialMeters   = "PartialMeters"
	ReasonMixedSources    = "MixedSources"
)

// countedSources is where the watts a member counts in dom came from: the
// sources of its fresh or held watts, or of its last watts when the
// domain counts those (no unmeteredNodeWatts); 0 when it counts none of
// its own (see contribution).
func countedSources(dom *Domain, ns *NodeState) telemetry.PowerSources {
	switch {
	case ns.View == nil:
		return 0
	case ns.FreshPower && ns.Held:
		return ns.View.LastPowerSources
	case ns.FreshPower:
		return ns.View.PowerSources
	case !dom.HasUnmetered && ns.View.HasLastWatts:
		return ns.View.LastPowerSources
	}
	return 0
}

// partial reports whether a node metered by s counts only part of what it
// draws: RAPL, or NVML without a node meter.
func partial(s telemetry.PowerSources) bool {
	return s&telemetry.PowerRAPL != 0 || s == telemetry.PowerNVML
}

// base is the node meter of s, NVML aside.
func base(s telemetry.PowerSources) telemetry.PowerSources { return s &^ telemetry.PowerNVML }

// PowerSources are the sources of the watts the domain adds up.
func (d *Domain) PowerSources() telemetry.PowerSources {
	var all telemetry.PowerSources
	for s, k := range d.SourceNodes {
		if k > 0 {
			all |= telemetry.PowerSources(s)
		}
	}
	return all
}

// SourcesCondition says whether the domain's watts are comparable with
// its feed's limit: True when every node it counts is metered by the same
// kind of node meter (acpi or hwmon, with or without nvml); False with
// PartialMeters when one counts RAPL, or NVML alone, and with
// MixedSources when its nodes' meters differ; Unknown when it counts no
// node's watts.
func SourcesCondition(d *Domain) metav1.Condition {
	c := metav1.Condition{Type: ConditionPowerSourcesComparable, ObservedGeneration: d.Generation}
	var counted, partials int32
	bases := map[telemetry.PowerSources]bool{}
	var list []string
	for s, k := range d.SourceNodes {
		if s == 0 || k == 0 {
			continue
		}
		src := telemetry.PowerSources(s)
		counted += k
		bases[base(src)] = true
		if partial(src) {
			partials += k
		}
		list = append(list, fmt.Sprintf("%s %d", src, k))
	}
	sources := "nodes by their watts' sources: " + strings.Join(list, ", ")
	switch {
	case counted == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ReasonNoMeasuredWatts, "no node's own watts are counted"
	case partials > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonPartialMeters
		c.Message = fmt.Sprintf("%d of %d nodes count part of what they draw (rapl: CPU packages and DRAM only; nvml alone: GPUs only), "+
			"so measuredWatts reads below what the feed carries; give them an ACPI power meter or hwmon power sensor, or lower budgetWatts; %s",
			partials, counted, sources)
	case len(bases) > 1:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonMixedSources
		c.Message = "the nodes' watts come from different kinds of meter, which do not count the same parts of a node; " + sources
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonOneSource, sources
	}
	return c
}
