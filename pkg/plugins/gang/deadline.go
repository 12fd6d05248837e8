package gang

import (
	"sync"
	"time"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Permit deadlines that follow a gang's progress: the plugin keeps one
// timer per hierarchy waiting in Permit, and the round's rules
// (gangcore.Round) say when the gang is released. Permit hands the
// framework the overall bound, which only backs the round up.

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
	*gangcore.Round
	timer *time.Timer
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
		g.Arrive(now)
		return
	}
	g := &gangDeadline{Round: gangcore.NewRound(now, d.idle, d.limit, own)}
	// One timer per gang, re-armed lazily when it fires early: a 20,000
	// member gang resets nothing per arrival.
	g.timer = time.AfterFunc(g.Idle, func() { d.check(root, g) })
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
	again, reason := g.Check(time.Now())
	if reason == "" {
		g.timer.Reset(again)
		d.mu.Unlock()
		return
	}
	delete(d.open, root)
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
