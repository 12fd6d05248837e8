package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodGroup: a set of pods scheduled together, the leaf of a group
// hierarchy, with the status the scheduler and phalanx-controller write. The
// constraint and policy types it shares with CompositePodGroup and Workload
// templates are in types.go.

// PodGroup is a set of pods scheduled together.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ppg,categories=phalanx
// +kubebuilder:printcolumn:name="Gang Min",type=integer,JSONPath=`.spec.schedulingPolicy.gang.minCount`,description="The policy: a gang of at least minCount pods; <none> for a basic (best-effort) group."
// +kubebuilder:printcolumn:name="Present",type=integer,JSONPath=`.status.members`,description="Pods attached to the group (phalanx-controller's count)."
// +kubebuilder:printcolumn:name="Bound",type=integer,JSONPath=`.status.scheduled`,description="Pods bound to a node."
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`,priority=1
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Schedulable")].reason`,description="The Schedulable condition's reason; kubectl phalanx explain tells more."
// +kubebuilder:printcolumn:name="Topology",type=string,JSONPath=`.spec.schedulingConstraints.topology[0].key`,priority=1
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parentCompositePodGroupName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PodGroupSpec `json:"spec"`
	// +optional
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupSpec describes how a PodGroup's pods are scheduled. Only
// schedulingPolicy.gang.minCount and minRuntimeSeconds may change after
// creation.
//
// +kubebuilder:validation:XValidation:rule="has(self.schedulingPolicy.gang) == has(oldSelf.schedulingPolicy.gang)",message="the scheduling policy kind (basic or gang) is immutable",fieldPath=".schedulingPolicy"
// +kubebuilder:validation:XValidation:rule="has(self.schedulingConstraints) == has(oldSelf.schedulingConstraints) && (!has(self.schedulingConstraints) || self.schedulingConstraints == oldSelf.schedulingConstraints)",message="schedulingConstraints is immutable",fieldPath=".schedulingConstraints"
// +kubebuilder:validation:XValidation:rule="has(self.parentCompositePodGroupName) == has(oldSelf.parentCompositePodGroupName) && (!has(self.parentCompositePodGroupName) || self.parentCompositePodGroupName == oldSelf.parentCompositePodGroupName)",message="parentCompositePodGroupName is immutable",fieldPath=".parentCompositePodGroupName"
// +kubebuilder:validation:XValidation:rule="has(self.workloadRef) == has(oldSelf.workloadRef) && (!has(self.workloadRef) || self.workloadRef == oldSelf.workloadRef)",message="workloadRef is immutable",fieldPath=".workloadRef"
// +kubebuilder:validation:XValidation:rule="has(self.disruptionMode) == has(oldSelf.disruptionMode) && (!has(self.disruptionMode) || self.disruptionMode == oldSelf.disruptionMode)",message="disruptionMode is immutable",fieldPath=".disruptionMode"
// +kubebuilder:validation:XValidation:rule="has(self.priorityClassName) == has(oldSelf.priorityClassName) && (!has(self.priorityClassName) || self.priorityClassName == oldSelf.priorityClassName)",message="priorityClassName is immutable",fieldPath=".priorityClassName"
// +kubebuilder:validation:XValidation:rule="has(self.priority) == has(oldSelf.priority) && (!has(self.priority) || self.priority == oldSelf.priority)",message="priority is immutable",fieldPath=".priority"
// +kubebuilder:validation:XValidation:rule="has(self.preemptionPolicy) == has(oldSelf.preemptionPolicy) && (!has(self.preemptionPolicy) || self.preemptionPolicy == oldSelf.preemptionPolicy)",message="preemptionPolicy is immutable",fieldPath=".preemptionPolicy"
// +kubebuilder:validation:XValidation:rule="has(self.resourceClaims) == has(oldSelf.resourceClaims) && (!has(self.resourceClaims) || self.resourceClaims == oldSelf.resourceClaims)",message="resourceClaims is immutable",fieldPath=".resourceClaims"
type PodGroupSpec struct {
	// ParentCompositePodGroupName links the group to a CompositePodGroup in
	// the same namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ParentCompositePodGroupName *string `json:"parentCompositePodGroupName,omitempty"`
	// WorkloadRef is set when the group was made from a Workload template.
	// +optional
	WorkloadRef *WorkloadReference `json:"workloadRef,omitempty"`
	// +required
	SchedulingPolicy PodGroupSchedulingPolicy `json:"schedulingPolicy"`
	// +optional
	SchedulingConstraints *PodGroupSchedulingConstraints `json:"schedulingConstraints,omitempty"`
	// ResourceClaims are DRA claims the group's pods share, at most 4,
	// names unique. The claim is allocated once for the group.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	ResourceClaims []PodGroupResourceClaim `json:"resourceClaims,omitempty"`
	// DisruptionMode defaults to single.
	// +optional
	DisruptionMode *DisruptionMode `json:"disruptionMode,omitempty"`
	// PriorityClassName resolves the group's priority through a PriorityClass.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// Priority, when set, wins over PriorityClassName.
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// PreemptionPolicy defaults to PreemptLowerPriority.
	// +optional
	PreemptionPolicy *PreemptionPolicy `json:"preemptionPolicy,omitempty"`
	// MinRuntimeSeconds protects the group's running members from
	// preemption by higher-priority pods for this long after the group
	// became whole (a member bound later: after its own bind), capped by
	// PhalanxPreemption's maxMinRuntimeSeconds (default 3600). Unset: the
	// PriorityClass's annotation, then the profile's default. It may change
	// at any time.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=604800
	MinRuntimeSeconds *int32 `json:"minRuntimeSeconds,omitempty"`
}

// PodGroupStatus is written by Phalanx: conditions by the scheduler, member
// counters by the controller (see docs/user-guide.md).
type PodGroupStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Members counts the group's pods that exist and are not terminating.
	// +optional
	Members int32 `json:"members,omitempty"`
	// Scheduled counts members bound to a node.
	// +optional
	Scheduled int32 `json:"scheduled,omitempty"`
	// Running counts members in phase Running.
	// +optional
	Running int32 `json:"running,omitempty"`
	// Reservation is the scheduler's record of the domain it holds for the
	// gang (only on a root group, with reservations on). It is what a
	// scheduler restores holds from after a failover; the Reserved
	// condition tells the same to people.
	// +optional
	Reservation *GroupReservation `json:"reservation,omitempty"`
}

// GroupReservation is the scheduler's record of a hold on a root group. It
// lives in status, which only those allowed to update the status
// subresource can write (a group's owner, who may edit its spec and
// annotations, usually is not). A scheduler that reads it back still treats
// it as a claim and grants only what it could have granted itself.
type GroupReservation struct {
	// TopologyKey and Domain name the held nodes: those labelled
	// TopologyKey=Domain.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	TopologyKey string `json:"topologyKey"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Domain string `json:"domain"`
	// Since is when the hold began; it ends maxHoldSeconds later.
	// +required
	Since metav1.Time `json:"since"`
	// Expired, when set, is when the hold reached maxHoldSeconds and ended:
	// the gang may not hold again until maxHoldSeconds after it.
	// +optional
	Expired *metav1.Time `json:"expired,omitempty"`
}

// PodGroupList is a list of PodGroups.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}
