package v1alpha1

// What the API's kinds share: the limits the schema markers repeat, pod
// attachment labels, condition types and reasons, and the constraint,
// policy, disruption and reference types of PodGroup, CompositePodGroup and
// Workload templates alike. Each kind has its own file
// (podgroup_types.go, compositepodgroup_types.go, workload_types.go).

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

// RankAnnotation gives a member its rank: its position in the ring an
// all-reduce passes data around, a non-negative integer. Consecutive ranks
// are placed in the same domains (node, rack, block, zone) in a stable
// order of domains, so the ring crosses each boundary as few times as the
// planned nodes allow. It wins over the indexes controllers write (a Job's
// completion index, JobSet's job index, the training operators' replica
// index); set it on every member of a gang or on none.
const RankAnnotation = "scheduling.phalanx.dev/rank"

// AllocatedForAnnotation marks a ResourceClaim that Phalanx allocated for
// a group before any of its members used it; the value is the group's key
// (e.g. "PodGroup ns/name"). Phalanx frees such a claim when the group goes
// or no longer fits in the claim's reach.
const AllocatedForAnnotation = "scheduling.phalanx.dev/allocated-for"

// MinRuntimeAnnotation declares a minimum runtime in seconds, a decimal
// integer, where no field does: on any group object (upstream's and
// scheduler-plugins' PodGroups, CompositePodGroups), on a pod (a plain pod,
// or a member of a label gang) and on a PriorityClass, whose value is the
// default of every pod and group of that class. A Phalanx PodGroup's
// spec.minRuntimeSeconds wins over it.
const MinRuntimeAnnotation = "scheduling.phalanx.dev/min-runtime-seconds"

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
