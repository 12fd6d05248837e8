package gang

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// invalidByView returns why the pod's group is invalid from what its View
// alone says: a group of the chain is invalid, the hierarchy's priority
// cannot be resolved, or the pod itself disagrees with the group. "" when
// nothing there is wrong. Checked before the cache is read, so a large gang
// whose members all disagree is not listed once per member.
func invalidByView(pod *corev1.Pod, v *groups.View) string {
	for _, g := range v.Chain {
		if g.Invalid != "" {
			return g.Invalid
		}
	}
	if v.PriorityErr != nil {
		return v.PriorityErr.Error()
	}
	return gangcore.DisagreementAt(pod, nil, v.Chain.Root(), v.Priority, v.Policy)
}

// validationMemo is the remembered scan of the pod's hierarchy, as a memo
// the cache's read can skip the listing under, and its verdict.
func (pl *Gang) validationMemo(pod *corev1.Pod, v *groups.View) (groups.Memo, string) {
	pl.verdictMu.Lock()
	memo, seen := pl.verdicts[v.Root()]
	pl.verdictMu.Unlock()
	if !seen || memo.priority != v.Priority || memo.policy != v.Policy || memo.schedulerName != pod.Spec.SchedulerName {
		return groups.Memo{}, ""
	}
	return groups.Memo{Rev: memo.rev, OK: true}, memo.msg
}

// membersInvalid checks that all live members of the hierarchy agree with
// the group (or, for a label group, with each other). It returns the
// user-facing reason, "" when valid. The scan over the members only
// depends on the hierarchy's revision and the wanted values: a 1,000-member
// gang scans once, not once per member.
func (pl *Gang) membersInvalid(pod *corev1.Pod, v *groups.View, r *preFilterRead) string {
	if r.checked != nil || r.validated.Covers(r.Rev, r.RevKnown) {
		return r.validatedMsg
	}
	msg := gangcore.DisagreementAt(pod, r.Members, v.Chain.Root(), v.Priority, v.Policy)
	pl.rememberValidation(pod, v, r, msg)
	return msg
}

// rememberValidation keeps msg as the verdict of the scan of r's members.
func (pl *Gang) rememberValidation(pod *corev1.Pod, v *groups.View, r *preFilterRead, msg string) {
	if !r.RevKnown {
		return
	}
	// The entry lives as long as the hierarchy's root (forgetVerdict).
	pl.verdictMu.Lock()
	pl.verdicts[v.Root()] = verdict{rev: r.Rev, priority: v.Priority, policy: v.Policy, schedulerName: pod.Spec.SchedulerName, msg: msg}
	pl.verdictMu.Unlock()
}

// validate is the whole agreement check, both halves: PostFilter asks it
// again whether PreFilter refused the group.
func (pl *Gang) validate(pod *corev1.Pod, v *groups.View, r *preFilterRead) string {
	if msg := invalidByView(pod, v); msg != "" {
		return msg
	}
	return pl.membersInvalid(pod, v, r)
}
