package reservation

// Restoring holds after a failover. The book lives in the leader's memory;
// a scheduler that takes over rebuilds it from the records the previous
// leader kept in root groups' status. A group's status is not the
// scheduler's alone, though: whoever may update the status subresource can
// write any record, and a record can outlive the scheduler that wrote it.
// A record is therefore read as a claim, never as a grant. A hold is
// restored only when this scheduler could have granted it:
//   - the group exists, is the root of its hierarchy, has pending members,
//     and has waited its threshold;
//   - the key is one of the hierarchy's topology levels, and some node is
//     in the domain;
//   - restored holds, highest-ranked first, stay disjoint and within
//     maxSharePercent of the nodes;
//   - the hold starts at the record's start, or now when that lies in the
//     future, so no claim outlives maxHoldSeconds from the restart; one
//     already past its maximum is not restored, and its gang waits
//     maxHoldSeconds from the hold's end before holding again, as it would
//     after an expiry seen live (a record of an expiry restores that wait
//     too).
// The rank comes from what the API server sets: the gang's pod priority
// (resolved from PriorityClasses at admission) and the group's creation
// time. What a forged claim can still choose is which of its own gang's
// domains is held, within the share, for at most maxHoldSeconds after a
// restart: no more than the gang would get from its next failed plan.

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Claim is what a root group's status says of its hold after a restart.
type Claim struct {
	Root groups.Key
	// Record is the group's record of its hold; nil when it has none.
	Record *Record
	// Holding: the group's Reserved condition says Holding. Without a
	// record it was written by a scheduler that kept no record (an earlier
	// version) or by someone else; it is not restored, and is corrected.
	Holding bool
}

// Facts are what the claim is checked against, as the scheduler sees them
// now.
type Facts struct {
	// Tree is the claim's hierarchy, from its root; nil when the group is
	// gone (or its hierarchy is broken).
	Tree *groups.Tree
	// After is the group's wait before a hold (Args.AfterFor); negative:
	// never.
	After time.Duration
	// Nodes are the nodes' labels, by node name.
	Nodes map[string]map[string]string
}

// Verdict is what becomes of a claim.
type Verdict struct {
	Root groups.Key
	// Hold is the hold to offer the book; nil when none.
	Hold *Hold
	// CoolUntil, when not zero, keeps the gang from holding again before
	// it.
	CoolUntil time.Time
	// Reason and Why say why a claimed hold is not restored ("": nothing
	// to tell: no hold was claimed, or the group is gone).
	Reason, Why string
	// Record is what the group's status should keep instead of the claim
	// when Reason is set: the expiry of a hold past its maximum, else
	// nothing.
	Record *Record
}

// Check turns a claim into the hold to offer the book, or says why none is
// restored.
func Check(c Claim, f Facts, a Args, now time.Time) Verdict {
	v := Verdict{Root: c.Root}
	rec := c.Record
	if rec == nil {
		if c.Holding {
			v.Reason, v.Why = ReasonNotReserved, "the group's status keeps no record of the hold (an earlier version of the scheduler wrote only the condition)"
		}
		return v
	}
	hold := a.MaxHold()
	if !rec.Expired.IsZero() {
		v.CoolUntil = earliest(rec.Expired, now).Add(hold)
		return v
	}
	if rec.Key == "" || rec.Domain == "" || rec.Since.IsZero() {
		v.Reason, v.Why = ReasonNotReserved, "the record names no hold the scheduler wrote"
		return v
	}
	since := earliest(rec.Since, now)
	tree := f.Tree
	if tree == nil {
		return v
	}
	if tree.Key != c.Root {
		// Holds belong to roots: the book would refuse a child's hold to
		// its own siblings' pods.
		v.Reason, v.Why = ReasonNotReserved, fmt.Sprintf("holds are made for the root group %s", tree.Key)
		return v
	}
	waiting, rep, ok := WaitedSince(tree)
	if !ok {
		v.Reason, v.Why = ReasonNotReserved, "no member of the gang is pending"
		return v
	}
	if !topologyKeys(tree).Has(rec.Key) {
		v.Reason, v.Why = ReasonNotReserved, fmt.Sprintf("%s is not a topology key of the gang", rec.Key)
		return v
	}
	if f.After < 0 {
		v.Reason, v.Why = ReasonNotReserved, fmt.Sprintf("the group's %s annotation says never to reserve for it", ReserveAfterAnnotation)
		return v
	}
	if waited := now.Sub(waiting); waited < f.After {
		v.Reason, v.Why = ReasonNotReserved, fmt.Sprintf("the gang has waited %s of the %s before a hold", waited.Round(time.Second), f.After)
		return v
	}
	if ended := since.Add(hold); !now.Before(ended) {
		// As the sweep does at expiry, measured from when the hold ended.
		v.CoolUntil = ended.Add(hold)
		v.Reason, v.Why = ReasonExpired, fmt.Sprintf("%s=%s reached the maximum hold of %s at %s", rec.Key, rec.Domain, hold, ended.UTC().Format(time.RFC3339))
		if v.CoolUntil.After(now) {
			v.Why += "; no new hold before " + v.CoolUntil.UTC().Format(time.RFC3339)
		}
		v.Record = &Record{Key: rec.Key, Domain: rec.Domain, Since: since, Expired: ended}
		return v
	}
	nodes := sets.New[string]()
	for name, labels := range f.Nodes {
		if d, ok := labels[rec.Key]; ok && d == rec.Domain {
			nodes.Insert(name)
		}
	}
	if nodes.Len() == 0 {
		v.Reason, v.Why = ReasonNotReserved, fmt.Sprintf("no node has %s=%s", rec.Key, rec.Domain)
		return v
	}
	v.Hold = &Hold{
		Gang: Gang{
			Root: c.Root, Priority: groups.PodPriority(rep), Preempts: groups.PodPolicy(rep) == corev1.PreemptLowerPriority,
			Created: tree.Created,
		},
		Key: rec.Key, Domain: rec.Domain, Nodes: nodes, Since: since.Truncate(time.Second), Members: Members(tree),
	}
	return v
}

func earliest(t, now time.Time) time.Time {
	if t.After(now) {
		return now
	}
	return t
}

// Restore enters the holds of verdicts, highest-ranked first, where they
// overlap no hold restored before them and fit maxNodes, and keeps the
// gangs' cooldowns. It returns the verdicts to tell their groups: those
// checked out, and the holds it did not restore (reason Overlap when
// another hold had one of its nodes, NotReserved for the share).
func (b *Book) Restore(verdicts []Verdict, maxNodes int) []Verdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	var tell, cands []Verdict
	for _, v := range verdicts {
		if !v.CoolUntil.IsZero() {
			b.coolUntilLocked(v.Root, v.CoolUntil)
		}
		switch {
		case v.Hold != nil:
			cands = append(cands, v)
		case v.Reason != "":
			tell = append(tell, v)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Hold.outranks(cands[j].Hold.Gang) })
	for _, v := range cands {
		h := *v.Hold
		reason := ReasonNotReserved
		for n := range h.Nodes {
			if b.byNode[n] != nil {
				reason = ReasonRestoreOverlap
				break
			}
		}
		// Expected stays unknown until the gang's next plan.
		_, ok, _, why := b.offerLocked(h, []Choice{{Domain: h.Domain, Nodes: h.Nodes}}, maxNodes)
		if !ok {
			tell = append(tell, Verdict{Root: v.Root, Reason: reason, Why: why})
		}
	}
	return tell
}

// WaitedSince is when the hierarchy started waiting: the later of the
// root's creation and its oldest pending member's, with that member. ok is
// false when nothing is pending.
func WaitedSince(tree *groups.Tree) (since time.Time, rep *corev1.Pod, ok bool) {
	var oldest *corev1.Pod
	walk(tree, func(tr *groups.Tree) {
		for _, m := range tr.Members {
			if m.State == groups.Pending && (oldest == nil || m.Pod.CreationTimestamp.Before(&oldest.CreationTimestamp)) {
				oldest = m.Pod
			}
		}
	})
	if oldest == nil {
		return time.Time{}, nil, false
	}
	since = oldest.CreationTimestamp.Time
	if created := time.Unix(0, tree.Created); tree.Created != 0 && created.After(since) {
		since = created
	}
	return since, oldest, true
}

// topologyKeys lists the levels the hierarchy's groups may be planned at:
// their required and preferred keys, and, for a group without a key, its
// pending members' required pod-affinity keys (a group whose pods must be
// together in a zone is planned within one). They are the only keys a
// failed plan of it can hold a domain of.
func topologyKeys(tree *groups.Tree) sets.Set[string] {
	out := sets.New[string]()
	walk(tree, func(tr *groups.Tree) {
		if tr.TopologyKey != "" {
			out.Insert(tr.TopologyKey)
		}
		out.Insert(tr.PreferredKeys...)
		for _, m := range tr.Members {
			if a := m.Pod.Spec.Affinity; m.State == groups.Pending && a != nil && a.PodAffinity != nil {
				for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					out.Insert(term.TopologyKey)
				}
			}
		}
	})
	return out
}

// Members lists the UIDs of the hierarchy's pods.
func Members(tree *groups.Tree) sets.Set[string] {
	out := sets.New[string]()
	walk(tree, func(tr *groups.Tree) {
		for _, m := range tr.Members {
			out.Insert(string(m.Pod.UID))
		}
	})
	return out
}

func walk(tree *groups.Tree, f func(*groups.Tree)) {
	f(tree)
	for _, ch := range tree.Children {
		walk(ch, f)
	}
}
