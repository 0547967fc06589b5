package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodGroup is a gang: a set of pods that starts whole (at least MinMember of them at once) or
// not at all. Pods name their group with the fairway.dev/pod-group annotation; the scheduler
// runtime creates a PodGroup for every group it meets and owns it by the pods' top owner, so it is
// garbage-collected with the workload.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=pg;fpg,categories=fairway
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queue`
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.spec.minMember`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Scheduled",type=integer,JSONPath=`.status.scheduled`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Priority",type=string,JSONPath=`.spec.priorityClassName`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Unschedulable")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PodGroupSpec `json:"spec"`
	// +optional
	Status PodGroupStatus `json:"status,omitempty"`
}

// Preemptibility says whether a gang may be preempted or reclaimed.
// +kubebuilder:validation:Enum=preemptible;non-preemptible
type Preemptibility string

const (
	// Preemptible work (training, pipeline steps) may run on borrowed capacity and be evicted.
	Preemptible Preemptibility = "preemptible"
	// NonPreemptible work (notebooks, inference) runs only within guaranteed quota and is never
	// evicted by the scheduler.
	NonPreemptible Preemptibility = "non-preemptible"
)

// PodGroupSpec describes how a gang must be placed.
type PodGroupSpec struct {
	// MinMember is how many pods must be placed together for the gang to start.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +kubebuilder:default=1
	MinMember int32 `json:"minMember"`

	// Queue is the leaf queue the gang is accounted to. The webhook fills it from the namespace
	// when the user does not name one.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Queue string `json:"queue,omitempty"`

	// PriorityClassName sets the gang's priority; every pod of the gang is scheduled at it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Preemptibility overrides the default derived from priority: below 100 preemptible, 100 and
	// above non-preemptible.
	// +optional
	Preemptibility Preemptibility `json:"preemptibility,omitempty"`

	// TopologyConstraint keeps the gang inside one domain of a topology level (a rack, an NVLink
	// domain).
	// +optional
	TopologyConstraint *TopologyConstraint `json:"topologyConstraint,omitempty"`

	// SubGroups split the gang into parts with their own minimum and topology, for example a Ray
	// head and its worker groups. Pods name their sub-group with fairway.dev/sub-group.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	SubGroups []SubGroup `json:"subGroups,omitempty"`
}

// TopologyConstraint names the node label of a topology level. Nodes with the same value of that
// label form one domain.
//
// +kubebuilder:validation:XValidation:rule="has(self.requiredLevel) || has(self.preferredLevel)",message="set requiredLevel, preferredLevel or both"
type TopologyConstraint struct {
	// RequiredLevel is a node label key; all pods of the gang must land on nodes that share one
	// value of it, or the gang waits.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	RequiredLevel string `json:"requiredLevel,omitempty"`

	// PreferredLevel is a node label key; the scheduler packs the gang into one domain of it when
	// one fits, and spreads it over as few domains as it can otherwise.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	PreferredLevel string `json:"preferredLevel,omitempty"`
}

// SubGroup is a named part of a gang.
type SubGroup struct {
	// Name matches the pods' fairway.dev/sub-group annotation.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// MinMember is how many pods of this sub-group must be placed for the gang to start.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MinMember int32 `json:"minMember"`

	// TopologyConstraint for this sub-group alone.
	// +optional
	TopologyConstraint *TopologyConstraint `json:"topologyConstraint,omitempty"`
}

// PodGroupPhase is where a gang is in its life.
// +kubebuilder:validation:Enum=Pending;Scheduled;Running;Succeeded;Failed
type PodGroupPhase string

const (
	// PodGroupPending: fewer than MinMember pods are bound.
	PodGroupPending PodGroupPhase = "Pending"
	// PodGroupScheduled: at least MinMember pods are bound, fewer than MinMember run.
	PodGroupScheduled PodGroupPhase = "Scheduled"
	// PodGroupRunning: at least MinMember pods run.
	PodGroupRunning PodGroupPhase = "Running"
	// PodGroupSucceeded: every pod ended successfully.
	PodGroupSucceeded PodGroupPhase = "Succeeded"
	// PodGroupFailed: the gang cannot go on (a pod failed and fewer than MinMember remain).
	PodGroupFailed PodGroupPhase = "Failed"
)

// Condition types of a PodGroup.
const (
	// PodGroupConditionUnschedulable is True while the gang waits, with the scheduler's reason.
	PodGroupConditionUnschedulable = "Unschedulable"
	// PodGroupConditionScheduled is True once the gang has been placed whole.
	PodGroupConditionScheduled = "Scheduled"
)

// PodGroupStatus is kept true by the scheduler runtime.
type PodGroupStatus struct {
	// Phase summarises the gang's state.
	// +optional
	Phase PodGroupPhase `json:"phase,omitempty"`
	// Scheduled counts pods bound to a node.
	// +optional
	Scheduled int32 `json:"scheduled,omitempty"`
	// Running counts pods in phase Running.
	// +optional
	Running int32 `json:"running,omitempty"`
	// Succeeded counts pods that ended successfully.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// Failed counts pods that ended in failure.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// LastStartTime is when the gang last became Running.
	// +optional
	LastStartTime *metav1.Time `json:"lastStartTime,omitempty"`
	// Conditions include Unschedulable (True with a human-readable reason while the gang waits)
	// and Scheduled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PodGroupList is a list of PodGroups.
//
// +kubebuilder:object:root=true
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}
