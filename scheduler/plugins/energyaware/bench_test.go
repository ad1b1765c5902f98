// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package energyaware

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// BenchmarkFilterScore measures Filter+Score per node over 100, 1000 and
// 5000 nodes with fresh telemetry, every node passing the filter: while no
// node is hot, PreFilter skips the filter for CPU pods; with one hot node
// elsewhere in the cluster, the filter runs on every node.
//
//	go test -run '^$' -bench BenchmarkFilterScore -benchmem ./scheduler/plugins/energyaware/
func BenchmarkFilterScore(b *testing.B) {
	for _, hot := range []bool{false, true} {
		b.Run(fmt.Sprintf("hot-node-elsewhere=%v", hot), func(b *testing.B) {
			plugintest.BenchmarkCPUPod(b, func(cache *telemetry.Cache, _ []fwk.NodeInfo) plugintest.Plugin {
				if hot {
					st := status(99)
					st.SampleTime = metav1.NewTime(cache.Now())
					observe(cache, "hot", st)
				}
				return New(*configv1.DefaultEnergyAwareArgs(), cache)
			})
		})
	}
}
