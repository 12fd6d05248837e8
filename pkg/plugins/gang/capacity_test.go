package gang

import (
	"fmt"
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
	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func requesting(cpu, mem string) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	if mem != "" {
		req[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: req}}}}}
}

func nodesOf(n int, cpu int64, pods int64) []placement.Resources {
	out := make([]placement.Resources, n)
	for i := range out {
		out[i] = placement.Resources{corev1.ResourceCPU: cpu * 1000, corev1.ResourceMemory: 64 << 30, corev1.ResourcePods: pods}
	}
	return out
}

func TestExceedsAllocatable(t *testing.T) {
	tests := []struct {
		name    string
		need    int
		members []*corev1.Pod
		alloc   []placement.Resources
		want    string
	}{{
		name:    "20,000 one-cpu pods on 7,500 one-cpu nodes cannot fit",
		need:    20000,
		members: []*corev1.Pod{requesting("1", ""), requesting("1", "")},
		alloc:   nodesOf(7500, 1, 110),
		want:    "needs 20000 pods of 1 cpu; the cluster's allocatable holds at most 7500 (7500 nodes)",
	}, {
		name:    "the same gang fits 7,500 four-cpu nodes",
		need:    20000,
		members: []*corev1.Pod{requesting("1", "")},
		alloc:   nodesOf(7500, 4, 110),
	}, {
		name:    "pods do not straddle nodes: 3 pods of 1.5 cpu do not fit 2 nodes of 2 cpu",
		need:    3,
		members: []*corev1.Pod{requesting("1500m", "1Gi")},
		alloc:   nodesOf(2, 2, 110),
		want:    "needs 3 pods of 1500m cpu, 1Gi memory; the cluster's allocatable holds at most 2 (2 nodes)",
	}, {
		name:    "the pod limit of a node bounds it too",
		need:    5,
		members: []*corev1.Pod{requesting("100m", "")},
		alloc:   nodesOf(2, 64, 2),
		want:    "needs 5 pods of 100m cpu; the cluster's allocatable holds at most 4 (2 nodes)",
	}, {
		name:    "members of different sizes are bounded by the smallest",
		need:    5,
		members: []*corev1.Pod{requesting("4", ""), requesting("2", "")},
		alloc:   nodesOf(2, 4, 110),
		want:    "needs 5 pods of at least 2 cpu; the cluster's allocatable holds at most 4 (2 nodes)",
	}, {
		name:    "a resource no node has holds nothing",
		need:    1,
		members: []*corev1.Pod{{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}}}},
		alloc:   nodesOf(3, 4, 110),
		want:    "needs 1 pods of 1 nvidia.com/gpu; the cluster's allocatable holds at most 0 (3 nodes)",
	}, {
		name: "no nodes at all",
		need: 1, members: []*corev1.Pod{requesting("1", "")},
		want: "needs 1 pods of 1 cpu; the cluster's allocatable holds at most 0 (0 nodes)",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, gangcore.ExceedsAllocatable(tc.need, requestsOf(tc.members), tc.alloc))
		})
	}
}

// TestCapacityVerdictFollowsNodes: the verdict on a gang is remembered
// while the nodes are unchanged, and a node added (or grown) makes the
// gang fit again.
func TestCapacityVerdictFollowsNodes(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	addNode := func(i int) {
		require.NoError(t, store.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n-%d", i)},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}}}))
	}
	addNode(0)
	c := newCapacity(corelisters.NewNodeLister(store))
	g := groups.Info{Key: groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "big"}, Gang: true, MinCount: 8}
	scans := 0
	members := func() []*corev1.Pod { scans++; return []*corev1.Pod{requesting("1", "")} }

	msg, err := c.exceeds(g, 7, true, members)
	require.NoError(t, err)
	assert.Equal(t, "needs 8 pods of 1 cpu; the cluster's allocatable holds at most 4 (1 nodes)", msg)
	msg, err = c.exceeds(g, 7, true, members)
	require.NoError(t, err)
	assert.NotEmpty(t, msg)
	assert.Equal(t, 1, scans, "a second member of the unchanged gang reuses the verdict")

	addNode(1)
	c.bump() // what the node informer's handler does
	msg, err = c.exceeds(g, 7, true, members)
	require.NoError(t, err)
	assert.Empty(t, msg, "two 4-cpu nodes hold 8 one-cpu pods")
	assert.Equal(t, 2, scans)

	c.forget(g.Key)
	assert.Zero(t, c.size())
}

// TestCapacityVerdictFollowsMinCount: a gang of five one-cpu members on a
// four-cpu node is refused for its size until its minCount drops to four,
// also when the drop lands after the member's View was built: the size is
// judged from the cache's read, not from the View.
func TestCapacityVerdictFollowsMinCount(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, store.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}}}))
	g := newCapacityGang(store, 5)
	fed, pg := g.fed, g.pg
	assert.Equal(t, "needs 5 pods of 1 cpu; the cluster's allocatable holds at most 4 (1 nodes)", g.tooLarge(g.view()))

	stale := g.view()
	pg = pg.DeepCopy()
	pg.Spec.SchedulingPolicy.Gang.MinCount = 4
	fed.OnPodGroup(pg)
	assert.Empty(t, g.tooLarge(stale), "the group as it is now is judged")
	assert.Empty(t, g.tooLarge(g.view()), "and no verdict on the old minCount is remembered")
}

// TestNodeEventRenewsCapacityVerdict: a node is added while a gang too
// large for the old nodes waits. The queue asks the plugin's hint about
// the event before the capacity's own informer handler has counted it:
// the member's next PreFilter must judge the gang against the nodes the
// event brought, not the refusal remembered from before.
func TestNodeEventRenewsCapacityVerdict(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	addNode := func(name string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}}}
		require.NoError(t, store.Add(n))
		return n
	}
	addNode("n-0")
	g := newCapacityGang(store, 6)
	pl := g.pl
	require.Equal(t, "needs 6 pods of 1 cpu; the cluster's allocatable holds at most 4 (1 nodes)", g.tooLarge(g.view()))

	// The informer's store has the new node; its handlers have not all run.
	n := addNode("n-1")
	hint, err := pl.nodeCanHelp(klog.Background(), g.members[0], nil, n)
	require.NoError(t, err)
	require.Equal(t, fwk.Queue, hint)
	assert.Empty(t, g.tooLarge(g.view()), "two 4-cpu nodes hold 6 one-cpu pods")
}

// capacityGang is a gang plugin whose capacity check reads store's nodes,
// and a PodGroup pg of minCount members of 1 cpu each, all in the group
// cache.
type capacityGang struct {
	pl      *Gang
	fed     *groupcache.Fed
	pg      *v1alpha1.PodGroup
	members []*corev1.Pod
}

func newCapacityGang(store cache.Indexer, minCount int32) *capacityGang {
	fed := groupcache.NewFed()
	g := &capacityGang{fed: fed, pl: &Gang{groups: fed, shared: &shared{capacity: newCapacity(corelisters.NewNodeLister(store)), room: newMinRoom()}}}
	g.pg = &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pg", UID: "pg"}}
	g.pg.Spec.SchedulingPolicy.Gang = &v1alpha1.GangSchedulingPolicy{MinCount: minCount}
	fed.OnPodGroup(g.pg)
	for i := range int(minCount) {
		p := requesting("1", "")
		p.Namespace, p.Name, p.UID = "ns", fmt.Sprintf("m-%d", i), types.UID(fmt.Sprintf("m-%d", i))
		p.Labels = map[string]string{v1alpha1.PodGroupLabel: "pg"}
		fed.OnPod(p)
		g.members = append(g.members, p)
	}
	return g
}

// view is the first member's View as the cache has it now.
func (g *capacityGang) view() *groups.View { return g.fed.Resolve(g.members[0]) }

// tooLarge is PreFilter's size check of the first member with View v,
// over a read of the cache as it is now.
func (g *capacityGang) tooLarge(v *groups.View) string {
	return g.pl.tooLarge(g.pl.read(g.members[0], v, false))
}
