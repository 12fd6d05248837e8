package topology

import (
	corev1 "k8s.io/api/core/v1"
)

// ensureMember makes sure the group cache knows pod before its group is
// planned: a member of a group that already has quorum (any member of a
// basic group, a gang's members beyond minCount) can reach PreFilter before
// the cache has added it, and a plan made then would leave it out, parked
// as unschedulable until some unrelated cluster event.
func (t *Topology) ensureMember(pod *corev1.Pod) {
	pods := t.podLister
	if pods == nil {
		pods = t.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	}
	t.groups.EnsurePod(pod, pods)
}
