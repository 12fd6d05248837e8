package pluginrt

import (
	fwk "k8s.io/kube-scheduler/framework"
)

// surplusStateKey marks, in a member's CycleState, that PreFilter found a
// feasible plan of its hierarchy that leaves the member out: the gang
// reaches its minimum without it. The gang plugin reads it in PostFilter,
// where the member's failure would otherwise release the siblings waiting
// in Permit. Which members a plan leaves out follows the planner's order,
// not the queue's, so the left-out member is often tried before its planned
// siblings have all reserved; releasing them each time kept a gang with one
// member more than the cluster holds from ever binding.
const surplusStateKey fwk.StateKey = TopologyName + "/surplus"

type surplusState struct{}

func (surplusState) Clone() fwk.StateData { return surplusState{} }

// MarkSurplus records in state that the topology plugin's PreFilter left its member out of a
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
