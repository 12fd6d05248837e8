package gang

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// preFilterRead is one read of a member's group for PreFilter (and
// PostFilter): the cache's facts, taken in one call, and the plugin's own
// memos as they stood when it asked for them. A memo is read before the
// facts and judged against the revision the facts carry, so a verdict and
// the members it would be recomputed from always come from the same read.
type preFilterRead struct {
	groups.PreFilterFacts

	// validated is the memo of the scan of the hierarchy's members, with
	// its verdict.
	validated    groups.Memo
	validatedMsg string

	// sized reports whether the size check was asked for: the View's leaf
	// is a gang with a minimum and the nodes' allocatable could be read.
	// alloc is that allocatable, at node generation gen; sizeMemo is the
	// remembered verdict at gen, sizeMsg its message.
	sized    bool
	alloc    []placement.Resources
	gen      uint64
	sizeMemo groups.Memo
	sizeMsg  string

	// room is the minResources gate's pass at now, when the leaf sets
	// minResources (roomAsked).
	roomAsked bool
	room      groups.Memo
	now       time.Time

	// mendAsked is false when the View's unit already has an open
	// recovery or was seen whole: the unit's bound members were not read.
	mendAsked bool
}

// read takes the facts PreFilter decides from for pod, whose View v
// resolved, in one call into the group cache, asking for the member lists
// only where the plugin's memos do not cover the hierarchy's revision.
// prefilter adds what only PreFilter needs (the minResources gate and the
// recovery of a gang left partly bound).
func (pl *Gang) read(pod *corev1.Pod, v *groups.View, prefilter bool) *preFilterRead {
	r := &preFilterRead{}
	var ask groups.PreFilterAsk
	r.validated, r.validatedMsg = pl.validationMemo(pod, v)
	ask.Validated = r.validated
	if leaf := v.Chain.Leaf(); leaf.Gang && leaf.MinCount > 0 {
		if alloc, gen, err := pl.shared.capacity.allocatable(); err == nil {
			r.sized, r.alloc, r.gen = true, alloc, gen
			r.sizeMemo, r.sizeMsg = pl.shared.capacity.memoAt(leaf.Key, gen)
			ask.Sized = &r.sizeMemo
		}
	}
	if prefilter {
		if roomNeed(v.Chain.Leaf()) != nil {
			r.now = time.Now()
			r.roomAsked = true
			r.room = pl.shared.room.passAt(v.Leaf(), r.now)
			ask.Room = &r.room
		}
		r.mendAsked = v.Gang && !pl.shared.mends.settled(v.Unit)
		ask.Mend = r.mendAsked
	}
	r.PreFilterFacts = pl.groups.PreFilterFacts(v, ask)
	return r
}
