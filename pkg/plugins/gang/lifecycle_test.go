package gang

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
)

// lifecycleHandle is the part of the framework the plugin touches while
// label gangs assemble: no waiting pods, activation is a no-op. Anything
// else panics on the nil embedded interface, which would fail the test.
type lifecycleHandle struct{ fwk.Handle }

func (lifecycleHandle) Activate(klog.Logger, map[string]*corev1.Pod) {}
func (lifecycleHandle) GetWaitingPod(types.UID) fwk.WaitingPod       { return nil }

func labelMember(gang string, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", gang, i), UID: types.UID(fmt.Sprintf("%s-%d", gang, i)),
			Labels: map[string]string{v1alpha1.LightweightNameLabel: gang, v1alpha1.LightweightMinAvailableLabel: strconv.Itoa(2)}},
		Spec: corev1.PodSpec{SchedulerName: "phalanx-scheduler", Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
	}
}

// TestPerGroupStateFollowsGroupLifecycle: 10,000 two-pod label gangs come,
// are validated and checked against the cluster, reserve one member each
// and wait in Permit, and go (their pods deleted). Everything the plugin
// keeps per group is gone with them.
func TestPerGroupStateFollowsGroupLifecycle(t *testing.T) {
	const n = 10000
	fed := groupcache.NewFed()
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourcePods: resource.MustParse("110")}}}))
	args, err := decodeArgs(nil)
	require.NoError(t, err)
	pl := &Gang{handle: lifecycleHandle{}, groups: fed, args: args, verdicts: map[groups.Key]verdict{}}
	pl.shared = &shared{status: &groupstatus.Writer{}, events: newEventDedup(), attempts: newAttempts(), mends: newMends(),
		binds: newBindSlots(1), complete: map[groups.Key]bool{}, capacity: newCapacity(corelisters.NewNodeLister(nodes)), room: newMinRoom()}
	pl.shared.deadlines = newGangDeadlines(args.permitTimeout(), args.permitLimit(), pl.expireGang)
	defer pl.shared.deadlines.stop()
	fed.Subscribe(pl.groupChanged)
	fed.SubscribeGone(pl.forgetGroup)
	fed.SubscribeGone(pl.forgetVerdict)

	sizes := func() map[string]int {
		pl.shared.mu.Lock()
		complete := len(pl.shared.complete)
		pl.shared.mu.Unlock()
		pl.verdictMu.Lock()
		verdicts := len(pl.verdicts)
		pl.verdictMu.Unlock()
		open, _ := pl.shared.attempts.Open()
		return map[string]int{"complete": complete, "verdicts": verdicts, "capacity": pl.shared.capacity.size(),
			"deadlines": pl.shared.deadlines.len(), "attempts": open}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := heap()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		gang := fmt.Sprintf("g%05d", i)
		a, b := labelMember(gang, 0), labelMember(gang, 1)
		fed.OnPod(a)
		fed.OnPod(b)
		_, st := pl.PreFilter(ctx, nil, a, nil)
		require.True(t, st.IsSuccess(), "%s: %v", gang, st)
		require.Nil(t, pl.Reserve(ctx, nil, a, "n"))
		st, _ = pl.Permit(ctx, nil, a, "n")
		require.Equal(t, fwk.Wait, st.Code(), "%s waits for its second member", gang)
	}
	live := sizes()
	peak := heap()
	for name, size := range live {
		assert.Equal(t, n, size, "%s holds one entry per live gang", name)
	}
	for i := 0; i < n; i++ {
		gang := fmt.Sprintf("g%05d", i)
		fed.OnPodDeleted(labelMember(gang, 0))
		fed.OnPodDeleted(labelMember(gang, 1))
	}
	for name, size := range sizes() {
		assert.Zero(t, size, "%s after every gang is gone", name)
	}
	end := heap()
	t.Logf("live heap: %d KiB before, %d KiB with %d gangs, %d KiB after they are gone", base>>10, peak>>10, n, end>>10)
}
