package reservation

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Book holds the reservations. It is safe for concurrent use; callers
// never hold its lock, and it calls nothing outside this package while it
// holds it.
type Book struct {
	mu     sync.Mutex
	held   map[groups.Key]*entry
	byNode map[string]*entry
	// cooldown: a group whose hold expired may not hold again before. It
	// is keyed by namespace and name, not by the object, and outlives the
	// group until it ends: deleting a group and creating it again must not
	// end the wait. The sweep drops ended entries, so the map holds at
	// most the holds that expired within the last maxHoldSeconds (a node
	// is held by one gang at a time, for maxHoldSeconds before it expires,
	// so a couple per node of the share) plus those restored from records
	// of expired holds.
	cooldown map[cooldownKey]time.Time
	// remind: gangs whose plan failed before they waited long enough, with
	// when they will have; the sweep retries them then, since nothing else
	// may.
	remind map[groups.Key]time.Time
}

// entry is a hold with the pods it turned away, which are tried again when
// the hold ends or its expected start moves.
type entry struct {
	Hold
	waiting map[string]*corev1.Pod
}

// cooldownKey names a group by namespace and name, whatever its kind or
// API: the name is what its owner reuses.
type cooldownKey struct{ namespace, name string }

func cooldownKeyOf(k groups.Key) cooldownKey { return cooldownKey{k.Namespace, k.Name} }

// NewBook returns an empty book.
func NewBook() *Book {
	return &Book{
		held: map[groups.Key]*entry{}, byNode: map[string]*entry{},
		cooldown: map[cooldownKey]time.Time{}, remind: map[groups.Key]time.Time{},
	}
}

// Ended is a hold that ended, with what to tell its group and the pods to
// try again.
type Ended struct {
	Hold
	Reason, Message string
	// Waiting are the pods the hold turned away.
	Waiting map[string]*corev1.Pod
	// Record is what the group's status keeps of the hold: the expiry,
	// which a scheduler that takes over must not forget; nil otherwise.
	Record *Record
}

// Offer grants c the first of choices it may hold: no overlap with a hold
// that outranks it, and within maxNodes once lower-ranked holds it
// overlaps (or, for the share, the lowest-ranked ones) are displaced. c
// brings its gang, key, start and members; the choice fills in the rest.
// It returns the hold granted and the holds displaced, or why none was
// granted.
func (b *Book) Offer(c Hold, choices []Choice, maxNodes int) (granted Hold, ok bool, displaced []Ended, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.offerLocked(c, choices, maxNodes)
}

func (b *Book) offerLocked(c Hold, choices []Choice, maxNodes int) (Hold, bool, []Ended, string) {
	var whys []string
	for _, ch := range choices {
		var over []*entry
		blocked := ""
		for _, e := range b.held {
			if e.Root == c.Root || !e.Nodes.HasAny(ch.Nodes.UnsortedList()...) {
				continue
			}
			if e.outranks(c.Gang) {
				blocked = fmt.Sprintf("%s=%s overlaps the reservation of %s", c.Key, ch.Domain, e.Root)
				break
			}
			over = append(over, e)
		}
		if blocked != "" {
			whys = append(whys, blocked)
			continue
		}
		out := sets.New(over...)
		used := len(ch.Nodes)
		for _, e := range b.held {
			if !out.Has(e) && e.Root != c.Root {
				used += len(e.Nodes)
			}
		}
		if used > maxNodes {
			// Displace the lowest-ranked holds below c.
			var lower []*entry
			for _, e := range b.held {
				if !out.Has(e) && e.Root != c.Root && c.outranks(e.Gang) {
					lower = append(lower, e)
				}
			}
			sort.Slice(lower, func(i, j int) bool { return lower[j].outranks(lower[i].Gang) })
			for _, e := range lower {
				if used <= maxNodes {
					break
				}
				out.Insert(e)
				over = append(over, e)
				used -= len(e.Nodes)
			}
		}
		if used > maxNodes {
			whys = append(whys, fmt.Sprintf("%s=%s (%d nodes) would exceed the reservable share (%d nodes)", c.Key, ch.Domain, len(ch.Nodes), maxNodes))
			continue
		}
		var displaced []Ended
		for _, e := range over {
			b.removeLocked(e)
			displaced = append(displaced, Ended{
				Hold: e.Hold, Reason: ReasonTakenOver, Waiting: e.waiting,
				Message: fmt.Sprintf("%s=%s was taken over by %s (priority %d)", e.Key, e.Domain, c.Root, c.Priority),
			})
		}
		waiting := map[string]*corev1.Pod{}
		if old := b.held[c.Root]; old != nil {
			b.removeLocked(old)
			waiting = old.waiting
		}
		c.Domain, c.Nodes, c.Free, c.Short, c.Expected, c.Protected = ch.Domain, ch.Nodes, ch.Free, ch.Short, ch.Expected, ch.Protected
		e := &entry{Hold: c, waiting: waiting}
		b.held[c.Root] = e
		for n := range c.Nodes {
			b.byNode[n] = e
		}
		return c, true, displaced, ""
	}
	if len(whys) == 0 {
		whys = append(whys, "no domain to hold")
	}
	return Hold{}, false, nil, strings.Join(whys, "; ")
}

func (b *Book) removeLocked(e *entry) {
	if b.held[e.Root] != e {
		return
	}
	delete(b.held, e.Root)
	for n := range e.Nodes {
		if b.byNode[n] == e {
			delete(b.byNode, n)
		}
	}
}

// Get returns root's hold.
func (b *Book) Get(root groups.Key) (Hold, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.held[root]; e != nil {
		return e.Hold, true
	}
	return Hold{}, false
}

// List returns the holds, highest-ranked first.
func (b *Book) List() []Hold {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Hold, 0, len(b.held))
	for _, e := range b.held {
		out = append(out, e.Hold)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].outranks(out[j].Gang) })
	return out
}

// Len counts the holds.
func (b *Book) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// HeldNodes counts the nodes held now.
func (b *Book) HeldNodes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byNode)
}

// Admit says whether pod may use node: it is held by no hold, or by the
// hold of its own hierarchy (root, when grouped), or the pod may backfill.
// A pod turned away is remembered, to be tried again when the hold ends or
// its expected start moves.
func (b *Book) Admit(pod *corev1.Pod, root groups.Key, grouped bool, node string, now time.Time, backfill bool) (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byNode[node]
	if e == nil || (grouped && e.Root == root) {
		return true, ""
	}
	ok, why := e.admits(pod, now, backfill)
	if !ok {
		e.waiting[pod.Namespace+"/"+pod.Name] = pod
	}
	return ok, why
}

// Closed lists, for a plan of root's hierarchy, the nodes other
// hierarchies hold that rep (a member of it) may not use, with why.
func (b *Book) Closed(root groups.Key, rep *corev1.Pod, now time.Time, backfill bool) map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for _, e := range b.held {
		if e.Root == root {
			continue
		}
		if ok, why := e.admits(rep, now, backfill); !ok {
			for n := range e.Nodes {
				out[n] = why
			}
		}
	}
	return out
}

// Refresh updates root's hold with the numbers of its domain from a new
// failed plan (a gang keeps its domain: other choices are ignored), and
// returns it with the pods to try again when its expected start moved. ok
// is false when root holds none of choices.
func (b *Book) Refresh(root groups.Key, choices []Choice, members sets.Set[string]) (Hold, map[string]*corev1.Pod, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.held[root]
	if e == nil {
		return Hold{}, nil, false
	}
	for _, ch := range choices {
		if ch.Domain == e.Domain {
			e.Free, e.Short, e.Members = ch.Free, ch.Short, members
			// The copy is taken after the update: Go leaves the order of
			// e.Hold and a call in one return list unspecified.
			waiting := e.expectLocked(ch.Expected, ch.Protected)
			return e.Hold, waiting, true
		}
	}
	return Hold{}, nil, false
}

// Expect sets root's expected start, and when the protection it waits for
// ends (ExpectedFit), and returns the pods to try again when the start
// moved.
func (b *Book) Expect(root groups.Key, at, protected time.Time) map[string]*corev1.Pod {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.held[root]; e != nil {
		return e.expectLocked(at, protected)
	}
	return nil
}

func (e *entry) expectLocked(at, protected time.Time) map[string]*corev1.Pod {
	moved := !e.Expected.Equal(at)
	e.Expected, e.Protected = at, protected
	if !moved || len(e.waiting) == 0 {
		return nil
	}
	waiting := e.waiting
	e.waiting = map[string]*corev1.Pod{}
	return waiting
}

// Due says whether gang root may be offered a hold at now: it holds one
// already (whose numbers a new plan refreshes), or it is waiting (waiting,
// since since) and has waited after (negative: never) and any cooldown of
// its name is over. When not, at is when it will be (zero: not by waiting).
func (b *Book) Due(root groups.Key, waiting bool, since time.Time, after time.Duration, now time.Time) (due bool, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[root] != nil {
		return true, now
	}
	if after < 0 || !waiting {
		return false, time.Time{}
	}
	at = since.Add(after)
	if until, ok := b.cooldown[cooldownKeyOf(root)]; ok && until.After(at) {
		at = until
	}
	return !now.Before(at), at
}

// Remind asks the sweep to retry root at at.
func (b *Book) Remind(root groups.Key, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.remind[root] = at
}

// Reminders returns, and forgets, the gangs due for a retry at now.
func (b *Book) Reminders(now time.Time) []groups.Key {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []groups.Key
	for k, at := range b.remind {
		if !now.Before(at) {
			out = append(out, k)
			delete(b.remind, k)
		}
	}
	return out
}

// Fate is what became of a hold's gang, as the sweep finds it.
type Fate int

const (
	// Waiting: the gang is still short of its minimum.
	Waiting Fate = iota
	// Bound: the gang reached its minimum bound.
	Bound
	// Gone: its root group was deleted.
	Gone
)

// Sweep ends the holds whose gang bound (fates[root] Bound), whose group
// is gone (Gone), or that reached maxHold (the name then may not hold
// again for maxHold), and forgets cooldowns that are over. Holds missing
// from fates are taken as Waiting.
func (b *Book) Sweep(now time.Time, maxHold time.Duration, fates map[groups.Key]Fate) []Ended {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Ended
	for _, e := range b.held {
		end := Ended{Hold: e.Hold, Waiting: e.waiting}
		switch {
		case fates[e.Root] == Gone:
			end.Reason = ReasonGroupDeleted
		case fates[e.Root] == Bound:
			end.Reason = ReasonReleasedBound
			end.Message = fmt.Sprintf("the gang bound; %s=%s held for %s", e.Key, e.Domain, now.Sub(e.Since).Round(time.Second))
		case now.Sub(e.Since) >= maxHold:
			until := now.Add(maxHold)
			b.coolUntilLocked(e.Root, until)
			end.Reason = ReasonExpired
			end.Message = fmt.Sprintf("%s=%s was held for the maximum %s; no new hold before %s", e.Key, e.Domain, maxHold, until.UTC().Format(time.RFC3339))
			end.Record = &Record{Key: e.Key, Domain: e.Domain, Since: e.Since, Expired: now}
		default:
			continue
		}
		b.removeLocked(e)
		out = append(out, end)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].outranks(out[j].Gang) })
	for k, until := range b.cooldown {
		if now.After(until) {
			delete(b.cooldown, k)
		}
	}
	return out
}

// Forget ends the hold of a deleted group and drops its retry. Its
// cooldown stays until it ends, for a group created again under the same
// name.
func (b *Book) Forget(root groups.Key) (Ended, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.remind, root)
	e := b.held[root]
	if e == nil {
		return Ended{}, false
	}
	b.removeLocked(e)
	return Ended{Hold: e.Hold, Reason: ReasonGroupDeleted, Waiting: e.waiting}, true
}

// coolUntilLocked keeps k's name from holding again before until (or a
// later end it already has).
func (b *Book) coolUntilLocked(k groups.Key, until time.Time) {
	if cur, ok := b.cooldown[cooldownKeyOf(k)]; !ok || until.After(cur) {
		b.cooldown[cooldownKeyOf(k)] = until
	}
}
