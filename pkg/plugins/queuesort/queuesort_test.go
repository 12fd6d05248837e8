package queuesort

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

type podOpt func(*corev1.Pod)

func newPod(name string, created time.Time, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{},
	}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func inGroup(name string) podOpt {
	return func(p *corev1.Pod) { p.Labels[v1alpha1.PodGroupLabel] = name }
}

func inLabelGang(name string) podOpt {
	return func(p *corev1.Pod) {
		p.Labels[v1alpha1.LightweightNameLabel] = name
		p.Labels[v1alpha1.LightweightMinAvailableLabel] = "2"
	}
}

func priority(v int32) podOpt { return func(p *corev1.Pod) { p.Spec.Priority = ptr.To(v) } }

func podGroup(name string, created time.Time, parent string) *v1alpha1.PodGroup {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created)}}
	pg.Spec.SchedulingPolicy.Gang = &v1alpha1.GangSchedulingPolicy{MinCount: 2}
	if parent != "" {
		pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	return pg
}

func composite(name string, created time.Time) *v1alpha1.CompositePodGroup {
	cpg := &v1alpha1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created)}}
	cpg.Spec.SchedulingPolicy.Gang = &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: 2}
	return cpg
}

// entity is the queue's view of pod, added to the queue at queued.
func entity(t *testing.T, pod *corev1.Pod, queued time.Time) *framework.QueuedPodInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(pod)
	require.NoError(t, err)
	return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: queued}}
}

// fixture is a group cache with:
//   - PodGroup "old" created at minute 0 and PodGroup "new" created at 60,
//   - PodGroups "a" and "b", both created at minute 30,
//   - composite "root" created at 10 over PodGroups "leaf" created at 50
//     and "leaf2" created at 5,
//   - a label gang "lg" whose members were created at 20 and 40,
//   - a pod attached to PodGroup "ghost", which does not exist.
func fixture(t *testing.T) *QueueSort {
	t.Helper()
	fed := &groupcache.Fed{Cache: groups.NewCache()}
	fed.SetPodGroup(podGroup("old", at(0), ""))
	fed.SetPodGroup(podGroup("new", at(60), ""))
	fed.SetPodGroup(podGroup("a", at(30), ""))
	fed.SetPodGroup(podGroup("b", at(30), ""))
	fed.SetComposite(composite("root", at(10)))
	fed.SetPodGroup(podGroup("leaf", at(50), "root"))
	fed.SetPodGroup(podGroup("leaf2", at(5), "root"))
	fed.AddOrUpdatePod(newPod("lg-1", at(40), inLabelGang("lg")))
	fed.AddOrUpdatePod(newPod("lg-0", at(20), inLabelGang("lg")))
	return &QueueSort{groups: fed}
}

func TestLess(t *testing.T) {
	tests := []struct {
		name string
		a, b *corev1.Pod
		// queued times; zero means t0 for both
		aQueued, bQueued time.Time
	}{
		{
			name: "a higher-priority pod sorts before an older lower-priority one",
			a:    newPod("young", at(90), priority(100)),
			b:    newPod("old", at(0), priority(10)),
		},
		{
			name: "a higher-priority gang member sorts before an older plain pod",
			a:    newPod("m", at(99), inGroup("new"), priority(5)),
			b:    newPod("plain", at(1)),
		},
		{
			name: "a negative priority sorts after priority zero",
			a:    newPod("zero", at(90)),
			b:    newPod("neg", at(0), priority(-1)),
		},
		{
			name: "with equal priority an earlier-created plain pod comes first",
			a:    newPod("p1", at(5)),
			b:    newPod("p2", at(6)),
		},
		{
			name: "a gang member created after its group sorts at its own creation, not the group's",
			a:    newPod("plain", at(5)),
			b:    newPod("member", at(100), inGroup("old")),
		},
		{
			name: "a plain pod created before a group comes before the group's older members",
			a:    newPod("plain", at(55)),
			b:    newPod("member", at(1), inGroup("new")),
		},
		{
			name: "members of an older group come before members of a newer group",
			a:    newPod("z-old-member", at(0), inGroup("old")),
			b:    newPod("a-new-member", at(60), inGroup("new")),
		},
		{
			name: "a label gang sorts at its youngest pending member",
			a:    newPod("lg-0", at(20), inLabelGang("lg")),
			b:    newPod("plain", at(45)),
		},
		{
			name: "a label gang's older member waits for its youngest pending one",
			a:    newPod("plain", at(30)),
			b:    newPod("lg-0", at(20), inLabelGang("lg")),
		},
		{
			name: "members of a hierarchy take the root's creation time, not their leaf's",
			a:    newPod("leaf-member", at(12), inGroup("leaf")),
			b:    newPod("plain", at(15)),
		},
		{
			name: "a pod whose group does not exist sorts by its own creation time",
			a:    newPod("plain", at(3)),
			b:    newPod("orphan", at(4), inGroup("ghost")),
		},
		{
			name: "a pod whose group does not exist is not placed before its own creation",
			a:    newPod("orphan", at(3), inGroup("ghost")),
			b:    newPod("plain", at(4)),
		},
		{
			name: "with equal priority and creation a grouped pod comes before a plain pod",
			a:    newPod("zz-member", at(30), inGroup("a")),
			b:    newPod("aa-plain", at(30)),
		},
		{
			name: "groups created at the same time are ordered by identity",
			a:    newPod("z-member", at(0), inGroup("a")),
			b:    newPod("a-member", at(0), inGroup("b")),
		},
		{
			name: "members of one group are ordered by pod name",
			a:    newPod("m-1", at(9), inGroup("old")),
			b:    newPod("m-2", at(1), inGroup("old")),
		},
		{
			name: "members of different leaves of one hierarchy are ordered by pod name",
			a:    newPod("m-1", at(9), inGroup("leaf2")),
			b:    newPod("m-2", at(1), inGroup("leaf")),
		},
		{
			name: "identical pods are ordered by their queue timestamp",
			a:    newPod("same", at(0)), aQueued: at(1),
			b: newPod("same", at(0)), bQueued: at(2),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := fixture(t)
			// The queue holds pending pods, which the cache tracks.
			q.groups.AddOrUpdatePod(tt.a)
			q.groups.AddOrUpdatePod(tt.b)
			aq, bq := tt.aQueued, tt.bQueued
			if aq.IsZero() {
				aq, bq = t0, t0
			}
			a, b := entity(t, tt.a, aq), entity(t, tt.b, bq)
			assert.True(t, q.Less(a, b), "Less(a, b)")
			assert.False(t, q.Less(b, a), "Less(b, a)")
			assert.False(t, q.Less(a, a), "Less(a, a)")
		})
	}
}

func TestLessTimestampDoesNotOverrideCreation(t *testing.T) {
	q := fixture(t)
	older := entity(t, newPod("older", at(1)), at(100))
	newer := entity(t, newPod("newer", at(2)), at(0))
	assert.True(t, q.Less(older, newer), "a pod's creation time orders it, not its time in the queue")
}

// mix is 3 gangs with members created at interleaved times, a hierarchy
// whose two leaves' members interleave by name, and plain pods, all at
// priority 0.
func mix() (pods []*corev1.Pod, block map[string][]string) {
	block = map[string][]string{}
	add := func(b string, p *corev1.Pod) {
		pods = append(pods, p)
		if b != "" {
			block[b] = append(block[b], p.Name)
		}
	}
	for i := range 4 {
		add("a", newPod(fmt.Sprintf("a-%d", i), at(61-10*i), inGroup("a")))                               // group at 30
		add("b", newPod(fmt.Sprintf("b-%d", i), at(5+20*i), inGroup("b")))                                // group at 30
		add("lg", newPod(fmt.Sprintf("lg-%d", i+2), at(25+20*i), inLabelGang("lg")))                      // gang at 20
		add("root", newPod(fmt.Sprintf("leaf-%d", i), at(12+i), inGroup([]string{"leaf", "leaf2"}[i%2]))) // root at 10
	}
	for _, m := range []int{0, 10, 15, 20, 30, 31, 45} {
		add("", newPod(fmt.Sprintf("plain-%02d", m), at(m)))
	}
	return pods, block
}

func TestLessKeepsGangsTogether(t *testing.T) {
	q := fixture(t)
	pods, block := mix()
	// The label gang's creation comes from the fixture's lg-0 (minute 20).
	block["lg"] = append(block["lg"], "lg-0", "lg-1")
	pods = append(pods, newPod("lg-0", at(20), inLabelGang("lg")), newPod("lg-1", at(40), inLabelGang("lg")))
	for _, p := range pods {
		q.groups.AddOrUpdatePod(p)
	}
	// Each hierarchy sorts at its youngest pending member, never before
	// its root's creation.
	want := []string{
		"plain-00", "plain-10",
		"leaf-0", "leaf-1", "leaf-2", "leaf-3", // root at 10, youngest member at 15, before the plain pod of 15
		"plain-15", "plain-20", "plain-30", "plain-31", "plain-45",
		"a-0", "a-1", "a-2", "a-3", // PodGroup a at 30, youngest member at 61
		"b-0", "b-1", "b-2", "b-3", // youngest at 65
		"lg-0", "lg-1", "lg-2", "lg-3", "lg-4", "lg-5", // youngest at 85
	}
	require.Len(t, pods, len(want))

	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("a shuffle with seed %d sorts into gang blocks", seed), func(t *testing.T) {
			entities := make([]*framework.QueuedPodInfo, len(pods))
			for i, p := range pods {
				entities[i] = entity(t, p, t0)
			}
			rng := rand.New(rand.NewPCG(seed, 0))
			rng.Shuffle(len(entities), func(i, j int) { entities[i], entities[j] = entities[j], entities[i] })
			sort.Slice(entities, func(i, j int) bool { return q.Less(entities[i], entities[j]) })

			got := make([]string, len(entities))
			pos := map[string]int{}
			for i, e := range entities {
				got[i] = e.Pod.Name
				pos[e.Pod.Name] = i
			}
			for b, members := range block {
				lo, hi := len(got), -1
				for _, m := range members {
					lo, hi = min(lo, pos[m]), max(hi, pos[m])
				}
				assert.Equal(t, len(members)-1, hi-lo, "members of %s are not adjacent: %v", b, got)
			}
			assert.Equal(t, want, got)
		})
	}
}

func TestLessIsAStrictTotalOrder(t *testing.T) {
	q := fixture(t)
	pods, _ := mix()
	pods = append(pods,
		newPod("hi", at(50), priority(10)),
		newPod("hi-member", at(50), inGroup("new"), priority(10)),
		newPod("orphan", at(20), inGroup("ghost")),
	)
	es := make([]*framework.QueuedPodInfo, len(pods))
	for i, p := range pods {
		es[i] = entity(t, p, t0)
	}
	for _, a := range es {
		assert.False(t, q.Less(a, a), "irreflexive: %s", a.Pod.Name)
		for _, b := range es {
			if a == b {
				continue
			}
			assert.NotEqual(t, q.Less(a, b), q.Less(b, a), "exactly one of %s<%s and %s<%s", a.Pod.Name, b.Pod.Name, b.Pod.Name, a.Pod.Name)
			for _, c := range es {
				if q.Less(a, b) && q.Less(b, c) {
					assert.True(t, q.Less(a, c), "transitive: %s<%s<%s", a.Pod.Name, b.Pod.Name, c.Pod.Name)
				}
			}
		}
	}
}

func TestName(t *testing.T) {
	assert.Equal(t, "PhalanxQueueSort", (&QueueSort{}).Name())
}

// TestPartlyBoundGangSortsFirst: a gang with members the scheduler bound
// and fewer than its minimum (a scheduler stopped during its binds) is
// finished before older groups and plain pods of the same priority, but
// not before higher priorities; a gang bound to its minimum is ordinary
// again.
func TestPartlyBoundGangSortsFirst(t *testing.T) {
	q := fixture(t)
	bound := newPod("new-0", at(60), inGroup("new"))
	q.groups.AddOrUpdatePod(bound)
	q.groups.MarkAssumedOn(bound, "n1")
	bound = bound.DeepCopy()
	bound.Spec.NodeName = "n1"
	q.groups.AddOrUpdatePod(bound)
	last := newPod("new-1", at(60), inGroup("new"))
	q.groups.AddOrUpdatePod(last)
	less := func(a, b *corev1.Pod) bool { return q.Less(entity(t, a, t0), entity(t, b, t0)) }

	older := newPod("old-0", at(0), inGroup("old"))
	q.groups.AddOrUpdatePod(older)
	plain := newPod("plain", at(1))
	assert.True(t, less(last, older), "the partly bound gang's last member before an older gang")
	assert.False(t, less(older, last))
	assert.True(t, less(last, plain), "and before an older plain pod")
	urgent := newPod("urgent", at(99), priority(100))
	assert.True(t, less(urgent, last), "a higher priority still comes first")

	done := last.DeepCopy()
	done.Spec.NodeName = "n2"
	q.groups.AddOrUpdatePod(done)
	late := newPod("new-2", at(60), inGroup("new"))
	q.groups.AddOrUpdatePod(late)
	assert.True(t, less(older, late), "a gang at its minimum sorts by its creation time again")
}
