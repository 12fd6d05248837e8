package queuesort

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// member builds a tracked-style pod with the scheduler's pod wrappers.
func member(name, group string, created int) *corev1.Pod {
	w := st.MakePod().Namespace("ns").Name(name).UID("uid-" + name).CreationTimestamp(metav1.NewTime(at(created)))
	if group != "" {
		w = w.Label(v1alpha1.PodGroupLabel, group)
	}
	return w.Obj()
}

// TestSortKeyFollowsChanges: the queue's remembered keys of members the
// cache tracks answer the same as a fresh resolution after each kind of
// change that moves a pod in the order. a and b are compared once (which
// remembers their keys), the change is applied, and the order must follow.
func TestSortKeyFollowsChanges(t *testing.T) {
	tests := []struct {
		name string
		// before: a sorts before b; change; after: wantAFirst.
		change     func(t *testing.T, fed *groupcache.Fed, a, b *corev1.Pod) (*corev1.Pod, *corev1.Pod)
		wantAFirst bool
	}{
		{
			name: "the group object is recreated younger",
			change: func(t *testing.T, fed *groupcache.Fed, a, b *corev1.Pod) (*corev1.Pod, *corev1.Pod) {
				fed.SetPodGroup(podGroup("x", at(50), ""))
				return a, b
			},
		},
		{
			name: "the group joins an older composite",
			change: func(t *testing.T, fed *groupcache.Fed, a, b *corev1.Pod) (*corev1.Pod, *corev1.Pod) {
				fed.SetComposite(composite("older", at(1)))
				fed.SetPodGroup(podGroup("y", at(20), "older"))
				return a, b
			},
			wantAFirst: false,
		},
		{
			name: "the pod moves to another group (a new pod object)",
			change: func(t *testing.T, fed *groupcache.Fed, a, b *corev1.Pod) (*corev1.Pod, *corev1.Pod) {
				moved := a.DeepCopy()
				moved.Labels[v1alpha1.PodGroupLabel] = "late"
				fed.AddOrUpdatePod(moved)
				return moved, b
			},
		},
		{
			name: "a member of b's gang binds, so b's gang is partly bound",
			change: func(t *testing.T, fed *groupcache.Fed, a, b *corev1.Pod) (*corev1.Pod, *corev1.Pod) {
				pending := member("y-bound", "y", 0)
				fed.AddOrUpdatePod(pending)
				bound := pending.DeepCopy()
				bound.Spec.NodeName = "n"
				fed.AddOrUpdatePod(bound)
				return a, b
			},
		},
		{
			name: "a younger member joins a's group, which then queues at its creation",
			change: func(t *testing.T, fed *groupcache.Fed, a, b *corev1.Pod) (*corev1.Pod, *corev1.Pod) {
				fed.AddOrUpdatePod(member("x-late", "x", 30))
				return a, b
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fed := &groupcache.Fed{Cache: groups.NewCache()}
			fed.SetPodGroup(podGroup("x", at(10), ""))
			fed.SetPodGroup(podGroup("y", at(20), ""))
			fed.SetPodGroup(podGroup("late", at(90), ""))
			a, b := member("a", "x", 0), member("b", "y", 0)
			fed.AddOrUpdatePod(a)
			fed.AddOrUpdatePod(b)
			q := &QueueSort{groups: fed}
			require.True(t, q.Less(entity(t, a, t0), entity(t, b, t0)), "before the change")
			a, b = tt.change(t, fed, a, b)
			assert.Equal(t, tt.wantAFirst, q.Less(entity(t, a, t0), entity(t, b, t0)), "after the change")
			assert.Equal(t, !tt.wantAFirst, q.Less(entity(t, b, t0), entity(t, a, t0)), "after the change, reversed")
		})
	}
}

// TestLessDoesNotAllocate: comparing two members whose keys the cache
// remembers resolves no hierarchy and formats no string.
func TestLessDoesNotAllocate(t *testing.T) {
	fed := &groupcache.Fed{Cache: groups.NewCache()}
	fed.SetPodGroup(podGroup("x", at(10), ""))
	a, b := member("a", "x", 0), member("b", "x", 0)
	fed.AddOrUpdatePod(a)
	fed.AddOrUpdatePod(b)
	q := &QueueSort{groups: fed}
	ea, eb := entity(t, a, t0), entity(t, b, t0)
	require.True(t, q.Less(ea, eb))
	assert.Zero(t, testing.AllocsPerRun(100, func() { q.Less(ea, eb) }))
}

func TestCompareJoined(t *testing.T) {
	for _, tt := range [][4]string{{"a", "x", "a", "y"}, {"a-b", "x", "a", "y"}, {"a", "b", "a", "b"}, {"ab", "", "a", "b"}, {"a", "", "a", "b"}} {
		want := 0
		switch x, y := tt[0]+"/"+tt[1], tt[2]+"/"+tt[3]; {
		case x < y:
			want = -1
		case x > y:
			want = 1
		}
		assert.Equal(t, want, compareJoined(tt[0], tt[1], tt[2], tt[3]), "%v", tt)
		assert.Equal(t, -want, compareJoined(tt[2], tt[3], tt[0], tt[1]), "%v reversed", tt)
	}
}

// BenchmarkLess compares members of two 1,000-pod gangs.
func BenchmarkLess(b *testing.B) {
	fed := &groupcache.Fed{Cache: groups.NewCache()}
	fed.SetPodGroup(podGroup("x", at(10), ""))
	fed.SetPodGroup(podGroup("y", at(10), ""))
	var pods []*corev1.Pod
	for i := range 1000 {
		for _, g := range []string{"x", "y"} {
			p := member(fmt.Sprintf("%s-%d", g, i), g, 0)
			p.UID = types.UID(p.Name)
			fed.AddOrUpdatePod(p)
			pods = append(pods, p)
		}
	}
	q := &QueueSort{groups: fed}
	entities := make([]*framework.QueuedPodInfo, len(pods))
	for i, p := range pods {
		pi, err := framework.NewPodInfo(p)
		require.NoError(b, err)
		entities[i] = &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: t0}}
	}
	i := 0
	for b.Loop() {
		q.Less(entities[i%len(pods)], entities[(i*7+1)%len(pods)])
		i++
	}
}
