package groups

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Cache holds every group and member the scheduler knows about. One Cache
// serves all profiles of a scheduler. It is safe for concurrent use by
// informer handlers, the scheduling cycle and binding goroutines.
type Cache struct {
	mu     sync.RWMutex
	groups map[Key]*Group
	// pods maps a member's UID to its leaf group.
	pods map[types.UID]Key
	// lastRev hands out group revisions; see HierarchyRevision.
	lastRev uint64
	served  [numDialects]atomic.Bool
}

// bumpLocked gives g a new revision: something HierarchyRevision promises
// to reflect changed in it.
func (c *Cache) bumpLocked(g *Group) {
	c.lastRev++
	g.rev = c.lastRev
}

// sameMemberSpec reports whether two versions of a member agree on what
// the scheduler validates across a hierarchy.
func sameMemberSpec(a, b *corev1.Pod) bool {
	return ptrEqual(a.Spec.Priority, b.Spec.Priority) && ptrEqual(a.Spec.PreemptionPolicy, b.Spec.PreemptionPolicy) &&
		a.Spec.SchedulerName == b.Spec.SchedulerName
}

func ptrEqual[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{groups: map[Key]*Group{}, pods: map[types.UID]Key{}}
}

// stateOf derives a member's state from the API object; Assumed is only set
// by the scheduler (MarkAssumed) and survives updates until the pod binds.
func stateOf(pod *corev1.Pod, previous State) State {
	switch {
	case pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return Finished
	case pod.Spec.NodeName != "":
		return Bound
	case previous == Assumed:
		return Assumed
	default:
		return Pending
	}
}

// getOrCreateLocked returns the group for k, creating a placeholder (Exists
// false) that holds members or children until the object appears.
func (c *Cache) getOrCreateLocked(k Key) *Group {
	g := c.groups[k]
	if g == nil {
		g = &Group{Key: k, members: map[types.UID]*Member{}, children: map[Key]struct{}{}}
		c.groups[k] = g
	}
	return g
}

// gcLocked drops a group that has no object, no members and no children.
func (c *Cache) gcLocked(k Key) {
	g := c.groups[k]
	if g == nil || g.Exists || len(g.members) > 0 || len(g.children) > 0 {
		return
	}
	delete(c.groups, k)
	if g.ParentName != "" {
		pk := k.parent(g.ParentName)
		if p := c.groups[pk]; p != nil {
			delete(p.children, k)
			c.bumpLocked(p)
			c.gcLocked(pk)
		}
	}
}

// AddOrUpdatePod records a pod. Pods in no group, or with a malformed
// attachment, are not tracked (PreEnqueue reports the malformation).
func (c *Cache) AddOrUpdatePod(pod *corev1.Pod) {
	a, grouped, err := Attach(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	oldKey, known := c.pods[pod.UID]
	if !grouped || err != nil {
		if known {
			c.removeMemberLocked(oldKey, pod.UID)
		}
		return
	}
	if known && oldKey != a.Key {
		c.removeMemberLocked(oldKey, pod.UID)
		known = false
	}
	g := c.getOrCreateLocked(a.Key)
	if a.Key.Kind == LabelKind {
		if !g.Exists {
			c.bumpLocked(g)
		}
		g.Exists = true
		g.Gang = true
		g.PriorityFromMembers = true
		if g.Created.IsZero() || pod.CreationTimestamp.Time.Before(g.Created) {
			g.Created = pod.CreationTimestamp.Time
		}
	}
	m := g.members[pod.UID]
	if m == nil {
		m = &Member{State: Pending}
		g.members[pod.UID] = m
		g.counts[Pending]++
		c.bumpLocked(g)
	} else if !sameMemberSpec(m.Pod, pod) {
		c.bumpLocked(g)
	}
	next := stateOf(pod, m.State)
	if (next == Finished) != (m.State == Finished) {
		c.bumpLocked(g)
	}
	if a.Key.Kind == LabelKind {
		if m.Pod != nil {
			g.vote(m.State, m.minAvailable, -1)
		}
		g.vote(next, a.MinAvailable, 1)
		m.minAvailable = a.MinAvailable
	}
	g.counts[m.State]--
	g.counts[next]++
	m.State = next
	m.Pod = pod
	if next == Bound {
		m.Node = pod.Spec.NodeName
	}
	c.pods[pod.UID] = a.Key
	if a.Key.Kind == LabelKind {
		c.labelMinimumLocked(g)
	}
}

// vote adds (sign 1) or removes (sign -1) the min-available of a label
// group member in state s from the group's tally. Finished members have no
// say in the group's minimum.
func (g *Group) vote(s State, minAvailable, sign int) {
	if s == Finished {
		return
	}
	if g.minVotes == nil {
		g.minVotes = map[int]int{}
	}
	g.minVotes[minAvailable] += sign
	if g.minVotes[minAvailable] <= 0 {
		delete(g.minVotes, minAvailable)
	}
}

// MsgMinAvailableMismatch starts the reason a label group whose members
// disagree on min-available is refused with.
const MsgMinAvailableMismatch = "all pods in a single pod group should have the same min-available"

// labelMinimumLocked derives a label group's minimum from its live members.
// Members that disagree make the group invalid until they agree; its
// minimum is then the largest any member asks for, so it does not move
// with whichever member changed last, and no member binds below what any
// of them asked for.
func (c *Cache) labelMinimumLocked(g *Group) {
	minCount, invalid := g.MinCount, ""
	if len(g.minVotes) > 0 {
		minCount = 0
		for v := range g.minVotes {
			minCount = max(minCount, v)
		}
	}
	if len(g.minVotes) > 1 {
		invalid = minAvailableDisagreement(g)
	}
	if minCount != g.MinCount || invalid != g.Invalid {
		g.MinCount, g.Invalid = minCount, invalid
		c.bumpLocked(g)
	}
}

// maxNamed bounds the pod names listed per min-available value.
const maxNamed = 3

// minAvailableDisagreement names the live members of g by the
// min-available they carry, largest value first.
func minAvailableDisagreement(g *Group) string {
	byValue := map[int][]string{}
	for _, m := range g.members {
		if m.State != Finished && m.Pod != nil {
			byValue[m.minAvailable] = append(byValue[m.minAvailable], m.Pod.Name)
		}
	}
	values := make([]int, 0, len(byValue))
	for v := range byValue {
		values = append(values, v)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(values)))
	parts := make([]string, 0, len(values))
	for _, v := range values {
		names := byValue[v]
		sort.Strings(names)
		who := "pod " + names[0]
		if len(names) > 1 {
			shown := names[:min(len(names), maxNamed)]
			who = "pods " + strings.Join(shown, ", ")
			if rest := len(names) - len(shown); rest > 0 {
				who += fmt.Sprintf(" and %d more", rest)
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s=%d", who, v1alpha1.LightweightMinAvailableLabel, v))
	}
	return MsgMinAvailableMismatch + ": " + strings.Join(parts, "; ")
}

// DeletePod forgets a pod.
func (c *Cache) DeletePod(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.pods[pod.UID]; ok {
		c.removeMemberLocked(k, pod.UID)
	}
}

func (c *Cache) removeMemberLocked(k Key, uid types.UID) {
	delete(c.pods, uid)
	g := c.groups[k]
	if g == nil {
		return
	}
	if m := g.members[uid]; m != nil {
		g.counts[m.State]--
		delete(g.members, uid)
		c.bumpLocked(g)
		if k.Kind == LabelKind {
			g.vote(m.State, m.minAvailable, -1)
			c.labelMinimumLocked(g)
		}
	}
	if k.Kind == LabelKind && len(g.members) == 0 {
		g.Exists = false
	}
	c.gcLocked(k)
}

// MarkAssumed records that the scheduler reserved the pod (Reserve).
func (c *Cache) MarkAssumed(pod *corev1.Pod) { c.setState(pod, Assumed, "") }

// MarkAssumedOn records that the scheduler reserved the pod on node.
func (c *Cache) MarkAssumedOn(pod *corev1.Pod, node string) { c.setState(pod, Assumed, node) }

// MarkPending records that a reservation was undone (Unreserve).
func (c *Cache) MarkPending(pod *corev1.Pod) { c.setState(pod, Pending, "") }

func (c *Cache) setState(pod *corev1.Pod, s State, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.pods[pod.UID]
	if !ok {
		return
	}
	m := c.groups[k].members[pod.UID]
	if m == nil || m.State == Bound || m.State == Finished {
		return
	}
	g := c.groups[k]
	g.counts[m.State]--
	g.counts[s]++
	m.State = s
	m.Node = node
}

// SetGroup records the definition of group object k, in any dialect.
func (c *Cache) SetGroup(k Key, spec Spec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.getOrCreateLocked(k)
	c.bumpLocked(g)
	g.Exists = true
	g.UID = spec.UID
	g.Created = spec.Created
	g.Gang = spec.Gang
	g.MinCount, g.MinGroupCount = 0, 0
	if g.Gang {
		g.MinCount, g.MinGroupCount = spec.MinCount, spec.MinGroupCount
	}
	g.TopologyKey = spec.TopologyKey
	g.PreferredKeys = spec.PreferredKeys
	g.DisruptionAll = spec.DisruptionAll
	g.PriorityClassName = spec.PriorityClassName
	g.Priority = spec.Priority
	g.PreemptionPolicy = spec.PreemptionPolicy
	g.PriorityFromMembers = spec.PriorityFromMembers
	g.MinResources = spec.MinResources
	g.WaitTimeout = spec.WaitTimeout
	g.Invalid = spec.Invalid
	c.setParentLocked(g, spec.Parent)
}

// SetPodGroup records a Phalanx PodGroup object.
func (c *Cache) SetPodGroup(pg *v1alpha1.PodGroup) {
	c.SetGroup(Key{Kind: PodGroupKind, Namespace: pg.Namespace, Name: pg.Name}, SpecOfPodGroup(pg))
}

// SetComposite records a Phalanx CompositePodGroup object.
func (c *Cache) SetComposite(cpg *v1alpha1.CompositePodGroup) {
	c.SetGroup(Key{Kind: CompositeKind, Namespace: cpg.Namespace, Name: cpg.Name}, SpecOfComposite(cpg))
}

func (c *Cache) setParentLocked(g *Group, name string) {
	if g.ParentName == name {
		if name != "" {
			c.getOrCreateLocked(g.Key.parent(name)).children[g.Key] = struct{}{}
		}
		return
	}
	if g.ParentName != "" {
		old := g.Key.parent(g.ParentName)
		if p := c.groups[old]; p != nil {
			delete(p.children, g.Key)
			c.bumpLocked(p)
			c.gcLocked(old)
		}
	}
	g.ParentName = name
	if name != "" {
		p := c.getOrCreateLocked(g.Key.parent(name))
		p.children[g.Key] = struct{}{}
		c.bumpLocked(p)
	}
}

// DeleteGroup records that a PodGroup or CompositePodGroup object is gone.
// Its members stay tracked (they now point at a missing group).
func (c *Cache) DeleteGroup(k Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[k]; g != nil {
		g.Exists = false
		c.bumpLocked(g)
		// A deleted object names no parent. Keeping the link would let
		// Members walk from the old parent into the deleted group, and
		// would keep placeholders that link to each other (a deleted
		// cycle) alive forever.
		c.setParentLocked(g, "")
		c.gcLocked(k)
	}
}

// Info is a read-only copy of a group's definition and counts.
type Info struct {
	Key           Key
	UID           types.UID
	Gang          bool
	MinCount      int
	MinGroupCount int
	TopologyKey   string
	PreferredKeys []string // shared with the cache: do not modify
	DisruptionAll bool
	Created       int64 // unix nanoseconds, for ordering

	PriorityClassName   string
	Priority            *int32
	PreemptionPolicy    *corev1.PreemptionPolicy
	PriorityFromMembers bool

	MinResources corev1.ResourceList
	WaitTimeout  time.Duration

	// Invalid explains why the group cannot be scheduled as defined, ""
	// when it can.
	Invalid string

	Existing, Placed, Bound int
}

func infoOf(g *Group) Info {
	return Info{
		Key: g.Key, UID: g.UID, Gang: g.Gang, MinCount: g.MinCount, MinGroupCount: g.MinGroupCount,
		TopologyKey: g.TopologyKey, PreferredKeys: g.PreferredKeys, DisruptionAll: g.DisruptionAll, Created: g.Created.UnixNano(),
		PriorityClassName: g.PriorityClassName, Priority: g.Priority, PreemptionPolicy: g.PreemptionPolicy,
		PriorityFromMembers: g.PriorityFromMembers, MinResources: g.MinResources, WaitTimeout: g.WaitTimeout,
		Invalid:  g.Invalid,
		Existing: g.Existing(), Placed: g.Placed(), Bound: g.counts[Bound],
	}
}

// Chain is a pod's leaf group followed by its ancestors up to the root.
type Chain []Info

// Leaf is the pod's own group.
func (ch Chain) Leaf() Info { return ch[0] }

// Root is the top of the hierarchy; its priority fields are authoritative.
func (ch Chain) Root() Info { return ch[len(ch)-1] }

// MissingError says a group or a parent a pod depends on does not exist.
type MissingError struct {
	Key Key
	// NotServed: the API server does not serve the dialect's resources, so
	// the group cannot appear until it does.
	NotServed bool
}

func (e *MissingError) Error() string {
	var msg string
	switch {
	case e.Key.Kind == CompositeKind:
		msg = fmt.Sprintf("parent %s not found: create it or fix parentCompositePodGroupName", e.Key)
	case e.Key.Dialect == Native:
		msg = fmt.Sprintf("%s %s/%s not found: create it or fix the pod's spec.schedulingGroup.podGroupName", e.Key.kindName(), e.Key.Namespace, e.Key.Name)
	case e.Key.Dialect == Coscheduling:
		msg = fmt.Sprintf("%s %s/%s not found: create it or fix the pod's %s label", e.Key.kindName(), e.Key.Namespace, e.Key.Name, xv1alpha1.PodGroupLabel)
	default:
		msg = fmt.Sprintf("PodGroup %s/%s not found: create it or fix the pod's %s label", e.Key.Namespace, e.Key.Name, v1alpha1.PodGroupLabel)
	}
	switch {
	case e.NotServed && e.Key.Dialect == Coscheduling:
		msg += fmt.Sprintf(" (the API server does not serve %s PodGroups: install scheduler-plugins' PodGroup CRD, manifests/components/scheduler-plugins-crd)", e.Key.Dialect)
	case e.NotServed:
		msg += fmt.Sprintf(" (the API server does not serve %s groups)", e.Key.Dialect)
	}
	return msg
}

// InvalidError says a group of the pod's hierarchy cannot be scheduled as
// defined (Group.Invalid): its quorum is not counted, so no member passes
// Permit while the problem stands.
type InvalidError struct {
	Key    Key
	Reason string
}

func (e *InvalidError) Error() string { return e.Reason }

// ChainOf returns the hierarchy of the pod's group. ok is false for a pod
// in no group. The error is a *MissingError, an attachment problem, or a
// hierarchy deeper than 4 levels (which includes cycles).
func (c *Cache) ChainOf(pod *corev1.Pod) (ch Chain, ok bool, err error) {
	a, grouped, err := Attach(pod)
	if !grouped || err != nil {
		return nil, grouped, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	groups, err := c.chainLocked(a.Key)
	if err != nil {
		return nil, true, err
	}
	for _, g := range groups {
		ch = append(ch, infoOf(g))
	}
	return ch, true, nil
}

func (c *Cache) chainLocked(leaf Key) ([]*Group, error) {
	g := c.groups[leaf]
	if g == nil || !g.Exists {
		return nil, c.missing(leaf)
	}
	chain := []*Group{g}
	for g.ParentName != "" {
		if len(chain) >= v1alpha1.MaxTreeDepth {
			return nil, fmt.Errorf("group hierarchy above %s is deeper than %d levels or cyclic: fix parentCompositePodGroupName", leaf, v1alpha1.MaxTreeDepth)
		}
		pk := g.Key.parent(g.ParentName)
		p := c.groups[pk]
		if p == nil || !p.Exists {
			return nil, c.missing(pk)
		}
		chain = append(chain, p)
		g = p
	}
	return chain, nil
}

func (c *Cache) missing(k Key) *MissingError {
	return &MissingError{Key: k, NotServed: k.Dialect != Phalanx && !c.served[k.Dialect].Load()}
}

// SetServed records whether the API server serves dialect d's group
// resources; a missing group of an unserved dialect says so.
func (c *Cache) SetServed(d Dialect, served bool) { c.served[d].Store(served) }

// Served reports what SetServed last recorded.
func (c *Cache) Served(d Dialect) bool { return d == Phalanx || c.served[d].Load() }

// Counter picks which members count toward a quorum.
type Counter func(*Group) int

var (
	// ByExisting counts members that exist (PreEnqueue).
	ByExisting Counter = (*Group).Existing
	// ByPlaced counts members assumed or bound (Permit).
	ByPlaced Counter = (*Group).Placed
	// ByBound counts members bound to nodes (status).
	ByBound Counter = func(g *Group) int { return g.counts[Bound] }
)

// Shortfall says which level of a hierarchy is below its minimum.
type Shortfall struct {
	Key Key
	// Leaf: Have/Need count pods; otherwise child groups at their minimum.
	Leaf       bool
	Have, Need int
}

// Quorum reports whether every gang on the pod's chain is satisfied when
// members are counted by count; when not, the first short level.
func (c *Cache) Quorum(pod *corev1.Pod, count Counter) (ok bool, short Shortfall, err error) {
	a, grouped, err := Attach(pod)
	if !grouped || err != nil {
		return !grouped, short, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	chain, err := c.chainLocked(a.Key)
	if err != nil {
		return false, short, err
	}
	for _, g := range chain {
		if g.Invalid != "" {
			return false, short, &InvalidError{Key: g.Key, Reason: g.Invalid}
		}
	}
	for i, g := range chain {
		if sat, have, need := c.satisfiedLocked(g, count, len(chain)-1-i); !sat {
			return false, Shortfall{Key: g.Key, Leaf: g.IsLeaf(), Have: have, Need: need}, nil
		}
	}
	return true, short, nil
}

// Satisfied reports whether group k reaches its minimum under count.
func (c *Cache) Satisfied(k Key, count Counter) (ok bool, have, need int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.groups[k]
	if g == nil || !g.Exists {
		return false, 0, 0
	}
	depth := 0
	if chain, err := c.chainLocked(k); err == nil {
		depth = len(chain) - 1
	}
	return c.satisfiedLocked(g, count, depth)
}

// expands reports whether the children of a composite at depth (0 for a
// root) are within MaxTreeDepth levels. Deeper groups are not part of the
// tree: their own chains are errors.
func expands(depth int) bool { return depth+1 < v1alpha1.MaxTreeDepth }

// satisfiedLocked reports whether g, at depth below its root, reaches its
// minimum, with the counts behind the answer. A basic group is satisfied
// by any placed member.
func (c *Cache) satisfiedLocked(g *Group, count Counter, depth int) (bool, int, int) {
	if g.Invalid != "" {
		return false, count(g), g.MinCount
	}
	if g.IsLeaf() {
		n := count(g)
		if g.Gang {
			return n >= g.MinCount, n, g.MinCount
		}
		return n > 0, n, 1
	}
	sat := 0
	if expands(depth) {
		for ck := range g.children {
			ch := c.groups[ck]
			if ch == nil || !ch.Exists {
				continue
			}
			if ok, _, _ := c.satisfiedLocked(ch, count, depth+1); ok {
				sat++
			}
		}
	}
	if g.Gang {
		return sat >= g.MinGroupCount, sat, g.MinGroupCount
	}
	return sat > 0, sat, 1
}

// HierarchyMembers returns the members whose state passes keep, of every
// leaf under the root of the pod's hierarchy, sorted by name for
// determinism. The pods are the informer's objects: do not modify them.
func (c *Cache) HierarchyMembers(pod *corev1.Pod, keep func(State) bool) []*corev1.Pod {
	a, grouped, err := Attach(pod)
	if !grouped || err != nil {
		return nil
	}
	return c.Members(a.Key, keep)
}

// HierarchyRevision identifies the state of the hierarchy group k belongs
// to as far as validation is concerned: it changes whenever a group object
// of the hierarchy, its parent links, its set of live members, or a
// member's priority, preemption policy or scheduler name changes. It does
// not change when members are reserved or bound, so a check over all
// members can be remembered across the members' scheduling cycles instead
// of being repeated for each (quadratic in gang size). ok is false when k
// is unknown.
func (c *Cache) HierarchyRevision(k Key) (rev uint64, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	root := c.groups[k]
	if root == nil {
		return 0, false
	}
	if chain, err := c.chainLocked(k); err == nil {
		root = chain[len(chain)-1]
	}
	// Revisions are unique and only grow, and a detached child bumps its
	// old parent, so the largest revision in the tree moves with any change.
	rev = root.rev
	c.walkGroupsLocked(root, func(g *Group) { rev = max(rev, g.rev) })
	return rev, true
}

// HierarchyWaitTimeout returns the shortest Permit wait a group of k's
// hierarchy asks for (Spec.WaitTimeout), 0 when none does. The gang waits
// in Permit as one unit, so the strictest of its groups bounds it.
func (c *Cache) HierarchyWaitTimeout(k Key) time.Duration {
	c.mu.RLock()
	defer c.mu.RUnlock()
	root := c.groups[k]
	if root == nil {
		return 0
	}
	if chain, err := c.chainLocked(k); err == nil {
		root = chain[len(chain)-1]
	}
	var out time.Duration
	c.walkGroupsLocked(root, func(g *Group) {
		if g.Exists && g.WaitTimeout > 0 && (out == 0 || g.WaitTimeout < out) {
			out = g.WaitTimeout
		}
	})
	return out
}

// HierarchyCount counts the members in states passing keep across the
// hierarchy group k belongs to, without listing them.
func (c *Cache) HierarchyCount(k Key, keep func(State) bool) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	root := c.groups[k]
	if root == nil {
		return 0
	}
	if chain, err := c.chainLocked(k); err == nil {
		root = chain[len(chain)-1]
	}
	n := 0
	c.walkLeavesLocked(root, 0, func(g *Group) {
		for s := State(0); s < numStates; s++ {
			if keep(s) {
				n += g.counts[s]
			}
		}
	})
	return n
}

// Members is HierarchyMembers for the hierarchy that group k belongs to.
func (c *Cache) Members(k Key, keep func(State) bool) []*corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	root := c.groups[k]
	if root == nil {
		return nil
	}
	if chain, err := c.chainLocked(k); err == nil {
		root = chain[len(chain)-1]
	}
	return c.membersUnderLocked(root, 0, keep)
}

// SubtreeMembers returns the members of group k and of the groups below
// it (not of k's parents or siblings) whose state passes keep, sorted by
// namespace and name. Under a basic composite each child gang is a unit of
// its own: what happens to one child's members is no business of another's.
func (c *Cache) SubtreeMembers(k Key, keep func(State) bool) []*corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.groups[k]
	if g == nil {
		return nil
	}
	depth := 0
	if chain, err := c.chainLocked(k); err == nil {
		depth = len(chain) - 1
	}
	return c.membersUnderLocked(g, depth, keep)
}

func (c *Cache) membersUnderLocked(top *Group, depth int, keep func(State) bool) []*corev1.Pod {
	var out []*corev1.Pod
	c.walkLeavesLocked(top, depth, func(g *Group) {
		for _, m := range g.members {
			if keep(m.State) {
				out = append(out, m.Pod)
			}
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// LeafMembers returns the members of group k itself whose state passes
// keep, in no particular order; nil for a composite or an unknown group.
func (c *Cache) LeafMembers(k Key, keep func(State) bool) []*corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.groups[k]
	if g == nil || !g.IsLeaf() {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(g.members))
	for _, m := range g.members {
		if keep(m.State) {
			out = append(out, m.Pod)
		}
	}
	return out
}

// LeafPlaced returns copies of group k's own members that are assumed or
// bound, each with the node it holds; nil for a composite or an unknown
// group.
func (c *Cache) LeafPlaced(k Key) []Member {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.groups[k]
	if g == nil || !g.IsLeaf() {
		return nil
	}
	out := make([]Member, 0, g.Placed())
	for _, m := range g.members {
		if m.State == Assumed || m.State == Bound {
			out = append(out, *m)
		}
	}
	return out
}

func (c *Cache) walkLeavesLocked(g *Group, depth int, fn func(*Group)) {
	c.walkLeavesVisited(g, depth, map[Key]bool{}, fn)
}

// walkGroupsLocked calls fn for every group under g, g included, composites too.
func (c *Cache) walkGroupsLocked(g *Group, fn func(*Group)) {
	seen := map[Key]bool{}
	var walk func(g *Group, depth int)
	walk = func(g *Group, depth int) {
		if seen[g.Key] {
			return
		}
		seen[g.Key] = true
		fn(g)
		if depth >= v1alpha1.MaxTreeDepth {
			return
		}
		for ck := range g.children {
			if ch := c.groups[ck]; ch != nil {
				walk(ch, depth+1)
			}
		}
	}
	walk(g, 0)
}

// walkLeavesVisited visits each group once, so a cyclic parent chain (which
// ChainOf reports as an error) cannot yield a leaf twice.
func (c *Cache) walkLeavesVisited(g *Group, depth int, seen map[Key]bool, fn func(*Group)) {
	if seen[g.Key] {
		return
	}
	seen[g.Key] = true
	if g.IsLeaf() {
		fn(g)
		return
	}
	if !expands(depth) {
		return
	}
	for ck := range g.children {
		if ch := c.groups[ck]; ch != nil {
			c.walkLeavesVisited(ch, depth+1, seen, fn)
		}
	}
}

// objectKeys lists the groups of one dialect and kind whose objects exist.
func (c *Cache) objectKeys(d Dialect, kind Kind) []Key {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Key
	for k, g := range c.groups {
		if k.Dialect == d && k.Kind == kind && g.Exists {
			out = append(out, k)
		}
	}
	return out
}

// Get returns a copy of a group's definition and counts.
func (c *Cache) Get(k Key) (Info, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.groups[k]
	if g == nil || !g.Exists {
		return Info{}, false
	}
	return infoOf(g), true
}

// Is returns a state filter for HierarchyMembers.
func Is(states ...State) func(State) bool {
	return func(s State) bool {
		for _, want := range states {
			if s == want {
				return true
			}
		}
		return false
	}
}

// GroupOf returns the leaf key of a tracked pod.
func (c *Cache) GroupOf(uid types.UID) (Key, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	k, ok := c.pods[uid]
	return k, ok
}

// RootOf returns the root of k's hierarchy, false when it is broken.
func (c *Cache) RootOf(k Key) (Key, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	chain, err := c.chainLocked(k)
	if err != nil {
		return Key{}, false
	}
	return chain[len(chain)-1].Key, true
}

// Tree is a copy of one hierarchy, for planning.
type Tree struct {
	Info
	// Members of a leaf, sorted by name.
	Members  []Member
	Children []*Tree
}

// TreeOf returns a copy of the whole hierarchy that group k belongs to,
// from its root. Missing or broken links are an error.
func (c *Cache) TreeOf(k Key) (*Tree, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	chain, err := c.chainLocked(k)
	if err != nil {
		return nil, err
	}
	return c.treeLocked(chain[len(chain)-1], 0), nil
}

func (c *Cache) treeLocked(g *Group, depth int) *Tree {
	t := &Tree{Info: infoOf(g)}
	if g.IsLeaf() {
		for _, m := range g.members {
			t.Members = append(t.Members, *m)
		}
		sort.Slice(t.Members, func(i, j int) bool { return t.Members[i].Pod.Name < t.Members[j].Pod.Name })
		return t
	}
	if !expands(depth) {
		return t
	}
	keys := make([]Key, 0, len(g.children))
	for ck := range g.children {
		if ch := c.groups[ck]; ch != nil && ch.Exists {
			keys = append(keys, ck)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, ck := range keys {
		t.Children = append(t.Children, c.treeLocked(c.groups[ck], depth+1))
	}
	return t
}
