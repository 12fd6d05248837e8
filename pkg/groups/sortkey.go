package groups

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// SortFacts is what the scheduling queue orders a grouped pod by, besides
// its priority and name: its hierarchy's root, the time the hierarchy
// queues at, and whether its leaf gang is partly bound.
//
// Neither fact can be bought by the tenant who owns the pods, since other
// tenants' pods of the same priority wait behind them:
//   - Created is never before the creation of any pending member of the
//     hierarchy, nor of the pod itself. A group object created long ago
//     and fed new pods (a "lane") would otherwise let each new pod pass
//     every older pod of others. The members of a hierarchy share the
//     value, so a gang still sorts as one block; it is the time the set of
//     pods now waiting was complete, and no earlier than the root object.
//   - Partial counts only members the scheduler bound (Member.scheduled).
//     Otherwise one pod created with spec.nodeName, or a running pod
//     labelled into the gang, would put the whole gang ahead of everyone.
type SortFacts struct {
	Root Key
	// RootName is Root.String(), formatted once per hierarchy change
	// rather than on each of the queue's comparisons.
	RootName string
	// Created is the time the pod queues at, in unix nanoseconds: the
	// latest of its root's creation, the creation of the hierarchy's
	// youngest pending member, and the pod's own creation (which the
	// others cover once the cache has seen the pod).
	Created int64
	// Partial: the leaf is a gang with members bound but fewer than its
	// minimum, and among them members the scheduler bound.
	Partial bool
}

// noPending is a group's youngest when it has no pending member.
const noPending = math.MinInt64

// sortEntry remembers a member's SortFacts but Partial and the
// hierarchy's youngest pending member, which are read live. It answers
// while the member's pod object and the cache's structure are the ones it
// was computed from.
type sortEntry struct {
	pod       *corev1.Pod
	structure uint64
	leaf      Key
	// root is the hierarchy's root group: the cache keeps a group's
	// struct while it is in the cache, and dropping one moves structure.
	root  *Group
	facts SortFacts
}

// bumpStructureLocked records that a hierarchy's shape changed: a group
// object was set or deleted, a parent link moved, a label gang appeared,
// went, or got an earlier creation time. Every remembered sort key is then
// stale. Members being reserved, bound or added to an existing group leave
// it alone, which is what lets the queue's keys outlive them.
func (c *Cache) bumpStructureLocked() { c.structure++ }

// SortFactsOf returns what the queue orders pod by; grouped is false for a
// pod in no group or one whose hierarchy cannot be resolved (the queue
// orders those as plain pods). The answer is remembered per member and
// recomputed only when the member's pod object or a hierarchy's shape
// changed, so one comparison costs a map lookup and no formatting.
func (c *Cache) SortFactsOf(pod *corev1.Pod) (f SortFacts, grouped bool) {
	c.mu.RLock()
	if e := c.sortKeys[pod.UID]; e != nil && e.pod == pod && e.structure == c.structure {
		f = e.facts
		f.Created = max(f.Created, e.root.youngest)
		if g := c.groups[e.leaf]; g != nil {
			f.Partial = g.partial()
		}
		c.mu.RUnlock()
		return f, true
	}
	c.mu.RUnlock()
	a, isGrouped, err := Attach(pod)
	if !isGrouped || err != nil {
		return f, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	chain, err := c.chainLocked(a.Key)
	if err != nil {
		return f, false
	}
	root := chain[len(chain)-1]
	f = SortFacts{Root: root.Key, RootName: root.Key.String(), Created: max(root.Created.UnixNano(), pod.CreationTimestamp.UnixNano())}
	// Only tracked members are remembered: their entry goes with them
	// (removeMemberLocked), so no pod the cache has forgotten is kept.
	if c.pods[pod.UID] == a.Key {
		if c.sortKeys == nil {
			c.sortKeys = map[types.UID]*sortEntry{}
		}
		c.sortKeys[pod.UID] = &sortEntry{pod: pod, structure: c.structure, leaf: a.Key, root: root, facts: f}
	}
	f.Created = max(f.Created, root.youngest)
	f.Partial = chain[0].partial()
	return f, true
}

// partial reports whether g is a gang with members bound but fewer than
// its minimum, some of them bound by the scheduler. Members bound
// otherwise still count toward the minimum, as they do in Permit.
func (g *Group) partial() bool {
	return g.Gang && g.scheduledBound > 0 && g.counts[Bound] < g.MinCount
}

// pendingAdded counts a pending member created at t.
func (g *Group) pendingAdded(t int64) {
	if g.pendingAt == nil {
		g.pendingAt = map[int64]int{}
	}
	g.pendingAt[t]++
	g.youngest = max(g.youngest, t)
}

// pendingRemoved uncounts a pending member created at t. Creation times
// have a resolution of one second, so the members of a gang share few
// distinct times and the scan after the youngest of them goes is short.
func (g *Group) pendingRemoved(t int64) {
	if g.pendingAt[t]--; g.pendingAt[t] > 0 {
		return
	}
	delete(g.pendingAt, t)
	if t != g.youngest {
		return
	}
	g.youngest = noPending
	for at := range g.pendingAt {
		g.youngest = max(g.youngest, at)
	}
}

// refreshYoungestLocked recomputes a composite's youngest after its
// children changed, and its ancestors'.
func (c *Cache) refreshYoungestLocked(g *Group) {
	if !g.IsLeaf() {
		g.youngest = c.youngestUnderLocked(g)
	}
	c.refreshAncestorsLocked(g)
}

// refreshAncestorsLocked recomputes the youngest of the composites above g
// after g's changed. Each is taken from the leaves under it rather than
// from its children's values, so a parent cycle (which no chain resolves)
// cannot keep a stale value.
func (c *Cache) refreshAncestorsLocked(g *Group) {
	if g.ParentName == "" {
		return
	}
	seen := map[Key]bool{g.Key: true}
	for g.ParentName != "" && len(seen) <= v1alpha1.MaxTreeDepth {
		p := c.groups[g.Key.parent(g.ParentName)]
		if p == nil || seen[p.Key] {
			return
		}
		seen[p.Key] = true
		p.youngest = c.youngestUnderLocked(p)
		g = p
	}
}

// youngestUnderLocked is the latest creation time of a pending member of a
// leaf under g.
func (c *Cache) youngestUnderLocked(g *Group) int64 {
	y := int64(noPending)
	c.walkLeavesLocked(g, c.depthLocked(g.Key), func(l *Group) { y = max(y, l.youngest) })
	return y
}
