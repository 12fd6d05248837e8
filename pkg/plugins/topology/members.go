package topology

import (
	corev1 "k8s.io/api/core/v1"
)

// ensureMember makes sure the group cache knows pod before its group is
// planned. The scheduler's queue and the group cache get pod events through
// separate handlers of the same informer, so a member of a group that
// already has quorum (any member of a basic group, a gang's members beyond
// minCount) can reach PreFilter before the cache has added it. A plan made
// then would leave the member out, and it would wait as unschedulable for
// some unrelated cluster event.
//
// The pod is added only while the informer's store still holds it, and
// taken out again if the store lost it meanwhile: a deletion leaves the
// store before the cache's handler hears of it, so no deleted pod stays in
// the cache.
func (t *Topology) ensureMember(pod *corev1.Pod) {
	if _, seen := t.groups.GroupOf(pod.UID); seen {
		return
	}
	pods := t.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	live := func() bool {
		p, err := pods.Pods(pod.Namespace).Get(pod.Name)
		return err == nil && p.UID == pod.UID
	}
	if !live() {
		return
	}
	t.groups.AddOrUpdatePod(pod)
	if !live() {
		t.groups.DeletePod(pod)
	}
}
