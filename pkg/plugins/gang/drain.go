package gang

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Graceful stop.
//
// A gang passes Permit all at once and then binds over seconds (bind
// pacing): a scheduler that stops in between leaves it bound below its
// minimum, and the room its unbound members were promised is free for any
// other scheduler until the next leader gets to the gang. Drain closes that
// window for a graceful stop. Every pod Permit lets through is admitted
// here; a stopping scheduler first stops admitting (Permit refuses from
// then on, so a gang it had not let through yet stays whole-or-nothing:
// nothing of it binds) and then waits, for a bounded time, until the
// admitted binds have finished. Binding requests run on contexts that end
// with the scheduler instance, not with its scheduling cycles, so they
// survive the stop of the scheduling loop (bindpace.go).

// msgStopping is the reason Permit gives while the scheduler stops.
const msgStopping = "the scheduler is stopping: nothing more passes Permit; the next scheduler places this group"

// Drain tracks the binds a scheduler has let through Permit and not yet
// finished. One Drain serves one scheduler instance.
type Drain struct {
	mu       sync.Mutex
	stopping bool
	admitted map[types.UID]admittedBind
	// idle is closed once the scheduler is stopping and nothing is
	// admitted.
	idle chan struct{}
	// bound and failed count the binds finished since Stop.
	bound, failed int
	stoppedAt     time.Time
	// claimBinds counts the admitted pods that use ResourceClaims;
	// claimDone is closed, and replaced, whenever one of them finishes
	// (claimbacklog.go).
	claimBinds int
	claimDone  chan struct{}
}

type admittedBind struct {
	pod    string // namespace/name
	group  string // the hierarchy's root, "" for a pod of no group
	claims bool   // the pod uses ResourceClaims
}

// NewDrain returns a Drain for one scheduler instance.
func NewDrain() *Drain {
	return &Drain{admitted: map[types.UID]admittedBind{}, idle: make(chan struct{}), claimDone: make(chan struct{})}
}

// admit records pods as let through Permit together, unless the scheduler
// is stopping: then it records nothing and returns false. Either all of a
// gang's members are admitted, before Stop counts what is in flight, or
// none is; so Wait never returns while a gang it let through still binds.
func (d *Drain) admit(group string, pods []*corev1.Pod) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopping {
		return false
	}
	for _, p := range pods {
		if old, ok := d.admitted[p.UID]; ok && old.claims {
			d.claimBinds--
		}
		b := admittedBind{pod: p.Namespace + "/" + p.Name, group: group, claims: len(p.Spec.ResourceClaims) > 0}
		if b.claims {
			d.claimBinds++
		}
		d.admitted[p.UID] = b
	}
	return true
}

// finish records that the bind of uid ended: bound, or given up (a bind
// error, a failed PreBind), and reports whether Permit had let it through.
// Pods never admitted are ignored: Unreserve also runs for members Permit
// did not let through.
func (d *Drain) finish(uid types.UID, bound bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.admitted[uid]
	if !ok {
		return false
	}
	delete(d.admitted, uid)
	if b.claims {
		d.claimBinds--
		close(d.claimDone)
		d.claimDone = make(chan struct{})
	}
	if !d.stopping {
		return true
	}
	if bound {
		d.bound++
	} else {
		d.failed++
	}
	if len(d.admitted) == 0 {
		close(d.idle)
	}
	return true
}

// Stop makes Permit refuse from now on and returns how many binds, of how
// many groups, are still to finish. Calling it again only reports.
func (d *Drain) Stop() (pods, groups int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.stopping {
		d.stopping = true
		d.stoppedAt = time.Now()
		if len(d.admitted) == 0 {
			close(d.idle)
		}
	}
	seen := map[string]bool{}
	for _, b := range d.admitted {
		if b.group != "" {
			seen[b.group] = true
		}
	}
	return len(d.admitted), len(seen)
}

// DrainReport is what a stop's wait for the admitted binds achieved.
type DrainReport struct {
	// Bound and Failed count the binds that finished during the wait.
	Bound, Failed int
	// Left lists (namespace/name, sorted) the binds still unfinished when
	// the wait ended; empty when everything drained.
	Left []string
	// LeftGroups lists the groups of Left, sorted.
	LeftGroups []string
	// Took is the time from Stop to the end of the wait.
	Took time.Duration
}

// Wait blocks until every admitted bind has finished or ctx ends (the
// drain timeout), and reports. It calls Stop first if nobody did.
func (d *Drain) Wait(ctx context.Context) DrainReport {
	d.Stop()
	select {
	case <-d.idle:
	case <-ctx.Done():
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r := DrainReport{Bound: d.bound, Failed: d.failed, Took: time.Since(d.stoppedAt)}
	groups := map[string]bool{}
	for _, b := range d.admitted {
		r.Left = append(r.Left, b.pod)
		if b.group != "" {
			groups[b.group] = true
		}
	}
	for g := range groups {
		r.LeftGroups = append(r.LeftGroups, g)
	}
	sort.Strings(r.Left)
	sort.Strings(r.LeftGroups)
	return r
}
