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
// one computed over every node from scratch.
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
			c.Set(&telemetry.Node{Name: name, SampleTime: at, Interval: 5 * time.Second,
				HasCPU: rng.IntN(8) > 0, CPUPercent: rng.Int32N(101), LogicalCores: []int32{0, 4, 16, 64}[rng.IntN(4)],
				HasMemory: rng.IntN(8) > 0, MemoryPercent: rng.Int32N(101), MemoryTotalBytes: int64(rng.IntN(4)) << 30})
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
			l := loadOf(n, r.Get(name))
			want.CPUBP, want.MemoryBP = max(want.CPUBP, l.cpuBP), max(want.MemoryBP, l.memoryBP)
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
