// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/telesched/telesched/apis/config"
	configscheme "github.com/telesched/telesched/apis/config/scheme"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/apis/config/validation"
	schedulerdeploy "github.com/telesched/telesched/deploy/scheduler"
	"github.com/telesched/telesched/scheduler/plugins/energyaware"
	"github.com/telesched/telesched/scheduler/plugins/loadaware"
	powerbudgetplugin "github.com/telesched/telesched/scheduler/plugins/powerbudget"
)

// DefaultSchedulerProfile is the scheduler profile whose args
// PluginArgsFrom reads by default (--scheduler-profile).
const DefaultSchedulerProfile = "telesched"

// DefaultPluginArgs are LoadAware's and EnergyAware's args at their
// defaults, as the scheduler would build them from an empty args object.
func DefaultPluginArgs() (config.LoadAwareArgs, config.EnergyAwareArgs, error) {
	return pluginArgs(&configv1.LoadAwareArgs{}, &configv1.EnergyAwareArgs{})
}

// PluginArgsFrom is ProfileArgs of profile of the KubeSchedulerConfiguration
// file at path (the scheduler's --config; "" is the configuration
// telesched-scheduler ships), read by LoadSchedulerProfile: so that "too
// hot", "stale" and "too busy" mean to the descheduler what they mean to
// the scheduler, with one decoder, kube-scheduler's.
func PluginArgsFrom(path, profile string) (config.LoadAwareArgs, config.EnergyAwareArgs, error) {
	p, err := LoadSchedulerProfile(path, profile)
	if err != nil {
		return config.LoadAwareArgs{}, config.EnergyAwareArgs{}, err
	}
	la, ea, err := ProfileArgs(p)
	if err != nil {
		err = fmt.Errorf("profile %s: %w", profile, err)
		if path != "" {
			err = fmt.Errorf("%s: %w", path, err)
		}
	}
	return la, ea, err
}

// ProfileArgs are LoadAware's and EnergyAware's args of the scheduler
// profile p as kube-scheduler decoded them (LoadSchedulerProfile), each
// plugin's defaults when the profile gives it none, validated as the
// plugins validate them.
func ProfileArgs(p *schedconfig.KubeSchedulerProfile) (config.LoadAwareArgs, config.EnergyAwareArgs, error) {
	la, ea, err := DefaultPluginArgs()
	if err != nil {
		return la, ea, err
	}
	for _, pc := range p.PluginConfig {
		switch a := pc.Args.(type) {
		case *config.LoadAwareArgs:
			if pc.Name == loadaware.Name {
				la = *a
			}
		case *config.EnergyAwareArgs:
			if pc.Name == energyaware.Name {
				ea = *a
			}
		}
	}
	if err := validation.ValidateLoadAwareArgs(nil, &la); err != nil {
		return la, ea, fmt.Errorf("LoadAware args: %w", err)
	}
	if err := validation.ValidateEnergyAwareArgs(nil, &ea); err != nil {
		return la, ea, fmt.Errorf("EnergyAware args: %w", err)
	}
	return la, ea, nil
}

// pluginArgs defaults, converts and validates versioned args.
func pluginArgs(vla *configv1.LoadAwareArgs, vea *configv1.EnergyAwareArgs) (config.LoadAwareArgs, config.EnergyAwareArgs, error) {
	var la config.LoadAwareArgs
	var ea config.EnergyAwareArgs
	s := runtime.NewScheme()
	if err := configscheme.AddToScheme(s); err != nil {
		return la, ea, err
	}
	s.Default(vla)
	s.Default(vea)
	if err := s.Convert(vla, &la, nil); err != nil {
		return la, ea, err
	}
	if err := s.Convert(vea, &ea, nil); err != nil {
		return la, ea, err
	}
	if err := validation.ValidateLoadAwareArgs(nil, &la); err != nil {
		return la, ea, fmt.Errorf("LoadAware args: %w", err)
	}
	if err := validation.ValidateEnergyAwareArgs(nil, &ea); err != nil {
		return la, ea, fmt.Errorf("EnergyAware args: %w", err)
	}
	return la, ea, nil
}

// LoadSchedulerProfile reads the scheduler profile schedulerName of the
// KubeSchedulerConfiguration file at path (the scheduler's --config) as
// kube-scheduler does: decoded, defaulted (the default plugins merged
// into the profile's) and validated, telesched's plugin args included.
// An empty path is the configuration telesched-scheduler ships
// (deploy/scheduler/scheduler-config.yaml).
func LoadSchedulerProfile(path, schedulerName string) (*schedconfig.KubeSchedulerProfile, error) {
	cfg, err := LoadSchedulerConfig(path)
	if err != nil {
		return nil, err
	}
	return ProfileOf(cfg, path, schedulerName)
}

// ProfileOf is the profile schedulerName of cfg, read from path ("": the
// shipped configuration), which an error names.
func ProfileOf(cfg *schedconfig.KubeSchedulerConfiguration, path, schedulerName string) (*schedconfig.KubeSchedulerProfile, error) {
	var names []string
	for i := range cfg.Profiles {
		if cfg.Profiles[i].SchedulerName == schedulerName {
			return &cfg.Profiles[i], nil
		}
		names = append(names, cfg.Profiles[i].SchedulerName)
	}
	err := fmt.Errorf("no profile with schedulerName %q (profiles: %q)", schedulerName, names)
	if path != "" {
		err = fmt.Errorf("%s: %w", path, err)
	}
	return nil, err
}

// LoadSchedulerConfig reads the KubeSchedulerConfiguration file at path
// as kube-scheduler does (see LoadSchedulerProfile); "" is the shipped
// one.
func LoadSchedulerConfig(path string) (*schedconfig.KubeSchedulerConfiguration, error) {
	data := schedulerdeploy.Config
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, err
		}
	}
	cfg, err := loadSchedulerConfig(data)
	if err != nil && path != "" {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, err
}

// SchedulerNames are the profiles' schedulerNames: the schedulers whose
// pods telesched's filters place.
func SchedulerNames(cfg *schedconfig.KubeSchedulerConfiguration) []string {
	var names []string
	for _, p := range cfg.Profiles {
		names = append(names, p.SchedulerName)
	}
	return names
}

var registerArgs = sync.OnceValue(configscheme.Register)

func loadSchedulerConfig(data []byte) (*schedconfig.KubeSchedulerConfiguration, error) {
	if err := registerArgs(); err != nil {
		return nil, err
	}
	obj, gvk, err := schedscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if runtime.IsNotRegisteredError(err) || runtime.IsMissingKind(err) || runtime.IsMissingVersion(err) {
		return nil, fmt.Errorf("want a KubeSchedulerConfiguration of kubescheduler.config.k8s.io/v1: %w", err)
	}
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("%s: want a KubeSchedulerConfiguration", gvk)
	}
	cfg.TypeMeta.APIVersion = gvk.GroupVersion().String()
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// PowerBudgetMaxAge is the telemetryMaxAge of the profile's PowerBudget
// args (its default when the profile sets none): how old a member's watts
// may be for the scheduler to count them fresh.
func PowerBudgetMaxAge(p *schedconfig.KubeSchedulerProfile) time.Duration {
	for _, pc := range p.PluginConfig {
		if a, ok := pc.Args.(*config.PowerBudgetArgs); ok && pc.Name == powerbudgetplugin.Name {
			return a.TelemetryMaxAge
		}
	}
	var v configv1.PowerBudgetArgs
	var a config.PowerBudgetArgs
	s := runtime.NewScheme()
	if configscheme.AddToScheme(s) == nil {
		s.Default(&v)
		if s.Convert(&v, &a, nil) == nil {
			return a.TelemetryMaxAge
		}
	}
	return 0
}
