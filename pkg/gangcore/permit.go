package gangcore

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// FrameworkMaxPermitSeconds is the longest wait the scheduling framework
// lets a Permit plugin ask for; it cuts longer ones to this.
const FrameworkMaxPermitSeconds = 900

// PermitInput is everything Permit decides from, gathered once per call.
type PermitInput struct {
	// Facts is the group cache's snapshot for the member (groups.PermitFacts).
	Facts groups.PermitFacts
	Pod   *corev1.Pod
	// NodeGone: the node the member reserved no longer exists.
	Node     string
	NodeGone bool
	// Waiting are Facts.Others that wait in Permit now, with their nodes.
	// Only read when Facts.Quorum holds.
	Waiting []Waiter
	// Limit is the profile's overall Permit bound
	// (maxPermitWaitingTimeSeconds).
	Limit time.Duration
}

// Waiter is another member waiting in Permit.
type Waiter struct {
	Pod  *corev1.Pod
	Node string
	// NodeGone: its node no longer exists.
	NodeGone bool
	// Quorum: every gang on its own chain has its minimum placed.
	Quorum bool
}

// Verdict is what Permit answers the framework.
type Verdict int

const (
	// Allow lets the member and the waiters in Decision.Release through.
	Allow Verdict = iota
	// Wait keeps the member reserved for Decision.Timeout.
	Wait
	// Reject fails the member's attempt; its Unreserve releases the rest.
	Reject
)

// Decision is Permit's answer.
type Decision struct {
	Verdict Verdict
	// Unresolvable marks a Reject no retry of the same group fixes (its
	// chain cannot be counted); otherwise a Reject is worth retrying.
	Unresolvable bool
	Message      string
	// Release are the Waiting members Allow lets through with the member.
	Release []Waiter
	// Timeout is the framework's per-pod bound for a Wait. It only backs
	// up the gang's own deadline (Round), which moves with the gang's
	// progress or, for a group with a wait of its own, is that wait.
	Timeout time.Duration
	// Round: a Wait records the member's arrival in its hierarchy's
	// round (Facts.Root), whose bound is OwnWait when that is set.
	Round   bool
	OwnWait time.Duration
	// Assembling: the member is the first of its attempt to wait, so the
	// gang's pending members (Facts.Pending) are pulled forward and the
	// user is told the gang assembles if it still waits a moment later.
	Assembling bool
}

// Permit decides for a member reserved on in.Node. The whole hierarchy
// reaching quorum (every gang on the chain with its minimum assumed or
// bound) lets the member through with every waiting member whose own
// chain has quorum; a member or waiter reserved on a node deleted since
// fails the attempt instead, since allowing it would bind it to a node
// that does not exist. Without quorum the member waits.
func Permit(in PermitInput) Decision {
	f := in.Facts
	if f.Err != nil {
		return Decision{Verdict: Reject, Unresolvable: true, Message: f.Err.Error()}
	}
	if f.Quorum {
		if msg := deletedNode(in); msg != "" {
			return Decision{Verdict: Reject, Message: msg}
		}
		d := Decision{Verdict: Allow}
		for _, w := range in.Waiting {
			if w.Quorum {
				d.Release = append(d.Release, w)
			}
		}
		return d
	}
	own := time.Duration(0)
	if f.Tracked {
		own = f.WaitTimeout
	}
	return Decision{
		Verdict:    Wait,
		Message:    WaitingMessage(f.Short),
		Timeout:    min(max(in.Limit, own), FrameworkMaxPermitSeconds*time.Second),
		Round:      f.Tracked,
		OwnWait:    own,
		Assembling: f.Tracked && f.Assumed <= 1,
	}
}

// deletedNode says why the hierarchy must not be let through because a
// member holds a reservation on a node that no longer exists: the member
// itself, else the first waiter by namespace and name, so the message does
// not change from one try to the next. "" when every node exists.
func deletedNode(in PermitInput) string {
	if in.NodeGone {
		return fmt.Sprintf("node %s of member %s/%s was deleted; the gang retries as a unit", in.Node, in.Pod.Namespace, in.Pod.Name)
	}
	var first *Waiter
	for i := range in.Waiting {
		w := &in.Waiting[i]
		if !w.NodeGone {
			continue
		}
		if first == nil || w.Pod.Namespace < first.Pod.Namespace || w.Pod.Namespace == first.Pod.Namespace && w.Pod.Name < first.Pod.Name {
			first = w
		}
	}
	if first != nil {
		return fmt.Sprintf("node %s of member %s/%s was deleted; the gang retries as a unit", first.Node, first.Pod.Namespace, first.Pod.Name)
	}
	return ""
}

// WaitingEventDelay is how long a member waits (in Permit, or held before
// the queue) before the user is told. Most gangs complete within
// milliseconds, and an event each would be one more API write per gang on
// the scheduler's hot path.
const WaitingEventDelay = time.Second

// WaitingEvent returns how long after an assembling member starts to wait
// the user is told it still waits, and the bounds that event states. idle
// and limit are the profile's Permit timeouts; own the wait the member's
// groups ask for (0: none). A short timeout gets a proportionally short
// delay, so the event still comes well before the members are released.
func WaitingEvent(idle, limit, own time.Duration) (time.Duration, string) {
	bounds := fmt.Sprintf("released after %s without one, or %s in all", idle, limit)
	timeout := idle
	if own > 0 {
		timeout = min(own, FrameworkMaxPermitSeconds*time.Second)
		bounds = fmt.Sprintf("released after %s in all, its PodGroup's scheduleTimeoutSeconds", timeout)
	}
	return min(WaitingEventDelay, timeout/10), bounds
}
