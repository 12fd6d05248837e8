package pluginrt

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Protections is what PhalanxTopology's reservations read of
// PhalanxPreemption: how long running pods are protected by their minimum
// runtime. A hold counts the pods its gang may preempt as free room; those
// still protected free it only when their protection ends, and the hold's
// expected start and its Reserved condition must say so.
type Protections interface {
	// ProtectedUntil is, for each of pods (placed pods), when the
	// protection of what it would be preempted with (the pod, or its
	// disruptionMode-all unit) ends; zero when it has none.
	ProtectedUntil(pods []*corev1.Pod) []time.Time
}

// Protections returns what the profile behind h protects from preemption,
// nil when the profile runs no PhalanxPreemption.
func (r *Runtime) Protections(h fwk.Handle) Protections {
	if p, ok := r.Plugin(h, PreemptionName); ok {
		if pr, ok := p.(Protections); ok {
			return pr
		}
	}
	return nil
}
