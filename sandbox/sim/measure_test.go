package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/sandbox/hosttree"
)

// TestAgentMeasuresTheModel: the agent's own collectors, reading a
// simulated node's tree, measure the power the model draws, DRAM zones
// included (they were once written where the kernel does not list them,
// and the agent measured 10 % less than the model).
func TestAgentMeasuresTheModel(t *testing.T) {
	if testing.Short() {
		t.Skip("samples for 3s")
	}
	n, err := NewNode(t.TempDir(), NodeSpec{Name: "n", BaseUtilization: 0.41,
		Curve: [11]float64{52.3, 129, 147, 170, 195, 224, 255, 292, 344, 408, 457},
		Host:  hosttree.Spec{CPUs: 16, NUMANodes: 2, Packages: 2, MemoryKiB: 16 << 20, CritMilliCelsius: 100_000}})
	if err != nil {
		t.Fatal(err)
	}
	// Settle at the load first.
	for range 200 {
		n.celsius, _ = n.Spec.Steady(0.41, 0)
	}
	root := hostfs.New(n.Dir)
	cs := []collector.Collector{collector.NewCPUCollector(root), collector.NewPowerCollector(root)}
	var got float64
	for i := range 4 {
		for range 4 {
			time.Sleep(250 * time.Millisecond)
			if err := n.Step(); err != nil {
				t.Fatal(err)
			}
		}
		s, _ := collector.Run(context.Background(), cs, time.Now())
		if i > 0 && s.Power != nil {
			got = s.Power.Watts
		}
	}
	_, want := n.Spec.Steady(0.41, 0)
	if math.Abs(got-want)/want > 0.03 {
		t.Errorf("the agent measures %.1f W, the model draws %.1f W", got, want)
	}
}
