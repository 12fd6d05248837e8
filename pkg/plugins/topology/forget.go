package topology

import "github.com/phalanx-sched/phalanx/pkg/groups"

// forgetGroup drops the plan of a hierarchy whose root is gone (its object
// deleted, or a label gang's last member): a plan holds its members'
// assignments and nominations, and nothing else would ever remove it. The nodes its members
// were refused on, the nodes of its ranks and its probe verdicts go with
// it.
func (t *Topology) forgetGroup(k groups.Key) {
	t.drop(k)
	t.mu.Lock()
	delete(t.rejected, k)
	delete(t.ranks, k)
	t.mu.Unlock()
	t.prober.Forget(k.String() + "#")
	if t.runCtx != nil {
		go t.releaseGone(t.runCtx, k)
	}
}

// trackedPlans counts the stored per-group entries: plans, refusals and
// the nodes of ranks.
func (t *Topology) trackedPlans() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.plans) + len(t.rejected) + len(t.ranks)
}
