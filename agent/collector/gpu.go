package collector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"k8s.io/klog/v2"
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
type GPUCollector struct {
	lib  nvml.Library
	root hostfs.Root

	mu          sync.Mutex
	initialized bool
	noDriver    *SourceError // set once NVML turned out to be missing
	// xid counts critical XID events since the agent started, by GPU UUID.
	// Events NVML did not tie to a GPU count against every GPU.
	xid             map[string]int64
	xidUnattributed int64
	// problems is the last logged problem of each GPU ("gpu-N"), of
	// listing them ("list") and of XID events ("xid"), so that each is
	// logged once.
	problems map[string]string
}

var _ Collector = &GPUCollector{}

// NewGPUCollector returns a GPU collector reading NVML through lib and sysfs
// under root. NVML is initialized on the first Collect.
func NewGPUCollector(lib nvml.Library, root hostfs.Root) *GPUCollector {
	return &GPUCollector{lib: lib, root: root, xid: map[string]int64{}, problems: map[string]string{}}
}

// Name implements Collector.
func (c *GPUCollector) Name() telemetryv1alpha1.SourceName { return telemetryv1alpha1.SourceGPU }

// Close shuts NVML down; a failure is logged, as there is nothing left to
// do about it. A later Collect initializes NVML again.
func (c *GPUCollector) Close() {
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

// Collect implements Collector.
func (c *GPUCollector) Collect(ctx context.Context, s *Sample) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	logger := klog.FromContext(ctx)
	if c.noDriver != nil {
		return c.noDriver
	}
	if !c.initialized {
		if err := c.lib.Init(); err != nil {
			if errors.Is(err, nvml.ErrLibraryNotFound) {
				c.noDriver = Unavailable("NVMLNotAvailable", "no NVIDIA driver: libnvidia-ml.so.1 cannot be loaded or the kernel driver is not loaded (%v)", err)
				logger.Info("No NVIDIA driver on this node; GPU telemetry is off until the agent restarts", "err", err)
				return c.noDriver
			}
			return Failed("NVMLInitFailed", err, "initializing NVML")
		}
		c.initialized = true
	}

	devs, listErr := c.lib.Devices()
	if listErr != nil && len(devs) == 0 {
		return Failed("GPUListFailed", listErr, "listing GPUs")
	}
	if len(devs) > 0 {
		c.drainXIDEvents(logger)
	}

	numa := newNUMAResolver(c.root)
	gpus := make([]telemetryv1alpha1.GPUStatus, 0, len(devs))
	var failed []error
	if listErr != nil {
		failed = append(failed, listErr)
	}
	c.logProblem(logger, "list", "GPUs left out of the sample", listErr)
	for _, d := range devs {
		st, problems, err := c.readGPU(d, numa)
		if err != nil {
			failed = append(failed, err)
			c.logProblem(logger, fmt.Sprintf("gpu-%d", d.Index()), "GPU left out of the sample", err, "gpu", d.Index())
			continue
		}
		c.logProblem(logger, fmt.Sprintf("gpu-%d", d.Index()), "GPU readings left out", errors.Join(problems...), "gpu", d.Index())
		gpus = append(gpus, st)
	}
	if len(gpus) == 0 && len(failed) > 0 {
		return Failed("GPUReadFailed", errors.Join(failed...), "no GPU could be read")
	}
	slices.SortFunc(gpus, func(a, b telemetryv1alpha1.GPUStatus) int { return int(a.Index - b.Index) })
	s.GPUs = gpus
	return nil
}

// readGPU reads one GPU. It returns an error when the GPU cannot be
// described at all, and otherwise the problems with its optional readings,
// which are left absent.
func (c *GPUCollector) readGPU(d nvml.Device, numa *numaResolver) (telemetryv1alpha1.GPUStatus, []error, error) {
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
	if v, err := d.UtilizationPercent(); read("utilization", err) {
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
	if v, err := d.MIGEnabled(); read("MIG mode", err) {
		st.MIGEnabled = ptr.To(v)
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
