package groups

import (
	"fmt"
	"sort"
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
	// structure moves with every change of a hierarchy's shape
	// (bumpStructureLocked); sortKeys are the queue's remembered keys of
	// members (SortFactsOf).
	structure uint64
	sortKeys  map[types.UID]*sortEntry
	served    [numDialects]atomic.Bool
}

// bumpLocked gives g a new revision: something HierarchyRevision promises
// to reflect changed in it.
func (c *Cache) bumpLocked(g *Group) {
	c.lastRev++
	g.rev = c.lastRev
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{groups: map[Key]*Group{}, pods: map[types.UID]Key{}}
}

// getOrCreateLocked returns the group for k, creating a placeholder (Exists
// false) that holds members or children until the object appears.
func (c *Cache) getOrCreateLocked(k Key) *Group {
	g := c.groups[k]
	if g == nil {
		g = &Group{Key: k, members: map[types.UID]*Member{}, children: map[Key]struct{}{}, youngest: noPending}
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
	c.bumpStructureLocked()
	if g.ParentName != "" {
		pk := k.parent(g.ParentName)
		if p := c.groups[pk]; p != nil {
			delete(p.children, k)
			c.bumpLocked(p)
			c.gcLocked(pk)
		}
	}
}

// SetGroup records the definition of group object k, in any dialect.
func (c *Cache) SetGroup(k Key, spec Spec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.getOrCreateLocked(k)
	c.bumpLocked(g)
	c.bumpStructureLocked()
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
	g.MinRuntime = spec.MinRuntime
	g.Claims = spec.Claims
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
			p := c.getOrCreateLocked(g.Key.parent(name))
			if _, ok := p.children[g.Key]; !ok {
				p.children[g.Key] = struct{}{}
				c.refreshYoungestLocked(p)
			}
		}
		return
	}
	if g.ParentName != "" {
		old := g.Key.parent(g.ParentName)
		if p := c.groups[old]; p != nil {
			delete(p.children, g.Key)
			c.bumpLocked(p)
			c.refreshYoungestLocked(p)
			c.gcLocked(old)
		}
	}
	g.ParentName = name
	if name != "" {
		p := c.getOrCreateLocked(g.Key.parent(name))
		p.children[g.Key] = struct{}{}
		c.bumpLocked(p)
		c.refreshYoungestLocked(p)
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
		c.bumpStructureLocked()
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
	// MinRuntime is the group's declared minimum runtime (Spec.MinRuntime);
	// shared with the cache: do not modify.
	MinRuntime *time.Duration
	// Claims are the group's own DRA claims; shared with the cache: do
	// not modify.
	Claims []GroupClaim

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
		PriorityFromMembers: g.PriorityFromMembers, MinResources: g.MinResources, WaitTimeout: g.WaitTimeout, MinRuntime: g.MinRuntime,
		Claims: g.Claims, Invalid: g.Invalid,
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

// ObjectKeys lists the groups of one dialect and kind whose objects exist
// (the informer-fed cache drops them when their API goes away).
func (c *Cache) ObjectKeys(d Dialect, kind Kind) []Key {
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

// UnitOf returns the highest gang on the chain of leaf group leaf, as the
// cache has it now: the members whose quorum a member of leaf counts
// toward. false when the chain is broken or holds no gang.
func (c *Cache) UnitOf(leaf Key) (Key, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	chain, err := c.chainLocked(leaf)
	if err != nil {
		return Key{}, false
	}
	var unit Key
	found := false
	for _, g := range chain {
		if g.Gang {
			unit, found = g.Key, true
		}
	}
	return unit, found
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
