// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"sigs.k8s.io/yaml"

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

// PluginArgsFrom reads LoadAware's and EnergyAware's args from profile of
// the KubeSchedulerConfiguration file at path (the scheduler's --config),
// defaulted and validated as the scheduler does, so that "too hot",
// "stale" and "too busy" mean to the descheduler what they mean to the
// scheduler. A plugin without args in the profile has its defaults. An
// empty path is DefaultPluginArgs.
func PluginArgsFrom(path, profile string) (config.LoadAwareArgs, config.EnergyAwareArgs, error) {
	if path == "" {
		return DefaultPluginArgs()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return config.LoadAwareArgs{}, config.EnergyAwareArgs{}, err
	}
	la, ea, err := parsePluginArgs(data, profile)
	if err != nil {
		return la, ea, fmt.Errorf("%s: %w", path, err)
	}
	return la, ea, nil
}

// schedulerFile is what PluginArgsFrom reads of a
// KubeSchedulerConfiguration: its kind and its profiles' plugin args.
type schedulerFile struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Profiles   []struct {
		SchedulerName string `json:"schedulerName"`
		PluginConfig  []struct {
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
		} `json:"pluginConfig"`
	} `json:"profiles"`
}

func parsePluginArgs(data []byte, profile string) (config.LoadAwareArgs, config.EnergyAwareArgs, error) {
	var f schedulerFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return config.LoadAwareArgs{}, config.EnergyAwareArgs{}, err
	}
	if f.Kind != "KubeSchedulerConfiguration" || f.APIVersion != "kubescheduler.config.k8s.io/v1" {
		return config.LoadAwareArgs{}, config.EnergyAwareArgs{}, fmt.Errorf("kind %q, apiVersion %q: want a KubeSchedulerConfiguration of kubescheduler.config.k8s.io/v1", f.Kind, f.APIVersion)
	}
	vla, vea := &configv1.LoadAwareArgs{}, &configv1.EnergyAwareArgs{}
	var names []string
	for _, p := range f.Profiles {
		names = append(names, p.SchedulerName)
		if p.SchedulerName != profile {
			continue
		}
		for _, pc := range p.PluginConfig {
			var into any
			var typ *metav1.TypeMeta
			switch pc.Name {
			case loadaware.Name:
				into, typ = vla, &vla.TypeMeta
			case energyaware.Name:
				into, typ = vea, &vea.TypeMeta
			default:
				continue
			}
			if len(pc.Args) == 0 || string(pc.Args) == "null" {
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(pc.Args))
			dec.DisallowUnknownFields()
			if err := dec.Decode(into); err != nil {
				return config.LoadAwareArgs{}, config.EnergyAwareArgs{}, fmt.Errorf("profile %s, %s args: %w", profile, pc.Name, err)
			}
			if want := pc.Name + "Args"; typ.Kind != "" && typ.Kind != want {
				return config.LoadAwareArgs{}, config.EnergyAwareArgs{}, fmt.Errorf("profile %s, %s args: kind %q, want %q", profile, pc.Name, typ.Kind, want)
			}
		}
		la, ea, err := pluginArgs(vla, vea)
		if err != nil {
			return la, ea, fmt.Errorf("profile %s: %w", profile, err)
		}
		return la, ea, nil
	}
	return config.LoadAwareArgs{}, config.EnergyAwareArgs{}, fmt.Errorf("no profile with schedulerName %q (profiles: %q)", profile, names)
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
