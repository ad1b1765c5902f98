// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PowerBudget is a watt budget for a power domain: the nodes its selector
// picks (a rack, a PDU, a row). The telesched scheduler places no pod that
// would take the domain's measured watts, plus the watts of the pods placed
// since their nodes' samples, plus the pod's own, past budgetWatts minus
// reserveWatts.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pb,categories=telesched
// +kubebuilder:printcolumn:name="Budget",type=integer,JSONPath=`.spec.budgetWatts`,description="The domain's budget, watts."
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.status.measuredWatts`,description="The domain's measured watts."
// +kubebuilder:printcolumn:name="Reserved",type=integer,JSONPath=`.status.reservedWatts`,description="Watts of pods placed since their nodes' samples."
// +kubebuilder:printcolumn:name="Headroom",type=integer,JSONPath=`.status.headroomWatts`,description="Budget minus reserve, used and reserved watts."
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`,description="Nodes the selector picks."
// +kubebuilder:printcolumn:name="Sources",type=string,JSONPath=`.status.powerSources`,priority=1,description="Where the nodes' measured watts come from (rapl: CPU packages and DRAM only)."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PowerBudget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the domain and its budget.
	// +required
	Spec PowerBudgetSpec `json:"spec"`
	// status is what the scheduler measures of the domain.
	// +optional
	Status PowerBudgetStatus `json:"status,omitempty"`
}

// PowerBudgetSpec is a power domain and its budget.
//
// +kubebuilder:validation:XValidation:rule="!has(self.reserveWatts) || self.reserveWatts < self.budgetWatts",message="reserveWatts must be below budgetWatts",fieldPath=".reserveWatts"
type PowerBudgetSpec struct {
	// nodeSelector picks the domain's nodes by their labels, typically a
	// rack or PDU label such as topology.kubernetes.io/zone. It must not
	// be empty: an empty selector would pick every node.
	// +required
	NodeSelector NodeSelector `json:"nodeSelector"`
	// budgetWatts is the domain's limit, watts.
	// +kubebuilder:validation:Minimum=1
	// +required
	BudgetWatts int64 `json:"budgetWatts"`
	// reserveWatts is kept free under the budget: pods are placed up to
	// budgetWatts - reserveWatts. Default 0.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ReserveWatts *int64 `json:"reserveWatts,omitempty"`
	// unmeteredNodeWatts is what a node of the domain without power
	// telemetry counts for: its nameplate, watts. A pod on such a node adds
	// nothing beyond it. Unset, no pod is placed on such a node while it
	// has no power telemetry.
	// +kubebuilder:validation:Minimum=0
	// +optional
	UnmeteredNodeWatts *int64 `json:"unmeteredNodeWatts,omitempty"`
}

// NodeSelector is a label selector (matchLabels and matchExpressions,
// ANDed), checked by the API server.
//
// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="an empty selector would pick every node; give matchLabels or matchExpressions"
type NodeSelector struct {
	// matchLabels are label key/value pairs a node must have.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && size(k) <= 317)",message="a label key is [prefix/]name: a DNS subdomain prefix and a name of up to 63 alphanumerics, '-', '_' or '.'"
	// +optional
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`
	// matchExpressions are label requirements a node must meet.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	MatchExpressions []NodeSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelValue is a label value: up to 63 alphanumerics, '-', '_' or '.',
// starting and ending with an alphanumeric, or empty.
//
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`
type LabelValue string

// NodeSelectorRequirement is one label requirement.
//
// +kubebuilder:validation:XValidation:rule="(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",message="In and NotIn need values; Exists and DoesNotExist take none"
type NodeSelectorRequirement struct {
	// key is the label key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	// +required
	Key string `json:"key"`
	// operator is In, NotIn, Exists or DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	// +required
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// values are the label values for In and NotIn.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// PowerBudgetStatus is what the scheduler measured of the domain at
// updateTime.
type PowerBudgetStatus struct {
	// observedGeneration is the spec generation this status is for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// updateTime is when the status was computed.
	// +optional
	UpdateTime *metav1.Time `json:"updateTime,omitempty"`
	// measuredWatts is the sum of the domain's nodes' latest fresh watts,
	// and unmeteredNodeWatts for each node without power telemetry.
	// +optional
	MeasuredWatts *int64 `json:"measuredWatts,omitempty"`
	// reservedWatts is the marginal watts of the pods placed on the
	// domain's nodes since their nodes' samples.
	// +optional
	ReservedWatts *int64 `json:"reservedWatts,omitempty"`
	// headroomWatts is budgetWatts - reserveWatts - measuredWatts -
	// reservedWatts; negative when the domain is over.
	// +optional
	HeadroomWatts *int64 `json:"headroomWatts,omitempty"`
	// nodes is how many nodes the selector picks.
	// +optional
	Nodes int32 `json:"nodes"`
	// nodesWithoutPower is how many of them have no fresh power telemetry.
	// +optional
	NodesWithoutPower int32 `json:"nodesWithoutPower"`
	// powerSources are the sources of the nodes' watts that measuredWatts
	// adds up (their status.power.sources). rapl is the CPU packages and
	// DRAM alone, nvml the GPUs alone: a domain that counts either without
	// a whole-node meter (acpi, hwmon) reads below what its feed carries.
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +optional
	PowerSources []PowerSource `json:"powerSources,omitempty"`
	// conditions are Ready (the status is computed from fresh telemetry),
	// OverBudget (measured watts exceed budgetWatts; reserved watts only
	// lower headroomWatts) and PowerSourcesComparable (the nodes' watts
	// come from one kind of whole-node meter; False with PartialMeters or
	// MixedSources).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PowerBudgetList is a list of PowerBudget.
//
// +kubebuilder:object:root=true
type PowerBudgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PowerBudget `json:"items"`
}
