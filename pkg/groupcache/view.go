package groupcache

import (
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// viewState carries a groups.View in a CycleState. The View is never
// modified after it is built, so a clone shares it: preemption's dry runs
// clone the state and read the View from several goroutines.
type viewState struct{ v *groups.View }

func (s viewState) Clone() fwk.StateData { return s }

// ViewStateKey is where a cycle's View lives in its CycleState.
const ViewStateKey fwk.StateKey = "phalanx.dev/group-view"

// ViewFor returns pod's View for the cycle of state: the one an earlier
// extension point of this cycle stored, else a new one, which it stores. A
// nil state (callers outside a scheduling cycle) always resolves anew.
func (f *Fed) ViewFor(state fwk.CycleState, pod *corev1.Pod) *groups.View {
	if v := ViewIn(state, pod); v != nil {
		return v
	}
	v := f.Resolve(pod)
	if state != nil {
		state.Write(ViewStateKey, viewState{v})
	}
	return v
}

// ViewIn returns the View stored in state for pod, nil when there is none.
func ViewIn(state fwk.CycleState, pod *corev1.Pod) *groups.View {
	if state == nil {
		return nil
	}
	d, err := state.Read(ViewStateKey)
	if err != nil {
		return nil
	}
	s, ok := d.(viewState)
	if !ok || s.v.UID != pod.UID {
		return nil
	}
	return s.v
}

// Resolve builds pod's View from the cache as it is now.
func (f *Fed) Resolve(pod *corev1.Pod) *groups.View {
	return f.ResolveView(pod, f.PriorityClasses)
}
