package queuesort

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// basicGroup is a PodGroup without a gang policy, created at created.
func basicGroup(name string, created time.Time) *v1alpha1.PodGroup {
	pg := podGroup(name, created, "")
	pg.Spec.SchedulingPolicy.Gang = nil
	pg.Spec.SchedulingPolicy.Basic = &v1alpha1.BasicSchedulingPolicy{}
	return pg
}

// onNode is pod bound to node.
func onNode(pod *corev1.Pod, node string) *corev1.Pod {
	b := pod.DeepCopy()
	b.Spec.NodeName = node
	return b
}

// boundByScheduler records pod as the cache sees a member the scheduler
// places: pending, reserved, then bound.
func boundByScheduler(fed *groupcache.Fed, pod *corev1.Pod, node string) {
	fed.AddOrUpdatePod(pod)
	fed.MarkAssumedOn(pod, node)
	fed.AddOrUpdatePod(onNode(pod, node))
}

// TestQueueJumpingIsNotRewarded: at equal priority, neither a gang made
// partly bound by a pod its owner bound itself, nor a pod added to a group
// object created long ago, sorts ahead of other tenants' older pods.
// Gangs the scheduler really bound in part still go first.
func TestQueueJumpingIsNotRewarded(t *testing.T) {
	// Other tenants' pods: a plain pod created at minute 50 and a member of
	// PodGroup "a" (created at 30) created at 30.
	others := func() []*corev1.Pod {
		return []*corev1.Pod{newPod("plain", at(50)), newPod("a-0", at(30), inGroup("a"))}
	}
	tests := []struct {
		name string
		// setup records the tenant's pods in the cache and returns the
		// pending pod whose place in the queue is checked.
		setup func(fed *groupcache.Fed) *corev1.Pod
		// first: the pending pod sorts before the others' pods; otherwise
		// after them.
		first bool
	}{
		{
			name: "a gang made partial by a pod created with spec.nodeName waits for older pods",
			setup: func(fed *groupcache.Fed) *corev1.Pod {
				fed.AddOrUpdatePod(onNode(newPod("new-0", at(60), inGroup("new")), "n1"))
				last := newPod("new-1", at(60), inGroup("new"))
				fed.AddOrUpdatePod(last)
				return last
			},
		},
		{
			name: "a gang made partial by a running pod labelled into it waits for older pods",
			setup: func(fed *groupcache.Fed) *corev1.Pod {
				running := onNode(newPod("new-0", at(60)), "n1")
				fed.AddOrUpdatePod(running)
				joined := running.DeepCopy()
				joined.Labels[v1alpha1.PodGroupLabel] = "new"
				fed.AddOrUpdatePod(joined)
				last := newPod("new-1", at(60), inGroup("new"))
				fed.AddOrUpdatePod(last)
				return last
			},
		},
		{
			name: "a gang the scheduler bound in part goes first",
			setup: func(fed *groupcache.Fed) *corev1.Pod {
				boundByScheduler(fed, newPod("new-0", at(60), inGroup("new")), "n1")
				last := newPod("new-1", at(60), inGroup("new"))
				fed.AddOrUpdatePod(last)
				return last
			},
			first: true,
		},
		{
			name: "a gang another replica bound in part while this one stood by goes first",
			setup: func(fed *groupcache.Fed) *corev1.Pod {
				bound := newPod("new-0", at(60), inGroup("new"))
				fed.AddOrUpdatePod(bound)
				fed.AddOrUpdatePod(onNode(bound, "n1"))
				last := newPod("new-1", at(60), inGroup("new"))
				fed.AddOrUpdatePod(last)
				return last
			},
			first: true,
		},
		{
			name: "a gang found bound in part when the scheduler starts goes first",
			setup: func(fed *groupcache.Fed) *corev1.Pod {
				fed.AddListedPod(onNode(newPod("new-0", at(60), inGroup("new")), "n1"))
				last := newPod("new-1", at(60), inGroup("new"))
				fed.AddListedPod(last)
				return last
			},
			first: true,
		},
		{
			name: "a pod added to a group created long ago waits for older pods",
			setup: func(fed *groupcache.Fed) *corev1.Pod {
				fed.SetPodGroup(basicGroup("lane", at(0)))
				boundByScheduler(fed, newPod("lane-0", at(0), inGroup("lane")), "n1")
				late := newPod("lane-1", at(100), inGroup("lane"))
				fed.AddOrUpdatePod(late)
				return late
			},
		},
		{
			name: "a pod kept pending in a group created long ago does not pull its younger siblings ahead",
			setup: func(fed *groupcache.Fed) *corev1.Pod {
				fed.SetPodGroup(basicGroup("lane", at(0)))
				fed.AddOrUpdatePod(newPod("lane-0", at(0), inGroup("lane")))
				late := newPod("lane-1", at(100), inGroup("lane"))
				fed.AddOrUpdatePod(late)
				return late
			},
		},
		{
			name: "a label gang kept alive by a running member waits for older pods",
			setup: func(fed *groupcache.Fed) *corev1.Pod {
				boundByScheduler(fed, newPod("lg-old", at(0), inLabelGang("lane")), "n1")
				fed.AddOrUpdatePod(onNode(newPod("lg-old-2", at(0), inLabelGang("lane")), "n1"))
				late := newPod("lg-new", at(100), inLabelGang("lane"))
				fed.AddOrUpdatePod(late)
				return late
			},
		},
		{
			name: "a pod added to a child of a composite created long ago waits for older pods",
			setup: func(fed *groupcache.Fed) *corev1.Pod {
				fed.SetComposite(composite("lanes", at(0)))
				fed.SetPodGroup(podGroup("lane-a", at(0), "lanes"))
				fed.SetPodGroup(podGroup("lane-b", at(0), "lanes"))
				late := newPod("lane-b-0", at(100), inGroup("lane-b"))
				fed.AddOrUpdatePod(newPod("lane-a-0", at(0), inGroup("lane-a")))
				fed.AddOrUpdatePod(late)
				return late
			},
		},
		{
			name: "an older pod of a group created long ago keeps its own place",
			setup: func(fed *groupcache.Fed) *corev1.Pod {
				fed.SetPodGroup(basicGroup("lane", at(0)))
				early := newPod("lane-0", at(10), inGroup("lane"))
				fed.AddOrUpdatePod(early)
				return early
			},
			first: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := fixture(t)
			for _, p := range others() {
				q.groups.AddOrUpdatePod(p)
			}
			pending := entity(t, tt.setup(q.groups), t0)
			for _, o := range others() {
				other := entity(t, o, t0)
				if tt.first {
					assert.True(t, q.Less(pending, other), "%s before %s", pending.Pod.Name, o.Name)
					assert.False(t, q.Less(other, pending), "%s after %s", o.Name, pending.Pod.Name)
				} else {
					assert.True(t, q.Less(other, pending), "%s before %s", o.Name, pending.Pod.Name)
					assert.False(t, q.Less(pending, other), "%s after %s", pending.Pod.Name, o.Name)
				}
			}
		})
	}
}

// TestGroupQueueTimeFollowsItsPendingMembers: a group's place in the queue
// is the latest of its root's creation and its pending members' creation,
// across the leaves of a hierarchy, as members come, bind and go and as
// children join and leave.
func TestGroupQueueTimeFollowsItsPendingMembers(t *testing.T) {
	fed := &groupcache.Fed{Cache: groups.NewCache()}
	q := &QueueSort{groups: fed}
	fed.SetComposite(composite("root", at(10)))
	fed.SetPodGroup(podGroup("left", at(10), "root"))
	fed.SetPodGroup(podGroup("right", at(10), "root"))
	left := newPod("left-0", at(20), inGroup("left"))
	right := newPod("right-0", at(40), inGroup("right"))
	fed.AddOrUpdatePod(left)
	fed.AddOrUpdatePod(right)
	less := func(a, b *corev1.Pod) bool { return q.Less(entity(t, a, t0), entity(t, b, t0)) }
	plain := newPod("plain", at(30))

	assert.True(t, less(plain, left), "the hierarchy waits for its youngest pending member, in another leaf")
	fed.MarkAssumedOn(right, "n1")
	assert.True(t, less(left, plain), "once that member is reserved, the hierarchy is as old as its remaining pending member")
	fed.MarkPending(right)
	assert.True(t, less(plain, left), "and young again when the reservation is undone")
	fed.DeletePod(right)
	assert.True(t, less(left, plain), "a deleted member no longer counts")

	fed.AddOrUpdatePod(right)
	assert.True(t, less(plain, left))
	detached := podGroup("right", at(10), "")
	detached.Spec.ParentCompositePodGroupName = nil
	fed.SetPodGroup(detached)
	assert.True(t, less(left, plain), "a child that left the hierarchy no longer delays it")
	assert.True(t, less(plain, right), "and is ordered by its own pending member")
	fed.SetPodGroup(podGroup("right", at(10), "root"))
	assert.True(t, less(plain, left), "a child that joins the hierarchy delays it again")

	untracked := newPod("left-9", at(90), inGroup("left"))
	assert.True(t, less(newPod("plain-late", at(80)), untracked), "a member the cache has not seen yet is never placed before its own creation")
}
