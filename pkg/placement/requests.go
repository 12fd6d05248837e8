package placement

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodRequests are a pod's effective requests (init containers, overhead
// and pod-level resources counted as the scheduler counts them) in the
// planner's units. It lives beside Resources because it is the one
// conversion of a pod into those units: the plugins' planner input, the
// gang's size checks and the diagnostics' totals all read pods through it.
func PodRequests(pod *corev1.Pod) Resources {
	out := Resources{}
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if name == corev1.ResourceCPU {
			out[name] = q.MilliValue()
		} else {
			out[name] = q.Value()
		}
	}
	return out
}
