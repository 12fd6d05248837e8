// Package groups is the single owner of group state in the Phalanx
// scheduler: PodGroup and CompositePodGroup trees, label-defined implicit
// gangs, and each member pod's state. It is fed by informers and by the
// scheduling cycle (Reserve/Unreserve), and every lookup the plugins make
// per scheduling attempt is O(1) or O(size of one hierarchy): nothing here
// scans all pods.
package groups

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kind tells where a group comes from.
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

// Key identifies a group.
type Key struct {
	Kind      Kind
	Namespace string
	Name      string
}

func (k Key) String() string {
	return fmt.Sprintf("%s %s/%s", k.Kind, k.Namespace, k.Name)
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
	DisruptionAll bool

	PriorityClassName string
	Priority          *int32
	PreemptionPolicy  *corev1.PreemptionPolicy

	ParentName string // CompositePodGroup in the same namespace, "" for a root
	Created    time.Time

	// Invalid explains why the group's own definition is unusable (a label
	// group whose members disagree on min-available), "" when fine.
	Invalid string
	// minVotes counts, for a label group, the live members per
	// min-available value they carry.
	minVotes map[int]int

	members  map[types.UID]*Member
	counts   [numStates]int
	children map[Key]struct{}
	rev      uint64 // see Cache.HierarchyRevision
}

// IsLeaf reports whether the group holds pods (PodGroup or label group).
func (g *Group) IsLeaf() bool { return g.Key.Kind != CompositeKind }

// Count returns how many members are in state s.
func (g *Group) Count(s State) int { return g.counts[s] }

// Existing counts members that exist and are not finished.
func (g *Group) Existing() int { return g.counts[Pending] + g.counts[Assumed] + g.counts[Bound] }

// Placed counts members that are assumed or bound.
func (g *Group) Placed() int { return g.counts[Assumed] + g.counts[Bound] }
