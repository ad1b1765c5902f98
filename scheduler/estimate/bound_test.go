// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// deleteObject is the cache's informer delivering the deletion of a node's
// NodeTelemetry, at resource version rv.
func deleteObject(c *telemetry.Cache, name string, rv int) {
	u := &unstructured.Unstructured{}
	u.SetName(name)
	u.SetResourceVersion(fmt.Sprint(rv))
	telemetry.DeliverDelete(c, u)
}

func TestEstimateBP(t *testing.T) {
	for _, tc := range []struct {
		name            string
		measured        int32
		added, capacity int64
		want            int64
	}{
		{"measured only", 40, 0, 8000, 4000},
		// 40% + 2000m of 8000m = 40% + 25% = 65%
		{"pods since sample", 40, 2000, 8000, 6500},
		// 100m of 64000m = 0.15625% -> 15 bp: not rounded away
		{"small pod on a big node", 10, 100, 64000, 1015},
		{"no capacity", 40, 2000, 0, 4000},
	} {
		if got := EstimateBP(tc.measured, tc.added, tc.capacity); got != tc.want {
			t.Errorf("%s: estimateBP = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestLoadBound(t *testing.T) {
	clock := time.Unix(0, 0)
	c := telemetry.NewCacheWithClock(func() time.Time { return clock })
	r := NewBook(c, DefaultOptions())
	node := func(name string, cpuPercent, cores int32) *telemetry.Node {
		return &telemetry.Node{Name: name, HasCPU: true, CPUPercent: cpuPercent, LogicalCores: cores,
			HasMemory: true, MemoryPercent: 50, MemoryTotalBytes: 64 << 30}
	}
	for _, step := range []struct {
		what string
		do   func()
		want LoadBound
	}{
		{"empty", func() {}, LoadBound{}},
		{"a node at 40% of 16 cores", func() { c.Set(node("a", 40, 16)) },
			LoadBound{CPUBP: 4000, MemoryBP: 5000, MinCPUMilli: 16_000, MinMemoryBytes: 64 << 30}},
		{"a busier node of 64 cores", func() { c.Set(node("b", 60, 64)) },
			LoadBound{CPUBP: 6000, MemoryBP: 5000, MinCPUMilli: 16_000, MinMemoryBytes: 64 << 30}},
		// a: 40% + 8000m of 16000m = 90%
		{"a reservation raises a", func() { r.ReserveDemand("a", "p1", Demand{CPUMilli: 8000}); r.Running("a", "p1") },
			LoadBound{CPUBP: 9000, MemoryBP: 5000, MinCPUMilli: 16_000, MinMemoryBytes: 64 << 30}},
		// a's sample 20 s later retires p1 (seen running at 0 s, hold 10 s) and measures 10%: b's 60% is the most
		{"a's next sample", func() {
			n := node("a", 10, 16)
			n.SampleTime = time.Unix(20, 0)
			clock = time.Unix(20, 0)
			c.Set(n)
		}, LoadBound{CPUBP: 6000, MemoryBP: 5000, MinCPUMilli: 16_000, MinMemoryBytes: 64 << 30}},
		{"a node without a CPU section", func() {
			c.Set(&telemetry.Node{Name: "c", HasMemory: true, MemoryPercent: 70, MemoryTotalBytes: 8 << 30})
		},
			LoadBound{CPUBP: 6000, MemoryBP: 7000, MinCPUMilli: 16_000, MinMemoryBytes: 8 << 30}},
		{"the smallest node deleted", func() { deleteObject(c, "a", 1) },
			LoadBound{CPUBP: 6000, MemoryBP: 7000, MinCPUMilli: 64_000, MinMemoryBytes: 8 << 30}},
		{"every node deleted", func() { deleteObject(c, "b", 1); deleteObject(c, "c", 1) }, LoadBound{}},
	} {
		step.do()
		if got := r.LoadBound(); got != step.want {
			t.Errorf("after %s: LoadBound = %+v, want %+v", step.what, got, step.want)
		}
	}
}

// TestLoadBoundMatchesAFullPass keeps the bound up to date through random
// samples, reservations and deletions, and checks it after each against
// one computed over every node from scratch, and each node's Slot's view
// against the cache's.
func TestLoadBoundMatchesAFullPass(t *testing.T) {
	at := time.Unix(0, 0)
	c := telemetry.NewCacheWithClock(func() time.Time { return at })
	r := NewBook(c, DefaultOptions())
	rng := rand.New(rand.NewPCG(1, 2))
	rv := 0
	for i := range 5000 {
		name := fmt.Sprintf("n%d", rng.IntN(20))
		at = at.Add(time.Second)
		rv++
		switch op := rng.IntN(10); {
		case op < 5:
			n := &telemetry.Node{Name: name, SampleTime: at, Interval: 5 * time.Second,
				HasCPU: rng.IntN(8) > 0, CPUPercent: rng.Int32N(101), LogicalCores: []int32{0, 4, 16, 64}[rng.IntN(4)],
				HasMemory: rng.IntN(8) > 0, MemoryPercent: rng.Int32N(101), MemoryTotalBytes: int64(rng.IntN(4)) << 30}
			if rng.IntN(2) == 0 {
				n.HasPower, n.Watts, n.Models = true, 100+rng.Int32N(300), randomModels(rng)
			}
			c.Set(n)
		case op < 8:
			r.ReserveDemand(name, types.UID(fmt.Sprint(i)), Demand{CPUMilli: rng.Int64N(4000), MemoryBytes: rng.Int64N(4 << 30)})
			r.Running(name, types.UID(fmt.Sprint(i-rng.IntN(20))))
		case op < 9:
			r.Unreserve(name, types.UID(fmt.Sprint(i-rng.IntN(50))))
		default:
			deleteObject(c, name, 0)
		}
		var want LoadBound
		for j := range 20 {
			name := fmt.Sprintf("n%d", j)
			n, _ := c.Get(name)
			if v := r.Slot(name).View; v != n {
				t.Fatalf("step %d: %s's slot holds view %p, the cache %p", i, name, v, n)
			}
			l := loadOf(n, r.Get(name), uncalibrated)
			want.CPUBP, want.MemoryBP = max(want.CPUBP, l.cpuBP), max(want.MemoryBP, l.memoryBP)
			if l.heatRoom > 0 {
				if room := l.heatRoom - heatRoomBase; !want.HasHeat || room < want.HeatRoomMilli {
					want.HeatRoomMilli = room
				}
				want.HasHeat, want.HeatMicroPerMilli = true, max(want.HeatMicroPerMilli, l.heatPerMilli)
			}
			if l.cpuMilli > 0 && (want.MinCPUMilli == 0 || l.cpuMilli < want.MinCPUMilli) {
				want.MinCPUMilli = l.cpuMilli
			}
			if l.memoryBytes > 0 && (want.MinMemoryBytes == 0 || l.memoryBytes < want.MinMemoryBytes) {
				want.MinMemoryBytes = l.memoryBytes
			}
		}
		if got := r.LoadBound(); got != want {
			t.Fatalf("step %d: LoadBound = %+v, a full pass gives %+v", i, got, want)
		}
	}
}

// Deleting pods one by one from nodes tied at the highest load takes no
// pass over every node until the last of them drops.
func TestLoadBoundTies(t *testing.T) {
	c := telemetry.NewCacheWithClock(func() time.Time { return time.Unix(0, 0) })
	r := NewBook(c, DefaultOptions())
	for i := range 100 {
		name := fmt.Sprintf("n%d", i)
		c.Set(&telemetry.Node{Name: name, HasCPU: true, CPUPercent: 50, LogicalCores: 16})
		r.ReserveDemand(name, types.UID(name), Demand{CPUMilli: 1600}) // 50% + 10% each
	}
	passes := r.loadPasses
	for i := range 99 {
		name := fmt.Sprintf("n%d", i)
		r.Unreserve(name, types.UID(name))
	}
	if got := r.LoadBound().CPUBP; got != 6000 {
		t.Errorf("CPUBP = %d with one node still at 60%%, want 6000", got)
	}
	if r.loadPasses != passes {
		t.Errorf("%d passes over every node for 99 deletions from tied nodes, want 0", r.loadPasses-passes)
	}
	r.Unreserve("n99", "n99")
	if got := r.LoadBound().CPUBP; got != 5000 || r.loadPasses != passes+1 {
		t.Errorf("after the last: CPUBP = %d after %d passes, want 5000 after 1", got, r.loadPasses-passes)
	}
}

// randomModels is a power curve, rising by random steps, with an
// uncertainty band, and mostly a thermal model (its sensor warming by
// 0-200 milli-°C a watt, now and then cooling: a fit gone wrong).
func randomModels(rng *rand.Rand) *telemetry.Models {
	m := &telemetry.Models{CurveBasis: telemetry.BasisFitted}
	w := 50 + rng.Float64()*150
	for k := range m.Watts {
		m.Watts[k], m.Uncertainty[k] = w, rng.Float64()*20
		w += rng.Float64() * 80
	}
	if rng.IntN(5) > 0 {
		m.HasThermal = true
		m.Thermal = telemetry.ThermalModel{Sensor: "s", LimitMilli: 80_000 + rng.Int64N(30_000),
			AmbientMilli: 20_000 + rng.Int64N(20_000), MilliPerWatt: rng.Int64N(200)}
		if rng.IntN(20) == 0 {
			m.Thermal.MilliPerWatt = -rng.Int64N(50)
		}
	}
	return m
}

// TestHeatClearBoundsEveryNode: where the bound over random nodes (curves,
// thermal models, loads, watts held or fresh, reservations, calibrations
// both ways) says a pod is clear of a margin, every node's Heat with the
// pod, and its Slot.SteadyBound, settles below its limit less that
// margin. Both answers come up often: the check is not vacuous, and the
// bound not so loose that it never clears.
func TestHeatClearBoundsEveryNode(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var cleared, refused int
	for round := range 2000 {
		type node struct {
			n    *telemetry.Node
			slot Slot
		}
		nodes := make([]node, 1+rng.IntN(8))
		var x loadExtremes
		for i := range nodes {
			n := &telemetry.Node{Name: fmt.Sprint(i), HasCPU: true, CPUPercent: rng.Int32N(101),
				LogicalCores: []int32{4, 16, 64, 192}[rng.IntN(4)], Models: randomModels(rng)}
			if rng.IntN(4) == 0 {
				n.HasLastWatts, n.LastWatts = true, 100+rng.Int32N(300)
			} else {
				n.HasPower, n.Watts, n.GPUWatts = true, 100+rng.Int32N(400), rng.Int32N(100)
			}
			s := Slot{cal: uncalibrated}
			if rng.IntN(3) == 0 {
				s.cal = calibration{ratio: 0.3 + rng.Float64()*2, count: rng.Int64N(2 * MinCalibrations)}
			}
			if rng.IntN(2) == 0 {
				s.Reserved.CPUMilli = rng.Int64N(8000)
			}
			nodes[i] = node{n, s}
			x.add(loadOf(n, s.Reserved, s.cal))
		}
		bound := x.bound()
		for range 5 {
			d := Demand{CPUMilli: rng.Int64N(4000)}
			margin := rng.Int64N(15_000)
			if !bound.HeatClear(d.CPUMilli, margin) {
				refused++
				continue
			}
			cleared++
			for _, nd := range nodes {
				if h := nd.slot.Heat(nd.n, d); h.Predicted && h.SteadyMilli >= h.LimitMilli-margin {
					t.Fatalf("round %d: bound %+v clears a pod of %dm by %d milli-°C, but node %s (%+v, slot %+v) settles at %d of limit %d",
						round, bound, d.CPUMilli, margin, nd.n.Name, nd.n.Models.Thermal, nd.slot, h.SteadyMilli, h.LimitMilli)
				}
				if b, ok := nd.slot.SteadyBound(nd.n, d); ok && b >= nd.n.Models.Thermal.LimitMilli-margin {
					t.Fatalf("round %d: bound %+v clears a pod of %dm by %d milli-°C, but node %s's SteadyBound is %d of limit %d",
						round, bound, d.CPUMilli, margin, nd.n.Name, b, nd.n.Models.Thermal.LimitMilli)
				}
			}
		}
	}
	if cleared < 500 || refused < 500 {
		t.Errorf("bound cleared %d pods and refused %d: want both at least 500", cleared, refused)
	}
}

// TestSteadyBound: Slot.SteadyBound is at least Heat's steady temperature
// on random nodes, reservations, calibrations and pods, and within a few
// degrees of it for a small pod on an unreserved node.
func TestSteadyBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 20_000 {
		n := &telemetry.Node{Name: "n", HasCPU: true, CPUPercent: rng.Int32N(101), LogicalCores: []int32{4, 16, 64}[rng.IntN(3)],
			HasPower: true, Watts: 100 + rng.Int32N(400), Models: randomModels(rng)}
		s := Slot{cal: uncalibrated, Reserved: Demand{CPUMilli: rng.Int64N(8000) * int64(rng.IntN(2))}}
		if rng.IntN(3) == 0 {
			s.cal = calibration{ratio: 0.3 + rng.Float64()*2, count: MinCalibrations}
		}
		d := Demand{CPUMilli: rng.Int64N(4000)}
		h := s.Heat(n, d)
		b, ok := s.SteadyBound(n, d)
		switch {
		case ok && !h.Predicted:
			t.Fatalf("case %d: a bound (%d) where Heat predicts nothing", i, b)
		case !ok && h.Predicted && n.Models.Thermal.MilliPerWatt >= 0:
			t.Fatalf("case %d: no bound where Heat predicts %d", i, h.SteadyMilli)
		case ok && b < h.SteadyMilli:
			t.Fatalf("case %d: bound %d below Heat's %d (%+v, slot %+v, pod %+v)", i, b, h.SteadyMilli, n.Models, s, d)
		}
	}
}

// TestSlotViewFollowsAgentReadiness: when a node's agent pod turns Ready
// or not, the cache restamps the node's view without telling its
// Watchers (the same sample); the node's slot holds the restamped view,
// which LoadAware and EnergyAware judge freshness by.
func TestSlotViewFollowsAgentReadiness(t *testing.T) {
	at := time.Unix(0, 0)
	c := telemetry.NewCacheWithClock(func() time.Time { return at })
	r := NewBook(c, DefaultOptions())
	c.Set(&telemetry.Node{Name: "n", SampleTime: at, Interval: 5 * time.Second, HasCPU: true, LogicalCores: 4})
	for _, ready := range []bool{true, false, true} {
		c.SetAgentPod("n", "agent", ready, false)
		n, _ := c.Get("n")
		if v := r.Slot("n").View; v != n || v.AgentReady != ready {
			t.Fatalf("agent ready %v: the slot holds view %p (agent ready %v), the cache %p", ready, v, v != nil && v.AgentReady, n)
		}
		if v, _ := r.Placed("n"); v != n {
			t.Fatalf("agent ready %v: Placed gives view %p, the cache %p", ready, v, n)
		}
	}
	c.SetAgentPod("n", "agent", false, true)
	deleteObject(c, "n", 0)
	if v := r.Slot("n").View; v != nil {
		t.Fatalf("a deleted node's slot holds view %p", v)
	}
}
