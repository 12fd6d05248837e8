package topology

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// domainStateKey holds, in a member's CycleState, the topology domains
// PreFilter found its groups confined to. Filter reads them from there, not
// from the stored plan: PostFilter drops the plan of a member that failed,
// and pod-level preemption (PhalanxPreemption's pod path, which serves
// basic groups) runs Filter after that, in its dry runs. Without the domains it would
// evict victims on nodes outside the group's domain, where the member can
// never go, and the member's nomination there would hold that room from
// every lower-priority pod for good.
const domainStateKey fwk.StateKey = Name + "/domains"

// domainState maps group key strings to the domain value of their
// topology key. It is never modified after it is written.
type domainState struct {
	domains map[string]string
}

// Clone shares the map: it is read-only.
func (d *domainState) Clone() fwk.StateData { return d }

func writeDomains(state fwk.CycleState, domains map[string]string) {
	if state != nil && len(domains) > 0 {
		state.Write(domainStateKey, &domainState{domains: domains})
	}
}

func readDomains(state fwk.CycleState) map[string]string {
	if state == nil {
		return nil
	}
	d, err := state.Read(domainStateKey)
	if err != nil {
		return nil
	}
	return d.(*domainState).domains
}

// pinnedDomains returns, for every group of the hierarchy tree that has a
// topology key, the domain its assumed or bound members already occupy.
// It walks the hierarchy, so it runs once per infeasible plan, and the
// plan's members read the result (plan.pinned).
func (t *Topology) pinnedDomains(tree *groups.Tree) map[string]string {
	nodes := t.handle.SnapshotSharedLister().NodeInfos()
	out := map[string]string{}
	// walk returns the node of some placed member under tr, "" if none.
	var walk func(tr *groups.Tree) string
	walk = func(tr *groups.Tree) string {
		placed := ""
		for _, m := range tr.Members {
			if placed != "" || (m.State != groups.Assumed && m.State != groups.Bound) {
				continue
			}
			placed = m.Node
			if placed == "" {
				placed = m.Pod.Spec.NodeName
			}
		}
		for _, ch := range tr.Children {
			if n := walk(ch); placed == "" {
				placed = n
			}
		}
		if tr.TopologyKey != "" && placed != "" {
			if ni, err := nodes.Get(placed); err == nil && ni.Node() != nil {
				if v, ok := ni.Node().Labels[tr.TopologyKey]; ok {
					out[tr.Key.String()] = v
				}
			}
		}
		return placed
	}
	walk(tree)
	return out
}

// surplusStateKey marks, in a member's CycleState, that PreFilter found a
// feasible plan of its hierarchy that leaves the member out: the gang
// reaches its minimum without it. The gang plugin reads it in PostFilter,
// where the member's failure would otherwise release the siblings waiting
// in Permit. Which members a plan leaves out follows the planner's order,
// not the queue's, so the left-out member is often tried before its planned
// siblings have all reserved; releasing them each time kept a gang with one
// member more than the cluster holds from ever binding.
const surplusStateKey fwk.StateKey = Name + "/surplus"

type surplusState struct{}

func (surplusState) Clone() fwk.StateData { return surplusState{} }

// MarkSurplus records in state that PreFilter left its member out of a
// feasible plan (see surplusStateKey).
func MarkSurplus(state fwk.CycleState) {
	if state != nil {
		state.Write(surplusStateKey, surplusState{})
	}
}

// Surplus reports whether the member of state was left out of a feasible
// plan, so its failure says nothing about its gang.
func Surplus(state fwk.CycleState) bool {
	if state == nil {
		return false
	}
	_, err := state.Read(surplusStateKey)
	return err == nil
}
