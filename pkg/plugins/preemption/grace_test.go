package preemption

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// graceFixture is a label gang g of two members that preempted one victim
// on n1 at start, with a fake clock the test moves.
type graceFixture struct {
	p       *Preemption
	clock   *clocktesting.FakePassiveClock
	pods    informers.SharedInformerFactory
	root    groups.Key
	members []*corev1.Pod
	start   time.Time
}

func newGraceFixture(t *testing.T, victim *corev1.Pod) *graceFixture {
	t.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &graceFixture{
		clock: clocktesting.NewFakePassiveClock(start),
		pods:  informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0),
		root:  groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: "g"},
		start: start,
	}
	nodes := []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}
	fed := groupcache.NewFed()
	h := &searchHandle{snapshotHandle: snapshotHandle{snapshot: cache.NewSnapshot(nil, nodes)}, factory: f.pods}
	f.p = &Preemption{handle: h, groups: fed, status: &groupstatus.Writer{},
		pods: f.pods.Core().V1().Pods().Lister(), pending: map[groups.Key]*pendingEviction{}, prober: probe.New(nil), clock: f.clock}
	for _, name := range []string{"g-0", "g-1"} {
		m := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			Labels: map[string]string{v1alpha1.LightweightNameLabel: "g", v1alpha1.LightweightMinAvailableLabel: "2"}},
			Spec: corev1.PodSpec{Priority: ptr.To[int32](100)}}
		fed.OnPod(m)
		f.members = append(f.members, m)
	}
	require.NoError(t, f.pods.Core().V1().Pods().Informer().GetIndexer().Add(victim))
	f.p.remember(f.root, []*corev1.Pod{victim}, map[string]string{
		planinput.PodKey(f.members[0]): "n1", planinput.PodKey(f.members[1]): "n1",
	})
	return f
}

// victimPod is a pod on n1 with the given grace period (nil: unset).
func victimPod(grace *int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "victim"},
		Spec:       corev1.PodSpec{NodeName: "n1", TerminationGracePeriodSeconds: grace},
	}
}

// terminating is the victim as the API server shows it once deleted at
// start+after: its deletionTimestamp is when its grace period ends.
func (f *graceFixture) terminating(t *testing.T, victim *corev1.Pod, after time.Duration) {
	t.Helper()
	v := victim.DeepCopy()
	grace := int64(30)
	if v.Spec.TerminationGracePeriodSeconds != nil {
		grace = *v.Spec.TerminationGracePeriodSeconds
	}
	v.DeletionTimestamp = ptr.To(metav1.NewTime(f.start.Add(after + time.Duration(grace)*time.Second)))
	v.DeletionGracePeriodSeconds = &grace
	require.NoError(t, f.pods.Core().V1().Pods().Informer().GetIndexer().Update(v))
}

// TestGroupWaitsForVictimsThroughTheirGracePeriod: a group that preempted
// does not preempt again while its victims terminate, however long their
// terminationGracePeriodSeconds. A search meanwhile finds no candidate in a
// terminating pod, yet counts its room as used, so it would evict a second
// set of victims, or clear the members' nominations and let other pods take
// the room. Only a victim stuck past its grace period by more than the
// margin stops being waited for.
func TestGroupWaitsForVictimsThroughTheirGracePeriod(t *testing.T) {
	tests := []struct {
		name  string
		grace *int64
		// deletedAfter is when the eviction's delete reached the API
		// server, after the preemption; nil: not yet.
		deletedAfter *time.Duration
		gone         bool
		now          time.Duration
		waits        bool
	}{
		{
			name: "a victim terminating for 150 s is still waited for after 130 s", grace: ptr.To[int64](150),
			deletedAfter: ptr.To(time.Second), now: 130 * time.Second, waits: true,
		},
		{
			name: "a victim terminating for 150 s is still waited for just before its grace period ends", grace: ptr.To[int64](150),
			deletedAfter: ptr.To(time.Second), now: 150 * time.Second, waits: true,
		},
		{
			name: "a victim whose delete came late is waited for from then on", grace: ptr.To[int64](150),
			deletedAfter: ptr.To(100 * time.Second), now: 150*time.Second + 100*time.Second + victimMargin - time.Second, waits: true,
		},
		{
			name: "a victim not yet deleted is waited for through its grace period", grace: ptr.To[int64](150),
			now: 200 * time.Second, waits: true,
		},
		{
			name: "a victim stuck past its grace period and the margin is no longer waited for", grace: ptr.To[int64](150),
			deletedAfter: ptr.To(time.Second), now: 151*time.Second + victimMargin + time.Second,
		},
		{
			name: "a victim with the default grace period is waited for two minutes", deletedAfter: ptr.To(time.Duration(0)),
			now: 2*time.Minute - time.Second, waits: true,
		},
		{
			name: "a victim with the default grace period is not waited for beyond two minutes", deletedAfter: ptr.To(time.Duration(0)),
			now: 2*time.Minute + time.Second,
		},
		{
			name: "a victim that is gone is not waited for", grace: ptr.To[int64](150), gone: true, now: 10 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			victim := victimPod(tt.grace)
			f := newGraceFixture(t, victim)
			if tt.deletedAfter != nil {
				f.terminating(t, victim, *tt.deletedAfter)
			}
			if tt.gone {
				require.NoError(t, f.pods.Core().V1().Pods().Informer().GetIndexer().Delete(victim))
			}
			f.clock.SetTime(f.start.Add(tt.now))
			left := f.p.victimsLeft(f.root, nil)
			if !tt.waits {
				assert.Zero(t, left)
				return
			}
			assert.Equal(t, 1, left)
			for _, m := range f.members {
				res, st := f.p.PostFilter(context.Background(), framework.NewCycleState(), m, nil)
				assert.True(t, st.IsSuccess(), "%s: %v", m.Name, st)
				assert.Contains(t, st.Message(), "waiting for 1 preempted pods to terminate")
				require.NotNil(t, res, "%s keeps the node its victim is leaving", m.Name)
				assert.Equal(t, fwk.ModeOverride, res.Mode())
				assert.Equal(t, "n1", res.NominatedNodeName, m.Name)
			}
		})
	}
}
