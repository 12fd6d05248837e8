package gang

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Reserve records the member as assumed: it now counts toward quorum.
func (pl *Gang) Reserve(_ context.Context, state fwk.CycleState, pod *corev1.Pod, node string) *fwk.Status {
	pl.groups.MarkAssumedOn(pod, node)
	if unit, ok := pl.gangUnit(state, pod); ok {
		// A new attempt of the gang: its next failure must release the
		// members that reserve from now on.
		pl.shared.releases.Started(unit)
	}
	return nil
}

// Unreserve undoes Reserve and releases every waiting member of the
// hierarchy: a gang whose member failed cannot reach quorum this round,
// and its reservations would only block others.
func (pl *Gang) Unreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, node string) {
	pl.groups.MarkPending(pod)
	pl.shared.binds.release(pod.UID)
	if pl.shared.drain.finish(pod.UID, false) {
		// Permit had let it through: its binding failed, and its siblings
		// may be bound without it.
		pl.bindFailed(state, pod, node)
	}
	pl.rejectWaiting(ctx, state, pod, fmt.Sprintf("member %s/%s was released; the gang retries as a unit", pod.Namespace, pod.Name))
}

// rejectWaiting releases the members of pod's gang that wait in Permit.
// Only the first failure of an attempt does the work: each member it
// rejects comes back through Unreserve, and a failing n-member gang would
// otherwise list its members n times to reject nobody new. A member that
// reserves after that starts a new attempt (Reserve), whose first failure
// releases again.
func (pl *Gang) rejectWaiting(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, msg string) {
	root, known := pl.hierarchyOf(pod.UID)
	pl.shared.attempts.failed(root, known, pod.UID, pl.args.permitLimit())
	if known {
		pl.shared.deadlines.done(root)
		pl.shared.room.forgetHierarchy(root)
	}
	unit, ok := pl.gangUnit(state, pod)
	if !ok {
		return // no gang waits for this pod
	}
	if !pl.shared.releases.First(unit) {
		return // this attempt's first failure released the waiting members
	}
	for _, m := range pl.groups.SubtreeMembersIn(unit, groups.Assumed) {
		if m.UID == pod.UID {
			continue
		}
		if wp := pl.handle.GetWaitingPod(m.UID); wp != nil {
			if wp.Reject(Name, msg) {
				klog.FromContext(ctx).V(4).Info("Rejected waiting gang member", "pod", klog.KObj(m), "because", msg)
			}
		}
	}
}

// gangUnit returns the highest gang on pod's chain: the members whose
// quorum pod counts toward, which wait for it and must let go when it
// fails. Siblings under a basic composite are not in it: releasing a child
// gang whenever its basic sibling fits nowhere made the two take turns
// forever, the waiting child re-activating the failing one each round.
// false when no group of the chain is a gang. The chain is read as the
// cache has it now (Unreserve may run long after the cycle's PreFilter),
// from the leaf the cycle's View already parsed.
func (pl *Gang) gangUnit(state fwk.CycleState, pod *corev1.Pod) (groups.Key, bool) {
	v := pl.groups.ViewFor(state, pod)
	if !v.Grouped {
		return groups.Key{}, false
	}
	return pl.groups.UnitOf(v.Leaf())
}

// Permit lets a member through once its whole hierarchy has quorum, and
// then lets every other waiting member through too. The rules are
// gangcore.Permit's, asked once about one snapshot of the group
// (groups.PermitFacts) and the waiting members the framework holds.
func (pl *Gang) Permit(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, node string) (*fwk.Status, time.Duration) {
	if pl.shared.mends.evictingAny() {
		if unit, ok := pl.gangUnit(state, pod); ok {
			if msg := pl.evictingReason(unit); msg != "" {
				return fwk.NewStatus(fwk.Unschedulable, msg), 0
			}
		}
	}
	facts := pl.groups.PermitFacts(pl.groups.ViewFor(state, pod))
	in := gangcore.PermitInput{Facts: facts, Pod: pod, Node: node, Limit: pl.args.permitLimit()}
	var handles map[types.UID]fwk.WaitingPod
	if facts.Quorum && facts.Err == nil {
		in.NodeGone, in.Waiting, handles = pl.waiters(node, facts.Others)
	}
	d := gangcore.Permit(in)
	switch d.Verdict {
	case gangcore.Reject:
		// Unreserve of this member releases the waiting ones.
		if d.Unresolvable {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, d.Message), 0
		}
		return fwk.NewStatus(fwk.Unschedulable, d.Message), 0
	case gangcore.Allow:
		group := ""
		if facts.Tracked {
			group = facts.Root.String()
		}
		pods := make([]*corev1.Pod, 0, len(d.Release)+1)
		for _, w := range d.Release {
			pods = append(pods, w.Pod)
		}
		if !pl.shared.drain.admit(group, append(pods, pod)) {
			// Unreserve of this member releases the waiting ones: a gang
			// the stopping scheduler has not let through binds nothing.
			return fwk.NewStatus(fwk.Unschedulable, msgStopping), 0
		}
		if facts.Tracked {
			pl.shared.attempts.allowed(facts.Root)
			pl.shared.deadlines.done(facts.Root)
		}
		for _, w := range d.Release {
			handles[w.Pod.UID].Allow(Name)
		}
		return nil, 0
	}
	if d.Assembling {
		// First member of this attempt: pull siblings of its gang that sit
		// in backoff or the unschedulable queue forward instead of waiting
		// for a flush, and tell the user the gang is assembling.
		pl.activatePods(facts.Pending)
		pl.eventIfStillWaiting(pod, d.OwnWait)
	}
	if d.Round {
		pl.shared.attempts.waiting(facts.Root, pod.UID)
		pl.shared.deadlines.progressFor(facts.Root, d.OwnWait)
	}
	return fwk.NewStatus(fwk.Wait, d.Message), d.Timeout
}

// waiters are the members of others that wait in Permit, with their
// framework handles, and whether node (the member's own) and theirs were
// deleted: allowing a member reserved on a deleted node would bind it to a
// node that does not exist (the API server accepts such a binding), which
// closes the race with watchNodeDeletions when quorum is reached just as a
// node goes away.
func (pl *Gang) waiters(node string, others []groups.PermitMember) (bool, []gangcore.Waiter, map[types.UID]fwk.WaitingPod) {
	nodes := pl.handle.SharedInformerFactory().Core().V1().Nodes().Lister()
	gone := func(name string) bool {
		_, err := nodes.Get(name)
		return apierrors.IsNotFound(err)
	}
	var out []gangcore.Waiter
	handles := map[types.UID]fwk.WaitingPod{}
	for _, m := range others {
		wp := pl.handle.GetWaitingPod(m.Pod.UID)
		if wp == nil {
			continue
		}
		on := wp.GetPod().Spec.NodeName
		out = append(out, gangcore.Waiter{Pod: m.Pod, Node: on, NodeGone: gone(on), Quorum: m.Quorum})
		handles[m.Pod.UID] = wp
	}
	return gone(node), out, handles
}

// expireGang releases every waiting member of root because the gang stopped
// progressing in Permit, or waited its overall bound.
func (pl *Gang) expireGang(root groups.Key, reason string) {
	pl.shared.attempts.timedOut(root)
	pl.shared.room.forgetHierarchy(root)
	for _, m := range pl.groups.HierarchyMembersIn(root, groups.Assumed) {
		if wp := pl.handle.GetWaitingPod(m.UID); wp != nil {
			wp.Reject(Name, reason)
		}
	}
	klog.Background().V(2).Info("Released a gang waiting in Permit", "group", root, "reason", reason)
}
