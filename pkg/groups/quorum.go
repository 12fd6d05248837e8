package groups

import (
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Quorum arithmetic over the cache's hierarchies: which members count
// (Counter), whether every gang on a pod's chain reaches its minimum, and the
// first level short of it. It reads the groups tree.go keeps and changes
// none, so it sits apart from the bookkeeping of group objects and links.

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
	return c.QuorumOf(a.Key, count)
}

// QuorumOf is Quorum for a member of leaf group leaf, for callers that
// hold the pod's View and need not parse its attachment again. The chain
// is walked as the cache has it now, and the members counted now.
func (c *Cache) QuorumOf(leaf Key, count Counter) (ok bool, short Shortfall, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.quorumLocked(leaf, count)
}

func (c *Cache) quorumLocked(leaf Key, count Counter) (ok bool, short Shortfall, err error) {
	chain, err := c.chainLocked(leaf)
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
