package placement

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Resources holds quantities keyed by resource name: cpu in millicores,
// memory and everything else in base units (bytes, devices).
type Resources map[corev1.ResourceName]int64

// Node is the planner's view of one node of the snapshot.
type Node struct {
	Name        string
	Labels      map[string]string
	Allocatable Resources
	// Requested is what pods bound or assumed on the node already use,
	// including pods of other groups and the bound members of this one.
	Requested     Resources
	MaxPods       int // allocatable pods
	PodCount      int // pods already on the node
	Taints        []corev1.Taint
	Unschedulable bool
}

// Shape describes pods that share requests, tolerations, node selector and
// required node affinity. Fit is computed once per shape per node, so pods of
// one template should share one Shape.
type Shape struct {
	// Requests of one pod. Zero quantities are ignored, as upstream does, and
	// so is "pods": pod slots are accounted through Node.MaxPods.
	Requests     Resources
	Tolerations  []corev1.Toleration
	NodeSelector map[string]string
	// RequiredAffinity is pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.
	RequiredAffinity *corev1.NodeSelector

	// Classes names the member classes a pod of this shape belongs to:
	// the label sets that member-to-member constraints of the plan select
	// (a pod anti-affinity selector, a host port, a spread selector). Class
	// names are the caller's; they are shared across every group of a plan.
	Classes []string
	// Limits are member-to-member constraints: how many pods of a class the
	// plan may put into one domain before a pod of this shape may no longer
	// join it. They count only the pods this plan places; constraints
	// against pods already running reach the planner through NodeLimit.
	Limits []DomainLimit
	// NodeLimit caps how many pods of this shape the plan puts on the named
	// nodes; 0 excludes a node. It carries what the planner does not model
	// itself: the verdicts of the scheduler's Filter plugins against the
	// pods already running, and the rejections of earlier plans.
	NodeLimit map[string]int
	// Excluded words, for messages, why NodeLimit excludes nodes.
	Excluded string
	// BlockedBy lists nodes the scheduler's filters refuse the shape on
	// because of running pods that preemption could evict, with their keys
	// (Victim.Key). PlanGroup keeps the shape off them; FindVictims lets the
	// shape use such a node once every listed pod is among the victims.
	BlockedBy map[string][]string
}

// DomainLimit is one member-to-member constraint of a shape. A pod of the
// shape may join a domain of Key only while fewer than Max pods of Class
// are planned there. For a shape that belongs to Class itself this bounds
// its own pods per domain (Max 1: one member per node for a hostname
// anti-affinity or a host port); for a shape outside Class it keeps the
// shape out of domains that already hold the class (Max 1: none of them).
type DomainLimit struct {
	// Key is a node label key; "" makes every node a domain of its own.
	// A node without the label is outside the constraint.
	Key   string
	Class string
	Max   int
	// PerDomain overrides Max for the named domains (label values), e.g.
	// the room a topology spread constraint leaves once running pods are
	// counted. A negative value is a domain that many pods past the limit
	// already: it stays closed until evictions (Victims) bring it back.
	PerDomain map[string]int
	// Victims are running pods the limit counts that FindVictims may
	// evict, by Victim.Key, each with the domain value it is counted in.
	// PlanGroup ignores them. A limit with victims is a topology spread:
	// PerDomain lists every domain it compares, Max-PerDomain[d] being the
	// pods counted in d, and every domain's limit is relative to the least
	// of those counts. Evicting a victim opens its domain by one; when that
	// lowers the least count, every domain closes by one, unless
	// FixedFloor.
	Victims map[string]string
	// FixedFloor says the least count is taken as zero whatever is evicted
	// (a spread's minDomains above the domains there are).
	FixedFloor bool
	// Reason words the constraint for messages, e.g. "one member per
	// kubernetes.io/hostname (pod anti-affinity)".
	Reason string
}

// Pod is a pending member of a leaf group.
type Pod struct {
	// Key identifies the pod and must be unique in a plan; the planner only
	// compares and sorts it. The scheduler passes the pod's UID (see
	// topology.PodKey), so a pod deleted and recreated under the same name
	// is a different pod; Plan.Assignments and Plan.Unplaced return the
	// same keys.
	Key   string
	Shape int // index into Group.Shapes
	// Rank is the pod's position in its leaf's ring (an all-reduce passes
	// data from one rank to the next), meaningful when Ranked. Only the
	// order matters: ranks may have gaps and need not start at 0. Within
	// the nodes a plan gives a shape of the leaf, ranked pods take them in
	// rank order, domain by domain (see rank.go); unranked pods follow.
	Rank   int64
	Ranked bool
	// Prefer is a node the pod should return to when the plan puts a pod
	// of its shape there anyway: where an earlier incarnation of its rank
	// was planned or ran. Placement favours nodes some pending pod
	// prefers, and rank order keeps the preferred node for that pod.
	Prefer string
}

// BoundPod is a member that is already bound or assumed.
type BoundPod struct {
	Key  string // as Pod.Key: the scheduler passes the pod's UID
	Node string // node name it is bound/assumed on
}

// Policy is a group's scheduling policy.
type Policy int

const (
	// Gang is all or nothing: MinCount pods (MinGroupCount children) together, or none.
	Gang Policy = iota
	// Basic is best effort: whatever fits is placed.
	Basic
)

// Group is a node of a group tree. A leaf (no Children) is a PodGroup; a
// group with children is a CompositePodGroup.
type Group struct {
	Name   string // unique in the tree, e.g. "ns/name"
	Policy Policy
	// TopologyKey is a node label key. When set, every pod of the subtree
	// goes to nodes sharing one value of it; "" leaves the group unconstrained.
	TopologyKey string
	// PreferredKeys are soft topology levels of a leaf, node label keys
	// narrowest first, all below TopologyKey: the group goes into one
	// domain of the first level when one holds it, else into the fewest
	// domains of a level that one domain of the next level holds, climbing
	// up to TopologyKey's domain (or the whole of the parent's domain when
	// TopologyKey is ""). Nodes lacking any of these labels are left out.
	// See preferred.go.
	PreferredKeys []string

	// Leaf only.

	// MinCount is, for a gang, how many members (bound included) must run together.
	MinCount int
	Shapes   []Shape
	Pending  []Pod
	// Bound members count toward MinCount and pin the domain of every
	// constrained group above them.
	Bound []BoundPod

	// Composite only.

	Children []*Group
	// MinGroupCount is, for a gang composite, how many children must be
	// satisfiable together in one domain of the parent.
	MinGroupCount int
}

// DomainPolicy picks among the feasible topology domains of a group.
type DomainPolicy int

const (
	// BestFit picks the feasible domain that leaves the least room after
	// placement, which keeps large domains whole for large gangs.
	BestFit DomainPolicy = iota
	// WorstFit picks the feasible domain that leaves the most room, which
	// spreads groups across domains.
	WorstFit
	// FirstFit picks the feasible domain with the smallest label value.
	FirstFit
)

// Options tune a plan.
type Options struct {
	DomainPolicy DomainPolicy
	// TaintComparisonOperators enables the Lt and Gt toleration operators,
	// mirroring the TaintTolerationComparisonOperators feature gate.
	TaintComparisonOperators bool
	// ExplainDomains, when positive, makes every Infeasible of a group with
	// a topology key list up to this many of the domains it was tried in,
	// closest first (Infeasible.Domains). Each costs one more placement
	// attempt of the group, so the scheduler leaves it at 0 and only
	// diagnostics (kubectl phalanx explain and fit) ask for it.
	ExplainDomains int
	// Extra is room, per node name, in resources the node table does not
	// carry: the devices of DRA device classes, which the scheduler counts
	// per plan from ResourceSlices and claims (see DeviceResource). A
	// resource neither the table nor Extra lists has no room anywhere.
	Extra map[string]ExtraRoom
	// Domains are topology levels the node table does not carry, by key:
	// each node's value, as a label would give it. A key listed here takes
	// its domains from here and never from node labels; a node missing
	// from its map is outside the key's domains, as a node without a
	// label is. The scheduler fills it for device attribute levels
	// (DeviceAttributeKey), whose values come from ResourceSlices.
	Domains map[string]map[string]string
	// RankLevels are topology keys, such as zone, block and rack, by which
	// ranked pods are ordered on the nodes of their plan: consecutive ranks
	// fill one domain of each level before the next, domains in order of
	// their values, nodes by name (rank.go). The tree's own topology keys
	// are levels too. The order given does not matter: levels are nested
	// by how many domains the plan's nodes span.
	RankLevels []string
}

// ExtraRoom is one node's room in resources outside the node table.
type ExtraRoom struct {
	Allocatable, Requested Resources
}

// deviceResourcePrefix names the resources that count the devices of one
// DRA device class. No extended resource can take the name: the prefix is
// a domain Phalanx owns.
const deviceResourcePrefix = "devices.phalanx.dev/"

// DeviceResource is the resource that counts devices of a DRA device class
// in plans, so that a shortfall reads "short 2 devices of class X".
func DeviceResource(class string) corev1.ResourceName {
	return corev1.ResourceName(deviceResourcePrefix + class)
}

// DeviceClassOf is the class a DeviceResource counts, ok false for any
// other resource.
func DeviceClassOf(name corev1.ResourceName) (class string, ok bool) {
	return strings.CutPrefix(string(name), deviceResourcePrefix)
}

// deviceAttributePrefix starts the topology keys that name a device
// attribute instead of a node label. A label key has at most one slash;
// these have two, so no node label can take the name.
const deviceAttributePrefix = "device.phalanx.dev/"

// DeviceAttributeKey is the topology key of a device attribute, given by
// its fully qualified name (domain/name, e.g. gpu.nvidia.com/cliqueId).
func DeviceAttributeKey(attribute string) string {
	return deviceAttributePrefix + attribute
}

// DeviceAttributeOf is the fully qualified attribute a topology key
// names, ok false for a node label key.
func DeviceAttributeOf(key string) (attribute string, ok bool) {
	attr, ok := strings.CutPrefix(key, deviceAttributePrefix)
	if !ok || !strings.Contains(attr, "/") {
		return "", false
	}
	return attr, true
}

// Plan is the outcome of PlanGroup.
type Plan struct {
	// Assignments maps the key of every pod the plan places to its node.
	Assignments map[string]string
	// Domains maps each constrained group that holds a domain to its label value.
	Domains map[string]string
	// Unplaced lists the pending pods the plan does not place, sorted.
	Unplaced []string
	// Unsatisfied explains groups that were left out without failing the
	// plan: children of a basic composite, and children of a gang composite
	// beyond its MinGroupCount. Their pods are in Unplaced.
	Unsatisfied []*Infeasible
	// Choices says, for every placed group with PreferredKeys, which level
	// it settled at and why.
	Choices map[string]Choice
}

// Choice is where a group with preferred levels went.
type Choice struct {
	// Key is the level whose domains hold the group's pods: the first
	// preferred level when the preference was met, a wider one after a
	// fallback.
	Key string
	// Domains are the values of Key the group uses, in the order they are
	// filled: those already holding bound members first.
	Domains []string
	// Kept counts the Domains that held bound members before the plan.
	Kept int
	// Within is the level one domain of which holds every Domain, and
	// WithinDomain its value; both "" when the group may use the whole of
	// its parent's domain (no required key above the last preferred level).
	Within, WithinDomain string
	// Preferred is true when the group fits one domain of its first level.
	Preferred bool
	// Outgrown is true when the group's members beyond its minimum did not
	// fit the domains its minimum took and went on into wider ones, which
	// Key, Domains and Within then describe.
	Outgrown bool
	// Message words the choice for group status, e.g. "placed in 2
	// topology.phalanx.dev/rack domains of topology.phalanx.dev/block b-3
	// (r-1, r-2): no single topology.phalanx.dev/rack fits 12 pods (best
	// r-1 fits 8; short 4 nvidia.com/gpu)".
	Message string
}
