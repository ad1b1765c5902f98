package energyaware

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	configv1 "github.com/telesched/telesched/apis/config/v1"
)

// Defect 6: EnergyAware counts GPUs by the configured resource, as
// TopologyFit does.
func TestGPUResourceName(t *testing.T) {
	cache := newCache()
	observe(cache, "n", status(50, 60, 89)) // one GPU cool, one 1°C from slowdown
	args := *configv1.DefaultEnergyAwareArgs()
	args.GPUResourceName = "amd.com/gpu"
	pl := New(args, cache)
	p := gpuPod("")
	p.Spec.Containers[0].Resources.Requests["amd.com/gpu"] = resource.MustParse("2")
	p.Spec.Containers[0].Resources.Limits = p.Spec.Containers[0].Resources.Requests
	cs := framework.NewCycleState()
	_, _ = pl.PreFilter(context.Background(), cs, p, nil)
	if st := pl.Filter(context.Background(), cs, p, nodeInfoOf("n")); st.IsSuccess() {
		t.Error("a pod needing 2 amd.com/gpu fit a node with one cool GPU")
	}
}

func nodeInfoOf(name string) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{})
	ni.Node().Name = name
	return ni
}
