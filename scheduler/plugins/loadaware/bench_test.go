package loadaware

import (
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// BenchmarkFilterScore measures Filter+Score per node over 100, 1000 and
// 5000 nodes with fresh telemetry and a reservation each, every node
// passing the filter.
//
//	go test -run '^$' -bench BenchmarkFilterScore -benchmem ./scheduler/plugins/loadaware/
func BenchmarkFilterScore(b *testing.B) {
	plugintest.BenchmarkCPUPod(b, func(cache *telemetry.Cache, nodes []fwk.NodeInfo) plugintest.Plugin {
		pl := New(*configv1.DefaultLoadAwareArgs(), cache)
		for _, ni := range nodes {
			pl.res.Reserve(ni.Node().Name, "reserved", 500, 1<<30) // one pod placed since each sample
		}
		return pl
	})
}
