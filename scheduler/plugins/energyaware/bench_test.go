package energyaware

import (
	"testing"
	"time"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// BenchmarkFilterScore measures Filter+Score per node over 100, 1000 and
// 5000 nodes with fresh telemetry, every node passing the filter.
//
//	go test -run '^$' -bench BenchmarkFilterScore -benchmem ./scheduler/plugins/energyaware/
func BenchmarkFilterScore(b *testing.B) {
	plugintest.BenchmarkCPUPod(b, func(cache *telemetry.Cache, now func() time.Time) plugintest.Plugin {
		return New(*configv1.DefaultEnergyAwareArgs(), cache, now)
	})
}
