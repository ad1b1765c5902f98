// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/nvml"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// GPUCollector reports the node's NVIDIA GPUs through NVML, and the NUMA
// node of each from sysfs.
//
// A node without the driver (libnvidia-ml.so.1 or the kernel module
// missing) is Unavailable with reason NVMLNotAvailable; that is decided once
// and logged once, and later calls return it without trying NVML again.
// Any other failure to initialize NVML is Failed and retried on the next
// call. A driver with no GPU is Available with no GPUs.
//
// One GPU's failures do not drop the others:
//   - A GPU whose identity or memory (UUID, name, memory info: required
//     fields of GPUStatus) cannot be read is left out of the sample. If
//     every GPU is left out the source is Failed (GPUReadFailed).
//   - Any other reading that fails is absent from its GPU, exactly like a
//     reading NVML does not support there; health is judged from the
//     readings that succeeded.
//
// Both are logged when they first appear and when they clear, not on every
// call.
//
// NVML calls can hang (a GPU fallen off the bus, a driver waiting on a
// wedged GPU), and NVML gives no way to cancel one. So each collection runs
// on a goroutine of its own, and Collect waits for it at most the timeout
// (see WithTimeout; DefaultNVMLTimeout). A collection that does not finish
// in time makes the source Failed with reason NVMLTimeout, the message
// naming the timeout, what the collection was doing and since when; the
// rest of the sample goes on without GPUs. While that collection is stuck
// NVML is not called again (one collection in flight at most, so stuck
// calls cannot pile up): later calls return NVMLTimeout at once, saying it
// is still stuck. Once it returns, its late result is dropped and the next
// call collects afresh.
type GPUCollector struct {
	lib          nvml.Library
	root         hostfs.Root
	timeout      time.Duration
	topoInterval time.Duration
	clock        clock.Clock

	// callMu guards call, the collection that did not finish in time and
	// has not been seen to return since; nil when none.
	callMu sync.Mutex
	call   *gpuCall

	// mu guards what the collections use. A collection holds it
	// throughout, so a stuck one holds it until it returns.
	mu          sync.Mutex
	initialized bool
	// noDriver is set once NVML turned out to be missing; Collect reads it
	// without waiting for mu.
	noDriver atomic.Pointer[SourceError]
	// xid counts critical XID events since the agent started, by GPU UUID.
	// Events NVML did not tie to a GPU count against every GPU.
	xid             map[string]int64
	xidUnattributed int64
	// topo is the GPUs' PCIe roots and NVLinks as last read; nil before
	// the first read and after one that met problems.
	topo *gpuTopology
	// problems is the last logged problem of each GPU ("gpu-N"), of
	// listing them ("list") and of XID events ("xid"), so that each is
	// logged once.
	problems map[string]string
}

var _ Collector = &GPUCollector{}

// DefaultNVMLTimeout is how long one GPU collection, every NVML call of a
// sample, may take before the GPU source is reported NVMLTimeout
// (--nvml-timeout). A healthy collection takes milliseconds. The slow one is
// the first: without persistence mode, initializing a GPU costs "order of
// 1-3 second" per GPU (NVIDIA, Driver Persistence, "Overview"), which 10s
// covers for a few GPUs; on a node with more the first sample may report
// NVMLTimeout, and once that initialization returns the agent holds NVML
// open and the next collection is fast. 10s stays below the 15s (3
// intervals of 5s) after which /healthz fails, so that one timed-out sample
// does not fail the probe.
const DefaultNVMLTimeout = 10 * time.Second

// NewGPUCollector returns a GPU collector reading NVML through lib and sysfs
// under root, with DefaultNVMLTimeout. NVML is initialized on the first
// Collect.
func NewGPUCollector(lib nvml.Library, root hostfs.Root) *GPUCollector {
	return &GPUCollector{lib: lib, root: root, timeout: DefaultNVMLTimeout, topoInterval: DefaultGPUTopologyInterval,
		clock: clock.RealClock{}, xid: map[string]int64{}, problems: map[string]string{}}
}

// WithTopologyInterval sets how often the GPUs' PCIe roots and NVLinks are
// read again while the set of GPUs stays the same (see
// DefaultGPUTopologyInterval); it must be positive. It returns c.
func (c *GPUCollector) WithTopologyInterval(d time.Duration) *GPUCollector {
	c.topoInterval = d
	return c
}

// WithTimeout sets how long Collect waits for one collection's NVML calls;
// it must be positive. It returns c.
func (c *GPUCollector) WithTimeout(d time.Duration) *GPUCollector {
	c.timeout = d
	return c
}

// gpuCall is one collection: its NVML calls, on a goroutine of their own.
type gpuCall struct {
	started time.Time
	done    chan struct{} // closed when the collection returned
	step    atomic.Pointer[string]

	// Set before done is closed.
	gpus    []telemetryv1alpha1.GPUStatus
	devices map[string]GPUDevice
	err     error
}

// at records what the collection is doing, for the message if it hangs.
func (g *gpuCall) at(step string) { g.step.Store(&step) }

func (g *gpuCall) doing() string { return *g.step.Load() }

// Name implements Collector.
func (c *GPUCollector) Name() telemetryv1alpha1.SourceName { return telemetryv1alpha1.SourceGPU }

// Close shuts NVML down; a failure is logged, as there is nothing left to
// do about it. While a collection is stuck in NVML it leaves NVML as it is
// (shutting NVML down under a stuck call would hang too), and says so in
// the log. A later Collect initializes NVML again.
func (c *GPUCollector) Close() {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	if call := c.call; call != nil && !returned(call) {
		klog.Background().Info("Not shutting NVML down: a call is still stuck in it", "since", call.started, "doing", call.doing())
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.initialized {
		return
	}
	c.initialized = false
	if err := c.lib.Shutdown(); err != nil {
		klog.Background().Error(err, "Shutting down NVML")
	}
}

// Collect implements Collector. It runs the collection on a goroutine and
// waits for it at most the timeout; see GPUCollector.
func (c *GPUCollector) Collect(ctx context.Context, s *Sample) error {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	logger := klog.FromContext(ctx)
	if call := c.call; call != nil {
		if !returned(call) {
			return Failed("NVMLTimeout", nil, "an NVML call is still stuck, %s, since %s (--nvml-timeout %v); NVML is not called again until it returns",
				call.doing(), call.started.UTC().Format(time.RFC3339), c.timeout)
		}
		// It returned since: its result is late and dropped.
		logger.Info("The stuck NVML call returned; reading the GPUs again", "since", call.started, "doing", call.doing())
		c.call = nil
	}
	if absent := c.noDriver.Load(); absent != nil {
		// No driver: no call to make, no goroutine and timer to spend.
		return absent
	}
	call := &gpuCall{started: c.clock.Now(), done: make(chan struct{})}
	call.at("starting")
	go func() {
		defer close(call.done)
		call.gpus, call.devices, call.err = c.collect(ctx, call)
	}()
	timer := c.clock.NewTimer(c.timeout)
	defer timer.Stop()
	select {
	case <-call.done:
		if call.err != nil {
			return call.err
		}
		s.GPUs = call.gpus
		s.GPUDevices = call.devices
		return nil
	case <-timer.C():
		c.call = call
		logger.Error(nil, "NVML did not return in time; GPU telemetry is off until it does", "timeout", c.timeout, "doing", call.doing())
		return Failed("NVMLTimeout", nil, "NVML did not return within %v (--nvml-timeout), %s, since %s; NVML is not called again until it returns",
			c.timeout, call.doing(), call.started.UTC().Format(time.RFC3339))
	case <-ctx.Done():
		// Stopping: the collection may still be running.
		c.call = call
		return ctx.Err()
	}
}

// returned reports whether a collection has returned.
func returned(call *gpuCall) bool {
	select {
	case <-call.done:
		return true
	default:
		return false
	}
}

// collect reads NVML: the GPUs and the device ids that stand for them, or
// the SourceError that says why not.
func (c *GPUCollector) collect(ctx context.Context, call *gpuCall) ([]telemetryv1alpha1.GPUStatus, map[string]GPUDevice, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	logger := klog.FromContext(ctx)
	if absent := c.noDriver.Load(); absent != nil {
		return nil, nil, absent
	}
	if !c.initialized {
		call.at("initializing NVML")
		if err := c.lib.Init(); err != nil {
			if errors.Is(err, nvml.ErrLibraryNotFound) {
				absent := Unavailable("NVMLNotAvailable", "no NVIDIA driver: libnvidia-ml.so.1 cannot be loaded or the kernel driver is not loaded (%v)", err)
				c.noDriver.Store(absent)
				logger.Info("No NVIDIA driver on this node; GPU telemetry is off until the agent restarts", "err", err)
				return nil, nil, absent
			}
			return nil, nil, Failed("NVMLInitFailed", err, "initializing NVML")
		}
		c.initialized = true
	}

	call.at("listing GPUs")
	devs, listErr := c.lib.Devices()
	if listErr != nil && len(devs) == 0 {
		return nil, nil, Failed("GPUListFailed", listErr, "listing GPUs")
	}
	if len(devs) > 0 {
		call.at("reading XID events")
		c.drainXIDEvents(logger)
	}

	numa := newNUMAResolver(c.root)
	gpus := make([]telemetryv1alpha1.GPUStatus, 0, len(devs))
	devices := map[string]GPUDevice{}
	byIndex := map[int32]nvml.Device{}
	var failed []error
	if listErr != nil {
		failed = append(failed, listErr)
	}
	c.logProblem(logger, "list", "GPUs left out of the sample", listErr)
	for _, d := range devs {
		call.at(fmt.Sprintf("reading GPU %d", d.Index()))
		st, problems, err := c.readGPU(d, numa, devices)
		if err != nil {
			failed = append(failed, err)
			c.logProblem(logger, fmt.Sprintf("gpu-%d", d.Index()), "GPU left out of the sample", err, "gpu", d.Index())
			continue
		}
		c.logProblem(logger, fmt.Sprintf("gpu-%d", d.Index()), "GPU readings left out", errors.Join(problems...), "gpu", d.Index())
		gpus = append(gpus, st)
		byIndex[st.Index] = d
	}
	if len(gpus) == 0 && len(failed) > 0 {
		return nil, nil, Failed("GPUReadFailed", errors.Join(failed...), "no GPU could be read")
	}
	slices.SortFunc(gpus, func(a, b telemetryv1alpha1.GPUStatus) int { return int(a.Index - b.Index) })
	call.at("reading the GPU topology")
	c.applyTopology(logger, gpus, byIndex)
	return gpus, devices, nil
}

// applyTopology sets each GPU's PCIe root and NVLinks from the topology,
// read again when the set of GPUs changed, when the last read met problems,
// or after the topology interval.
func (c *GPUCollector) applyTopology(logger klog.Logger, gpus []telemetryv1alpha1.GPUStatus, devs map[int32]nvml.Device) {
	key := topologyKey(gpus)
	now := c.clock.Now()
	if c.topo == nil || c.topo.key != key || now.Sub(c.topo.readAt) >= c.topoInterval {
		byGPU, problems := readTopology(c.root, gpus, devs)
		c.logProblem(logger, "topology", "GPU topology read in part", errors.Join(problems...))
		c.topo = &gpuTopology{key: key, readAt: now, byGPU: byGPU}
		if len(problems) > 0 {
			c.topo.key = "" // read again next time
		}
		logger.V(2).Info("Read the GPU topology", "gpus", len(gpus), "problems", len(problems))
	}
	for i := range gpus {
		t := c.topo.byGPU[gpus[i].Index]
		gpus[i].PCIeRoot = t.pcieRoot
		if t.nvlink != nil {
			nv := *t.nvlink
			nv.Peers = slices.Clone(nv.Peers)
			gpus[i].NVLink = &nv
		}
	}
}

// readGPU reads one GPU. It returns an error when the GPU cannot be
// described at all, and otherwise the problems with its optional readings,
// which are left absent.
func (c *GPUCollector) readGPU(d nvml.Device, numa *numaResolver, devices map[string]GPUDevice) (telemetryv1alpha1.GPUStatus, []error, error) {
	idx := d.Index()
	uuid, err := d.UUID()
	if err != nil {
		return telemetryv1alpha1.GPUStatus{}, nil, fmt.Errorf("GPU %d: %w", idx, err)
	}
	name, err := d.Name()
	if err != nil {
		return telemetryv1alpha1.GPUStatus{}, nil, fmt.Errorf("GPU %d: %w", idx, err)
	}
	mem, err := d.Memory()
	if err != nil {
		return telemetryv1alpha1.GPUStatus{}, nil, fmt.Errorf("GPU %d: %w", idx, err)
	}
	total := clampInt64(mem.TotalBytes)
	st := telemetryv1alpha1.GPUStatus{
		Index:            int32(idx),
		UUID:             uuid,
		Model:            name,
		MemoryTotalBytes: total,
		// NVML's used never exceeds total; the API rejects a status where
		// it does, so a driver glitch must not cost the whole sample.
		MemoryUsedBytes: min(clampInt64(mem.UsedBytes), total),
	}

	var problems []error
	// read keeps a reading when it succeeded; an unsupported reading is
	// absent, a failed one absent and a problem.
	read := func(what string, err error) bool {
		if err != nil && !errors.Is(err, nvml.ErrNotSupported) {
			problems = append(problems, fmt.Errorf("%s: %w", what, err))
		}
		return err == nil
	}

	if busID, err := d.PCIBusID(); read("PCI bus id", err) {
		st.PCIBusID = busID
		addr, err := ParsePCIAddress(busID)
		if read("PCI bus id", err) {
			node, err := numa.numaNode(addr)
			if read("NUMA node", err) {
				st.NUMANode = node
			}
		}
	}
	devices[uuid] = GPUDevice{GPU: int32(idx)}
	migOn, migErr := d.MIGEnabled()
	if read("MIG mode", migErr) {
		st.MIGEnabled = ptr.To(migOn)
	}
	if migOn {
		// NVML has no utilization for a GPU in MIG mode (its MIG devices
		// run the work; nvmlDeviceGetUtilizationRates answers
		// NOT_SUPPORTED): absent, never a 0 a driver may still return.
		layout, err := d.MIGDevices()
		if len(layout.Devices) > 0 || err == nil {
			st.MIG = migStatus(layout, int32(idx), mem.TotalBytes, devices)
		}
		read("MIG devices", err)
	} else if v, err := d.UtilizationPercent(); read("utilization", err) {
		st.UtilizationPercent = ptr.To(int32(min(v, 100)))
	}
	if v, err := d.TemperatureCelsius(); read("temperature", err) {
		st.TemperatureMilliCelsius = ptr.To(int64(v) * 1000)
	}
	if v, err := d.SlowdownTemperatureCelsius(); read("slowdown temperature", err) {
		st.SlowdownMilliCelsius = ptr.To(int64(v) * 1000)
	}
	if v, err := d.ShutdownTemperatureCelsius(); read("shutdown temperature", err) {
		st.ShutdownMilliCelsius = ptr.To(int64(v) * 1000)
	}
	if v, err := d.PowerUsageMilliwatts(); read("power", err) {
		st.PowerWatts = ptr.To(milliToRounded(v))
	}
	if v, err := d.PowerLimitMilliwatts(); read("power limit", err) {
		st.PowerLimitWatts = ptr.To(milliToRounded(v))
	}
	if v, err := d.TotalEnergyMillijoules(); read("energy", err) {
		// A counter: truncated, so it never runs ahead of the meter.
		st.EnergyJoules = ptr.To(clampInt64(v / 1000))
	}
	if v, err := d.ECCUncorrectedVolatile(); read("ECC errors", err) {
		st.Health.ECCUncorrectedErrors = ptr.To(clampInt64(v))
	}
	if rows, err := d.RemappedRows(); read("remapped rows", err) {
		st.Health.RowRemapPending = rows.Pending
		st.Health.RowRemapFailed = rows.Failed
	}
	st.Health.XIDCriticalEvents = c.xid[uuid] + c.xidUnattributed
	st.Health.Healthy = !(ptr.Deref(st.Health.ECCUncorrectedErrors, 0) > 0 ||
		st.Health.RowRemapPending || st.Health.RowRemapFailed ||
		st.Health.XIDCriticalEvents > 0)
	if v, err := d.ClocksEventReasons(); read("clock event reasons", err) {
		st.ThrottleReasons = decodeThrottleReasons(v)
	}
	return st, problems, nil
}

// drainXIDEvents adds the critical XID events queued since the last call to
// the counts, leaving out those an application causes.
func (c *GPUCollector) drainXIDEvents(logger klog.Logger) {
	events, err := c.lib.XIDEvents()
	for _, ev := range events {
		if applicationXID(ev.XID) {
			logger.V(4).Info("Application XID event, not counted against the GPU", "uuid", ev.UUID, "xid", ev.XID)
			continue
		}
		logger.Info("Critical XID event; the GPU is reported unhealthy", "uuid", ev.UUID, "xid", ev.XID)
		if ev.UUID == "" {
			c.xidUnattributed++
		} else {
			c.xid[ev.UUID]++
		}
	}
	if errors.Is(err, nvml.ErrNotSupported) {
		err = fmt.Errorf("XID events cannot be watched: %w", err)
	}
	c.logProblem(logger, "xid", "XID events", err)
}

// applicationXID reports whether an XID is one that a user's program causes
// rather than a fault of the GPU (graphics engine exception, memory page
// fault, stopped processing, preemptive cleanup, video processor exception,
// context switch timeout): the same list NVIDIA's k8s-device-plugin skips.
func applicationXID(xid uint64) bool {
	switch xid {
	case 13, 31, 43, 45, 68, 109:
		return true
	}
	return false
}

// logProblem logs err when it differs from the last one logged under key,
// and logs its clearing, so that a lasting problem is logged once.
func (c *GPUCollector) logProblem(logger klog.Logger, key, msg string, err error, keysAndValues ...any) {
	last, had := c.problems[key]
	switch {
	case err == nil && had:
		delete(c.problems, key)
		logger.Info(msg+": cleared", keysAndValues...)
	case err != nil && err.Error() != last:
		c.problems[key] = err.Error()
		logger.Error(err, msg, keysAndValues...)
	}
}

// gpuThrottleReasons maps NVML clock-event bits to the API's names, in the
// order they are reported.
var gpuThrottleReasons = [...]struct {
	bit    nvml.ClocksEventReasons
	reason telemetryv1alpha1.GPUThrottleReason
}{
	{nvml.ClocksEventGPUIdle, telemetryv1alpha1.GPUThrottleIdle},
	{nvml.ClocksEventApplicationsClocksSetting, telemetryv1alpha1.GPUThrottleApplicationsClocks},
	{nvml.ClocksEventSwPowerCap, telemetryv1alpha1.GPUThrottleSwPowerCap},
	{nvml.ClocksEventHwSlowdown, telemetryv1alpha1.GPUThrottleHwSlowdown},
	{nvml.ClocksEventSyncBoost, telemetryv1alpha1.GPUThrottleSyncBoost},
	{nvml.ClocksEventSwThermalSlowdown, telemetryv1alpha1.GPUThrottleSwThermalSlowdown},
	{nvml.ClocksEventHwThermalSlowdown, telemetryv1alpha1.GPUThrottleHwThermalSlowdown},
	{nvml.ClocksEventHwPowerBrakeSlowdown, telemetryv1alpha1.GPUThrottleHwPowerBrakeSlowdown},
	{nvml.ClocksEventDisplayClockSetting, telemetryv1alpha1.GPUThrottleDisplayClockSetting},
}

// decodeThrottleReasons names the bits set in v, in NVML's bit order; bits
// the API has no name for are left out. nil when none is set.
func decodeThrottleReasons(v nvml.ClocksEventReasons) []telemetryv1alpha1.GPUThrottleReason {
	var out []telemetryv1alpha1.GPUThrottleReason
	for _, r := range gpuThrottleReasons {
		if v&r.bit != 0 {
			out = append(out, r.reason)
		}
	}
	return out
}

// milliToRounded converts thousandths (mW) to units (W), rounded half up.
func milliToRounded(v uint32) int32 {
	return int32((uint64(v) + 500) / 1000)
}

// clampInt64 converts an unsigned counter to int64, saturating.
func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
