// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"k8s.io/utils/clock"

	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/agent/kube"
	"github.com/telesched/telesched/agent/nvml"
	"github.com/telesched/telesched/agent/nvml/nvmltest"
	"github.com/telesched/telesched/agent/publisher"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/sandbox/hosttree"
	"github.com/telesched/telesched/test/fixtures"
)

// TestSeventeenGPUs: a node with more GPUs than the API lists (gpus
// maxItems 16) still publishes, with 16 GPUs, every other section, and the
// gpu source saying what was left out. Before, the API server refused the
// whole status on every write and the node went stale.
func TestSeventeenGPUs(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	ctx := t.Context()
	const name = "gpu17"
	schedNode(ctx, t, c, name)
	host, err := hosttree.New(t.TempDir(), hosttree.Spec{CPUs: 8, NUMANodes: 2, Packages: 2, MemoryKiB: 64 << 20, IdleWatts: 100, FullLoadWatts: 400, CritMilliCelsius: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	// go-nvml's DGX A100 mock, grown to 17 GPUs.
	srv := dgxa100.New()
	q := nvmltest.NewEventQueue()
	srv.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) { return q, gonvml.SUCCESS }
	var devices []gonvml.Device
	for i := range 17 {
		d := dgxa100.NewDevice(i)
		d.UUID = nvmltest.UUID(i)
		staticGPU(d)
		devices = append(devices, d)
	}
	srv.DeviceGetCountFunc = func() (int, gonvml.Return) { return len(devices), gonvml.SUCCESS }
	srv.DeviceGetHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) {
		if i < 0 || i >= len(devices) {
			return nil, gonvml.ERROR_INVALID_ARGUMENT
		}
		return devices[i], gonvml.SUCCESS
	}

	kubeconfig := adminKubeconfig(t)
	opts := app.NewOptions()
	opts.Kubeconfig, opts.MetricsAddress, opts.HealthAddress = kubeconfig, "", ""
	opts.NVMLLibrary, opts.NVML = nvml.NewWith(srv), true
	runAgentOn(t, host, name, opts)

	var nt *telemetryv1alpha1.NodeTelemetry
	waitFor(t, "gpu17's NodeTelemetry with GPUs and power", 60*time.Second, func() bool {
		nt = getNT(ctx, c, name)
		return nt != nil && len(nt.Status.GPUs) > 0 && nt.Status.Power != nil
	})
	var sources []string
	for _, s := range nt.Status.Sources {
		sources = append(sources, fmt.Sprintf("%s %s %s %q", s.Name, s.State, s.Reason, s.Message))
	}
	t.Logf("gpu17 status.sources:\n  %s", strings.Join(sources, "\n  "))
	st := nt.Status
	if len(st.GPUs) != 16 || st.GPUs[15].UUID != nvmltest.UUID(15) {
		t.Errorf("%d GPUs published, want the first 16 of 17", len(st.GPUs))
	}
	if st.CPU == nil || st.Memory == nil || st.Thermal == nil || st.Power == nil || len(st.NUMA) != 2 {
		t.Errorf("sections missing beside the GPUs: cpu %v memory %v thermal %v power %v numa %d", st.CPU != nil, st.Memory != nil, st.Thermal != nil, st.Power != nil, len(st.NUMA))
	}
	if !strings.Contains(strings.Join(sources, "\n"), `gpu Available  "gpus: 17 items, the API takes 16; the last 1 are not published"`) {
		t.Error("the gpu source does not say a GPU was left out")
	}
}

// TestPublisherLeavesOutRejectedSection: when the API server still refuses
// a section (a rule the agent's bounds do not cover: a GPU whose used memory
// exceeds its total breaks the CRD's CEL rule), the publisher writes the
// status without that section, marks its source, and the rest arrives.
func TestPublisherLeavesOutRejectedSection(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	ctx := t.Context()
	const name = "rejected-gpus"
	schedNode(ctx, t, c, name)
	client, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPub := publisher.Config{NodeName: name, FieldManager: publisher.DefaultFieldManager, Heartbeat: time.Minute,
		RateLimitQPS: 10, RateLimitBurst: 10, BackoffInitial: time.Second, BackoffMax: time.Second, Deadbands: publisher.DefaultDeadbands()}
	pub, err := publisher.New(cfgPub, client, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	st := fixtures.FullStatus(time.Now(), 2, 8)
	st.GPUs[3].MemoryUsedBytes = st.GPUs[3].MemoryTotalBytes + 1
	out := pub.Offer(ctx, &st)
	if !out.Published || out.Err != nil {
		t.Fatalf("Offer = %+v, want published without the refused section", out)
	}
	nt := getNT(ctx, c, name)
	if nt == nil {
		t.Fatal("no NodeTelemetry")
	}
	var gpuSource telemetryv1alpha1.SourceStatus
	for _, s := range nt.Status.Sources {
		if s.Name == telemetryv1alpha1.SourceGPU {
			gpuSource = s
		}
		t.Logf("status.sources: %s %s %s %q", s.Name, s.State, s.Reason, s.Message)
	}
	if len(nt.Status.GPUs) != 0 || nt.Status.Thermal == nil || nt.Status.Power == nil || nt.Status.CPU == nil {
		t.Errorf("published: %d GPUs, thermal %v, power %v, cpu %v; want no GPUs and the rest", len(nt.Status.GPUs), nt.Status.Thermal != nil, nt.Status.Power != nil, nt.Status.CPU != nil)
	}
	if gpuSource.State != telemetryv1alpha1.SourceFailed || gpuSource.Reason != "RejectedByAPIServer" || !strings.Contains(gpuSource.Message, "status.gpus[3]") {
		t.Errorf("gpu source = %+v, want Failed/RejectedByAPIServer naming status.gpus[3]", gpuSource)
	}
	if fmt.Sprint(out.Dropped) != "[gpus]" {
		t.Errorf("Outcome.Dropped = %v, want [gpus]", out.Dropped)
	}
}

// staticGPU gives a mock GPU the readings the agent's GPU collector asks
// for, fixed: 40 GB of 80 used, 50% busy, 60°C (slowdown 90, shutdown 95),
// 250 W of 400, healthy.
func staticGPU(d *dgxa100.Device) {
	d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
		return gonvml.Memory{Total: 80 << 30, Used: 40 << 30, Free: 40 << 30}, gonvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{Gpu: 50, Memory: 25}, gonvml.SUCCESS
	}
	d.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 60, gonvml.SUCCESS }
	d.GetTemperatureThresholdFunc = func(th gonvml.TemperatureThresholds) (uint32, gonvml.Return) {
		switch th {
		case gonvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
			return 90, gonvml.SUCCESS
		case gonvml.TEMPERATURE_THRESHOLD_SHUTDOWN:
			return 95, gonvml.SUCCESS
		}
		return 0, gonvml.ERROR_NOT_SUPPORTED
	}
	d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 250_000, gonvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, gonvml.Return) { return 400_000, gonvml.SUCCESS }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) { return 1_000_000, gonvml.SUCCESS }
	nvmltest.Healthy(d)
}
