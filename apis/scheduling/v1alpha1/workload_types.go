package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Workload: the templates from which phalanx-controller makes a hierarchy
// of PodGroups and CompositePodGroups, down to MaxTreeDepth levels. The
// schema cannot recurse, so each level of composite template has a type of
// its own. Its shared constraint and policy types are in types.go.

// Workload holds group templates. The Phalanx controller creates one group
// object per template, named <workload>-<template>.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pwl,categories=phalanx
// +kubebuilder:printcolumn:name="Groups",type=string,JSONPath=`.status.conditions[?(@.type=="GroupsCreated")].reason`,description="Whether phalanx-controller created the Workload's groups (GroupsCreated's reason)."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WorkloadSpec `json:"spec"`
	// +optional
	Status WorkloadStatus `json:"status,omitempty"`
}

// WorkloadSpec lists the templates. Template names are unique within each
// list and between the two lists of one level; the controller checks the
// whole tree.
//
// +kubebuilder:validation:XValidation:rule="(has(self.podGroupTemplates) && size(self.podGroupTemplates) > 0) || (has(self.compositePodGroupTemplates) && size(self.compositePodGroupTemplates) > 0)",message="at least one template is required"
// +kubebuilder:validation:XValidation:rule="!has(self.podGroupTemplates) || !has(self.compositePodGroupTemplates) || self.podGroupTemplates.all(p, self.compositePodGroupTemplates.all(c, c.name != p.name))",message="template names must be unique across podGroupTemplates and compositePodGroupTemplates"
type WorkloadSpec struct {
	// ControllerRef points at the object that owns this Workload, e.g. a Job.
	// +optional
	ControllerRef *TypedLocalObjectReference `json:"controllerRef,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	PodGroupTemplates []PodGroupTemplate `json:"podGroupTemplates,omitempty"`
	// CompositePodGroupTemplates are the roots of group hierarchies.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	CompositePodGroupTemplates []CompositePodGroupTemplate `json:"compositePodGroupTemplates,omitempty"`
}

// WorkloadStatus is written by the controller.
type WorkloadStatus struct {
	// Conditions report problems building groups from the templates.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PodGroupTemplate is a template for one PodGroup.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.disruptionMode) && has(self.disruptionMode.all) && has(self.schedulingPolicy.basic))",message="the disruptionMode `all` is not supported with the Basic scheduling policy",fieldPath=".disruptionMode"
type PodGroupTemplate struct {
	// Name is unique within the Workload and forms the group name
	// <workload>-<name>.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// +required
	SchedulingPolicy PodGroupSchedulingPolicy `json:"schedulingPolicy"`
	// +optional
	SchedulingConstraints *PodGroupSchedulingConstraints `json:"schedulingConstraints,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	ResourceClaims []PodGroupResourceClaim `json:"resourceClaims,omitempty"`
	// +optional
	DisruptionMode *DisruptionMode `json:"disruptionMode,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// +optional
	PreemptionPolicy *PreemptionPolicy `json:"preemptionPolicy,omitempty"`
	// MinRuntimeSeconds is copied to the PodGroup's minRuntimeSeconds: its
	// running members are protected from preemption by higher-priority
	// pods for this long after the group became whole, capped by
	// PhalanxPreemption's maxMinRuntimeSeconds. The PodGroup keeps the
	// value it was created with.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=604800
	MinRuntimeSeconds *int32 `json:"minRuntimeSeconds,omitempty"`
}

// CompositePodGroupTemplateFields are the fields every composite template
// level shares.
type CompositePodGroupTemplateFields struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// +required
	SchedulingPolicy CompositePodGroupSchedulingPolicy `json:"schedulingPolicy"`
	// +optional
	SchedulingConstraints *CompositePodGroupSchedulingConstraints `json:"schedulingConstraints,omitempty"`
	// +optional
	DisruptionMode *CompositeDisruptionMode `json:"disruptionMode,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// +optional
	PreemptionPolicy *PreemptionPolicy `json:"preemptionPolicy,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	PodGroupTemplates []PodGroupTemplate `json:"podGroupTemplates,omitempty"`
}

// A CRD schema cannot refer to itself, yet upstream's CompositePodGroupTemplate
// nests itself. The hierarchy is at most MaxTreeDepth (4) levels deep, so the
// recursion is unrolled into three composite levels (the fourth level can only
// be PodGroup templates). The JSON shape is identical to upstream's; only the
// Go type names differ per level. Level 3 keeps a compositePodGroupTemplates
// field that must be empty, so that a fourth composite level is rejected with a
// message instead of being silently pruned as an unknown field.

// CompositePodGroupTemplate is a root (level 1) composite template.
//
// +kubebuilder:validation:XValidation:rule="(has(self.podGroupTemplates) && size(self.podGroupTemplates) > 0) || (has(self.compositePodGroupTemplates) && size(self.compositePodGroupTemplates) > 0)",message="a composite template needs at least one child template"
// +kubebuilder:validation:XValidation:rule="!has(self.podGroupTemplates) || !has(self.compositePodGroupTemplates) || self.podGroupTemplates.all(p, self.compositePodGroupTemplates.all(c, c.name != p.name))",message="template names must be unique across podGroupTemplates and compositePodGroupTemplates"
type CompositePodGroupTemplate struct {
	CompositePodGroupTemplateFields `json:",inline"`
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	CompositePodGroupTemplates []CompositePodGroupTemplateLevel2 `json:"compositePodGroupTemplates,omitempty"`
}

// CompositePodGroupTemplateLevel2 is a composite template nested one level.
//
// +kubebuilder:validation:XValidation:rule="(has(self.podGroupTemplates) && size(self.podGroupTemplates) > 0) || (has(self.compositePodGroupTemplates) && size(self.compositePodGroupTemplates) > 0)",message="a composite template needs at least one child template"
// +kubebuilder:validation:XValidation:rule="!has(self.podGroupTemplates) || !has(self.compositePodGroupTemplates) || self.podGroupTemplates.all(p, self.compositePodGroupTemplates.all(c, c.name != p.name))",message="template names must be unique across podGroupTemplates and compositePodGroupTemplates"
type CompositePodGroupTemplateLevel2 struct {
	CompositePodGroupTemplateFields `json:",inline"`
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	CompositePodGroupTemplates []CompositePodGroupTemplateLevel3 `json:"compositePodGroupTemplates,omitempty"`
}

// CompositePodGroupTemplateLevel3 is the deepest composite template; its
// children can only be PodGroup templates (level 4).
//
// +kubebuilder:validation:XValidation:rule="has(self.podGroupTemplates) && size(self.podGroupTemplates) > 0",message="a composite template needs at least one child template"
type CompositePodGroupTemplateLevel3 struct {
	CompositePodGroupTemplateFields `json:",inline"`
	// CompositePodGroupTemplates must be empty: a composite at level 4 would
	// leave no room for its PodGroups.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="size(self) == 0",message="the template hierarchy is at most 4 levels deep: a composite template at level 3 may only hold podGroupTemplates"
	CompositePodGroupTemplates []TooDeepTemplate `json:"compositePodGroupTemplates,omitempty"`
}

// TooDeepTemplate stands for a composite template below the depth limit; it
// only exists so such input is rejected with a message.
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:Type=object
type TooDeepTemplate struct{}

// WorkloadList is a list of Workloads.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type WorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workload `json:"items"`
}
