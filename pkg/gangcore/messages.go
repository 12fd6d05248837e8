package gangcore

import (
	"fmt"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Messages for groups whose members disagree, as the user guide quotes them.
const (
	MsgPriorityMismatch        = "all pods in a single pod group should have the same priority as the pod group"
	MsgPolicyMismatchWithGroup = "all pods in a single pod group should have the same preemption policy as the pod group's preemption policy"
	MsgPolicyMismatch          = "all pods in a single pod group should have the same preemption policy"
	MsgSchedulerNameMismatch   = "all pods in a single pod group should have the same schedulerName"
)

// WaitingMessage says how far a hierarchy is from its minimum, e.g.
// "waiting for pods: 3/4 present".
func WaitingMessage(s groups.Shortfall) string {
	if s.Leaf {
		return fmt.Sprintf("waiting for pods: %d/%d present", s.Have, s.Need)
	}
	return fmt.Sprintf("waiting for child groups: %d/%d have their minimum pods", s.Have, s.Need)
}
