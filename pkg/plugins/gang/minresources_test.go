package gang

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

var xGroup = groups.Key{Dialect: groups.Coscheduling, Kind: groups.PodGroupKind, Namespace: "ns", Name: "job"}

func cpuNode(allocCPU, usedCPU int64) gateNode {
	return gateNode{
		alloc: placement.Resources{corev1.ResourceCPU: allocCPU * 1000, corev1.ResourcePods: 110},
		used:  placement.Resources{corev1.ResourceCPU: usedCPU * 1000, corev1.ResourcePods: 1},
	}
}

// The gate's rule, as scheduler-plugins states it: the free room of all
// nodes summed resource by resource, minMember pod slots included, the
// group's own pods not counted against it.
func TestJudgeRoom(t *testing.T) {
	need := placement.Resources{corev1.ResourceCPU: 8000, corev1.ResourcePods: 4}

	t.Run("free room summed over nodes holds it", func(t *testing.T) {
		msg, never := judgeRoom(xGroup, need, []gateNode{cpuNode(4, 1), cpuNode(4, 0), cpuNode(4, 3)}, false, 0)
		assert.Empty(t, msg, "3 + 4 + 1 = 8 cpu free")
		assert.False(t, never)
	})

	t.Run("short: a wait naming the group and the numbers", func(t *testing.T) {
		msg, never := judgeRoom(xGroup, need, []gateNode{cpuNode(4, 2), cpuNode(4, 2)}, false, 0)
		assert.False(t, never)
		assert.Equal(t, "waiting for free capacity: minResources of PodGroup.scheduling.x-k8s.io ns/job asks for 8 cpu, 4 pods in total; the cluster has 4 cpu free (short 4 cpu)", msg)
	})

	t.Run("the group's own pods do not count against it", func(t *testing.T) {
		n := cpuNode(4, 4)
		n.own = placement.Resources{corev1.ResourceCPU: 4000, corev1.ResourcePods: 1}
		msg, _ := judgeRoom(xGroup, need, []gateNode{n, cpuNode(4, 0)}, false, 0)
		assert.Empty(t, msg, "the 4 cpu its own member holds are the group's")
	})

	t.Run("an overcommitted node hides nothing", func(t *testing.T) {
		msg, _ := judgeRoom(xGroup, need, []gateNode{cpuNode(4, 9), cpuNode(8, 0)}, false, 0)
		assert.Empty(t, msg, "a node's free room counts from 0, not below")
	})

	t.Run("pod slots are part of it", func(t *testing.T) {
		n := cpuNode(64, 0)
		n.used[corev1.ResourcePods] = 108
		msg, _ := judgeRoom(xGroup, need, []gateNode{n}, false, 0)
		assert.Contains(t, msg, "the cluster has 2 pods free (short 2 pods)")
	})

	t.Run("pods it may preempt count when it may preempt", func(t *testing.T) {
		a, b := cpuNode(4, 4), cpuNode(4, 4)
		a.reclaim = placement.Resources{corev1.ResourceCPU: 4000, corev1.ResourcePods: 1}
		b.reclaim = placement.Resources{corev1.ResourceCPU: 2000, corev1.ResourcePods: 1}
		msg, _ := judgeRoom(xGroup, need, []gateNode{a, b}, true, 100)
		assert.Equal(t, "waiting for free capacity: minResources of PodGroup.scheduling.x-k8s.io ns/job asks for 8 cpu, 4 pods in total; the cluster has 0 cpu free, 6 cpu counting pods of priority below 100 (short 2 cpu)", msg)
		a.reclaim, b.reclaim = nil, nil
		msg, _ = judgeRoom(xGroup, need, []gateNode{a, b}, true, 100)
		assert.Equal(t, "waiting for free capacity: minResources of PodGroup.scheduling.x-k8s.io ns/job asks for 8 cpu, 4 pods in total; the cluster has 0 cpu free (short 8 cpu)", msg,
			"no pod of lower priority: nothing to say about them")
		a.reclaim = placement.Resources{corev1.ResourceCPU: 4000, corev1.ResourcePods: 1}
		b.reclaim = placement.Resources{corev1.ResourceCPU: 4000, corev1.ResourcePods: 1}
		msg, _ = judgeRoom(xGroup, need, []gateNode{a, b}, true, 100)
		assert.Empty(t, msg, "evicting them could make room: the planner and preemption decide")
	})

	t.Run("more than the allocatable of all nodes can never be met", func(t *testing.T) {
		gpus := placement.Resources{"nvidia.com/gpu": 16, corev1.ResourcePods: 2}
		n := cpuNode(8, 0)
		n.alloc["nvidia.com/gpu"] = 4
		msg, never := judgeRoom(xGroup, gpus, []gateNode{n, n}, true, 0)
		assert.True(t, never)
		assert.Equal(t, "minResources of PodGroup.scheduling.x-k8s.io ns/job can never be met: it asks for 16 nvidia.com/gpu, 2 pods in total, and the allocatable of all 2 nodes together is 8 nvidia.com/gpu; lower spec.minResources or add nodes", msg)
	})
}

func TestRoomNeed(t *testing.T) {
	assert.Nil(t, roomNeed(groups.Info{MinCount: 3}), "no minResources, no gate")
	need := roomNeed(groups.Info{MinCount: 3, MinResources: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("2Gi"), "nvidia.com/gpu": resource.MustParse("2"),
	}})
	assert.Equal(t, placement.Resources{corev1.ResourceCPU: 1500, corev1.ResourceMemory: 2 << 30, "nvidia.com/gpu": 2, corev1.ResourcePods: 3}, need,
		"minMember pod slots are added, as scheduler-plugins adds them")
}

func podOn(name string, cpu string, prio int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "n1", Priority: ptr.To(prio), Containers: []corev1.Container{{
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
}

// The table reads a node again only when its generation moves, and its
// pods by priority only when a gate asks.
func TestMinRoomTable(t *testing.T) {
	ni := framework.NewNodeInfo(podOn("low", "2", 0), podOn("mid", "1", 50), podOn("high", "1", 100))
	ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("4"),
	}}})
	m := newMinRoom()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entryLocked(ni)
	assert.Equal(t, int64(8000), e.alloc[corev1.ResourceCPU])
	assert.Equal(t, int64(4), e.alloc["nvidia.com/gpu"])
	assert.Equal(t, int64(110), e.alloc[corev1.ResourcePods])
	assert.Equal(t, int64(4000), e.used[corev1.ResourceCPU])
	assert.Equal(t, int64(3), e.used[corev1.ResourcePods])
	assert.Nil(t, e.byPriority, "pods are not read by priority until a gate needs it")
	assert.Equal(t, placement.Resources{corev1.ResourceCPU: 3000, corev1.ResourceMemory: 0, corev1.ResourceEphemeralStorage: 0, corev1.ResourcePods: 2},
		e.below(ni, 100), "pods below priority 100: low and mid")
	assert.Equal(t, int64(2000), e.below(ni, 50)[corev1.ResourceCPU])
	assert.Same(t, e, m.entryLocked(ni), "same generation, same entry")

	ni.AddPod(podOn("late", "1", 0))
	e2 := m.entryLocked(ni)
	require.NotSame(t, e, e2, "a new generation is read again")
	assert.Equal(t, int64(5000), e2.used[corev1.ResourceCPU])
	assert.Nil(t, e2.byPriority)

	m.pruneLocked(nil)
	assert.Len(t, m.nodes, 1, "a small table is kept")
}

func TestMinRoomPasses(t *testing.T) {
	m := newMinRoom()
	leaf := xGroup
	root := groups.Key{Kind: groups.CompositeKind, Namespace: "ns", Name: "top"}
	now := metav1.Now().Time
	m.pass(leaf, root, 7, now.Add(60e9))
	assert.True(t, m.passAt(leaf, now).Covers(7, true))
	assert.False(t, m.passAt(leaf, now).Covers(8, true), "a changed hierarchy is checked again")
	assert.False(t, m.passAt(leaf, now.Add(61e9)).Covers(7, true), "a pass expires")
	m.forgetHierarchy(root)
	assert.False(t, m.passAt(leaf, now).Covers(7, true), "a failed attempt forgets the passes of its hierarchy")
	m.pass(leaf, leaf, 7, now.Add(60e9))
	m.forget(leaf)
	assert.False(t, m.passAt(leaf, now).Covers(7, true))
}
