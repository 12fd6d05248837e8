package groups

import (
	corev1 "k8s.io/api/core/v1"
)

// PreFilterFacts is what the gang PreFilter decides from for one member
// after its View: the hierarchy's revision, quorum among existing members,
// the leaf group as it is now, and the member lists its checks need, all
// read under one lock of the cache. Read in separate calls, a member added
// or a minimum changed in between could be counted by one check and not by
// the next, and a large gang's member would take the lock a dozen times per
// cycle.
type PreFilterFacts struct {
	// Rev is the hierarchy's revision (HierarchyRevision of the leaf);
	// RevKnown is false when the cache does not know the leaf.
	Rev      uint64
	RevKnown bool
	// Quorum reports whether every gang on the chain has its minimum among
	// the members that exist; Short is the first level short of it. Err is
	// why the chain cannot be counted.
	Quorum bool
	Short  Shortfall
	Err    error
	// Leaf is the pod's own group as it is now; LeafOK is false when its
	// object does not exist (Get).
	Leaf   Info
	LeafOK bool
	// Root is the top of the leaf's hierarchy, the leaf's key when the
	// chain above it is broken.
	Root Key

	// Members are the hierarchy's pending, assumed and bound members,
	// sorted by namespace and name; listed only when PreFilterAsk.Validated
	// does not cover Rev.
	Members []*corev1.Pod
	// LeafMembers are the leaf's pending, assumed and bound members, for
	// the size check; listed only when asked (PreFilterAsk.Sized) for a
	// leaf gang with a minimum, and not covered.
	LeafMembers []*corev1.Pod
	// Placed are the leaf's assumed and bound members with their nodes,
	// for the minResources gate; listed only when asked (PreFilterAsk.Room)
	// and not covered.
	Placed []Member

	// Unit is the highest gang on the chain as it is now; UnitOK is false
	// when there is none or the chain is broken. The fields below are read
	// only when PreFilterAsk.Mend is set and there is a unit.
	Unit   Key
	UnitOK bool
	// UnitWhole reports whether the unit has its minimum bound; UnitBound
	// and UnitNeed are the counts behind it (Satisfied by ByBound).
	UnitWhole           bool
	UnitBound, UnitNeed int
	// When the unit has members bound but is not whole: UnitAssumed counts
	// its assumed members, ScheduledBound are its members a scheduler
	// bound (SubtreeScheduledBound) and Finished its finished members.
	UnitAssumed    int
	ScheduledBound []*corev1.Pod
	Finished       []*corev1.Pod
}

// Memo is a hierarchy revision at which the caller already holds what a
// listing would tell it: the listing is skipped while the hierarchy is
// still at that revision. The zero Memo covers nothing.
type Memo struct {
	Rev uint64
	OK  bool
}

// Covers reports whether m holds for a hierarchy at rev (known false: a
// hierarchy the cache does not know, which no memo covers).
func (m Memo) Covers(rev uint64, known bool) bool { return m.OK && known && m.Rev == rev }

// PreFilterAsk says which of the costly parts of PreFilterFacts the caller
// needs. The member lists are what makes PreFilter of a large gang cost,
// and the caller remembers its verdicts per revision, so it lists them only
// when its memo does not cover the revision read under the same lock.
type PreFilterAsk struct {
	// Validated covers the scan of the hierarchy's members (Members).
	Validated Memo
	// Sized, when set, asks for LeafMembers unless it covers Rev.
	Sized *Memo
	// Room, when set, asks for Placed unless it covers Rev.
	Room *Memo
	// Mend asks for the unit's bound counts and, when it is bound below
	// its minimum, the members that tell why.
	Mend bool
}

// PreFilterFacts reads the facts the gang PreFilter needs about the pod of
// v, whose attachment parsed and whose chain resolved (see PreFilterFacts).
func (c *Cache) PreFilterFacts(v *View, ask PreFilterAsk) PreFilterFacts {
	var f PreFilterFacts
	leafKey := v.Leaf()
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.groups[leafKey]
	f.Root = leafKey
	if g != nil {
		f.RevKnown = true
		chain, err := c.chainLocked(leafKey)
		root := g
		if err == nil {
			root = chain[len(chain)-1]
			f.Root = root.Key
			for _, cg := range chain {
				if cg.Gang {
					f.Unit, f.UnitOK = cg.Key, true
				}
			}
		}
		f.Rev = root.rev
		c.walkGroupsLocked(root, func(x *Group) { f.Rev = max(f.Rev, x.rev) })
		if g.Exists {
			f.Leaf, f.LeafOK = infoOf(g), true
		}
		if !ask.Validated.Covers(f.Rev, f.RevKnown) {
			f.Members = c.membersUnderLocked(root, 0, Is(Pending, Assumed, Bound))
		}
	}
	f.Quorum, f.Short, f.Err = c.quorumLocked(leafKey, ByExisting)
	if g != nil && g.IsLeaf() {
		if ask.Sized != nil && f.LeafOK && f.Leaf.Gang && f.Leaf.MinCount > 0 && !ask.Sized.Covers(f.Rev, f.RevKnown) {
			f.LeafMembers = make([]*corev1.Pod, 0, len(g.members))
			for _, s := range []State{Pending, Assumed, Bound} {
				for _, m := range g.byState[s] {
					f.LeafMembers = append(f.LeafMembers, m.Pod)
				}
			}
		}
		if ask.Room != nil && !ask.Room.Covers(f.Rev, f.RevKnown) {
			f.Placed = make([]Member, 0, g.Placed())
			for _, s := range []State{Assumed, Bound} {
				for _, m := range g.byState[s] {
					f.Placed = append(f.Placed, *m)
				}
			}
		}
	}
	if ask.Mend && f.UnitOK {
		c.unitMendLocked(&f)
	}
	return f
}

// unitMendLocked fills in whether f's unit was left bound below its
// minimum, and what tells whether a scheduler's binds stopped half way.
func (c *Cache) unitMendLocked(f *PreFilterFacts) {
	unit := c.groups[f.Unit]
	if unit == nil || !unit.Exists {
		return
	}
	depth := c.depthLocked(f.Unit)
	f.UnitWhole, f.UnitBound, f.UnitNeed = c.satisfiedLocked(unit, ByBound, depth)
	if f.UnitWhole || f.UnitBound == 0 {
		return
	}
	c.walkLeavesLocked(unit, depth, func(l *Group) {
		f.UnitAssumed += len(l.byState[Assumed])
		for _, m := range l.byState[Bound] {
			if m.scheduled {
				f.ScheduledBound = append(f.ScheduledBound, m.Pod)
			}
		}
		for _, m := range l.byState[Finished] {
			f.Finished = append(f.Finished, m.Pod)
		}
	})
}
