package gang

import (
	"fmt"
	"sync"
	"time"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Permit deadlines that follow a gang's progress.
//
// The framework gives each waiting pod a timer of its own, armed when the
// pod enters Permit and never re-armed. A gang of 20,000 members at a few
// hundred reservations a second needs longer than any sensible per-pod
// timeout just to reserve itself, so the first member's timer would release
// the whole gang every round and it would retry forever. Permit therefore
// hands the framework the overall bound (maxPermitWaitingTimeSeconds), and
// the plugin keeps one timer per hierarchy: the gang is released when no
// member has arrived in Permit for permitWaitingTimeSeconds, or when it has
// waited maxPermitWaitingTimeSeconds in all. A gang that keeps assembling
// keeps its reservations; one that stalls gives them back as quickly as
// before.
//
// A hierarchy whose group sets its own wait (a scheduler-plugins PodGroup's
// scheduleTimeoutSeconds, Spec.WaitTimeout) waits exactly that long in all,
// counted from its first member's arrival, as scheduler-plugins' per-pod
// timer does: the group's owner chose the bound, so the profile's idle
// timeout does not cut it short.

// gangDeadlines holds the deadline of every hierarchy with members waiting
// in Permit.
type gangDeadlines struct {
	idle  time.Duration // allowed time without a member arriving
	limit time.Duration // allowed time in all
	// expire releases the waiting members of root; it runs on the timer's
	// goroutine, without the lock.
	expire func(root groups.Key, reason string)

	mu   sync.Mutex
	open map[groups.Key]*gangDeadline
}

type gangDeadline struct {
	started, last time.Time
	arrivals      int
	timer         *time.Timer
	// idle and limit are this round's bounds; own is set when they come
	// from the group (its scheduleTimeoutSeconds) rather than the profile.
	idle, limit time.Duration
	own         bool
}

func newGangDeadlines(idle, limit time.Duration, expire func(groups.Key, string)) *gangDeadlines {
	return &gangDeadlines{idle: min(idle, limit), limit: limit, expire: expire, open: map[groups.Key]*gangDeadline{}}
}

// progress records that a member of root entered Permit to wait: the first
// one starts the round and its timer, later ones push the idle deadline.
func (d *gangDeadlines) progress(root groups.Key) { d.progressFor(root, 0) }

// progressFor is progress for a hierarchy whose groups ask for a wait of
// their own (0: none, the profile's bounds apply). The bound is read when
// the round starts; a group changed while its members wait keeps the
// round it started with.
func (d *gangDeadlines) progressFor(root groups.Key, own time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if g := d.open[root]; g != nil {
		g.last = now
		g.arrivals++
		return
	}
	g := &gangDeadline{started: now, last: now, arrivals: 1, idle: d.idle, limit: d.limit}
	if own > 0 {
		own = min(own, frameworkMaxPermitSeconds*time.Second)
		g.idle, g.limit, g.own = own, own, true
	}
	// One timer per gang, re-armed lazily when it fires early: a 20,000
	// member gang resets nothing per arrival.
	g.timer = time.AfterFunc(g.idle, func() { d.check(root, g) })
	d.open[root] = g
}

// check runs when g's timer fires: it re-arms for the deadline as pushed by
// later arrivals, or expires the round.
func (d *gangDeadlines) check(root groups.Key, g *gangDeadline) {
	d.mu.Lock()
	if d.open[root] != g {
		d.mu.Unlock()
		return // the round ended (quorum, a failure) or was replaced
	}
	now := time.Now()
	idleEnd, hardEnd := g.last.Add(g.idle), g.started.Add(g.limit)
	next := min(idleEnd.UnixNano(), hardEnd.UnixNano())
	if now.UnixNano() < next {
		g.timer.Reset(time.Duration(next - now.UnixNano()))
		d.mu.Unlock()
		return
	}
	delete(d.open, root)
	var reason string
	switch {
	case g.own:
		reason = fmt.Sprintf("the gang waited %s in Permit (its PodGroup's scheduleTimeoutSeconds) without reaching its minimum; %d members had arrived; the gang retries as a unit", g.limit, g.arrivals)
	case !hardEnd.After(now):
		reason = fmt.Sprintf("the gang waited %s in Permit in all (maxPermitWaitingTimeSeconds) without reaching its minimum; %d members had arrived", g.limit, g.arrivals)
	default:
		reason = fmt.Sprintf("no member of the gang reached Permit for %s (permitWaitingTimeSeconds) after %d had arrived; the gang retries as a unit", g.idle, g.arrivals)
	}
	d.mu.Unlock()
	d.expire(root, reason)
}

// done ends root's round: it reached quorum or a member failed.
func (d *gangDeadlines) done(root groups.Key) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if g := d.open[root]; g != nil {
		g.timer.Stop()
		delete(d.open, root)
	}
}

// stop ends every round without expiring it, when the scheduler stops.
func (d *gangDeadlines) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for root, g := range d.open {
		g.timer.Stop()
		delete(d.open, root)
	}
}

func (d *gangDeadlines) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.open)
}
