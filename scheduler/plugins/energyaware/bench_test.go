package energyaware

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/kubernetes/pkg/scheduler/framework"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// BenchmarkFilterScore measures Filter+Score per node over 100, 1000 and
// 5000 nodes with fresh telemetry, every node passing the filter.
//
//	go test -run '^$' -bench BenchmarkFilterScore -benchmem ./scheduler/plugins/energyaware/
func BenchmarkFilterScore(b *testing.B) {
	now := time.Now()
	for _, nodes := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			cache := telemetry.NewCache()
			infos := plugintest.FreshNodes(cache, nodes, now)
			pl := New(*configv1.DefaultEnergyAwareArgs(), cache, func() time.Time { return now })
			pod := plugintest.CPUPod()
			cs := framework.NewCycleState()
			if _, st := pl.PreFilter(context.Background(), cs, pod, infos); !st.IsSuccess() {
				b.Fatalf("PreFilter: %v", st)
			}
			if st := pl.PreScore(context.Background(), cs, pod, infos); !st.IsSuccess() {
				b.Fatalf("PreScore: %v", st)
			}
			plugintest.BenchFilterScore(b, pl, cs, pod, infos)
		})
	}
}
