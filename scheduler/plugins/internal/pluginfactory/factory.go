// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package pluginfactory builds the telesched plugins' factories, which all
// take their args the same way.
package pluginfactory

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// New returns the factory of the plugin name: it takes the args the
// scheduler decoded and defaulted (a *A), validates them under the field
// path pluginConfig[name].args, so a bad config stops the scheduler naming
// the field, starts the shared cache (once per process) and builds the
// plugin with the framework's handle and the scheduler's context, which
// lives as long as the process.
func New[A any, PA interface {
	*A
	runtime.Object
}](name string, cache *telemetry.Cache, validate func(*field.Path, PA) error, build func(context.Context, A, fwk.Handle) (fwk.Plugin, error)) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, ok := obj.(PA)
		if !ok {
			return nil, fmt.Errorf("%s: want args of type %s, got %T", name, reflect.TypeFor[A]().Name(), obj)
		}
		if err := validate(field.NewPath("pluginConfig").Key(name).Child("args"), args); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := cache.Start(ctx, h.KubeConfig(), telemetry.DefaultSyncTimeout); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		pl, err := build(ctx, *(*A)(args), h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return pl, nil
	}
}
