package gang

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// TestPartlyBoundGangsANewSchedulerRecovers: a scheduler that finds a
// gang of 3 with 2 members bound and 1 pending opens a recovery only when
// the binds stopped half way: the pending member was there before them,
// a scheduler bound them, and nothing of the gang ran. Gangs below their
// minimum for other reasons are left as they are.
func TestPartlyBoundGangsANewSchedulerRecovers(t *testing.T) {
	bindTime := time.Now().Add(-time.Minute).Truncate(time.Second)
	cases := []struct {
		name string
		// listed: the bound members come from the informer's initial list
		// (an earlier scheduler may have bound them); else they are first
		// seen bound (created with spec.nodeName).
		listed bool
		// pendingAt is the pending member's creation, relative to the binds.
		pendingAt time.Duration
		// succeeded: a third bound member ran to completion.
		succeeded bool
		// sawWhole: this scheduler saw the gang's minimum bound.
		sawWhole bool
		want     bool
	}{
		{name: "binds stopped half way", listed: true, pendingAt: -time.Second, want: true},
		{name: "pending member created in the second of the binds", listed: true, pendingAt: 0, want: true},
		{name: "replacement created after the binds", listed: true, pendingAt: 10 * time.Second},
		{name: "members created on their nodes", pendingAt: -time.Second},
		{name: "a member succeeded", listed: true, pendingAt: -time.Second, succeeded: true},
		{name: "seen whole before", listed: true, pendingAt: -time.Second, sawWhole: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl := mendGang(t)
			member := func(i int) *corev1.Pod {
				p := labelMember("g", i)
				p.Labels[v1alpha1.LightweightMinAvailableLabel] = strconv.Itoa(3)
				p.CreationTimestamp = metav1.NewTime(bindTime.Add(-time.Hour))
				return p
			}
			bound := func(i int) *corev1.Pod {
				p := member(i)
				p.Spec.NodeName = fmt.Sprintf("n-%d", i)
				p.Status.Phase = corev1.PodRunning
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(bindTime)}}
				return p
			}
			add := fedOf(pl).OnPod
			if tc.listed {
				add = func(obj interface{}) { fedOf(pl).AddListedPod(obj.(*corev1.Pod)) }
			}
			add(bound(0))
			add(bound(1))
			if tc.succeeded {
				done := bound(3)
				done.Status.Phase = corev1.PodSucceeded
				add(done)
			}
			leaf := groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: "g"}
			if tc.sawWhole {
				add(bound(4))
				pl.mendMaybeDone(leaf)
				fedOf(pl).OnPodDeleted(bound(4))
				pl.mendMaybeDone(leaf)
			}
			pending := member(2)
			pending.CreationTimestamp = metav1.NewTime(bindTime.Add(tc.pendingAt))
			fedOf(pl).OnPod(pending)

			v := fedOf(pl).Resolve(pending)
			pl.mendIfLeftPartial(pending, pl.read(pending, v, true))
			pl.shared.mends.mu.Lock()
			_, opened := pl.shared.mends.open[leaf]
			pl.shared.mends.mu.Unlock()
			assert.Equal(t, tc.want, opened)
		})
	}
}

// TestRetryKeepsTheFailedMembersNode: a member whose binding failed after
// Permit holds its node (a retry promise) while its gang is below its
// minimum; the recovery ends, and the promise with it, once the gang's
// minimum is bound.
func TestRetryKeepsTheFailedMembersNode(t *testing.T) {
	pl := mendGang(t)
	ctx := context.Background()
	var members []*corev1.Pod
	for i := 0; i < 2; i++ {
		members = append(members, labelMember("g", i))
		fedOf(pl).OnPod(members[i])
	}
	for _, m := range members {
		require.Nil(t, pl.Reserve(ctx, nil, m, "n-"+m.Name))
	}
	// Permit let both through together.
	require.True(t, pl.shared.drain.admit("label group ns/g", members))

	pl.Unreserve(ctx, nil, members[0], "n-g-0")
	assert.Equal(t, map[string]string{"g-0": "n-g-0"}, keptNominations(pl), "the failed member keeps its node")
	leaf := groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: "g"}
	pl.shared.mends.mu.Lock()
	m := pl.shared.mends.open[leaf]
	pl.shared.mends.mu.Unlock()
	require.NotNil(t, m, "the gang's recovery is open")
	assert.WithinDuration(t, time.Now().Add(pl.args.permitTimeout()), m.deadline, 5*time.Second)

	for _, p := range members {
		b := p.DeepCopy()
		b.Spec.NodeName = "n-" + p.Name
		fedOf(pl).OnPod(b)
	}
	pl.mendMaybeDone(leaf)
	pl.shared.mends.mu.Lock()
	_, open := pl.shared.mends.open[leaf]
	pl.shared.mends.mu.Unlock()
	assert.False(t, open, "the recovery ends once the gang is whole")
	assert.Empty(t, keptNominations(pl), "the gang is whole: nothing is promised")
}

// keptNominations are the nominations the next scheduling cycle makes
// again from the promises the gang's members hold, by pod name.
func keptNominations(pl *Gang) map[string]string {
	n := recordedNominations{}
	pl.shared.promises.Keep(klog.Background(), n, pl.groups)
	return n
}

type recordedNominations map[string]string

func (n recordedNominations) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	n[pi.GetPod().Name] = ni.NominatedNodeName
}

// TestRecoveryEndingGivesBackTheRetryNomination: the recovery of a gang
// that can no longer be made whole (its bound member deleted) ends at its
// deadline with the failed member still pending. Its retry nomination is
// dropped with the promise, and the pending pods it may have kept off the
// node are tried again; a failed attempt keeps a nomination, so without
// this the member would hold the node for as long as it stays pending.
func TestRecoveryEndingGivesBackTheRetryNomination(t *testing.T) {
	pl := mendGang(t)
	members, leaf, m := failedBind(t, pl)
	fedOf(pl).OnPodDeleted(members[1])

	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "plain"}}
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, store.Add(plain))
	require.NoError(t, store.Add(members[0]))
	pl.podLister = corelisters.NewPodLister(store)

	pl.mendDue(leaf, m)
	h := pl.handle.(*drainHandle)
	assert.Empty(t, keptNominations(pl), "the promise ends with the recovery")
	assert.Equal(t, []string{"g-0"}, h.unnominated, "the pending member's nomination is dropped")
	assert.ElementsMatch(t, []string{"ns/plain", "ns/g-0"}, h.activated, "the pending pods are tried again")
}

// TestRetryWaitsWhileItsGangIsEvicted: the recovery of a gang of 2 whose
// member g-0 could not bind evicts g-1, the member that bound. Until g-1
// is gone it still counts toward the gang's quorum, so a retry of g-0
// reaching Permit meanwhile would be let through beside it and then left
// bound alone. Permit refuses it, saying why, until g-1 is terminating.
func TestRetryWaitsWhileItsGangIsEvicted(t *testing.T) {
	pl := mendGang(t)
	pl.handle.(*drainHandle).client = fake.NewSimpleClientset()
	pl.podLister = corelisters.NewPodLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	ctx := context.Background()
	members, leaf, m := failedBind(t, pl)
	bound := members[1].DeepCopy()
	bound.Spec.NodeName = "n-g-1"
	fedOf(pl).OnPod(bound)

	pl.mendDue(leaf, m)
	require.Nil(t, pl.Reserve(ctx, nil, members[0], "n-g-0"))
	st, _ := pl.Permit(ctx, nil, members[0], "n-g-0")
	require.NotNil(t, st)
	assert.Equal(t, fwk.Unschedulable, st.Code())
	assert.Contains(t, st.Message(), "bound members are being evicted")
	pl.Unreserve(ctx, nil, members[0], "n-g-0")

	gone := bound.DeepCopy()
	gone.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	fedOf(pl).OnPod(gone)
	require.Nil(t, pl.Reserve(ctx, nil, members[0], "n-g-0"))
	st, _ = pl.Permit(ctx, nil, members[0], "n-g-0")
	assert.NotContains(t, st.Message(), "being evicted", "the eviction is over once its victims are terminating")
	assert.False(t, pl.shared.mends.evictingAny())
}

// failedBind has Permit let label gang g's two members through together
// and g-0's binding fail, and returns the members, the gang and its open
// recovery.
func failedBind(t *testing.T, pl *Gang) ([]*corev1.Pod, groups.Key, *mend) {
	t.Helper()
	ctx := context.Background()
	var members []*corev1.Pod
	for i := 0; i < 2; i++ {
		members = append(members, labelMember("g", i))
		fedOf(pl).OnPod(members[i])
		require.Nil(t, pl.Reserve(ctx, nil, members[i], "n-"+members[i].Name))
	}
	require.True(t, pl.shared.drain.admit("label group ns/g", members))
	pl.Unreserve(ctx, nil, members[0], "n-g-0")
	leaf := groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: "g"}
	pl.shared.mends.mu.Lock()
	m := pl.shared.mends.open[leaf]
	pl.shared.mends.mu.Unlock()
	require.NotNil(t, m, "the gang's recovery is open")
	return members, leaf, m
}

func mendGang(t *testing.T) *Gang {
	t.Helper()
	h := &drainHandle{}
	args, err := decodeArgs(nil)
	require.NoError(t, err)
	pl := &Gang{handle: h, groups: groupcache.NewFed(), args: args, verdicts: map[groups.Key]verdict{}}
	pl.shared = &shared{status: &groupstatus.Writer{}, events: newEventDedup(), attempts: newAttempts(), mends: newMends(),
		promises: &pluginrt.Promises{}, binds: newBindSlots(1), complete: map[groups.Key]bool{},
		drain: NewDrain(), lifetime: context.Background(), room: newMinRoom(),
		capacity: newCapacity(corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})))}
	pl.shared.deadlines = newGangDeadlines(args.permitTimeout(), args.permitLimit(), pl.expireGang)
	t.Cleanup(pl.shared.deadlines.stop)
	t.Cleanup(pl.shared.mends.stop)
	return pl
}
