package gang

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// validate checks that all live members of the hierarchy agree with the
// group (or, for a label group, with each other). It returns the user-facing
// reason, "" when valid.
func (pl *Gang) validate(pod *corev1.Pod, v *groups.View) string {
	ch := v.Chain
	for _, g := range ch {
		if g.Invalid != "" {
			return g.Invalid
		}
	}
	root := ch.Root()
	if v.PriorityErr != nil {
		return v.PriorityErr.Error()
	}
	wantPriority, wantPolicy, policyMsg := v.Priority, v.Policy, gangcore.PolicyMessage(root)
	check := func(m *corev1.Pod) string { return gangcore.Mismatch(m, pod, wantPriority, wantPolicy, policyMsg) }
	if msg := check(pod); msg != "" {
		return msg
	}
	// The scan over the other members only depends on the hierarchy's
	// revision and the wanted values: a 1,000-member gang scans once, not
	// once per member.
	rev, known := pl.groups.HierarchyRevision(ch.Leaf().Key)
	want := verdict{rev: rev, priority: wantPriority, policy: wantPolicy, schedulerName: pod.Spec.SchedulerName}
	pl.verdictMu.Lock()
	memo, seen := pl.verdicts[root.Key]
	pl.verdictMu.Unlock()
	if known && seen && memo.rev == want.rev && memo.priority == want.priority && memo.policy == want.policy && memo.schedulerName == want.schedulerName {
		return memo.msg
	}
	for _, m := range pl.groups.HierarchyMembersOf(v.Leaf(), groups.Is(groups.Pending, groups.Assumed, groups.Bound)) {
		if want.msg = check(m); want.msg != "" {
			break
		}
	}
	if known {
		// The entry lives as long as the hierarchy's root (forgetVerdict).
		pl.verdictMu.Lock()
		pl.verdicts[root.Key] = want
		pl.verdictMu.Unlock()
	}
	return want.msg
}
