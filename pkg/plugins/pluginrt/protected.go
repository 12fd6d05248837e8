package pluginrt

import (
	fwk "k8s.io/kube-scheduler/framework"
)

// protectedStateKey holds, in a member's CycleState, why PhalanxPreemption
// found no victims it may take yet: the pods it would need are within
// their minimum runtime, and until when. PhalanxGang's PostFilter, which
// runs next and has the last word on the member's status and on its
// group's condition, repeats it, so that the pod's event and the group say
// when the gang can preempt rather than only that it fits nowhere.
const protectedStateKey fwk.StateKey = PreemptionName + "/protected"

type protectedState struct{ msg string }

func (s protectedState) Clone() fwk.StateData { return s }

// MarkProtected records msg in state (see protectedStateKey).
func MarkProtected(state fwk.CycleState, msg string) {
	if state != nil {
		state.Write(protectedStateKey, protectedState{msg: msg})
	}
}

// Protected returns the message MarkProtected recorded, false when none.
func Protected(state fwk.CycleState) (string, bool) {
	if state == nil {
		return "", false
	}
	d, err := state.Read(protectedStateKey)
	if err != nil {
		return "", false
	}
	return d.(protectedState).msg, true
}
