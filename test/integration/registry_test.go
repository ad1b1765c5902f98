// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/profile"

	configscheme "github.com/telesched/telesched/apis/config/scheme"
	deployscheduler "github.com/telesched/telesched/deploy/scheduler"
	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/scheduler/registry"
	"github.com/telesched/telesched/test/fixtures"
)

// TestRegistryGivesEachSchedulerItsOwnTelemetry builds two schedulers in
// one process from one registry, each against its own API server, as
// Kubernetes' scheduler_perf does for its workloads: each scheduler's
// plugins must read the NodeTelemetry of their own API server, not the
// first scheduler's.
func TestRegistryGivesEachSchedulerItsOwnTelemetry(t *testing.T) {
	needControlPlane(t)
	second := secondControlPlane(t, controlplane.Options{})
	if err := configscheme.Register(); err != nil {
		t.Fatal(err)
	}
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode(deployscheduler.Config, nil, nil)
	if err != nil {
		t.Fatalf("decoding deploy/scheduler/scheduler-config.yaml: %v", err)
	}
	profiles := obj.(*schedconfig.KubeSchedulerConfiguration).Profiles[:1] // telesched

	reg := registry.New(func() (*registry.Shared, error) { return registry.NewShared(nil), nil })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	servers := []struct {
		name string
		cfg  *rest.Config
	}{{"registry-first", cfg}, {"registry-second", second.Config}}
	for _, s := range servers {
		c := clients{kube: kubernetes.NewForConfigOrDie(s.cfg), dyn: dynamic.NewForConfigOrDie(s.cfg)}
		c.createNodeAndTelemetry(ctx, t, s.name)
		if _, err := c.applyStatus(ctx, s.name, fixtures.FullStatus(time.Now(), 1, 0)); err != nil {
			t.Fatalf("%s: applying status: %v", s.name, err)
		}
		factory := scheduler.NewInformerFactory(c.kube, 0, nil)
		broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: c.kube.EventsV1()})
		// Building the scheduler builds its plugins, which start (and
		// sync) the telemetry cache they share.
		if _, err := scheduler.New(ctx, c.kube, factory, nil, profile.NewRecorderFactory(broadcaster),
			scheduler.WithKubeConfig(s.cfg), scheduler.WithProfiles(profiles...),
			scheduler.WithFrameworkOutOfTreeRegistry(reg.Framework())); err != nil {
			t.Fatalf("%s: building the scheduler: %v", s.name, err)
		}
		shared := reg.Shared(factory)
		if shared == nil {
			t.Fatalf("%s: the registry holds nothing for the scheduler it built plugins for", s.name)
		}
		var got []string
		for _, other := range servers {
			if _, ok := shared.Cache.Get(other.name); ok {
				got = append(got, other.name)
			}
		}
		if diff := cmp.Diff([]string{s.name}, got); diff != "" {
			t.Errorf("%s: NodeTelemetry in the scheduler's cache (-want +got):\n%s", s.name, diff)
		}
	}
	if got := reg.Len(); got != 2 {
		t.Errorf("schedulers the registry holds: got %d, want 2", got)
	}
	cancel()
	// A scheduler's Shared is forgotten when its context ends.
	deadline := time.Now().Add(10 * time.Second)
	for reg.Len() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := reg.Len(); got != 0 {
		t.Errorf("schedulers the registry holds after their context ended: got %d, want 0", got)
	}
}
