package workloadbuilder

import (
	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// The building blocks below are meant to be embedded in a controller's own
// API (a Job annotation set, a JobSet-like CRD's spec.scheduling, ...). They
// mirror upstream's scheduling.k8s.io/v1alpha3 Workload* blocks field for
// field, so a controller written against upstream needs only its import
// changed. They differ from the compiled template types in one way: the
// count fields are optional, because the controller, not the user, often
// knows the right default (a Job's parallelism, a JobSet's replica count).
//
// Suggested immutability for an embedding API, which Validate enforces when
// given the stored old configuration: the policy kind, the constraints, the
// disruption mode and a composite's minGroupCount are frozen after create; a
// leaf gang's minCount may change.

// PolicyKind names a scheduling policy: one member of the basic/gang union.
// It is also the unit of BuildOptions.AllowedPolicies.
type PolicyKind string

const (
	// BasicPolicy is best-effort, pod-by-pod scheduling.
	BasicPolicy PolicyKind = "basic"
	// GangPolicy is all-or-nothing scheduling.
	GangPolicy PolicyKind = "gang"
)

// DisruptionModeKind names a disruption mode: one member of the single/all
// union. It is also the unit of BuildOptions.AllowedDisruptionModes.
type DisruptionModeKind string

const (
	// SingleMode lets pods (or child groups) be disrupted one by one.
	SingleMode DisruptionModeKind = "single"
	// AllMode disrupts the group as a whole.
	AllMode DisruptionModeKind = "all"
)

// WorkloadPodGroupSchedulingPolicy is the scheduling policy of a group of
// pods. Exactly one member must be set.
// +k8s:deepcopy-gen=true
type WorkloadPodGroupSchedulingPolicy struct {
	// Basic selects best-effort, pod-by-pod scheduling.
	// +optional
	Basic *WorkloadPodGroupBasicSchedulingPolicy `json:"basic,omitempty"`
	// Gang selects all-or-nothing scheduling.
	// +optional
	Gang *WorkloadPodGroupGangSchedulingPolicy `json:"gang,omitempty"`
}

// WorkloadPodGroupBasicSchedulingPolicy has no fields.
// +k8s:deepcopy-gen=true
type WorkloadPodGroupBasicSchedulingPolicy struct{}

// WorkloadPodGroupGangSchedulingPolicy is the all-or-nothing policy.
// +k8s:deepcopy-gen=true
type WorkloadPodGroupGangSchedulingPolicy struct {
	// MinCount is how many pods must be placeable together. When unset the
	// controller supplies a default (for a Job, its parallelism). If set it
	// must be at least 1.
	// +optional
	MinCount *int32 `json:"minCount,omitempty"`
}

// WorkloadPodGroupSchedulingConstraints holds a group's placement
// constraints.
// +k8s:deepcopy-gen=true
type WorkloadPodGroupSchedulingConstraints struct {
	// Topology holds at most one constraint: every pod of the group lands on
	// nodes sharing one value of the constraint's node label key.
	// +optional
	Topology []v1alpha1.TopologyConstraint `json:"topology,omitempty"`
	// PreferredTopology lists soft levels below Topology's key, narrowest
	// first (a Phalanx extension; see the field of the same name in
	// v1alpha1.PodGroupSchedulingConstraints). At most
	// v1alpha1.MaxPreferredTopology, unique, none equal to Topology's key.
	// +optional
	PreferredTopology []v1alpha1.TopologyConstraint `json:"preferredTopology,omitempty"`
}

// WorkloadPodGroupDisruptionMode says how a group's pods may be disrupted.
// Exactly one member must be set.
// +k8s:deepcopy-gen=true
type WorkloadPodGroupDisruptionMode struct {
	// Single lets the group's pods be disrupted one by one.
	// +optional
	Single *WorkloadPodGroupSingleDisruptionMode `json:"single,omitempty"`
	// All disrupts the group as a whole.
	// +optional
	All *WorkloadPodGroupAllDisruptionMode `json:"all,omitempty"`
}

// WorkloadPodGroupSingleDisruptionMode has no fields.
// +k8s:deepcopy-gen=true
type WorkloadPodGroupSingleDisruptionMode struct{}

// WorkloadPodGroupAllDisruptionMode has no fields.
// +k8s:deepcopy-gen=true
type WorkloadPodGroupAllDisruptionMode struct{}

// WorkloadPodGroupResourceClaim names a DRA claim shared by a group's pods.
// A group holds at most v1alpha1.MaxResourceClaims of them.
// +k8s:deepcopy-gen=true
type WorkloadPodGroupResourceClaim struct {
	// Name identifies the claim inside the group; it must be a DNS label.
	Name string `json:"name"`
	// ResourceClaimName names an existing ResourceClaim. Exactly one of
	// ResourceClaimName and ResourceClaimTemplateName must be set.
	// +optional
	ResourceClaimName *string `json:"resourceClaimName,omitempty"`
	// ResourceClaimTemplateName names a ResourceClaimTemplate.
	// +optional
	ResourceClaimTemplateName *string `json:"resourceClaimTemplateName,omitempty"`
}

// WorkloadCompositePodGroupSchedulingPolicy is the scheduling policy of a
// group of groups. Exactly one member must be set.
// +k8s:deepcopy-gen=true
type WorkloadCompositePodGroupSchedulingPolicy struct {
	// Basic admits the child groups independently.
	// +optional
	Basic *WorkloadCompositePodGroupBasicSchedulingPolicy `json:"basic,omitempty"`
	// Gang needs MinGroupCount child groups schedulable at the same time.
	// +optional
	Gang *WorkloadCompositePodGroupGangSchedulingPolicy `json:"gang,omitempty"`
}

// WorkloadCompositePodGroupBasicSchedulingPolicy has no fields.
// +k8s:deepcopy-gen=true
type WorkloadCompositePodGroupBasicSchedulingPolicy struct{}

// WorkloadCompositePodGroupGangSchedulingPolicy is the all-or-nothing policy
// over child groups.
// +k8s:deepcopy-gen=true
type WorkloadCompositePodGroupGangSchedulingPolicy struct {
	// MinGroupCount is how many child groups must be schedulable together.
	// When unset the controller supplies a default (e.g. the number of child
	// groups). If set it must be at least 1. Immutable after create.
	// +optional
	MinGroupCount *int32 `json:"minGroupCount,omitempty"`
}

// WorkloadCompositePodGroupSchedulingConstraints holds the placement
// constraints of a group of groups; every descendant pod is bound by them.
// +k8s:deepcopy-gen=true
type WorkloadCompositePodGroupSchedulingConstraints struct {
	// Topology holds at most one constraint.
	// +optional
	Topology []v1alpha1.TopologyConstraint `json:"topology,omitempty"`
}

// WorkloadCompositePodGroupDisruptionMode says how a group of groups may be
// disrupted. Exactly one member must be set.
// +k8s:deepcopy-gen=true
type WorkloadCompositePodGroupDisruptionMode struct {
	// Single lets child groups be disrupted independently.
	// +optional
	Single *WorkloadCompositePodGroupSingleDisruptionMode `json:"single,omitempty"`
	// All disrupts every pod of the hierarchy when any of them is disrupted.
	// +optional
	All *WorkloadCompositePodGroupAllDisruptionMode `json:"all,omitempty"`
}

// WorkloadCompositePodGroupSingleDisruptionMode has no fields.
// +k8s:deepcopy-gen=true
type WorkloadCompositePodGroupSingleDisruptionMode struct{}

// WorkloadCompositePodGroupAllDisruptionMode has no fields.
// +k8s:deepcopy-gen=true
type WorkloadCompositePodGroupAllDisruptionMode struct{}

// WorkloadPriority carries the priority fields of a group. Upstream keeps
// them outside the building blocks (a Job takes them from its pod template);
// a block of their own lets errors point wherever the controller read them.
// Every template of one hierarchy must resolve to the same PriorityClassName
// and Priority, so a child that sets neither inherits its parent's values.
// +k8s:deepcopy-gen=true
type WorkloadPriority struct {
	// PriorityClassName resolves the group's priority through a PriorityClass.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// Priority, when set, wins over PriorityClassName.
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// PreemptionPolicy is PreemptLowerPriority (the default) or Never.
	// +optional
	PreemptionPolicy *v1alpha1.PreemptionPolicy `json:"preemptionPolicy,omitempty"`
}

// policyKind reports which union member is set, or "" when none or both
// are: only a well-formed block states a kind.
func (p *WorkloadPodGroupSchedulingPolicy) policyKind() PolicyKind {
	switch {
	case p == nil || (p.Basic != nil) == (p.Gang != nil):
		return ""
	case p.Gang != nil:
		return GangPolicy
	default:
		return BasicPolicy
	}
}

func (p *WorkloadCompositePodGroupSchedulingPolicy) policyKind() PolicyKind {
	switch {
	case p == nil || (p.Basic != nil) == (p.Gang != nil):
		return ""
	case p.Gang != nil:
		return GangPolicy
	default:
		return BasicPolicy
	}
}

func (d *WorkloadPodGroupDisruptionMode) modeKind() DisruptionModeKind {
	switch {
	case d == nil || (d.Single != nil) == (d.All != nil):
		return ""
	case d.All != nil:
		return AllMode
	default:
		return SingleMode
	}
}

func (d *WorkloadCompositePodGroupDisruptionMode) modeKind() DisruptionModeKind {
	switch {
	case d == nil || (d.Single != nil) == (d.All != nil):
		return ""
	case d.All != nil:
		return AllMode
	default:
		return SingleMode
	}
}
