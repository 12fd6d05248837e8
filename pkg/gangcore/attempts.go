package gangcore

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Result is how a gang attempt that waited in Permit ended.
type Result string

// Results of an attempt, the values of the metrics' result label.
const (
	Allowed  Result = "allowed"
	Rejected Result = "rejected"
	TimedOut Result = "timeout"
)

// Attempts follows, per hierarchy root, the round its members are waiting
// in Permit, and says how each ended. It only observes (the metrics read
// it): scheduling never does. Safe for concurrent use.
type Attempts struct {
	mu   sync.Mutex
	now  func() time.Time
	open map[groups.Key]*attempt
	// rootOf remembers the hierarchy of every member that waited, so the
	// round can be closed when that member is unreserved after the cache
	// has already forgotten it (a deleted pod).
	rootOf map[types.UID]groups.Key
}

type attempt struct {
	started time.Time
	members []types.UID
}

// NewAttempts returns an empty record that reads the time from now.
func NewAttempts(now func() time.Time) *Attempts {
	return &Attempts{now: now, open: map[groups.Key]*attempt{}, rootOf: map[types.UID]groups.Key{}}
}

// Waiting records that member uid of hierarchy root waits in Permit; the
// first such member opens the round (opened).
func (a *Attempts) Waiting(root groups.Key, uid types.UID) (opened bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := a.open[root]
	if at == nil {
		at = &attempt{started: a.now()}
		a.open[root] = at
		opened = true
	}
	if _, seen := a.rootOf[uid]; !seen {
		at.members = append(at.members, uid)
		a.rootOf[uid] = root
	}
	return opened
}

// Allowed closes root's round because the hierarchy reached quorum, with
// how long it waited; false when no round was open.
func (a *Attempts) Allowed(root groups.Key) (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := a.closeLocked(root)
	if at == nil {
		return 0, false
	}
	return a.now().Sub(at.started), true
}

// Failed closes the round of the hierarchy of member uid (root when known,
// else the hierarchy uid waited for) because a member failed; false when
// no round was open. A round that has lasted the Permit bound limit ended
// by timing out: the first waiting member's timer fires no earlier.
func (a *Attempts) Failed(root groups.Key, known bool, uid types.UID, limit time.Duration) (Result, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !known {
		if root, known = a.rootOf[uid]; !known {
			return "", false
		}
	}
	at := a.closeLocked(root)
	if at == nil {
		return "", false
	}
	if a.now().Sub(at.started) >= limit {
		return TimedOut, true
	}
	return Rejected, true
}

// Expired closes root's round because its deadline passed; false when no
// round was open.
func (a *Attempts) Expired(root groups.Key) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closeLocked(root) != nil
}

// Forget closes root's round uncounted (the group is gone); it reports
// whether one was open.
func (a *Attempts) Forget(root groups.Key) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closeLocked(root) != nil
}

// Reset forgets every open round, when the scheduler stops, and returns
// how many there were.
func (a *Attempts) Reset() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for root := range a.open {
		a.closeLocked(root)
		n++
	}
	return n
}

// Open counts the open rounds and the members remembered in them.
func (a *Attempts) Open() (rounds, members int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.open), len(a.rootOf)
}

func (a *Attempts) closeLocked(root groups.Key) *attempt {
	at := a.open[root]
	if at == nil {
		return nil
	}
	delete(a.open, root)
	for _, uid := range at.members {
		delete(a.rootOf, uid)
	}
	return at
}

// Releases records, per gang unit, whether the current attempt's first
// failure already released the unit's waiting members. Each member it
// rejects comes back through Unreserve, and a failing n-member gang would
// otherwise list its members n times to reject nobody new. Safe for
// concurrent use.
type Releases struct {
	mu       sync.Mutex
	released map[groups.Key]bool
}

// First reports whether a failure in unit is the first of the unit's
// attempt, and records that it releases the members.
func (r *Releases) First(unit groups.Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released[unit] {
		return false
	}
	if r.released == nil {
		r.released = map[groups.Key]bool{}
	}
	r.released[unit] = true
	return true
}

// Started records that a member of unit reserved: the next failure is a
// new attempt's and must release what waits again.
func (r *Releases) Started(unit groups.Key) {
	r.mu.Lock()
	delete(r.released, unit)
	r.mu.Unlock()
}

// Forget drops unit, which is gone.
func (r *Releases) Forget(unit groups.Key) {
	r.mu.Lock()
	delete(r.released, unit)
	r.mu.Unlock()
}

// Len counts the units remembered.
func (r *Releases) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.released)
}
