package gang

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
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

	// checked holds the core's answers for this read (check), so the
	// checks below it ask the core nothing more.
	checked *gangcore.PreFilterVerdict
}

// check asks the core, in one call, every question PreFilter has of this
// read that the plugin's memos do not answer, remembers the member and
// size verdicts under the revision read, and keeps the answers in r.
func (pl *Gang) check(pod *corev1.Pod, v *groups.View, r *preFilterRead) {
	in := gangcore.PreFilterInput{Ref: pod, Root: v.Chain.Root(), Priority: v.Priority, Policy: v.Policy,
		Quorum: r.Quorum, Short: r.Short}
	in.CheckMembers = !r.validated.Covers(r.Rev, r.RevKnown)
	if in.CheckMembers {
		in.Members = r.Members
	}
	in.CheckSize = r.sizeAsked() && !r.sizeMemo.Covers(r.Rev, r.RevKnown)
	if in.CheckSize {
		in.MinCount, in.Requests, in.Alloc = r.Leaf.MinCount, requestsOf(r.LeafMembers), r.alloc
	}
	verdict := gangcore.PreFilterChecks(in)
	r.checked = &verdict
	if in.CheckMembers {
		pl.rememberValidation(pod, v, r, verdict.Disagreement)
		r.validated, r.validatedMsg = groups.Memo{Rev: r.Rev, OK: true}, verdict.Disagreement
	}
	if in.CheckSize {
		pl.shared.capacity.remember(r.Leaf, r.Rev, r.RevKnown, r.gen, verdict.TooLarge)
		r.sizeMemo, r.sizeMsg = groups.Memo{Rev: r.Rev, OK: true}, verdict.TooLarge
	}
}

// sizeAsked reports whether the size check applies to r's leaf.
func (r *preFilterRead) sizeAsked() bool {
	return r.sized && r.LeafOK && r.Leaf.Gang && r.Leaf.MinCount > 0
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
