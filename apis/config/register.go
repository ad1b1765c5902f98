// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
)

// GroupName is kube-scheduler's configuration group. telesched's plugin args
// live in it, like the args of in-tree plugins, so that they are written as
// "apiVersion: kubescheduler.config.k8s.io/v1" inside pluginConfig[].args.
const GroupName = schedconfigv1.GroupName

// SchemeGroupVersion is the internal version of the group:
// kubescheduler.config.k8s.io/__internal.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

var (
	// SchemeBuilder registers the internal plugin args types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the internal plugin args types to a scheme.
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
