// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
)

// GroupName is kube-scheduler's configuration group.
const GroupName = schedconfigv1.GroupName

// SchemeGroupVersion is kubescheduler.config.k8s.io/v1, the version of the
// KubeSchedulerConfiguration these args are written in.
var SchemeGroupVersion = schedconfigv1.SchemeGroupVersion

var (
	// SchemeBuilder registers the v1 plugin args types, their defaulting
	// functions and their conversions to and from the internal types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, RegisterDefaults, RegisterConversions)
	// AddToScheme adds the v1 plugin args types, defaults and conversions to
	// a scheme. The internal types are added by config.AddToScheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&LoadAwareArgs{},
		&TopologyFitArgs{},
		&EnergyAwareArgs{},
		&PowerBudgetArgs{},
	)
	return nil
}
