// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package scheme registers telesched's plugin args with kube-scheduler, so
// that a KubeSchedulerConfiguration file can carry them in
// pluginConfig[].args as kubescheduler.config.k8s.io/v1 LoadAwareArgs,
// TopologyFitArgs and EnergyAwareArgs, exactly like the args of in-tree
// plugins.
package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedconfigv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"

	"github.com/telesched/telesched/apis/config"
	configv1 "github.com/telesched/telesched/apis/config/v1"
)

// AddToScheme adds the internal and the v1 plugin args, with their defaulting
// functions and conversions, to s.
func AddToScheme(s *runtime.Scheme) error {
	if err := config.AddToScheme(s); err != nil {
		return err
	}
	return configv1.AddToScheme(s)
}

// Register adds telesched's plugin args to the two schemes kube-scheduler
// reads its configuration with. The command calls it once, before it executes
// app.NewSchedulerCommand; calling it again is harmless.
//
//   - schedscheme.Scheme, behind schedscheme.Codecs, which loads the
//     --config file: decoding a pluginConfig entry named <Plugin> looks up
//     kind <Plugin>Args there, and leaves the args a *runtime.Unknown (which
//     a plugin cannot use) when the kind is not registered.
//   - the plugin-args scheme of GetPluginArgConversionScheme, which v1
//     defaulting and conversion of KubeSchedulerConfiguration use to default
//     each pluginConfig entry's args, to add defaulted <Plugin>Args for an
//     enabled plugin that has no pluginConfig entry, and to convert the args
//     to their internal type. Without our types there, decoding a file that
//     carries our args fails with "no kind is registered".
//
// It is an explicit call rather than an init function (scheduler-plugins
// registers from init): kube-scheduler reads its configuration when the
// command runs (Options.Complete, in RunE), after main has started, so
// nothing needs our types before main; an explicit call keeps importing this
// package free of side effects on another package's global scheme, and shows
// in main where the registration happens. Both schemes are package globals of
// k8s.io/kubernetes: registration is process-wide, so every profile sees the
// same types; it holds no per-profile state.
func Register() error {
	if err := AddToScheme(schedscheme.Scheme); err != nil {
		return fmt.Errorf("registering telesched plugin args with kube-scheduler's scheme: %w", err)
	}
	if err := AddToScheme(schedconfigv1.GetPluginArgConversionScheme()); err != nil {
		return fmt.Errorf("registering telesched plugin args with kube-scheduler's plugin args scheme: %w", err)
	}
	return nil
}
