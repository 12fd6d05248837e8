// Package groups is the model of group state in the Phalanx scheduler:
// PodGroup and CompositePodGroup trees, label-defined implicit gangs, each
// member pod's state, and the Cache that holds them under one lock. It
// reads no API and runs no informer: pkg/groupcache feeds the Cache from
// informers, and the scheduling cycle changes it (Reserve/Unreserve).
// Every lookup the plugins make per scheduling attempt is O(1) or O(size
// of one hierarchy): nothing here scans all pods.
package groups

import (
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// Dialect is the API a group is defined in. A key carries its dialect, so a
// native PodGroup "a" and a Phalanx PodGroup "a" in one namespace are two
// groups, and a hierarchy never crosses dialects: a parent is looked up in
// its child's dialect.
type Dialect uint8

const (
	// Phalanx is scheduling.phalanx.dev/v1alpha1 PodGroups and
	// CompositePodGroups, and the label-pair gangs.
	Phalanx Dialect = iota
	// Native is upstream's scheduling.k8s.io PodGroups (v1beta1) and
	// CompositePodGroups (v1alpha3), named by pod.spec.schedulingGroup.
	Native
	// Coscheduling is scheduler-plugins' scheduling.x-k8s.io/v1alpha1
	// PodGroups, named by the scheduling.x-k8s.io/pod-group label.
	Coscheduling
	numDialects
)

// Dialects lists every dialect, in a fixed order.
var Dialects = [...]Dialect{Phalanx, Native, Coscheduling}

func (d Dialect) String() string {
	switch d {
	case Phalanx:
		return "scheduling.phalanx.dev"
	case Native:
		return "scheduling.k8s.io"
	case Coscheduling:
		return "scheduling.x-k8s.io"
	default:
		return fmt.Sprintf("dialect(%d)", uint8(d))
	}
}

// Kind tells what sort of group a key names within its dialect.
type Kind int

const (
	// PodGroupKind is a scheduling.phalanx.dev PodGroup object.
	PodGroupKind Kind = iota
	// CompositeKind is a scheduling.phalanx.dev CompositePodGroup object.
	CompositeKind
	// LabelKind is an implicit gang formed by the
	// pod-group.scheduling.sigs.k8s.io/{name,min-available} label pair.
	LabelKind
)

func (k Kind) String() string {
	switch k {
	case PodGroupKind:
		return "PodGroup"
	case CompositeKind:
		return "CompositePodGroup"
	default:
		return "label group"
	}
}

// Key identifies a group. The zero Dialect is Phalanx, so keys written
// without one keep meaning what they meant before other dialects existed.
type Key struct {
	Dialect   Dialect
	Kind      Kind
	Namespace string
	Name      string
}

// String names the group the way a user would look it up: Phalanx's own
// kinds plainly, the others with their API group, because `kubectl get
// podgroups` can resolve to any of them.
func (k Key) String() string {
	if k.Dialect == Phalanx {
		return fmt.Sprintf("%s %s/%s", k.Kind, k.Namespace, k.Name)
	}
	return fmt.Sprintf("%s.%s %s/%s", k.Kind, k.Dialect, k.Namespace, k.Name)
}

// kindName is the group's kind qualified by its dialect, for messages.
func (k Key) kindName() string {
	if k.Kind == LabelKind {
		return "label gang"
	}
	return fmt.Sprintf("%s.%s", k.Kind, k.Dialect)
}

// parent returns the key of k's parent CompositePodGroup called name: in
// k's own dialect and namespace, except that scheduler-plugins' API has no
// composite kind, so its PodGroups join a Phalanx CompositePodGroup.
func (k Key) parent(name string) Key {
	d := k.Dialect
	if d == Coscheduling {
		d = Phalanx
	}
	return Key{Dialect: d, Kind: CompositeKind, Namespace: k.Namespace, Name: name}
}

// Spec is a group object's definition, read from any dialect. The cache
// and the plugins work on it alone, so a dialect is only a translation
// into it (see SpecOf* in dialects.go).
type Spec struct {
	UID     types.UID
	Created time.Time

	Gang          bool
	MinCount      int // leaf gang
	MinGroupCount int // composite gang
	TopologyKey   string
	// PreferredKeys are a leaf's preferred topology levels below
	// TopologyKey, narrowest first (placement.Group.PreferredKeys).
	PreferredKeys []string
	DisruptionAll bool

	PriorityClassName string
	Priority          *int32
	PreemptionPolicy  *corev1.PreemptionPolicy
	// PriorityFromMembers: the dialect defines no group priority (as
	// scheduler-plugins' PodGroups); the members' own priority is the
	// group's, and they must agree with each other.
	PriorityFromMembers bool

	// Parent is the CompositePodGroup in the same namespace and dialect,
	// "" for a root.
	Parent string

	// MinResources: the group is not tried until the cluster's free
	// capacity could hold this much in total (scheduler-plugins'
	// minResources).
	MinResources corev1.ResourceList
	// WaitTimeout bounds this group's Permit wait; 0 takes the profile's.
	WaitTimeout time.Duration
	// MinRuntime is how long the group's running members are protected
	// from preemption, as the object declares it (field or annotation);
	// nil when it declares none. Preemption resolves defaults and the
	// profile's cap.
	MinRuntime *time.Duration

	// Claims are the DRA claims the group declares for its members to
	// share (a PodGroup's spec.resourceClaims).
	Claims []GroupClaim

	// Invalid explains why the object cannot be scheduled as written, for
	// definitions the dialect's own validation lets through.
	Invalid string
}

// GroupClaim is one entry of a group's resourceClaims. A member uses it
// through an entry of its own spec.resourceClaims with the same name and
// the same claim or template name, as upstream matches them.
type GroupClaim struct {
	Name string
	// ClaimName or TemplateName is set, as in the entry.
	ClaimName, TemplateName string
	// Made is, for an entry with TemplateName, the claim
	// kube-controller-manager made from it for the group, as the group's
	// status records it; empty until then (and for every dialect but
	// upstream's PodGroups, for which nothing makes one).
	Made string
}

// Claim is the name of the claim the entry stands for: ClaimName, or the
// claim made from the template; empty while none is known.
func (gc GroupClaim) Claim() string {
	if gc.ClaimName != "" {
		return gc.ClaimName
	}
	return gc.Made
}

// Matches says whether a pod's claim entry uses the group's claim.
func (gc GroupClaim) Matches(pc *corev1.PodResourceClaim) bool {
	return pc.Name == gc.Name && deref(pc.ResourceClaimName) == gc.ClaimName && deref(pc.ResourceClaimTemplateName) == gc.TemplateName
}

// State is a member pod's scheduling state.
type State int

const (
	// Pending: exists, not yet reserved by the scheduler.
	Pending State = iota
	// Assumed: reserved in a scheduling cycle; waiting in Permit or binding.
	Assumed
	// Bound: the API server has the pod on a node.
	Bound
	// Finished: terminating, succeeded or failed. It no longer counts.
	Finished
	numStates
)

// Member is a pod of a leaf group.
type Member struct {
	Pod   *corev1.Pod
	State State
	// Node is where an Assumed member was reserved; Bound members carry
	// pod.spec.nodeName.
	Node string

	// minAvailable is what a label group member's label says.
	minAvailable int
	// created is the pod's creation time in unix nanoseconds.
	created int64
	// scheduled: the member is bound, and the cache saw it unbound in this
	// group first (it went through a binding), or found it bound in the
	// informer's initial list (an earlier run of the scheduler may have
	// bound it). A pod created with spec.nodeName, or labelled into the
	// group while running, is bound without being scheduled.
	scheduled bool
	// queued: a PreEnqueue plugin saw the pod, so the scheduling queue has
	// filed it (Cache.MarkQueued).
	queued bool
}

// Group is one node of a group tree. Its fields are a snapshot: callers get
// copies (GroupInfo) and never the cache's own struct.
type Group struct {
	Key Key
	// Exists is false while pods point at a PodGroup or parent that has not
	// been created (yet).
	Exists bool
	UID    types.UID

	Gang          bool
	MinCount      int // leaf gang
	MinGroupCount int // composite gang
	TopologyKey   string
	PreferredKeys []string
	DisruptionAll bool

	PriorityClassName   string
	Priority            *int32
	PreemptionPolicy    *corev1.PreemptionPolicy
	PriorityFromMembers bool

	ParentName string // CompositePodGroup in the same namespace and dialect, "" for a root
	Created    time.Time

	MinResources corev1.ResourceList
	WaitTimeout  time.Duration
	MinRuntime   *time.Duration
	Claims       []GroupClaim

	// Invalid explains why the group's own definition is unusable (a label
	// group whose members disagree on min-available, or an object its
	// dialect lets through but Phalanx cannot schedule), "" when fine.
	Invalid string
	// minVotes counts, for a label group, the live members per
	// min-available value they carry.
	minVotes map[int]int

	members map[types.UID]*Member
	// byState holds the same members by state; counts are its sizes.
	byState  [numStates]map[types.UID]*Member
	counts   [numStates]int
	children map[Key]struct{}
	rev      uint64 // see Cache.HierarchyRevision

	// scheduledBound counts the bound members that are scheduled.
	scheduledBound int
	// pendingAt counts a leaf's pending members by creation time (unix
	// nanoseconds); youngest is the latest of those times, for a composite
	// the latest over the leaves under it, noPending when there is none.
	// The queue orders a hierarchy by its root's youngest (sortkey.go).
	pendingAt map[int64]int
	youngest  int64
}

// IsLeaf reports whether the group holds pods (PodGroup or label group).
func (g *Group) IsLeaf() bool { return g.Key.Kind != CompositeKind }

// Existing counts members that exist and are not finished.
func (g *Group) Existing() int { return g.counts[Pending] + g.counts[Assumed] + g.counts[Bound] }

// Placed counts members that are assumed or bound.
func (g *Group) Placed() int { return g.counts[Assumed] + g.counts[Bound] }

// SameSpec compares two definitions: quantities by value, times by
// instant, the rest field by field.
func SameSpec(a, b Spec) bool {
	if !apiequality.Semantic.DeepEqual(a.MinResources, b.MinResources) || !a.Created.Equal(b.Created) {
		return false
	}
	a.MinResources, b.MinResources = nil, nil
	a.Created, b.Created = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}
