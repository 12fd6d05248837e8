// Package reservation is the reservation book of PhalanxTopology, free of
// the scheduler framework: which domain a gang that waited too long may
// hold, which pods may still use a held node (backfill), when a hold ends,
// and which claimed holds a scheduler that takes over restores. The plugin
// (pkg/plugins/topology, reservation.go) only translates: informers and the
// snapshot into the plain inputs here, the book's answers into Filter
// statuses, conditions, the group's status record, activations and metrics.
//
// A gang that has waited past a threshold gets the domain it came closest
// to fitting (the smallest shortfall, within its topology key) held for it:
// room that frees there goes to the gang and not to pods that would delay
// it. Other pods still use held nodes when they cannot delay the gang
// (backfill):
//   - pods whose activeDeadlineSeconds ends before the gang is expected to
//     fit there (expected: the earliest time the pods already running in
//     the domain, ended at their own activeDeadlineSeconds, free the
//     shortfall; unknown when they cannot, and then there is no such
//     backfill);
//   - pods the gang may preempt (lower priority, and the gang's policy
//     preempts): the gang's own preemption evicts them, as a unit, when
//     evicting makes the gang fit;
//   - pods of higher priority than the gang, which could preempt it anyway.
//
// A reservation never evicts anything by itself. The book keeps holds
// disjoint, ranked by priority then age, and within a share of the
// cluster's nodes; one ends when the gang binds, its group is deleted,
// after a maximum hold (then the group may not hold again for as long), or
// when a higher-ranked gang takes its domain.
package reservation

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Args configure reservation and backfill (PhalanxTopology's `reservation`
// argument). Absent, nothing is ever reserved.
//
//	reservation:
//	  afterSeconds: 120      # a gang waiting this long gets a domain held
//	  maxHoldSeconds: 900    # a hold ends after this, and is not renewed for as long
//	  maxSharePercent: 50    # at most this share of the nodes held at once
//	  backfill: true         # let pods that cannot delay the gang use held nodes
type Args struct {
	AfterSeconds    int64 `json:"afterSeconds,omitempty"`
	MaxHoldSeconds  int64 `json:"maxHoldSeconds,omitempty"`
	MaxSharePercent int32 `json:"maxSharePercent,omitempty"`
	Backfill        *bool `json:"backfill,omitempty"`
}

// ReserveAfterAnnotation, on a root PodGroup or CompositePodGroup,
// lengthens afterSeconds for that group (a shorter value has no effect);
// "-1" never reserves for it.
const ReserveAfterAnnotation = "scheduling.phalanx.dev/reserve-after-seconds"

// The Reserved condition and its reasons.
const (
	ConditionReserved    = "Reserved"
	ReasonHolding        = "Holding"
	ReasonNotReserved    = "NotReserved"
	ReasonNeverFits      = "NeverFits"
	ReasonReleasedBound  = "Bound"
	ReasonExpired        = "Expired"
	ReasonTakenOver      = "TakenOver"
	ReasonGroupDeleted   = "GroupDeleted"
	ReasonRestoreOverlap = "Overlap"
)

// Default fills in defaults and validates.
func (a *Args) Default() error {
	if a.AfterSeconds < 0 {
		return fmt.Errorf("reservation.afterSeconds=%d is negative", a.AfterSeconds)
	}
	if a.MaxHoldSeconds == 0 {
		a.MaxHoldSeconds = 900
	}
	if a.MaxHoldSeconds < 1 {
		return fmt.Errorf("reservation.maxHoldSeconds=%d: use a positive number", a.MaxHoldSeconds)
	}
	if a.MaxSharePercent == 0 {
		a.MaxSharePercent = 50
	}
	if a.MaxSharePercent < 1 || a.MaxSharePercent > 100 {
		return fmt.Errorf("reservation.maxSharePercent=%d: use 1 to 100", a.MaxSharePercent)
	}
	if a.Backfill == nil {
		t := true
		a.Backfill = &t
	}
	return nil
}

// MaxHold is how long a hold lasts, and how long its gang then waits
// before it may hold again.
func (a Args) MaxHold() time.Duration { return time.Duration(a.MaxHoldSeconds) * time.Second }

// MaxNodes is how many of nodes may be held at once.
func (a Args) MaxNodes(nodes int) int { return nodes * int(a.MaxSharePercent) / 100 }

// BackfillOn says whether pods that cannot delay a gang may use its nodes.
func (a Args) BackfillOn() bool { return a.Backfill == nil || *a.Backfill }

// AfterFor is how long a gang whose root group carries annotations must
// wait before a hold: afterSeconds, or the group's annotation when that is
// longer; negative: never.
func (a Args) AfterFor(annotations map[string]string) time.Duration {
	after := time.Duration(a.AfterSeconds) * time.Second
	v, ok := annotations[ReserveAfterAnnotation]
	if !ok {
		return after
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return after
	}
	// The annotation is the group owner's, the threshold the
	// administrator's: a group may wait longer (or never hold), not take a
	// domain sooner than every other gang.
	if n < 0 || n > math.MaxInt64/int64(time.Second) {
		return -1
	}
	return max(after, time.Duration(n)*time.Second)
}
