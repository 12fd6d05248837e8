package topology

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// nominations records the nominations the plugin withdraws.
type nominations struct {
	fwk.Handle
	mu      sync.Mutex
	removed int
}

func (h *nominations) DeleteNominatedPodIfExists(*corev1.Pod) {
	h.mu.Lock()
	h.removed++
	h.mu.Unlock()
}

// TestPlansFollowGroupLifecycle: a plan (with the pod objects it
// nominated) is kept while its group lives and forgotten, nominations
// withdrawn, when the group is gone: 10,000 label gangs whose pods are
// deleted, and a PodGroup whose object is deleted.
func TestPlansFollowGroupLifecycle(t *testing.T) {
	const n = 10000
	fed := groupcache.NewFed()
	h := &nominations{}
	tp := &Topology{handle: h, groups: fed, plans: map[groups.Key]*plan{}, prober: probe.New(h)}
	fed.Subscribe(tp.groupChanged)
	fed.SubscribeGone(tp.forgetGroup)

	member := func(gang string, i int, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", gang, i),
			UID: types.UID(fmt.Sprintf("%s-%d", gang, i)), Labels: labels}}
	}
	// What replan stores for a planned gang.
	planned := func(root groups.Key, pods ...*corev1.Pod) {
		p := &plan{created: time.Now(), assignments: map[string]string{}, domains: map[string]string{}}
		for _, pod := range pods {
			p.assignments[planinput.PodKey(pod)] = "node"
			p.nominated = append(p.nominated, identities([]*corev1.Pod{pod})...)
		}
		tp.mu.Lock()
		tp.plans[root] = p
		tp.mu.Unlock()
	}
	for i := 0; i < n; i++ {
		gang := fmt.Sprintf("g%05d", i)
		labels := map[string]string{v1alpha1.LightweightNameLabel: gang, v1alpha1.LightweightMinAvailableLabel: "2"}
		a, b := member(gang, 0, labels), member(gang, 1, labels)
		fed.OnPod(a)
		fed.OnPod(b)
		planned(groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: gang}, a, b)
	}
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "trainer", UID: "pg"}}
	pg.Spec.SchedulingPolicy.Gang = &v1alpha1.GangSchedulingPolicy{MinCount: 1}
	fed.OnPodGroup(pg)
	trainer := member("trainer", 0, map[string]string{v1alpha1.PodGroupLabel: "trainer"})
	fed.OnPod(trainer)
	planned(groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "trainer"}, trainer)
	require.Equal(t, n+1, tp.trackedPlans())

	// One member of each label gang leaves: the gangs still exist.
	for i := 0; i < n; i++ {
		fed.OnPodDeleted(member(fmt.Sprintf("g%05d", i), 0, nil))
	}
	assert.Equal(t, n+1, tp.trackedPlans(), "a gang with a member left keeps its plan")
	for i := 0; i < n; i++ {
		fed.OnPodDeleted(member(fmt.Sprintf("g%05d", i), 1, nil))
	}
	assert.Equal(t, 1, tp.trackedPlans(), "the label gangs' plans are gone with their last members")
	fed.OnGroupDeleted(pg, groups.PodGroupKind)
	assert.Zero(t, tp.trackedPlans(), "the PodGroup's plan is gone with the object")
	assert.Equal(t, 2*n+1, h.removed, "every nomination of a forgotten plan is withdrawn")
}
