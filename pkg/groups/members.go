package groups

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// A leaf files each member under its state (Group.byState), so the
// extension points that act on one state (Permit allows the assumed ones,
// Unreserve rejects them, activation moves the pending ones) touch only
// those, and counts are the sets' sizes.

// addMember files a new member under its state.
func (g *Group) addMember(uid types.UID, m *Member) {
	g.members[uid] = m
	g.file(uid, m)
}

// moveMember refiles member m under state to.
func (g *Group) moveMember(uid types.UID, m *Member, to State) {
	if m.State == to {
		return
	}
	g.unfile(uid, m)
	m.State = to
	g.file(uid, m)
}

// dropMember forgets member m.
func (g *Group) dropMember(uid types.UID, m *Member) {
	delete(g.members, uid)
	g.unfile(uid, m)
}

// file enters m under its state, in the state's set and in the counts
// kept beside it.
func (g *Group) file(uid types.UID, m *Member) {
	if g.byState[m.State] == nil {
		g.byState[m.State] = map[types.UID]*Member{}
	}
	g.byState[m.State][uid] = m
	g.counts[m.State]++
	switch {
	case m.State == Pending:
		g.pendingAdded(m.created)
	case m.State == Bound && m.scheduled:
		g.scheduledBound++
	}
}

// unfile takes m out of what file entered it in.
func (g *Group) unfile(uid types.UID, m *Member) {
	delete(g.byState[m.State], uid)
	g.counts[m.State]--
	switch {
	case m.State == Pending:
		g.pendingRemoved(m.created)
	case m.State == Bound && m.scheduled:
		g.scheduledBound--
	}
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

// stateOf derives a member's state from the API object; Assumed is only set
// by the scheduler (MarkAssumedOn) and survives updates until the pod binds.
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

// AddOrUpdatePod records a pod. Pods in no group, or with a malformed
// attachment, are not tracked (PreEnqueue reports the malformation).
func (c *Cache) AddOrUpdatePod(pod *corev1.Pod) { c.addOrUpdatePod(pod, false) }

// AddListedPod records a pod of the informer's initial list. A member
// already bound then is taken as scheduled (Member.scheduled): the
// scheduler may have bound it before it (re)started, and nothing on the
// pod tells that binding from a pod created with spec.nodeName.
func (c *Cache) AddListedPod(pod *corev1.Pod) { c.addOrUpdatePod(pod, true) }

func (c *Cache) addOrUpdatePod(pod *corev1.Pod, listed bool) {
	a, grouped, err := Attach(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	oldKey, known := c.pods[pod.UID]
	// A pod that Kueue's TAS still gates is not a member yet: Kueue
	// writes its node selector (the node it chose) in the update that
	// lifts the gate. Counted and planned before, the gang would be
	// planned with its members' old specs, where Kueue did not put them.
	// Other gates keep their pods members: the gang is planned with them
	// and waits in Permit until they are lifted.
	if !grouped || err != nil || kueueTopologyGated(pod) {
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
	youngest := g.youngest
	defer func() {
		if g.youngest != youngest {
			c.refreshAncestorsLocked(g)
		}
	}()
	if a.Key.Kind == LabelKind {
		if !g.Exists {
			c.bumpLocked(g)
			c.bumpStructureLocked()
		}
		g.Exists = true
		g.Gang = true
		g.PriorityFromMembers = true
		if g.Created.IsZero() || pod.CreationTimestamp.Time.Before(g.Created) {
			g.Created = pod.CreationTimestamp.Time
			c.bumpStructureLocked()
		}
	}
	m := g.members[pod.UID]
	if m == nil {
		// A member first seen bound was bound before the cache knew it:
		// created with spec.nodeName, labelled into the group while
		// running, or, in the informer's initial list, bound by an earlier
		// run of the scheduler. Only the last counts as scheduled.
		s := stateOf(pod, Pending)
		m = &Member{State: s, created: pod.CreationTimestamp.UnixNano(), scheduled: s == Bound && listed}
		g.addMember(pod.UID, m)
		c.bumpLocked(g)
	} else if !sameMemberSpec(m.Pod, pod) {
		c.bumpLocked(g)
	}
	next := stateOf(pod, m.State)
	if next == Bound && m.State != Bound {
		// The cache saw the member unbound in this group: it went through
		// a binding, which only a scheduler writes (spec.nodeName of an
		// existing pod cannot be set otherwise). This scheduler, or
		// another replica while this one stood by: members whose
		// schedulerName differs make the group invalid.
		m.scheduled = true
	}
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
	g.moveMember(pod.UID, m, next)
	m.Pod = pod
	// A remembered sort key answers only for the object it was computed
	// from, which the queue no longer holds once the informer has a newer
	// one; kept, it held the member's pending version long after it bound.
	if e := c.sortKeys[pod.UID]; e != nil && e.pod != pod {
		delete(c.sortKeys, pod.UID)
	}
	if next == Bound {
		m.Node = pod.Spec.NodeName
	}
	c.pods[pod.UID] = a.Key
	if a.Key.Kind == LabelKind {
		c.labelMinimumLocked(g)
	}
}

// KueueTopologyGate is the scheduling gate Kueue's topology-aware
// scheduling puts on a pod until it has chosen the pod's node.
const KueueTopologyGate = "kueue.x-k8s.io/topology"

func kueueTopologyGated(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == KueueTopologyGate {
			return true
		}
	}
	return false
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
	delete(c.sortKeys, uid)
	g := c.groups[k]
	if g == nil {
		return
	}
	if m := g.members[uid]; m != nil {
		youngest := g.youngest
		g.dropMember(uid, m)
		if g.youngest != youngest {
			c.refreshAncestorsLocked(g)
		}
		c.bumpLocked(g)
		if k.Kind == LabelKind {
			g.vote(m.State, m.minAvailable, -1)
			c.labelMinimumLocked(g)
		}
	}
	if k.Kind == LabelKind && len(g.members) == 0 {
		g.Exists = false
		c.bumpStructureLocked()
	}
	c.gcLocked(k)
}

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
	g := c.groups[k]
	m := g.members[pod.UID]
	if m == nil || m.State == Bound || m.State == Finished {
		return
	}
	youngest := g.youngest
	g.moveMember(pod.UID, m, s)
	m.Node = node
	if g.youngest != youngest {
		c.refreshAncestorsLocked(g)
	}
}

// HierarchyMembers returns the members whose state passes keep, of every
// leaf under the root of the pod's hierarchy, sorted by name for
// determinism. The pods are the informer's objects: do not modify them.
func (c *Cache) HierarchyMembers(pod *corev1.Pod, keep func(State) bool) []*corev1.Pod {
	a, grouped, err := Attach(pod)
	if !grouped || err != nil {
		return nil
	}
	return c.HierarchyMembersOf(a.Key, keep)
}

// HierarchyCount counts the members in states passing keep across the
// hierarchy group k belongs to, without listing them.
func (c *Cache) HierarchyCount(k Key, keep func(State) bool) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	root, ok := c.rootGroupLocked(k)
	if !ok {
		return 0
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

// HierarchyMembersOf is HierarchyMembers for the hierarchy that group k
// belongs to, whichever level of it k is.
func (c *Cache) HierarchyMembersOf(k Key, keep func(State) bool) []*corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	root, ok := c.rootGroupLocked(k)
	if !ok {
		return nil
	}
	return c.membersUnderLocked(root, 0, keep)
}

// HierarchyMembersIn returns the members in state s of the whole hierarchy
// group k belongs to, in no particular order. It reads only the members in
// that state and neither copies nor sorts the others, so the extension
// points that run once per member (Permit, Unreserve) stay linear in what
// they change. The pods are the informer's objects: do not modify them.
func (c *Cache) HierarchyMembersIn(k Key, s State) []*corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	root, ok := c.rootGroupLocked(k)
	if !ok {
		return nil
	}
	return c.membersInLocked(root, 0, s)
}

// SubtreeMembersIn is SubtreeMembers for the members in state s, in no
// particular order (see HierarchyMembersIn).
func (c *Cache) SubtreeMembersIn(k Key, s State) []*corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.groups[k]
	if g == nil {
		return nil
	}
	return c.membersInLocked(g, c.depthLocked(k), s)
}

// rootGroupLocked returns the root of k's hierarchy, k itself when the
// chain above it is broken; false when k is unknown.
func (c *Cache) rootGroupLocked(k Key) (*Group, bool) {
	root := c.groups[k]
	if root == nil {
		return nil, false
	}
	if chain, err := c.chainLocked(k); err == nil {
		root = chain[len(chain)-1]
	}
	return root, true
}

// depthLocked is how far k is below its root, 0 when the chain is broken.
func (c *Cache) depthLocked(k Key) int {
	if chain, err := c.chainLocked(k); err == nil {
		return len(chain) - 1
	}
	return 0
}

func (c *Cache) membersInLocked(top *Group, depth int, s State) []*corev1.Pod {
	var out []*corev1.Pod
	c.walkLeavesLocked(top, depth, func(g *Group) {
		for _, m := range g.byState[s] {
			out = append(out, m.Pod)
		}
	})
	return out
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
	return c.membersUnderLocked(g, c.depthLocked(k), keep)
}

func (c *Cache) membersUnderLocked(top *Group, depth int, keep func(State) bool) []*corev1.Pod {
	var out []*corev1.Pod
	c.walkLeavesLocked(top, depth, func(g *Group) {
		for s := State(0); s < numStates; s++ {
			if keep(s) {
				for _, m := range g.byState[s] {
					out = append(out, m.Pod)
				}
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

// StateOf returns the state of a tracked pod; false for a pod in no group
// the cache knows.
func (c *Cache) StateOf(uid types.UID) (State, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	k, ok := c.pods[uid]
	if !ok {
		return 0, false
	}
	g := c.groups[k]
	if g == nil || g.members[uid] == nil {
		return 0, false
	}
	return g.members[uid].State, true
}

// MarkQueued records that the scheduling queue has filed the pod (a
// PreEnqueue plugin saw it): from then on a nomination made for it stays,
// where the queue filing a pod it has not seen yet drops any nomination
// its status does not carry.
func (c *Cache) MarkQueued(uid types.UID) {
	c.mu.RLock()
	k, ok := c.pods[uid]
	var m *Member
	if ok && c.groups[k] != nil {
		m = c.groups[k].members[uid]
	}
	queued := m == nil || m.queued
	c.mu.RUnlock()
	if queued {
		return
	}
	c.mu.Lock()
	if k2, ok := c.pods[uid]; ok && k2 == k && c.groups[k] != nil && c.groups[k].members[uid] == m {
		m.queued = true
	}
	c.mu.Unlock()
}

// Queued reports whether the scheduling queue has filed the tracked pod
// (MarkQueued); true for a pod the cache does not track.
func (c *Cache) Queued(uid types.UID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	k, ok := c.pods[uid]
	if !ok || c.groups[k] == nil || c.groups[k].members[uid] == nil {
		return true
	}
	return c.groups[k].members[uid].queued
}

// SubtreeScheduledBound returns the bound members of group k and the
// groups below it that a scheduler bound (Member.scheduled), in no
// particular order: the members a gang left below its minimum after a
// failed bind holds on their nodes. Pods created with spec.nodeName, or
// labelled into the group while running, are not among them.
func (c *Cache) SubtreeScheduledBound(k Key) []*corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.groups[k]
	if g == nil {
		return nil
	}
	var out []*corev1.Pod
	c.walkLeavesLocked(g, c.depthLocked(k), func(l *Group) {
		for _, m := range l.byState[Bound] {
			if m.scheduled {
				out = append(out, m.Pod)
			}
		}
	})
	return out
}
