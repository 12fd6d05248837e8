package groupcache

import (
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// EnsurePod adds pod to the cache if the cache has not seen it yet. The
// scheduler's queue and this cache hear of a pod through separate handlers
// of the same informer, in no set order, so a plugin can meet a pod (in
// PreEnqueue or PreFilter) before the cache has added it: its quorum would
// then be counted without it, and a plan made without it. store is that
// informer's pod lister.
//
// The pod is added only while store still holds it, and taken out again if
// store lost it meanwhile: a deletion leaves the store before the cache's
// handler hears of it, so no deleted pod stays in the cache.
func (f *Fed) EnsurePod(pod *corev1.Pod, store corelisters.PodLister) {
	if _, seen := f.GroupOf(pod.UID); seen {
		return
	}
	if _, grouped, err := groups.Attach(pod); !grouped || err != nil {
		return
	}
	live := func() bool {
		p, err := store.Pods(pod.Namespace).Get(pod.Name)
		return err == nil && p.UID == pod.UID
	}
	if !live() {
		return
	}
	f.AddOrUpdatePod(pod)
	if !live() {
		f.DeletePod(pod)
	}
}
