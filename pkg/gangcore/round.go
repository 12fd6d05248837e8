package gangcore

import (
	"fmt"
	"time"
)

// Round is one hierarchy's stay in Permit, from its first member's
// arrival until quorum, a failure or expiry.
//
// The framework gives each waiting pod a timer of its own, armed when the
// pod enters Permit and never re-armed. A gang of 20,000 members at a few
// hundred reservations a second needs longer than any sensible per-pod
// timeout just to reserve itself, so the first member's timer would
// release the whole gang every round and it would retry forever. A round
// therefore expires when no member has arrived for its idle bound
// (permitWaitingTimeSeconds), or when it has lasted its overall limit
// (maxPermitWaitingTimeSeconds): a gang that keeps assembling keeps its
// reservations, one that stalls gives them back as quickly as before.
//
// A hierarchy whose group sets its own wait (a scheduler-plugins
// PodGroup's scheduleTimeoutSeconds) waits exactly that long in all,
// counted from its first member's arrival: the group's owner chose the
// bound, so the profile's idle timeout does not cut it short.
type Round struct {
	Started, Last time.Time
	Arrivals      int
	// Idle and Limit are this round's bounds; Own is set when they come
	// from the group rather than the profile.
	Idle, Limit time.Duration
	Own         bool
}

// NewRound starts a round at now with the profile's bounds idle and limit,
// or the group's own wait when own > 0. The bounds are read once: a group
// changed while its members wait keeps the round it started with.
func NewRound(now time.Time, idle, limit, own time.Duration) *Round {
	r := &Round{Started: now, Last: now, Arrivals: 1, Idle: min(idle, limit), Limit: limit}
	if own > 0 {
		own = min(own, FrameworkMaxPermitSeconds*time.Second)
		r.Idle, r.Limit, r.Own = own, own, true
	}
	return r
}

// Arrive records another member entering Permit at now.
func (r *Round) Arrive(now time.Time) {
	r.Last = now
	r.Arrivals++
}

// Check is the round's state at now: still open, with how long until it
// must be checked again; or expired, with the reason its members are
// released.
func (r *Round) Check(now time.Time) (again time.Duration, expired string) {
	idleEnd, hardEnd := r.Last.Add(r.Idle), r.Started.Add(r.Limit)
	next := idleEnd
	if hardEnd.Before(next) {
		next = hardEnd
	}
	if now.Before(next) {
		return next.Sub(now), ""
	}
	switch {
	case r.Own:
		return 0, fmt.Sprintf("the gang waited %s in Permit (its PodGroup's scheduleTimeoutSeconds) without reaching its minimum; %d members had arrived; the gang retries as a unit", r.Limit, r.Arrivals)
	case !hardEnd.After(now):
		return 0, fmt.Sprintf("the gang waited %s in Permit in all (maxPermitWaitingTimeSeconds) without reaching its minimum; %d members had arrived", r.Limit, r.Arrivals)
	default:
		return 0, fmt.Sprintf("no member of the gang reached Permit for %s (permitWaitingTimeSeconds) after %d had arrived; the gang retries as a unit", r.Idle, r.Arrivals)
	}
}
