package gang

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

func drainPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
}

// TestDrainWaitsForAdmittedBinds: Stop counts what was let through and
// refuses everything after it; Wait returns once every admitted bind has
// finished, bound or not, and names what is left when its context ends
// first. Finishing a pod that was never admitted changes nothing.
func TestDrainWaitsForAdmittedBinds(t *testing.T) {
	d := NewDrain()
	require.True(t, d.admit("PodGroup ns/g", []*corev1.Pod{drainPod("g-0"), drainPod("g-1"), drainPod("g-2")}))
	require.True(t, d.admit("", []*corev1.Pod{drainPod("plain")}))
	d.finish("g-0", true) // bound before the stop: not counted by the report

	pods, groups := d.Stop()
	assert.Equal(t, 3, pods)
	assert.Equal(t, 1, groups)
	assert.False(t, d.admit("PodGroup ns/late", []*corev1.Pod{drainPod("late-0")}), "nothing is let through once stopping")
	d.finish("late-0", true)
	d.finish("never-admitted", false)

	short, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	r := d.Wait(short)
	assert.Equal(t, []string{"ns/g-1", "ns/g-2", "ns/plain"}, r.Left)
	assert.Equal(t, []string{"PodGroup ns/g"}, r.LeftGroups)

	done := make(chan DrainReport)
	go func() { done <- d.Wait(context.Background()) }()
	d.finish("g-1", true)
	d.finish("plain", false)
	select {
	case r := <-done:
		t.Fatalf("Wait returned with g-2 still binding: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	d.finish("g-2", true)
	r = <-done
	assert.Empty(t, r.Left)
	assert.Equal(t, 2, r.Bound)
	assert.Equal(t, 1, r.Failed)

	idle := NewDrain()
	pods, _ = idle.Stop()
	assert.Zero(t, pods)
	assert.Empty(t, idle.Wait(context.Background()).Left, "a drain with nothing admitted returns at once")
}

// drainHandle is the framework as Permit and Bind see it: waiting pods
// that record being allowed, and a client.
type drainHandle struct {
	fwk.Handle
	client    kubernetes.Interface
	informers informers.SharedInformerFactory
	mu        sync.Mutex
	waiting   map[types.UID]*recordingWaitingPod
	// activated and unnominated record the pods handed to Activate and
	// DeleteNominatedPodIfExists.
	activated, unnominated []string
}

func (h *drainHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	h.mu.Lock()
	defer h.mu.Unlock()
	if wp, ok := h.waiting[uid]; ok {
		return wp
	}
	return nil
}
func (h *drainHandle) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range pods {
		h.activated = append(h.activated, name)
	}
}

func (h *drainHandle) DeleteNominatedPodIfExists(pod *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unnominated = append(h.unnominated, pod.Name)
}
func (h *drainHandle) ClientSet() kubernetes.Interface { return h.client }
func (h *drainHandle) SharedInformerFactory() informers.SharedInformerFactory {
	return h.informers
}
func (h *drainHandle) APICacher() fwk.APICacher { return nil }

// EventRecorder drops events: a member whose bind fails after Permit gets
// one (mend.go).
func (h *drainHandle) EventRecorder() events.EventRecorderLogger { return events.NewFakeRecorder(100) }

type recordingWaitingPod struct {
	fwk.WaitingPod
	pod               *corev1.Pod
	allowed, rejected bool
}

func (w *recordingWaitingPod) GetPod() *corev1.Pod { return w.pod }
func (w *recordingWaitingPod) Allow(string)        { w.allowed = true }
func (w *recordingWaitingPod) Reject(string, string) bool {
	w.rejected = true
	return true
}

func drainGang(t *testing.T, h *drainHandle, ctx context.Context) *Gang {
	t.Helper()
	fed := groupcache.NewFed()
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	args, err := decodeArgs(nil)
	require.NoError(t, err)
	pl := &Gang{handle: h, groups: fed, args: args, verdicts: map[groups.Key]verdict{}}
	pl.shared = &shared{status: &groupstatus.Writer{}, events: newEventDedup(), attempts: newAttempts(), mends: newMends(),
		binds: newBindSlots(1), complete: map[groups.Key]bool{}, capacity: newCapacity(corelisters.NewNodeLister(nodes)),
		drain: NewDrain(), lifetime: ctx, room: newMinRoom()}
	pl.shared.deadlines = newGangDeadlines(args.permitTimeout(), args.permitLimit(), pl.expireGang)
	t.Cleanup(pl.shared.deadlines.stop)
	return pl
}

// TestPermitLetsNothingThroughWhileStopping: a two-member gang whose first
// member waits in Permit. Before the stop, the second member's Permit lets
// both through and admits both to the drain; once stopping, the same
// Permit refuses, allows nobody and admits nothing, so the gang binds
// nothing rather than part of itself.
func TestPermitLetsNothingThroughWhileStopping(t *testing.T) {
	for _, stopping := range []bool{false, true} {
		h := &drainHandle{waiting: map[types.UID]*recordingWaitingPod{}, informers: informers.NewSharedInformerFactory(fake.NewClientset(), 0)}
		require.NoError(t, h.informers.Core().V1().Nodes().Informer().GetIndexer().Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}))
		pl := drainGang(t, h, context.Background())
		a, b := labelMember("g", 0), labelMember("g", 1)
		fedOf(pl).OnPod(a)
		fedOf(pl).OnPod(b)
		ctx := context.Background()
		require.Nil(t, pl.Reserve(ctx, nil, a, "n"))
		st, _ := pl.Permit(ctx, nil, a, "n")
		require.Equal(t, fwk.Wait, st.Code())
		onNode := a.DeepCopy()
		onNode.Spec.NodeName = "n"
		h.waiting[a.UID] = &recordingWaitingPod{pod: onNode}
		// The delayed "still waiting" event must find no waiting pod.
		t.Cleanup(func() { delete(h.waiting, a.UID) })
		require.Nil(t, pl.Reserve(ctx, nil, b, "n"))

		if stopping {
			pl.shared.drain.Stop()
		}
		st, _ = pl.Permit(ctx, nil, b, "n")
		pods, _ := pl.shared.drain.Stop()
		if stopping {
			assert.Equal(t, fwk.Unschedulable, st.Code())
			assert.Equal(t, msgStopping, st.Message())
			assert.False(t, h.waiting[a.UID].allowed, "the waiting member is not let through")
			assert.Zero(t, pods, "nothing admitted")
			continue
		}
		assert.True(t, st.IsSuccess(), "%v", st)
		assert.True(t, h.waiting[a.UID].allowed)
		assert.Equal(t, 2, pods, "both members admitted to the drain")
		pl.PostBind(ctx, nil, a, "n")
		pl.Unreserve(ctx, nil, b, "n")
		pods, _ = pl.shared.drain.Stop()
		assert.Zero(t, pods, "PostBind and Unreserve finish admitted binds")
	}
}

// TestBindOutlivesItsCycle: the binding cycle's context is cancelled (the
// scheduler stops its cycles) while a member waits for a bind slot; the
// member still gets its slot and its binding request. Only the end of the
// scheduler instance abandons a waiting bind.
func TestBindOutlivesItsCycle(t *testing.T) {
	client := fake.NewClientset()
	var mu sync.Mutex
	var bound []string
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "binding" {
			b := a.(clienttesting.CreateAction).GetObject().(*corev1.Binding)
			mu.Lock()
			bound = append(bound, b.Name+"@"+b.Target.Name)
			mu.Unlock()
			return true, b, nil
		}
		return false, nil, nil
	})
	life, kill := context.WithCancel(context.Background())
	defer kill()
	pl := drainGang(t, &drainHandle{client: client}, life)
	first, second, third := drainPod("first"), drainPod("second"), drainPod("third")
	ctx := context.Background()
	require.Nil(t, pl.shared.binds.acquire(ctx, first.UID), "first holds the only slot")

	cycle, stopCycles := context.WithCancel(ctx)
	done := make(chan *fwk.Status)
	go func() { done <- pl.Bind(cycle, nil, second, "n1") }()
	stopCycles()
	select {
	case st := <-done:
		t.Fatalf("Bind gave up with its cycle: %v", st)
	case <-time.After(50 * time.Millisecond):
	}
	pl.PostBind(ctx, nil, first, "n0")
	require.True(t, (<-done).IsSuccess())
	mu.Lock()
	assert.Equal(t, []string{"second@n1"}, bound)
	mu.Unlock()

	go func() { done <- pl.Bind(ctx, nil, third, "n1") }()
	time.Sleep(20 * time.Millisecond)
	kill()
	st := <-done
	assert.Equal(t, fwk.Error, st.Code(), "a killed scheduler abandons the wait for a slot")
}

// TestMemberLeftOutOfThePlanReleasesNobody: a member of a waiting gang
// fails in PostFilter. When the plan left it out (it had no room and the
// gang's minimum is met without it), the members waiting in Permit stay
// there; any other failure releases them, so the gang retries as a unit.
func TestMemberLeftOutOfThePlanReleasesNobody(t *testing.T) {
	for _, leftOut := range []bool{true, false} {
		h := &drainHandle{waiting: map[types.UID]*recordingWaitingPod{}, informers: informers.NewSharedInformerFactory(fake.NewClientset(), 0)}
		pl := drainGang(t, h, context.Background())
		a, b := labelMember("g", 0), labelMember("g", 1)
		fedOf(pl).OnPod(a)
		fedOf(pl).OnPod(b)
		ctx := context.Background()
		require.Nil(t, pl.Reserve(ctx, nil, a, "n"))
		waiting := &recordingWaitingPod{pod: a}
		h.waiting[a.UID] = waiting

		state := framework.NewCycleState()
		if leftOut {
			pluginrt.MarkSurplus(state)
		}
		_, st := pl.PostFilter(ctx, state, b, framework.NewDefaultNodeToStatus())
		assert.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code(), "no pod-level preemption for a gang member")
		assert.Equal(t, !leftOut, waiting.rejected, "left out of the plan: %v", leftOut)
		delete(h.waiting, a.UID)
	}
}

func (h *drainHandle) SnapshotSharedLister() fwk.SharedLister { return schedcache.NewEmptySnapshot() }
