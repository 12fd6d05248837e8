package gangcore

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// PolicyMessage is the message for a member whose preemption policy
// differs: label gangs and scheduler-plugins' PodGroups define no
// priority or policy of their own (root.PriorityFromMembers), so their
// members must agree with each other rather than with the group.
func PolicyMessage(root groups.Info) string {
	if root.PriorityFromMembers {
		return MsgPolicyMismatch
	}
	return MsgPolicyMismatchWithGroup
}

// Mismatch says how member m disagrees with what its group wants (prio,
// policy) and with ref, the member being scheduled; "" when it agrees.
func Mismatch(m, ref *corev1.Pod, prio int32, policy corev1.PreemptionPolicy, policyMsg string) string {
	switch {
	case groups.PodPriority(m) != prio:
		return fmt.Sprintf("%s: pod %s has priority %d, the group %d", MsgPriorityMismatch, m.Name, groups.PodPriority(m), prio)
	case groups.PodPolicy(m) != policy:
		return fmt.Sprintf("%s: pod %s has %s, the group %s", policyMsg, m.Name, groups.PodPolicy(m), policy)
	case m.Spec.SchedulerName != ref.Spec.SchedulerName:
		return fmt.Sprintf("%s: pod %s uses %q, pod %s uses %q", MsgSchedulerNameMismatch, m.Name, m.Spec.SchedulerName, ref.Name, ref.Spec.SchedulerName)
	}
	return ""
}

// Disagreement is PreFilter's check of a whole hierarchy: why members,
// the live pods of every leaf under root, cannot be scheduled together
// when ref is tried first; "" when they agree. The diagnostics ask it
// about groups the cache does not hold (kubectl phalanx fit asks before
// they exist). The groups' own Invalid reasons are the caller's to check.
func Disagreement(ref *corev1.Pod, members []*corev1.Pod, root groups.Info, classes schedulinglisters.PriorityClassLister) string {
	prio, policy, err := groups.EffectivePriority(ref, root, classes)
	if err != nil {
		return err.Error()
	}
	return DisagreementAt(ref, members, root, prio, policy)
}

// DisagreementAt is Disagreement for a hierarchy whose priority and policy
// are already resolved (prio, policy), as a member's View carries them.
func DisagreementAt(ref *corev1.Pod, members []*corev1.Pod, root groups.Info, prio int32, policy corev1.PreemptionPolicy) string {
	policyMsg := PolicyMessage(root)
	if msg := Mismatch(ref, ref, prio, policy, policyMsg); msg != "" {
		return msg
	}
	for _, m := range members {
		if msg := Mismatch(m, ref, prio, policy, policyMsg); msg != "" {
			return msg
		}
	}
	return ""
}
