// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"errors"
	"fmt"
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// maxEventsPerDrain bounds how many events one XIDEvents call takes from the
// queue; the rest wait for the next call.
const maxEventsPerDrain = 1024

// library implements Library over go-nvml.
type library struct {
	nvml gonvml.Interface

	mu          sync.Mutex
	initialized bool
	calls       calls
	events      gonvml.EventSet // nil when no GPU is registered for XID events
	eventsErr   error           // why events is nil
}

// calls says which NVML entry points the loaded library has. A call to a
// symbol the library lacks would crash, so those newer than the oldest
// supported driver are looked up at Init.
type calls struct {
	clocksEventReasons bool // R535; before it, the same bits come from the throttle-reasons call
	remappedRows       bool
	totalEnergy        bool
	migMode            bool
	// migDevices: the unprivileged MIG calls (mig.go), all or none.
	migDevices bool
	// nvLinks: link state and the remote end's PCI info; nvLinkRemoteType
	// is newer and optional (nvlink.go).
	nvLinks          bool
	nvLinkRemoteType bool
}

var _ Library = &library{}

// New returns NVML from libnvidia-ml.so.1, which Init loads with dlopen.
func New() Library {
	return NewWith(gonvml.New())
}

// NewWith returns a Library over n, such as one of go-nvml's mock servers.
func NewWith(n gonvml.Interface) Library {
	return &library{nvml: n}
}

func (l *library) Init() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.initialized {
		return nil
	}
	if err := errorFor("nvmlInit", l.nvml.Init()); err != nil {
		return err
	}
	l.initialized = true
	l.calls = lookupCalls(l.nvml.Extensions())
	l.events, l.eventsErr = l.registerXIDEvents()
	return nil
}

func lookupCalls(ext gonvml.ExtendedInterface) calls {
	has := func(symbol string) bool { return ext.LookupSymbol(symbol) == nil }
	return calls{
		clocksEventReasons: has("nvmlDeviceGetCurrentClocksEventReasons"),
		remappedRows:       has("nvmlDeviceGetRemappedRows"),
		totalEnergy:        has("nvmlDeviceGetTotalEnergyConsumption"),
		migMode:            has("nvmlDeviceGetMigMode"),
		migDevices: has("nvmlDeviceGetMaxMigDeviceCount") && has("nvmlDeviceGetMigDeviceHandleByIndex") &&
			has("nvmlDeviceGetGpuInstanceId") &&
			(has("nvmlDeviceGetAttributes_v2") || has("nvmlDeviceGetAttributes")),
		nvLinks: has("nvmlDeviceGetNvLinkState") &&
			(has("nvmlDeviceGetNvLinkRemotePciInfo_v2") || has("nvmlDeviceGetNvLinkRemotePciInfo")),
		nvLinkRemoteType: has("nvmlDeviceGetNvLinkRemoteDeviceType"),
	}
}

// registerXIDEvents creates an event set and registers every GPU that
// supports critical XID events on it. It returns a nil set and the reason
// when no GPU could be registered.
func (l *library) registerXIDEvents() (gonvml.EventSet, error) {
	n, ret := l.nvml.DeviceGetCount()
	if err := errorFor("nvmlDeviceGetCount", ret); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("no GPU to register for XID events: %w", ErrNotSupported)
	}
	set, ret := l.nvml.EventSetCreate()
	if err := errorFor("nvmlEventSetCreate", ret); err != nil {
		return nil, err
	}
	var errs []error
	registered := 0
	for i := range n {
		dev, ret := l.nvml.DeviceGetHandleByIndex(i)
		if err := errorFor("nvmlDeviceGetHandleByIndex", ret); err != nil {
			errs = append(errs, fmt.Errorf("GPU %d: %w", i, err))
			continue
		}
		supported, ret := dev.GetSupportedEventTypes()
		if err := errorFor("nvmlDeviceGetSupportedEventTypes", ret); err != nil {
			errs = append(errs, fmt.Errorf("GPU %d: %w", i, err))
			continue
		}
		if supported&gonvml.EventTypeXidCriticalError == 0 {
			errs = append(errs, fmt.Errorf("GPU %d: XID events: %w", i, ErrNotSupported))
			continue
		}
		if err := errorFor("nvmlDeviceRegisterEvents", dev.RegisterEvents(gonvml.EventTypeXidCriticalError, set)); err != nil {
			errs = append(errs, fmt.Errorf("GPU %d: %w", i, err))
			continue
		}
		registered++
	}
	if registered == 0 {
		set.Free()
		return nil, errors.Join(errs...)
	}
	return set, nil
}

func (l *library) Shutdown() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.initialized {
		return nil
	}
	var errs []error
	if l.events != nil {
		errs = append(errs, errorFor("nvmlEventSetFree", l.events.Free()))
		l.events = nil
	}
	errs = append(errs, errorFor("nvmlShutdown", l.nvml.Shutdown()))
	l.initialized = false
	return errors.Join(errs...)
}

func (l *library) Devices() ([]Device, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.initialized {
		return nil, errNotInitialized
	}
	n, ret := l.nvml.DeviceGetCount()
	if err := errorFor("nvmlDeviceGetCount", ret); err != nil {
		return nil, err
	}
	devs := make([]Device, 0, n)
	var errs []error
	for i := range n {
		h, ret := l.nvml.DeviceGetHandleByIndex(i)
		if err := errorFor("nvmlDeviceGetHandleByIndex", ret); err != nil {
			errs = append(errs, fmt.Errorf("GPU %d: %w", i, err))
			continue
		}
		devs = append(devs, &device{index: i, h: h, calls: l.calls})
	}
	return devs, errors.Join(errs...)
}

func (l *library) XIDEvents() ([]XIDEvent, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.initialized {
		return nil, errNotInitialized
	}
	if l.events == nil {
		return nil, l.eventsErr
	}
	var out []XIDEvent
	for range maxEventsPerDrain {
		data, ret := l.events.Wait(0)
		if ret == gonvml.ERROR_TIMEOUT {
			break // the queue is empty
		}
		if err := errorFor("nvmlEventSetWait", ret); err != nil {
			return out, err
		}
		if data.EventType&gonvml.EventTypeXidCriticalError == 0 {
			continue
		}
		ev := XIDEvent{XID: data.EventData}
		if data.Device != nil {
			if uuid, ret := data.Device.GetUUID(); ret == gonvml.SUCCESS {
				ev.UUID = uuid
			}
		}
		out = append(out, ev)
	}
	return out, nil
}

// device implements Device over a go-nvml device handle.
type device struct {
	index int
	h     gonvml.Device
	calls calls
}

var _ Device = &device{}

func (d *device) Index() int { return d.index }

func (d *device) UUID() (string, error) {
	v, ret := d.h.GetUUID()
	return v, errorFor("nvmlDeviceGetUUID", ret)
}

func (d *device) Name() (string, error) {
	v, ret := d.h.GetName()
	return v, errorFor("nvmlDeviceGetName", ret)
}

func (d *device) PCIBusID() (string, error) {
	info, ret := d.h.GetPciInfo()
	if err := errorFor("nvmlDeviceGetPciInfo", ret); err != nil {
		return "", err
	}
	id := cString(info.BusId[:])
	if id == "" {
		return "", errors.New("nvmlDeviceGetPciInfo: empty bus id")
	}
	return id, nil
}

// cString converts a NUL-terminated C char array to a string.
func cString(c []int8) string {
	b := make([]byte, 0, len(c))
	for _, ch := range c {
		if ch == 0 {
			break
		}
		b = append(b, byte(ch))
	}
	return string(b)
}

func (d *device) Memory() (Memory, error) {
	m, ret := d.h.GetMemoryInfo()
	if err := errorFor("nvmlDeviceGetMemoryInfo", ret); err != nil {
		return Memory{}, err
	}
	return Memory{TotalBytes: m.Total, UsedBytes: m.Used}, nil
}

func (d *device) UtilizationPercent() (uint32, error) {
	u, ret := d.h.GetUtilizationRates()
	return u.Gpu, errorFor("nvmlDeviceGetUtilizationRates", ret)
}

func (d *device) TemperatureCelsius() (uint32, error) {
	v, ret := d.h.GetTemperature(gonvml.TEMPERATURE_GPU)
	return v, errorFor("nvmlDeviceGetTemperature", ret)
}

func (d *device) SlowdownTemperatureCelsius() (uint32, error) {
	v, ret := d.h.GetTemperatureThreshold(gonvml.TEMPERATURE_THRESHOLD_SLOWDOWN)
	return v, errorFor("nvmlDeviceGetTemperatureThreshold", ret)
}

func (d *device) ShutdownTemperatureCelsius() (uint32, error) {
	v, ret := d.h.GetTemperatureThreshold(gonvml.TEMPERATURE_THRESHOLD_SHUTDOWN)
	return v, errorFor("nvmlDeviceGetTemperatureThreshold", ret)
}

func (d *device) PowerUsageMilliwatts() (uint32, error) {
	v, ret := d.h.GetPowerUsage()
	return v, errorFor("nvmlDeviceGetPowerUsage", ret)
}

func (d *device) PowerLimitMilliwatts() (uint32, error) {
	v, ret := d.h.GetEnforcedPowerLimit()
	return v, errorFor("nvmlDeviceGetEnforcedPowerLimit", ret)
}

func (d *device) TotalEnergyMillijoules() (uint64, error) {
	if !d.calls.totalEnergy {
		return 0, missingCall("nvmlDeviceGetTotalEnergyConsumption")
	}
	v, ret := d.h.GetTotalEnergyConsumption()
	return v, errorFor("nvmlDeviceGetTotalEnergyConsumption", ret)
}

func (d *device) ECCUncorrectedVolatile() (uint64, error) {
	current, _, ret := d.h.GetEccMode()
	if err := errorFor("nvmlDeviceGetEccMode", ret); err != nil {
		return 0, err
	}
	if current != gonvml.FEATURE_ENABLED {
		return 0, fmt.Errorf("ECC is disabled: %w", ErrNotSupported)
	}
	v, ret := d.h.GetTotalEccErrors(gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.VOLATILE_ECC)
	return v, errorFor("nvmlDeviceGetTotalEccErrors", ret)
}

func (d *device) RemappedRows() (RemappedRows, error) {
	if !d.calls.remappedRows {
		return RemappedRows{}, missingCall("nvmlDeviceGetRemappedRows")
	}
	corrected, uncorrected, pending, failed, ret := d.h.GetRemappedRows()
	if err := errorFor("nvmlDeviceGetRemappedRows", ret); err != nil {
		return RemappedRows{}, err
	}
	return RemappedRows{Corrected: corrected, Uncorrected: uncorrected, Pending: pending, Failed: failed}, nil
}

func (d *device) ClocksEventReasons() (ClocksEventReasons, error) {
	if d.calls.clocksEventReasons {
		v, ret := d.h.GetCurrentClocksEventReasons()
		return ClocksEventReasons(v), errorFor("nvmlDeviceGetCurrentClocksEventReasons", ret)
	}
	// Deprecated in NVML, but the only call drivers before R535 have.
	v, ret := d.h.GetCurrentClocksThrottleReasons()
	return ClocksEventReasons(v), errorFor("nvmlDeviceGetCurrentClocksThrottleReasons", ret)
}

func (d *device) MIGEnabled() (bool, error) {
	if !d.calls.migMode {
		return false, missingCall("nvmlDeviceGetMigMode")
	}
	current, _, ret := d.h.GetMigMode()
	if err := errorFor("nvmlDeviceGetMigMode", ret); err != nil {
		return false, err
	}
	return current == gonvml.DEVICE_MIG_ENABLE, nil
}

// missingCall is the error for an NVML call the loaded driver is too old to
// have: the reading is not supported there.
func missingCall(symbol string) error {
	return fmt.Errorf("%s: not in this driver's NVML: %w", symbol, ErrNotSupported)
}
