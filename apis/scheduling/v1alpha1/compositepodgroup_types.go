package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CompositePodGroup: a group of child groups, the inner levels of a group
// hierarchy. Its shared constraint and policy types are in types.go.

// CompositePodGroup is a group of groups: its children are PodGroups and
// CompositePodGroups that name it as their parent.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pcpg,categories=phalanx
// +kubebuilder:printcolumn:name="Gang Min",type=integer,JSONPath=`.spec.schedulingPolicy.gang.minGroupCount`,description="The policy: a gang of at least minGroupCount child groups; <none> for a basic (best-effort) group."
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Schedulable")].reason`,description="The Schedulable condition's reason; kubectl phalanx explain tells more."
// +kubebuilder:printcolumn:name="Topology",type=string,JSONPath=`.spec.schedulingConstraints.topology[0].key`,priority=1
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parentCompositePodGroupName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CompositePodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CompositePodGroupSpec `json:"spec"`
	// +optional
	Status CompositePodGroupStatus `json:"status,omitempty"`
}

// CompositePodGroupSpec describes a group of groups. The root's priority
// fields are authoritative for the whole hierarchy.
//
// +kubebuilder:validation:XValidation:rule="has(self.schedulingPolicy.gang) == has(oldSelf.schedulingPolicy.gang)",message="the scheduling policy kind (basic or gang) is immutable",fieldPath=".schedulingPolicy"
// +kubebuilder:validation:XValidation:rule="has(self.schedulingConstraints) == has(oldSelf.schedulingConstraints) && (!has(self.schedulingConstraints) || self.schedulingConstraints == oldSelf.schedulingConstraints)",message="schedulingConstraints is immutable",fieldPath=".schedulingConstraints"
// +kubebuilder:validation:XValidation:rule="has(self.parentCompositePodGroupName) == has(oldSelf.parentCompositePodGroupName) && (!has(self.parentCompositePodGroupName) || self.parentCompositePodGroupName == oldSelf.parentCompositePodGroupName)",message="parentCompositePodGroupName is immutable",fieldPath=".parentCompositePodGroupName"
// +kubebuilder:validation:XValidation:rule="has(self.workloadRef) == has(oldSelf.workloadRef) && (!has(self.workloadRef) || self.workloadRef == oldSelf.workloadRef)",message="workloadRef is immutable",fieldPath=".workloadRef"
// +kubebuilder:validation:XValidation:rule="has(self.disruptionMode) == has(oldSelf.disruptionMode) && (!has(self.disruptionMode) || self.disruptionMode == oldSelf.disruptionMode)",message="disruptionMode is immutable",fieldPath=".disruptionMode"
// +kubebuilder:validation:XValidation:rule="has(self.priorityClassName) == has(oldSelf.priorityClassName) && (!has(self.priorityClassName) || self.priorityClassName == oldSelf.priorityClassName)",message="priorityClassName is immutable",fieldPath=".priorityClassName"
// +kubebuilder:validation:XValidation:rule="has(self.priority) == has(oldSelf.priority) && (!has(self.priority) || self.priority == oldSelf.priority)",message="priority is immutable",fieldPath=".priority"
// +kubebuilder:validation:XValidation:rule="has(self.preemptionPolicy) == has(oldSelf.preemptionPolicy) && (!has(self.preemptionPolicy) || self.preemptionPolicy == oldSelf.preemptionPolicy)",message="preemptionPolicy is immutable",fieldPath=".preemptionPolicy"
type CompositePodGroupSpec struct {
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ParentCompositePodGroupName *string `json:"parentCompositePodGroupName,omitempty"`
	// +optional
	WorkloadRef *WorkloadReference `json:"workloadRef,omitempty"`
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
}

// CompositePodGroupStatus is written by the scheduler.
type CompositePodGroupStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Reservation is the scheduler's record of the domain it holds for the
	// gang under this root (see PodGroupStatus).
	// +optional
	Reservation *GroupReservation `json:"reservation,omitempty"`
}

// CompositePodGroupList is a list of CompositePodGroups.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type CompositePodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CompositePodGroup `json:"items"`
}
