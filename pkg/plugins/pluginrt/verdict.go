package pluginrt

import (
	fwk "k8s.io/kube-scheduler/framework"
)

// GroupVerdict is why a plugin refused a pod for its group as a whole in
// PreFilter. Preemption reads it from the cycle's state: evicting pods
// cannot help a group that is invalid, incomplete or too large, and the
// refusing plugin, not a status string, is what says so.
type GroupVerdict int

const (
	// GroupInvalid: the group cannot be resolved, or its members disagree
	// on priority, preemption policy or scheduler.
	GroupInvalid GroupVerdict = iota + 1
	// GroupIncomplete: too few members exist for quorum.
	GroupIncomplete
	// GroupInfeasible: the group cannot fit however many pods are evicted
	// (larger than the cluster, or waiting for its minResources).
	GroupInfeasible
)

func (v GroupVerdict) String() string {
	switch v {
	case GroupInvalid:
		return "invalid"
	case GroupIncomplete:
		return "incomplete"
	case GroupInfeasible:
		return "infeasible"
	}
	return "none"
}

const verdictKey fwk.StateKey = "phalanx.dev/group-verdict"

type verdictState struct{ v GroupVerdict }

// Clone shares the value: it is never modified once written.
func (s *verdictState) Clone() fwk.StateData { return s }

// RefuseGroup records in state that the pod's group was refused for v.
func RefuseGroup(state fwk.CycleState, v GroupVerdict) {
	state.Write(verdictKey, &verdictState{v: v})
}

// GroupRefused returns the verdict a plugin recorded for the pod's group
// this cycle; false when none refused it.
func GroupRefused(state fwk.CycleState) (GroupVerdict, bool) {
	d, err := state.Read(verdictKey)
	if err != nil {
		return 0, false
	}
	s, ok := d.(*verdictState)
	if !ok {
		return 0, false
	}
	return s.v, true
}
