package topology

import "github.com/phalanx-sched/phalanx/pkg/groups"

// forgetGroup drops the plan of a hierarchy whose root is gone (its object
// deleted, or a label gang's last member): a plan holds the members' pod
// objects, and nothing else would ever remove it.
func (t *Topology) forgetGroup(k groups.Key) {
	t.drop(k)
}

// trackedPlans counts the stored plans.
func (t *Topology) trackedPlans() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.plans)
}
