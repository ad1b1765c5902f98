// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nvmltest sets up go-nvml's mock servers for tests: fixed GPU
// UUIDs and the event calls the mocks leave unset.
package nvmltest

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// EventQueue is an NVML event set whose events a test queues in Queue.
type EventQueue struct {
	mock.EventSet
	Queue []gonvml.EventData
}

// NewEventQueue returns an empty queue; Wait returns ERROR_TIMEOUT when it
// is empty, as NVML does.
func NewEventQueue() *EventQueue {
	q := &EventQueue{}
	q.WaitFunc = func(uint32) (gonvml.EventData, gonvml.Return) {
		if len(q.Queue) == 0 {
			return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
		}
		ev := q.Queue[0]
		q.Queue = q.Queue[1:]
		return ev, gonvml.SUCCESS
	}
	q.FreeFunc = func() gonvml.Return { return gonvml.SUCCESS }
	return q
}

// UUID is the UUID NewDGXA100 gives GPU i.
func UUID(i int) string { return fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i) }

// Device returns GPU i of a DGX A100 mock.
func Device(s *dgxa100.Server, i int) *dgxa100.Device { return s.Devices[i].(*dgxa100.Device) }

// NewDGXA100 returns go-nvml's DGX A100 mock (8 GPUs) with UUID(i) for GPU
// i and XID events supported on every GPU, delivered from the returned
// queue.
func NewDGXA100() (*dgxa100.Server, *EventQueue) {
	s := dgxa100.New()
	q := NewEventQueue()
	s.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) { return q, gonvml.SUCCESS }
	for i := range s.Devices {
		d := Device(s, i)
		d.UUID = UUID(i)
		d.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) { return gonvml.EventTypeAll, gonvml.SUCCESS }
		d.RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return { return gonvml.SUCCESS }
	}
	return s, q
}

// Healthy makes a mock GPU answer the health and state calls the agent's
// GPU collector makes as a healthy, unthrottled GPU does: ECC on with no
// uncorrected errors, no row remaps, no clock-event reasons, MIG off, and
// every event type supported.
func Healthy(d *dgxa100.Device) {
	d.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) { return gonvml.EventTypeAll, gonvml.SUCCESS }
	d.RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return { return gonvml.SUCCESS }
	d.GetEccModeFunc = func() (gonvml.EnableState, gonvml.EnableState, gonvml.Return) {
		return gonvml.FEATURE_ENABLED, gonvml.FEATURE_ENABLED, gonvml.SUCCESS
	}
	d.GetTotalEccErrorsFunc = func(gonvml.MemoryErrorType, gonvml.EccCounterType) (uint64, gonvml.Return) { return 0, gonvml.SUCCESS }
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) { return 0, 0, false, false, gonvml.SUCCESS }
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) { return gonvml.ClocksEventReasonNone, gonvml.SUCCESS }
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, gonvml.Return) { return gonvml.ClocksThrottleReasonNone, gonvml.SUCCESS }
	d.GetMigModeFunc = func() (int, int, gonvml.Return) {
		return gonvml.DEVICE_MIG_DISABLE, gonvml.DEVICE_MIG_DISABLE, gonvml.SUCCESS
	}
}

// Steady makes a mock GPU healthy (see Healthy) and answers the telemetry
// calls the DGX A100 mock leaves unset with fixed readings: 50% busy, 60 °C
// (slowdown 90 °C, shutdown 95 °C), 250 W of a 400 W limit, 1000 J since
// the driver loaded.
func Steady(d *dgxa100.Device) {
	Healthy(d)
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
}
