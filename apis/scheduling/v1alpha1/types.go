package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Limits shared by the schema markers below and by Go-side validation
// (pkg/workloadbuilder). The markers cannot reference constants, so a change
// here must be mirrored in the markers; the CRD tests catch a mismatch.
const (
	// MaxTemplates is the most templates one list of a Workload may hold.
	MaxTemplates = 8
	// MaxTreeDepth is the deepest a group hierarchy may be, counting the
	// root composite as level 1 and leaf PodGroups as the last level.
	MaxTreeDepth = 4
	// MaxResourceClaims is the most resource claims one PodGroup may declare.
	MaxResourceClaims = 4
)

// Pod attachment labels.
const (
	// PodGroupLabel attaches a pod to the PodGroup of that name in the pod's namespace.
	PodGroupLabel = "scheduling.phalanx.dev/pod-group"
	// LightweightNameLabel and LightweightMinAvailableLabel form an implicit
	// gang with no PodGroup object (the scheduler-plugins coscheduling labels).
	LightweightNameLabel         = "pod-group.scheduling.sigs.k8s.io/name"
	LightweightMinAvailableLabel = "pod-group.scheduling.sigs.k8s.io/min-available"
)

// Condition types and reasons written on PodGroup and CompositePodGroup status.
const (
	// PodGroupInitiallyScheduled is True once the group's quorum was first bound.
	PodGroupInitiallyScheduled = "PodGroupInitiallyScheduled"
	// PodGroupSchedulable says whether the group can be placed now, and if
	// not, why (waiting for members, unschedulable, invalid).
	PodGroupSchedulable = "Schedulable"
	// DisruptionTarget is set when the group's pods are being evicted.
	DisruptionTarget = "DisruptionTarget"
	// PodGroupPreferredTopology says, for a group with preferred topology
	// levels, where its last plan put it: True (reason Preferred) in one
	// domain of its first level, False (reason FellBack) wider, with the
	// reason in the message.
	PodGroupPreferredTopology = "PreferredTopology"

	ReasonWaitingForPods        = "WaitingForPods"
	ReasonUnschedulable         = "Unschedulable"
	ReasonInvalid               = "Invalid"
	ReasonScheduled             = "Scheduled"
	ReasonSchedulerError        = "SchedulerError"
	ReasonPreemptionByScheduler = "PreemptionByScheduler"
	ReasonPreferred             = "Preferred"
	ReasonFellBack              = "FellBack"
	// ReasonBindFailed: members of the gang are bound, but a binding
	// failed after Permit (or a scheduler stopped during the binds), and
	// the gang has until permitWaitingTimeSeconds later to reach its
	// minimum.
	ReasonBindFailed = "BindFailed"
	// ReasonGangIncomplete: the gang did not reach its minimum in that
	// time, and the members the scheduler had bound were evicted so that
	// the gang starts over as a unit.
	ReasonGangIncomplete = "GangIncomplete"
)

// PreemptionPolicy says whether a group may preempt lower-priority pods.
// +kubebuilder:validation:Enum=PreemptLowerPriority;Never
type PreemptionPolicy string

const (
	PreemptLowerPriority PreemptionPolicy = "PreemptLowerPriority"
	PreemptNever         PreemptionPolicy = "Never"
)

// TopologyConstraint asks that every pod of a group lands on nodes sharing
// one value of the node label Key, or, for a key under
// DeviceAttributeKeyPrefix, on nodes whose devices share one value of that
// device attribute.
//
// +kubebuilder:validation:XValidation:rule="!self.key.startsWith('device.phalanx.dev/') || self.key.lastIndexOf('/') > 18",message="a device.phalanx.dev/ key names a device attribute by its fully qualified name, device.phalanx.dev/<domain>/<attribute>, e.g. device.phalanx.dev/gpu.nvidia.com/cliqueId",fieldPath=".key"
type TopologyConstraint struct {
	// Key is a node label key, such as topology.kubernetes.io/zone, or
	// device.phalanx.dev/ followed by the fully qualified name of a device
	// attribute published in ResourceSlices (domain/name, e.g.
	// device.phalanx.dev/gpu.nvidia.com/cliqueId): each node's domain is
	// then the value its devices of the group's device classes agree on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// A schema pattern rather than a CEL rule for the syntax: a regular
	// expression's cost, multiplied through the nested template lists of a
	// Workload, exceeds the CEL budget. The rule above only tells the two
	// forms apart, at the cost of a prefix test and one scan.
	// +kubebuilder:validation:Pattern=`^(([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?|device[.]phalanx[.]dev/[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z_][A-Za-z0-9_]*)$`
	Key string `json:"key"`
}

// DeviceAttributeKeyPrefix starts a topology key that names a device
// attribute instead of a node label: DeviceAttributeKeyPrefix +
// "<domain>/<attribute>". Its domains are the attribute's values; a node
// belongs to one when every device it can use of the group's device
// classes that carries the attribute has that value.
const DeviceAttributeKeyPrefix = "device.phalanx.dev/"

// MaxPreferredTopology is the most preferred topology levels a group may
// list.
const MaxPreferredTopology = 4

// PreferredTopologyAnnotation carries preferred topology levels where an
// API has no field for them: on upstream's scheduling.k8s.io PodGroups, on
// scheduler-plugins' scheduling.x-k8s.io PodGroups and on gang Jobs. Its
// value lists node label keys narrowest first, separated by commas, e.g.
// "topology.phalanx.dev/rack,topology.phalanx.dev/block", with the same
// meaning as PodGroupSchedulingConstraints.PreferredTopology.
const PreferredTopologyAnnotation = "scheduling.phalanx.dev/preferred-topology"

// PodGroupSchedulingConstraints holds the placement constraints of a PodGroup.
//
// +kubebuilder:validation:XValidation:rule="!has(self.topology) || !has(self.preferredTopology) || self.preferredTopology.all(p, self.topology.all(t, t.key != p.key))",message="a preferred topology level cannot be the required key: list only levels narrower than it",fieldPath=".preferredTopology"
type PodGroupSchedulingConstraints struct {
	// Topology holds at most one constraint. Its key is required: every
	// pod of the group lands in one domain of it, as upstream's
	// scheduling.k8s.io field says. It is also the highest level
	// PreferredTopology may fall back to.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1
	Topology []TopologyConstraint `json:"topology,omitempty"`
	// PreferredTopology is a Phalanx extension: node label keys narrower
	// than the required one, narrowest first, such as
	// topology.phalanx.dev/rack then topology.phalanx.dev/block. The group
	// goes into one domain of the first level when one holds it; else into
	// the fewest domains of a level that one domain of the next level holds
	// (the last level's domains inside one domain of the required key, or
	// anywhere without one). The order is the group's own: a level the
	// nodes show to be wider than the next keeps the group pending with
	// reason Invalid, and a level no node carries keeps it pending until
	// nodes carry it. Nodes lacking one of these labels are not used.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=4
	PreferredTopology []TopologyConstraint `json:"preferredTopology,omitempty"`
}

// CompositePodGroupSchedulingConstraints holds the placement constraints of a
// CompositePodGroup; every descendant pod is bound by them.
type CompositePodGroupSchedulingConstraints struct {
	// Topology holds at most one constraint.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1
	Topology []TopologyConstraint `json:"topology,omitempty"`
}

// PodGroupSchedulingPolicy is a union: exactly one of Basic or Gang.
// +kubebuilder:validation:XValidation:rule="has(self.basic) != has(self.gang)",message="exactly one of basic or gang must be set"
type PodGroupSchedulingPolicy struct {
	// Basic is best effort: the group is feasible however many pods fit.
	// +optional
	Basic *BasicSchedulingPolicy `json:"basic,omitempty"`
	// Gang is all or nothing: no pod binds until MinCount can run together.
	// +optional
	Gang *GangSchedulingPolicy `json:"gang,omitempty"`
}

// BasicSchedulingPolicy has no fields.
type BasicSchedulingPolicy struct{}

// GangSchedulingPolicy is the all-or-nothing policy.
type GangSchedulingPolicy struct {
	// MinCount is how many pods must be placeable together. It is the only
	// mutable field of a PodGroup's spec.
	// +required
	// +kubebuilder:validation:Minimum=1
	MinCount int32 `json:"minCount"`
}

// CompositePodGroupSchedulingPolicy is a union: exactly one of Basic or Gang.
// +kubebuilder:validation:XValidation:rule="has(self.basic) != has(self.gang)",message="exactly one of basic or gang must be set"
type CompositePodGroupSchedulingPolicy struct {
	// Basic admits the children independently.
	// +optional
	Basic *CompositeBasicSchedulingPolicy `json:"basic,omitempty"`
	// Gang needs MinGroupCount children schedulable at the same time.
	// +optional
	Gang *CompositeGangSchedulingPolicy `json:"gang,omitempty"`
}

// CompositeBasicSchedulingPolicy has no fields.
type CompositeBasicSchedulingPolicy struct{}

// CompositeGangSchedulingPolicy is the all-or-nothing policy over children.
// +kubebuilder:validation:XValidation:rule="self.minGroupCount == oldSelf.minGroupCount",message="minGroupCount is immutable",fieldPath=".minGroupCount"
type CompositeGangSchedulingPolicy struct {
	// MinGroupCount is how many child groups must be schedulable together.
	// +required
	// +kubebuilder:validation:Minimum=1
	MinGroupCount int32 `json:"minGroupCount"`
}

// DisruptionMode is a union: exactly one of Single or All. Unset means Single.
// +kubebuilder:validation:XValidation:rule="has(self.single) != has(self.all)",message="exactly one of single or all must be set"
type DisruptionMode struct {
	// Single lets the group's pods be disrupted one by one.
	// +optional
	Single *SingleDisruptionMode `json:"single,omitempty"`
	// All disrupts the group as a whole.
	// +optional
	All *AllDisruptionMode `json:"all,omitempty"`
}

// SingleDisruptionMode has no fields.
type SingleDisruptionMode struct{}

// AllDisruptionMode has no fields.
type AllDisruptionMode struct{}

// CompositeDisruptionMode is a union: exactly one of Single or All. Unset means Single.
// +kubebuilder:validation:XValidation:rule="has(self.single) != has(self.all)",message="exactly one of single or all must be set"
type CompositeDisruptionMode struct {
	// Single lets children be disrupted independently.
	// +optional
	Single *SingleCompositeDisruptionMode `json:"single,omitempty"`
	// All disrupts every pod of the hierarchy when any of them is disrupted.
	// +optional
	All *AllCompositeDisruptionMode `json:"all,omitempty"`
}

// SingleCompositeDisruptionMode has no fields.
type SingleCompositeDisruptionMode struct{}

// AllCompositeDisruptionMode has no fields.
type AllCompositeDisruptionMode struct{}

// PodGroupResourceClaim names a DRA claim shared by the group's pods: a
// member uses it through an entry of its own spec.resourceClaims with the
// same name and resourceClaimName. Phalanx allocates it once for the group,
// with the group's plan, and places every member where its devices reach.
//
// +kubebuilder:validation:XValidation:rule="has(self.resourceClaimName) != has(self.resourceClaimTemplateName)",message="exactly one of resourceClaimName or resourceClaimTemplateName must be set"
type PodGroupResourceClaim struct {
	// Name identifies the claim inside the group (a DNS label).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// ResourceClaimName names an existing ResourceClaim.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ResourceClaimName *string `json:"resourceClaimName,omitempty"`
	// ResourceClaimTemplateName names a ResourceClaimTemplate.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ResourceClaimTemplateName *string `json:"resourceClaimTemplateName,omitempty"`
}

// WorkloadReference links a group to the Workload template it was made from.
type WorkloadReference struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	WorkloadName string `json:"workloadName"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	TemplateName string `json:"templateName"`
}

// TypedLocalObjectReference points at the object that owns a Workload.
type TypedLocalObjectReference struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup,omitempty"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ---------------------------------------------------------------------------
// PodGroup

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
// schedulingPolicy.gang.minCount may change after creation.
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

// ---------------------------------------------------------------------------
// CompositePodGroup

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

// ---------------------------------------------------------------------------
// Workload

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
