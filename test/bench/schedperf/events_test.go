//go:build schedperf

// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package schedperf

import (
	"context"

	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// forwardTelemetryEvents hands the scheduler the NodeTelemetry events
// that kube-scheduler's own dynamic informer would: scheduler_perf builds
// its scheduler without a dynamic informer factory, so a cluster event on
// a custom resource (telemetry.EventResource, which LoadAware, TopologyFit,
// EnergyAware and PowerBudget register) never reaches the queue, and a pod
// those plugins rejected waits for the queue's unschedulable flush (5 min)
// instead of its QueueingHint. Run for both profiles alike; the default
// profile registers no hint for the event, so the queue moves nothing.
func forwardTelemetryEvents(ctx context.Context, tCtx ktesting.TContext, f *fleet, s *scheduler.Scheduler) error {
	logger := tCtx.Logger()
	factory := dynamicinformer.NewDynamicSharedInformerFactory(f.dyn, 0)
	move := func(at fwk.ActionType, old, cur any) {
		s.SchedulingQueue.MoveAllToActiveOrBackoffQueue(logger, fwk.ClusterEvent{Resource: telemetry.EventResource, ActionType: at}, old, cur, nil)
	}
	if _, err := factory.ForResource(telemetry.Resource).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { move(fwk.Add, nil, obj) },
		UpdateFunc: func(old, obj any) { move(fwk.Update, old, obj) },
		DeleteFunc: func(obj any) { move(fwk.Delete, obj, nil) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return nil
}
