package preemption

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// cpuPod is a pod asking for cpu millicores, at priority prio, on node
// ("" pending).
func cpuPod(name, node string, prio int32, cpu int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
		Spec: corev1.PodSpec{NodeName: node, Priority: ptr.To(prio), Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}}}}},
	}
}

// crowdedCluster is nodes of 10 cpu, each full with ten 1-cpu pods: five
// of priority 10 and five of priority 1000.
func crowdedCluster(nodes int) ([]*corev1.Node, []*corev1.Pod) {
	var ns []*corev1.Node
	var pods []*corev1.Pod
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("n%04d", i)
		ns = append(ns, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10"), corev1.ResourcePods: resource.MustParse("110"),
		}}})
		for j := 0; j < 10; j++ {
			prio := int32(10)
			if j >= 5 {
				prio = 1000
			}
			pods = append(pods, cpuPod(fmt.Sprintf("%s-p%d", name, j), name, prio, 1000))
		}
	}
	return ns, pods
}

// labelGang is n pending members of label gang name, of priority 100,
// needing cpu millicores each, all of them required.
func labelGang(fed *groupcache.Fed, name string, n int, cpu int64) []*corev1.Pod {
	var members []*corev1.Pod
	for i := 0; i < n; i++ {
		members = append(members, labelGangMember(fed, name, i, n, cpu))
	}
	return members
}

// labelGangMember is member i of labelGang name of minimum n.
func labelGangMember(fed *groupcache.Fed, name string, i, n int, cpu int64) *corev1.Pod {
	m := cpuPod(fmt.Sprintf("%s-%d", name, i), "", 100, cpu)
	m.Labels = map[string]string{v1alpha1.LightweightNameLabel: name, v1alpha1.LightweightMinAvailableLabel: fmt.Sprint(n)}
	fed.OnPod(m)
	return m
}

// TestInfeasibleGangSearchesOncePerClusterChange: every pod deletion
// requeues every member of a gang that cannot fit, and each member's
// PostFilter would run the whole victim search over every pod of the
// cluster. The members of one group in one state of the cluster share one
// search: a 1,000-member gang that cannot fit on a cluster of 10,000 pods
// (half of them evictable, never enough on any node) costs one search per
// requeue round, not 1,000, and each member still gets the answer.
func TestInfeasibleGangSearchesOncePerClusterChange(t *testing.T) {
	nodes, pods := crowdedCluster(1000)
	require.Len(t, pods, 10_000)
	factory := informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	h := &searchHandle{snapshotHandle: snapshotHandle{snapshot: cache.NewSnapshot(pods, nodes)}, factory: factory}
	fed := groupcache.NewFed()
	p := &Preemption{handle: h, groups: fed, status: &groupstatus.Writer{}, pods: factory.Core().V1().Pods().Lister(),
		pending: map[groups.Key]*pendingEviction{}, prober: probe.New(nil)}
	// Six cpu each: evicting every low pod frees five per node.
	members := labelGang(fed, "g", 1000, 6000)

	round := func(t *testing.T) int {
		t.Helper()
		before, err := testutil.GetCounterMetricValue(searches)
		require.NoError(t, err)
		for _, m := range members {
			res, st := p.PostFilter(context.Background(), framework.NewCycleState(), m, nil)
			require.Equal(t, fwk.Unschedulable, st.Code(), "%s: %v", m.Name, st)
			require.Contains(t, st.Message(), "preemption cannot make the whole group fit", m.Name)
			require.NotNil(t, res, "%s's nomination is cleared", m.Name)
			require.Equal(t, "", res.NominatedNodeName, m.Name)
		}
		after, err := testutil.GetCounterMetricValue(searches)
		require.NoError(t, err)
		return int(after - before)
	}

	assert.Equal(t, 1, round(t), "the first requeue round searches once for all 1,000 members")
	assert.Equal(t, 0, round(t), "a round in the same state of the cluster reuses the answer")
	// A low pod is deleted: the snapshot moves, and every member is
	// requeued.
	h.snapshot = cache.NewSnapshot(pods[1:], nodes)
	assert.Equal(t, 1, round(t), "a round after a pod deletion searches once again")
}

// nominatingHandle is searchHandle with nominations the test sets.
type nominatingHandle struct {
	*searchHandle
	nominated map[string][]fwk.PodInfo
}

func (h *nominatingHandle) NominatedPodsForNode(node string) []fwk.PodInfo { return h.nominated[node] }

// TestMembersShareASearchOnlyInTheSameState: a member gets the answer of
// its group's last search only while nothing the search read has changed.
func TestMembersShareASearchOnlyInTheSameState(t *testing.T) {
	tests := []struct {
		name string
		// change happens between two members' PostFilters.
		change   func(t *testing.T, f *sharingFixture)
		searches int
	}{
		{name: "a member in the same state gets the answer", change: func(*testing.T, *sharingFixture) {}},
		{name: "a pod deleted anywhere searches again", searches: 1, change: func(t *testing.T, f *sharingFixture) {
			f.h.snapshot = cache.NewSnapshot(f.pods[1:], f.nodes)
		}},
		{name: "a member joining the gang searches again", searches: 1, change: func(t *testing.T, f *sharingFixture) {
			labelGangMember(f.fed, "g", 4, 3, 6000)
		}},
		{name: "a group object changing anywhere searches again", searches: 1, change: func(t *testing.T, f *sharingFixture) {
			f.fed.OnPodGroup(groupOf("other", 10, true))
		}},
		{name: "a pod outside the gang nominated to a node searches again", searches: 1, change: func(t *testing.T, f *sharingFixture) {
			f.h.nominated["n0000"] = []fwk.PodInfo{mustPodInfo(t, cpuPod("outsider", "", 500, 1000))}
		}},
		{name: "a member of the gang nominated to a node gets the answer", change: func(t *testing.T, f *sharingFixture) {
			f.h.nominated["n0000"] = []fwk.PodInfo{mustPodInfo(t, f.members[2])}
		}},
		{name: "an answer as old as the reuse bound is not shared", searches: 1, change: func(t *testing.T, f *sharingFixture) {
			f.clock.Step(searchReuse)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSharingFixture(t)
			require.Equal(t, 1, f.postFilter(t, f.members[0]), "the first member searches")
			tt.change(t, f)
			assert.Equal(t, tt.searches, f.postFilter(t, f.members[1]))
		})
	}

	t.Run("another gang searches on its own", func(t *testing.T) {
		f := newSharingFixture(t)
		other := labelGang(f.fed, "h", 3, 6000)
		require.Equal(t, 1, f.postFilter(t, f.members[0]))
		assert.Equal(t, 1, f.postFilter(t, other[0]))
		assert.Equal(t, 0, f.postFilter(t, f.members[1]), "each gang keeps its own answer")
	})
	t.Run("an answer that evicts is not kept", func(t *testing.T) {
		f := newSharingFixture(t)
		tree, err := f.fed.TreeOf(f.root)
		require.NoError(t, err)
		key, ok := f.p.searchKeyOf(f.root, 100, nil)
		require.True(t, ok)
		f.p.keepSearch(f.root, key, tree, searchAnswer{search: &searched{Result: &placement.Preemption{Victims: []string{"ns/n0000-p0"}}}})
		assert.Nil(t, f.p.sharedSearch(f.root, key))
	})
	t.Run("no answer is kept for a gang whose members use ResourceClaims", func(t *testing.T) {
		// Which devices are free moves with claims and slices, which the
		// fingerprint does not follow.
		f := newSharingFixture(t)
		m := f.members[2].DeepCopy()
		m.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu")}}
		f.fed.OnPod(m)
		tree, err := f.fed.TreeOf(f.root)
		require.NoError(t, err)
		key, ok := f.p.searchKeyOf(f.root, 100, nil)
		require.True(t, ok)
		f.p.keepSearch(f.root, key, tree, searchAnswer{err: errNoCandidates})
		assert.Nil(t, f.p.sharedSearch(f.root, key))
	})
}

// sharingFixture is a 3-member gang g that cannot fit on 4 crowded nodes.
type sharingFixture struct {
	p       *Preemption
	h       *nominatingHandle
	fed     *groupcache.Fed
	clock   *clocktesting.FakeClock
	nodes   []*corev1.Node
	pods    []*corev1.Pod
	root    groups.Key
	members []*corev1.Pod
}

func newSharingFixture(t *testing.T) *sharingFixture {
	t.Helper()
	f := &sharingFixture{fed: groupcache.NewFed(), clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		root: groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: "g"}}
	f.nodes, f.pods = crowdedCluster(4)
	factory := informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	f.h = &nominatingHandle{searchHandle: &searchHandle{snapshotHandle: snapshotHandle{snapshot: cache.NewSnapshot(f.pods, f.nodes)}, factory: factory},
		nominated: map[string][]fwk.PodInfo{}}
	f.p = &Preemption{handle: f.h, groups: f.fed, status: &groupstatus.Writer{}, pods: factory.Core().V1().Pods().Lister(),
		pending: map[groups.Key]*pendingEviction{}, prober: probe.New(nil), clock: f.clock}
	f.fed.Subscribe(f.p.groupChanged)
	f.members = labelGang(f.fed, "g", 3, 6000)
	return f
}

// postFilter runs m's PostFilter, which cannot make the gang fit, and
// returns how many searches it ran.
func (f *sharingFixture) postFilter(t *testing.T, m *corev1.Pod) int {
	t.Helper()
	before, err := testutil.GetCounterMetricValue(searches)
	require.NoError(t, err)
	res, st := f.p.PostFilter(context.Background(), framework.NewCycleState(), m, nil)
	require.Equal(t, fwk.Unschedulable, st.Code(), "%s: %v", m.Name, st)
	require.Contains(t, st.Message(), "preemption cannot make the whole group fit", m.Name)
	require.NotNil(t, res)
	assert.Equal(t, "", res.NominatedNodeName)
	after, err := testutil.GetCounterMetricValue(searches)
	require.NoError(t, err)
	return int(after - before)
}

func mustPodInfo(t *testing.T, pod *corev1.Pod) fwk.PodInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(pod)
	require.NoError(t, err)
	return pi
}
