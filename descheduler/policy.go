// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/defaultevictor"
	"sigs.k8s.io/yaml"
)

// The policy file's format: upstream's DeschedulerPolicy
// (descheduler/v1alpha2), one profile, with upstream's DefaultEvictor args
// and telesched's two plugins.
const (
	PolicyAPIVersion = "descheduler/v1alpha2"
	PolicyKind       = "DeschedulerPolicy"
	// The plugins' names in a policy (and in the descheduler's profile).
	ThermalPluginName = "TeleschedThermal"
	BudgetPluginName  = "TeleschedPowerBudget"
)

// Policy is what the descheduler may evict and which plugins run: the
// evictor's settings (upstream's DefaultEvictorArgs) and, per plugin,
// whether it runs and which pods it may choose.
type Policy struct {
	Evictor defaultevictor.DefaultEvictorArgs
	// Plugins are the plugins that run, each with the pods it may choose;
	// a plugin not in it does not run.
	Plugins map[string]PodSelection
}

// PodSelection says which pods a plugin may choose, beside the evictor's
// rules: by namespace (include or exclude, as upstream's plugins' args)
// and by the scheduler that places them.
type PodSelection struct {
	Namespaces *api.Namespaces `json:"namespaces,omitempty"`
	// SchedulerNames are the schedulers whose pods the plugin may move;
	// empty: the profiles of the scheduler's configuration
	// (--scheduler-config), telesched's. Only those schedulers place a
	// replacement by telesched's filters, so a pod of another scheduler
	// could land back on the node it left.
	SchedulerNames []string `json:"schedulerNames,omitempty"`
}

// Chooses reports whether a plugin with this selection may choose pod.
func (s PodSelection) Chooses(pod *v1.Pod) bool {
	if ns := s.Namespaces; ns != nil {
		if len(ns.Include) > 0 && !slices.Contains(ns.Include, pod.Namespace) {
			return false
		}
		if slices.Contains(ns.Exclude, pod.Namespace) {
			return false
		}
	}
	name := pod.Spec.SchedulerName
	if name == "" {
		name = v1.DefaultSchedulerName
	}
	return slices.Contains(s.SchedulerNames, name)
}

// DefaultPolicy is the policy without a file: upstream's DefaultEvictor
// defaults with priorityThreshold, and pods with PersistentVolumeClaims
// and pods with ResourceClaims protected as well (PodsWithPVC,
// PodsWithResourceClaims: a pod's volume or device may tie it to its
// node, and the scheduler's own check is only as good as the cluster's
// capacity then); both plugins, each choosing among the pods of
// schedulerNames in every namespace.
func DefaultPolicy(priorityThreshold int32, schedulerNames []string) *Policy {
	p := &Policy{
		Evictor: defaultevictor.DefaultEvictorArgs{
			PriorityThreshold: &api.PriorityThreshold{Value: ptr.To(priorityThreshold)},
			PodProtections: defaultevictor.PodProtections{
				ExtraEnabled: []defaultevictor.PodProtection{defaultevictor.PodsWithPVC, defaultevictor.PodsWithResourceClaims},
			},
		},
		Plugins: map[string]PodSelection{},
	}
	for _, name := range []string{ThermalPluginName, BudgetPluginName} {
		p.Plugins[name] = PodSelection{SchedulerNames: slices.Clone(schedulerNames)}
	}
	return p
}

// policyFile is the file's shape: upstream's v1alpha2 DeschedulerPolicy,
// of which the descheduler reads one profile's pluginConfig and its
// deschedule plugins.
type policyFile struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Profiles   []struct {
		Name         string `json:"name"`
		PluginConfig []struct {
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
		} `json:"pluginConfig"`
		Plugins struct {
			Deschedule struct {
				Enabled []string `json:"enabled"`
			} `json:"deschedule"`
			Filter struct {
				Enabled []string `json:"enabled"`
			} `json:"filter"`
			PreEvictionFilter struct {
				Enabled []string `json:"enabled"`
			} `json:"preEvictionFilter"`
		} `json:"plugins"`
	} `json:"profiles"`
	// Upstream's top-level limits: the descheduler's flags set these.
	MaxNoOfPodsToEvictPerNode      *uint `json:"maxNoOfPodsToEvictPerNode,omitempty"`
	MaxNoOfPodsToEvictPerNamespace *uint `json:"maxNoOfPodsToEvictPerNamespace,omitempty"`
	MaxNoOfPodsToEvictTotal        *uint `json:"maxNoOfPodsToEvictTotal,omitempty"`
}

// LoadPolicy reads the policy file at path (--policy); "" is
// DefaultPolicy. Settings the file leaves out keep DefaultPolicy's: a
// DefaultEvictor without priorityThreshold has priorityThreshold, and a
// plugin without schedulerNames has schedulerNames. Errors name the file
// and the field.
func LoadPolicy(path string, priorityThreshold int32, schedulerNames []string) (*Policy, error) {
	if path == "" {
		return DefaultPolicy(priorityThreshold, schedulerNames), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := parsePolicy(data, priorityThreshold, schedulerNames)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func parsePolicy(data []byte, priorityThreshold int32, schedulerNames []string) (*Policy, error) {
	var f policyFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, err
	}
	if f.APIVersion != PolicyAPIVersion || f.Kind != PolicyKind {
		return nil, fmt.Errorf("apiVersion %q, kind %q: want %s %s", f.APIVersion, f.Kind, PolicyAPIVersion, PolicyKind)
	}
	if f.MaxNoOfPodsToEvictPerNode != nil || f.MaxNoOfPodsToEvictPerNamespace != nil || f.MaxNoOfPodsToEvictTotal != nil {
		return nil, fmt.Errorf("maxNoOfPodsToEvict*: set by the flags --max-evictions-per-node-per-cycle and --max-evictions-per-cycle, not the policy")
	}
	if len(f.Profiles) != 1 {
		return nil, fmt.Errorf("profiles: %d, want exactly one (the descheduler runs one profile)", len(f.Profiles))
	}
	prof := f.Profiles[0]
	p := DefaultPolicy(priorityThreshold, schedulerNames)
	enabled := sets.New(prof.Plugins.Deschedule.Enabled...)
	for name := range enabled {
		if name != ThermalPluginName && name != BudgetPluginName {
			return nil, fmt.Errorf("profiles[0].plugins.deschedule.enabled: %q is no plugin of telesched-descheduler (it runs %s and %s)", name, ThermalPluginName, BudgetPluginName)
		}
	}
	if len(enabled) > 0 {
		for name := range p.Plugins {
			if !enabled.Has(name) {
				delete(p.Plugins, name)
			}
		}
	}
	seen := sets.New[string]()
	for i, pc := range prof.PluginConfig {
		field := fmt.Sprintf("profiles[0].pluginConfig[%d] (%s)", i, pc.Name)
		if seen.Has(pc.Name) {
			return nil, fmt.Errorf("%s: configured twice", field)
		}
		seen.Insert(pc.Name)
		switch pc.Name {
		case defaultevictor.PluginName:
			var args defaultevictor.DefaultEvictorArgs
			if err := strictJSON(pc.Args, &args); err != nil {
				return nil, fmt.Errorf("%s.args: %w", field, err)
			}
			if args.PriorityThreshold == nil {
				args.PriorityThreshold = p.Evictor.PriorityThreshold
			}
			if args.PriorityThreshold.Name != "" {
				return nil, fmt.Errorf("%s.args.priorityThreshold.name: give the value, not a PriorityClass's name", field)
			}
			if err := defaultevictor.ValidateDefaultEvictorArgs(&args); err != nil {
				return nil, fmt.Errorf("%s.args: %w", field, err)
			}
			p.Evictor = args
		case ThermalPluginName, BudgetPluginName:
			var sel PodSelection
			if err := strictJSON(pc.Args, &sel); err != nil {
				return nil, fmt.Errorf("%s.args: %w", field, err)
			}
			if ns := sel.Namespaces; ns != nil && len(ns.Include) > 0 && len(ns.Exclude) > 0 {
				return nil, fmt.Errorf("%s.args.namespaces: only one of include and exclude may be set", field)
			}
			if len(sel.SchedulerNames) == 0 {
				sel.SchedulerNames = slices.Clone(schedulerNames)
			}
			if _, on := p.Plugins[pc.Name]; on {
				p.Plugins[pc.Name] = sel
			}
		default:
			return nil, fmt.Errorf("%s: no plugin of telesched-descheduler (it runs %s, %s and %s)", field, defaultevictor.PluginName, ThermalPluginName, BudgetPluginName)
		}
	}
	if len(p.Plugins) == 0 {
		return nil, fmt.Errorf("profiles[0].plugins.deschedule.enabled: no plugin runs")
	}
	return p, nil
}

func strictJSON(raw json.RawMessage, into any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}
