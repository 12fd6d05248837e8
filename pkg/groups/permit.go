package groups

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// PermitFacts is what Permit decides from for one member: the pod's
// quorum and its hierarchy as the cache has them at one instant, read
// under one lock. Counting quorum, the wait its groups ask for and the
// members that wait with it in separate calls let a member reserved in
// between change one answer and not the others.
type PermitFacts struct {
	// Quorum reports whether every gang on the pod's chain has its
	// minimum placed (assumed or bound); Short is the first level short
	// of it otherwise. Err is why the chain cannot be counted.
	Quorum bool
	Short  Shortfall
	Err    error
	// Tracked is false when the cache does not know the pod (a pod in no
	// group, or one deleted meanwhile); the fields below are unset then.
	Tracked bool
	// Root is the top of the pod's hierarchy (its leaf when the chain
	// above is broken).
	Root Key
	// WaitTimeout is the shortest Permit wait a group of the hierarchy
	// asks for, 0 when none does (HierarchyWaitTimeout).
	WaitTimeout time.Duration
	// Assumed counts the hierarchy's assumed members, the pod included.
	Assumed int
	// Others are the hierarchy's other assumed members, each with whether
	// its own chain has quorum. Listed only when Quorum holds: a member
	// that waits needs none, and listing them for each of a large gang's
	// members would make its Permits quadratic.
	Others []PermitMember
	// Unit is the highest gang on the pod's chain; Gang is false when the
	// chain has none. Pending are the unit's pending members, listed only
	// for the first assumed member of an attempt that does not yet have
	// quorum (it pulls them forward).
	Unit    Key
	Gang    bool
	Pending []*corev1.Pod
}

// PermitMember is another assumed member of a hierarchy.
type PermitMember struct {
	Pod *corev1.Pod
	// Quorum reports whether every gang on this member's own chain has
	// its minimum placed.
	Quorum bool
}

// PermitFacts reads the facts Permit needs about the pod of v (see
// PermitFacts). A pod in no group has quorum and nothing else.
func (c *Cache) PermitFacts(v *View) PermitFacts {
	var f PermitFacts
	switch {
	case !v.Grouped:
		f.Quorum = true
		return f
	case v.attachErr:
		f.Err = v.Err
		return f
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	f.Quorum, f.Short, f.Err = c.quorumLocked(v.Leaf(), ByPlaced)
	if chain, err := c.chainLocked(v.Leaf()); err == nil {
		for _, g := range chain {
			if g.Gang {
				f.Unit, f.Gang = g.Key, true
			}
		}
	}
	if leaf, tracked := c.pods[v.UID]; tracked {
		f.Tracked, f.Root = true, leaf
		if root, ok := c.rootGroupLocked(leaf); ok {
			f.Root = root.Key
			c.walkGroupsLocked(root, func(g *Group) {
				if g.Exists && g.WaitTimeout > 0 && (f.WaitTimeout == 0 || g.WaitTimeout < f.WaitTimeout) {
					f.WaitTimeout = g.WaitTimeout
				}
			})
			c.walkLeavesLocked(root, 0, func(g *Group) { f.Assumed += g.counts[Assumed] })
		}
	}
	if f.Err == nil && f.Quorum {
		f.Others = c.othersLocked(v)
	}
	if f.Err == nil && !f.Quorum && f.Tracked && f.Assumed <= 1 && f.Gang {
		if unit := c.groups[f.Unit]; unit != nil {
			f.Pending = c.membersInLocked(unit, c.depthLocked(f.Unit), Pending)
		}
	}
	return f
}

// othersLocked lists the assumed members of v's hierarchy other than v's
// pod, with their chains' quorum, counted once per leaf.
func (c *Cache) othersLocked(v *View) []PermitMember {
	root, ok := c.rootGroupLocked(v.Leaf())
	if !ok {
		return nil
	}
	var out []PermitMember
	quorum := map[Key]bool{}
	c.walkLeavesLocked(root, 0, func(g *Group) {
		for uid, m := range g.byState[Assumed] {
			if uid == v.UID {
				continue
			}
			ok, seen := quorum[g.Key]
			if !seen {
				q, _, err := c.quorumLocked(g.Key, ByPlaced)
				ok = q && err == nil
				quorum[g.Key] = ok
			}
			out = append(out, PermitMember{Pod: m.Pod, Quorum: ok})
		}
	})
	return out
}
