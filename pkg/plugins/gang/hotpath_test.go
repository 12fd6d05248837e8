package gang

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
)

// countingHandle is waitingHandle that counts the plugin's waiting-pod
// lookups: each is one member visited by a scan of the gang.
type countingHandle struct {
	*waitingHandle
	lookups atomic.Int64
}

// EventRecorder drops the events of members still waiting after a second.
func (h *countingHandle) EventRecorder() events.EventRecorderLogger { return nopRecorder{} }

type nopRecorder struct{}

func (nopRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...interface{}) {
}

func (r nopRecorder) WithLogger(klog.Logger) events.EventRecorderLogger { return r }

func (h *countingHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	h.lookups.Add(1)
	return h.waitingHandle.GetWaitingPod(uid)
}

// gangMember is member i of label gang name with the given min-available,
// built with the scheduler's pod wrappers.
func gangMember(name string, i, minAvailable int) *corev1.Pod {
	return st.MakePod().Namespace("ns").Name(fmt.Sprintf("%s-%d", name, i)).UID(fmt.Sprintf("%s-%d", name, i)).
		SchedulerName("phalanx-scheduler").
		Label(v1alpha1.LightweightNameLabel, name).Label(v1alpha1.LightweightMinAvailableLabel, strconv.Itoa(minAvailable)).
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
}

func newHotPathGang(t testing.TB) (*Gang, *countingHandle, *groupcache.Fed) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100000"), corev1.ResourcePods: resource.MustParse("100000"),
	}}}
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, nodes.Add(node))
	h := &countingHandle{waitingHandle: &waitingHandle{snapshot: schedcache.NewSnapshot(nil, []*corev1.Node{node}), waiting: map[types.UID]*waitingPod{}}}
	fed := groupcache.NewFed()
	args, err := decodeArgs(nil)
	require.NoError(t, err)
	pl := &Gang{handle: h, groups: fed, args: args, verdicts: map[groups.Key]verdict{}}
	pl.shared = &shared{status: &groupstatus.Writer{}, events: newEventDedup(), attempts: newAttempts(), mends: newMends(),
		binds: newBindSlots(1), complete: map[groups.Key]bool{}, capacity: newCapacity(corelisters.NewNodeLister(nodes)), room: newMinRoom(),
		drain: NewDrain()}
	pl.shared.deadlines = newGangDeadlines(args.permitTimeout(), args.permitLimit(), pl.expireGang)
	t.Cleanup(pl.shared.deadlines.stop)
	return pl, h, fed
}

// rejectedNames lists the members rejected so far, in order.
func (h *waitingHandle) rejectedNames() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.rejected...)
}

// TestOnlyTheFirstFailureOfAnAttemptReleases: a gang of n members, n-1 of
// them waiting in Permit, loses one member. Its Unreserve rejects the n-1
// waiting ones; each of their own Unreserves then comes back and finds
// nothing new to release. Before, every Unreserve listed and sorted every
// member again: n scans of n members for one failed attempt.
func TestOnlyTheFirstFailureOfAnAttemptReleases(t *testing.T) {
	for _, n := range []int{2, 10, 200} {
		t.Run(fmt.Sprintf("gang of %d", n), func(t *testing.T) {
			pl, h, fed := newHotPathGang(t)
			ctx := context.Background()
			pods := make([]*corev1.Pod, n)
			states := make([]fwk.CycleState, n)
			for i := range pods {
				pods[i] = gangMember("g", i, n)
				fed.OnPod(pods[i])
				states[i] = framework.NewCycleState()
			}
			for i := 1; i < n; i++ {
				_, s := pl.PreFilter(ctx, states[i], pods[i], nil)
				require.True(t, s.IsSuccess(), "%v", s)
				require.Nil(t, pl.Reserve(ctx, states[i], pods[i], "n"))
				s, _ = pl.Permit(ctx, states[i], pods[i], "n")
				require.Equal(t, fwk.Wait, s.Code(), "member %d waits for the gang", i)
				h.wait(pods[i])
			}
			require.Nil(t, pl.Reserve(ctx, states[0], pods[0], "n"))
			h.lookups.Store(0)

			// Member 0 fails after reserving; the framework then runs the
			// Unreserve of every member its failure released.
			pl.Unreserve(ctx, states[0], pods[0], "n")
			for i := 1; i < n; i++ {
				pl.Unreserve(ctx, states[i], pods[i], "n")
			}
			assert.Len(t, h.rejectedNames(), n-1, "every waiting member is released once")
			assert.LessOrEqual(t, h.lookups.Load(), int64(n),
				"the members are looked at by the first failure only, not once per released member")

			// A member that reserves afterwards starts a new attempt, and
			// that attempt's first failure releases it.
			require.Nil(t, pl.Reserve(ctx, states[1], pods[1], "n"))
			s, _ := pl.Permit(ctx, states[1], pods[1], "n")
			if n > 2 {
				require.Equal(t, fwk.Wait, s.Code())
			}
			h.wait(pods[1])
			before := len(h.rejectedNames())
			pl.Unreserve(ctx, states[0], pods[0], "n")
			assert.Equal(t, []string{pods[1].Name}, h.rejectedNames()[before:], "a new attempt is released by its own first failure")
		})
	}
}

// TestViewIsResolvedOncePerCycle: PreFilter stores the pod's View in the
// cycle's state and the later extension points read that very View.
func TestViewIsResolvedOncePerCycle(t *testing.T) {
	pl, h, fed := newHotPathGang(t)
	ctx := context.Background()
	a, b := gangMember("v", 0, 2), gangMember("v", 1, 2)
	fed.OnPod(a)
	fed.OnPod(b)
	state := framework.NewCycleState()
	_, s := pl.PreFilter(ctx, state, a, nil)
	require.True(t, s.IsSuccess(), "%v", s)
	v := groupcache.ViewIn(state, a)
	require.NotNil(t, v, "PreFilter stores the view")
	assert.Equal(t, groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: "v"}, v.Leaf())
	assert.True(t, v.Gang)
	assert.Nil(t, groupcache.ViewIn(state, b), "a view answers for its own pod only")

	require.Nil(t, pl.Reserve(ctx, state, a, "n"))
	s, _ = pl.Permit(ctx, state, a, "n")
	require.Equal(t, fwk.Wait, s.Code())
	h.wait(a)
	assert.Same(t, v, groupcache.ViewIn(state, a), "Reserve and Permit read the stored view")
	pl.Unreserve(ctx, state, a, "n")
	assert.Same(t, v, groupcache.ViewIn(state, a), "Unreserve reads the stored view")
}

// BenchmarkUnreserveStorm is the release of a 1,000-member gang whose last
// member failed: one Unreserve that rejects the 999 waiting members, then
// their 999 Unreserves.
func BenchmarkUnreserveStorm(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		pl, h, fed := newHotPathGang(b)
		pods := make([]*corev1.Pod, n)
		states := make([]fwk.CycleState, n)
		for i := range pods {
			pods[i] = gangMember("g", i, n)
			fed.OnPod(pods[i])
			states[i] = framework.NewCycleState()
		}
		for i := range pods {
			_ = pl.Reserve(ctx, states[i], pods[i], "n")
			h.wait(pods[i])
		}
		b.StartTimer()
		for i := range pods {
			pl.Unreserve(ctx, states[i], pods[i], "n")
		}
	}
}

// BenchmarkPreFilterMember is PreFilter of one member of a 1,000-member
// gang whose members all exist, in a fresh cycle.
func BenchmarkPreFilterMember(b *testing.B) {
	const n = 1000
	pl, _, fed := newHotPathGang(b)
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = gangMember("g", i, n)
		fed.OnPod(pods[i])
	}
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if _, s := pl.PreFilter(ctx, framework.NewCycleState(), pods[i%n], nil); !s.IsSuccess() {
			b.Fatal(s)
		}
		i++
	}
}
