package gang

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
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

// waitingHandle keeps the members the plugin lets wait in Permit and
// records which of them it rejects.
type waitingHandle struct {
	fwk.Handle
	snapshot *schedcache.Snapshot

	mu       sync.Mutex
	waiting  map[types.UID]*waitingPod
	rejected []string
}

type waitingPod struct {
	fwk.WaitingPod
	h   *waitingHandle
	pod *corev1.Pod
}

func (w *waitingPod) Reject(_, _ string) bool {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	w.h.rejected = append(w.h.rejected, w.pod.Name)
	return true
}

func (h *waitingHandle) Activate(klog.Logger, map[string]*corev1.Pod) {}

// EventRecorder drops events: the "still waiting" timer of a member left
// in Permit may fire after the test has ended (held.go).
func (h *waitingHandle) EventRecorder() events.EventRecorderLogger {
	return events.NewFakeRecorder(100)
}
func (h *waitingHandle) SnapshotSharedLister() fwk.SharedLister { return h.snapshot }
func (h *waitingHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.waiting[uid]; w != nil {
		return w
	}
	return nil
}

func (h *waitingHandle) wait(pod *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting[pod.UID] = &waitingPod{h: h, pod: pod}
}

// TestSurplusMemberDoesNotReleaseItsGang: a member the plan left out (the
// gang reaches its minimum without it) fails without releasing the planned
// members waiting in Permit; any other failing member releases them.
func TestSurplusMemberDoesNotReleaseItsGang(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, nodes.Add(node))
	h := &waitingHandle{snapshot: schedcache.NewSnapshot(nil, []*corev1.Node{node}), waiting: map[types.UID]*waitingPod{}}
	fed := groupcache.NewFed()
	args, err := decodeArgs(nil)
	require.NoError(t, err)
	pl := &Gang{handle: h, groups: fed, args: args, verdicts: map[groups.Key]verdict{}}
	pl.shared = &shared{status: &groupstatus.Writer{}, events: newEventDedup(), attempts: newAttempts(), mends: newMends(),
		binds: newBindSlots(1), complete: map[groups.Key]bool{}, capacity: newCapacity(corelisters.NewNodeLister(nodes)), room: newMinRoom()}
	pl.shared.deadlines = newGangDeadlines(args.permitTimeout(), args.permitLimit(), pl.expireGang)
	defer pl.shared.deadlines.stop()

	// Three members, a minimum of two: the node holds two of them.
	a, b, c := labelMember("g", 0), labelMember("g", 1), labelMember("g", 2)
	for _, p := range []*corev1.Pod{a, b, c} {
		fed.OnPod(p)
	}
	ctx := context.Background()
	_, st := pl.PreFilter(ctx, framework.NewCycleState(), a, nil)
	require.True(t, st.IsSuccess(), "%v", st)
	require.Nil(t, pl.Reserve(ctx, nil, a, "n"))
	st, _ = pl.Permit(ctx, nil, a, "n")
	require.Equal(t, fwk.Wait, st.Code())
	h.wait(a)

	statuses := framework.NewDefaultNodeToStatus()
	statuses.Set("n", fwk.NewStatus(fwk.Unschedulable, "no room for member g-2 in its group's domain: 2 members placed by the plan").WithPlugin(pluginrt.TopologyName))
	surplus := framework.NewCycleState()
	pluginrt.MarkSurplus(surplus)
	_, st = pl.PostFilter(ctx, surplus, c, statuses)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code(), "nothing later preempts for one member of a gang")
	assert.Empty(t, h.rejected, "the planned member keeps waiting for its planned sibling")

	res, st := pl.PostFilter(ctx, framework.NewCycleState(), b, statuses)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	assert.Equal(t, []string{"g-0"}, h.rejected, "a planned member failing releases the gang")
	// It also gives up any node an earlier preemption nominated it to.
	// This plugin runs after PhalanxPreemption and its verdict ends the
	// PostFilters, so a result of nil here would leave the nomination in
	// the member's status, and the queue would refile it at every attempt,
	// holding the node's room against every pod of lower priority.
	require.NotNil(t, res, "a result that clears the member's nomination")
	assert.Equal(t, fwk.ModeOverride, res.Mode())
	assert.Empty(t, res.NominatedNodeName)
}
