package energyaware

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/telemetry"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// status is fresh telemetry with the hottest sensor at hottest°C of a
// 100°C critical limit and GPUs at the given temperatures (slowdown 90°C).
func status(hottest int64, gpuTemps ...int64) *telemetryv1alpha1.NodeTelemetryStatus {
	st := &telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime: metav1.NewTime(now), IntervalSeconds: 5,
		CPU: &telemetryv1alpha1.CPUStatus{LogicalCores: 16, OnlineCores: 16, UtilizationPercent: 20},
		Thermal: &telemetryv1alpha1.ThermalStatus{HottestSensor: "cpu", HottestMilliCelsius: hottest * 1000,
			LimitMilliCelsius: ptr.To[int64](100_000), HeadroomMilliCelsius: ptr.To((100 - hottest) * 1000)},
		Sources: []telemetryv1alpha1.SourceStatus{{Name: telemetryv1alpha1.SourceGPU, State: telemetryv1alpha1.SourceAvailable}},
	}
	for i, temp := range gpuTemps {
		st.GPUs = append(st.GPUs, telemetryv1alpha1.GPUStatus{Index: int32(i), UUID: string(rune('a' + i)), Health: telemetryv1alpha1.GPUHealth{Healthy: true},
			TemperatureMilliCelsius: ptr.To(temp * 1000), SlowdownMilliCelsius: ptr.To[int64](90_000)})
	}
	return st
}

func gpuPod(gpus string) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	if gpus != "" {
		req["nvidia.com/gpu"] = resource.MustParse(gpus)
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: req},
	}}}}
}

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     *telemetryv1alpha1.NodeTelemetryStatus
		pod        *v1.Pod
		wantReason string
	}{
		{"cool node", status(60), gpuPod(""), ""},
		// headroom 4°C <= 5°C margin
		{"hot node", status(96), gpuPod(""), "node thermal headroom 4.0°C <= margin 5.0°C"},
		// GPUs at 60, 88, 70: 88 >= 90-3 is too hot; 2 cool GPUs for a 2-GPU pod
		{"enough cool GPUs", status(60, 60, 88, 70), gpuPod("2"), ""},
		{"too few cool GPUs", status(60, 60, 88, 70), gpuPod("3"), "node has 2 healthy GPUs more than 3°C below slowdown, pod needs 3"},
		{"CPU pod ignores GPU heat", status(60, 89, 89), gpuPod(""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := telemetry.NewCache()
			cache.Set(telemetry.FromStatus("n", tc.status))
			pl := New(*configv1.DefaultEnergyAwareArgs(), cache, func() time.Time { return now })
			cs := framework.NewCycleState()
			_, _ = pl.PreFilter(context.Background(), cs, tc.pod, nil)
			ni := framework.NewNodeInfo()
			ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
			st := pl.Filter(context.Background(), cs, tc.pod, ni)
			switch {
			case tc.wantReason == "" && !st.IsSuccess():
				t.Errorf("Filter = %v, want success", st)
			case tc.wantReason != "" && (st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), tc.wantReason)):
				t.Errorf("Filter = %v, want Unschedulable containing %q", st, tc.wantReason)
			}
		})
	}
}

func TestHint(t *testing.T) {
	pl := New(*configv1.DefaultEnergyAwareArgs(), telemetry.NewCache(), func() time.Time { return now })
	obj := func(st *telemetryv1alpha1.NodeTelemetryStatus) *unstructured.Unstructured {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&telemetryv1alpha1.NodeTelemetry{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: *st})
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	for _, tc := range []struct {
		name     string
		old, new *telemetryv1alpha1.NodeTelemetryStatus
		want     fwk.QueueingHint
	}{
		{"cooled below the margin", status(97), status(80), fwk.Queue},
		{"still too hot", status(98), status(96), fwk.QueueSkip},
		{"cool node warmed a little", status(60), status(65), fwk.QueueSkip},
		{"a GPU cooled", status(60, 89, 89), status(60, 89, 70), fwk.Queue},
		{"GPUs unchanged", status(60, 89, 70), status(60, 89, 71), fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pl.hint(klog.Background(), gpuPod("1"), obj(tc.old), obj(tc.new))
			if err != nil || got != tc.want {
				t.Errorf("hint = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
