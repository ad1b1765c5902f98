package energyaware

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/fixtures"
)

// BenchmarkFilterScore measures Filter+Score per node over 100, 1000 and
// 5000 nodes with fresh telemetry (the worst-case fixture: 2 NUMA nodes,
// 8 GPUs, every node passing the filter).
//
//	go test -run '^$' -bench BenchmarkFilterScore -benchmem ./scheduler/plugins/energyaware/
func BenchmarkFilterScore(b *testing.B) {
	now := time.Now()
	for _, nodes := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			cache := telemetry.NewCache()
			infos := make([]fwk.NodeInfo, nodes)
			for i := range nodes {
				name := fmt.Sprintf("node-%05d", i)
				st := fixtures.FullStatus(now, 2, 8)
				st.CPU.UtilizationPercent = int32(10 + i%50)
				st.Thermal.Throttling, st.CPU.ThermalThrottle.Throttling = false, false
				cache.Set(telemetry.FromStatus(name, &st))
				cache.Reserve(name, "reserved", 500, 1<<30, now)
				ni := framework.NewNodeInfo()
				ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
				infos[i] = ni
			}
			pl := newBenchPlugin(cache, func() time.Time { return now })
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{
				Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}},
			}}}}
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

func newBenchPlugin(cache *telemetry.Cache, now func() time.Time) *EnergyAware {
	return New(*configv1.DefaultEnergyAwareArgs(), cache, now)
}
