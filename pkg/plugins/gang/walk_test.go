package gang

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
)

// fedOf is the cache a test built the plugin over.
func fedOf(pl *Gang) *groupcache.Fed { return pl.groups.(*groupcache.Fed) }

// countingCache is the group cache that records each call the plugin
// makes into it. It forwards every method by hand rather than embedding
// the cache, so a method added to groupCache cannot slip past the count.
type countingCache struct {
	fed   *groupcache.Fed
	mu    sync.Mutex
	calls []string
}

func (c *countingCache) note(name string) {
	c.mu.Lock()
	c.calls = append(c.calls, name)
	c.mu.Unlock()
}

// take returns the calls recorded since the last take.
func (c *countingCache) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

func (c *countingCache) StateOf(uid types.UID) (groups.State, bool) {
	c.note("StateOf")
	return c.fed.StateOf(uid)
}
func (c *countingCache) Queued(uid types.UID) bool { c.note("Queued"); return c.fed.Queued(uid) }
func (c *countingCache) ViewFor(state fwk.CycleState, pod *corev1.Pod) *groups.View {
	c.note("ViewFor")
	return c.fed.ViewFor(state, pod)
}
func (c *countingCache) PreFilterFacts(v *groups.View, ask groups.PreFilterAsk) groups.PreFilterFacts {
	c.note("PreFilterFacts")
	return c.fed.PreFilterFacts(v, ask)
}
func (c *countingCache) PermitFacts(v *groups.View) groups.PermitFacts {
	c.note("PermitFacts")
	return c.fed.PermitFacts(v)
}
func (c *countingCache) MarkAssumedOn(pod *corev1.Pod, node string) {
	c.note("MarkAssumedOn")
	c.fed.MarkAssumedOn(pod, node)
}
func (c *countingCache) MarkPending(pod *corev1.Pod) { c.note("MarkPending"); c.fed.MarkPending(pod) }
func (c *countingCache) EnsurePod(pod *corev1.Pod, store corelisters.PodLister) {
	c.note("EnsurePod")
	c.fed.EnsurePod(pod, store)
}
func (c *countingCache) MarkQueued(uid types.UID) { c.note("MarkQueued"); c.fed.MarkQueued(uid) }
func (c *countingCache) Quorum(pod *corev1.Pod, count groups.Counter) (bool, groups.Shortfall, error) {
	c.note("Quorum")
	return c.fed.Quorum(pod, count)
}
func (c *countingCache) QuorumOf(leaf groups.Key, count groups.Counter) (bool, groups.Shortfall, error) {
	c.note("QuorumOf")
	return c.fed.QuorumOf(leaf, count)
}
func (c *countingCache) SameHierarchy(e *groups.EventPod, held, other *corev1.Pod) bool {
	c.note("SameHierarchy")
	return c.fed.SameHierarchy(e, held, other)
}
func (c *countingCache) GroupOf(uid types.UID) (groups.Key, bool) {
	c.note("GroupOf")
	return c.fed.GroupOf(uid)
}
func (c *countingCache) Get(k groups.Key) (groups.Info, bool) { c.note("Get"); return c.fed.Get(k) }
func (c *countingCache) RootOf(k groups.Key) (groups.Key, bool) {
	c.note("RootOf")
	return c.fed.RootOf(k)
}
func (c *countingCache) UnitOf(leaf groups.Key) (groups.Key, bool) {
	c.note("UnitOf")
	return c.fed.UnitOf(leaf)
}
func (c *countingCache) Satisfied(k groups.Key, count groups.Counter) (bool, int, int) {
	c.note("Satisfied")
	return c.fed.Satisfied(k, count)
}
func (c *countingCache) HierarchyMembersIn(k groups.Key, s groups.State) []*corev1.Pod {
	c.note("HierarchyMembersIn")
	return c.fed.HierarchyMembersIn(k, s)
}
func (c *countingCache) SubtreeMembersIn(k groups.Key, s groups.State) []*corev1.Pod {
	c.note("SubtreeMembersIn")
	return c.fed.SubtreeMembersIn(k, s)
}
func (c *countingCache) SubtreeScheduledBound(k groups.Key) []*corev1.Pod {
	c.note("SubtreeScheduledBound")
	return c.fed.SubtreeScheduledBound(k)
}

// TestMemberWalkEntersGroupsAtMostTwicePerPhase walks each member of a
// three-member gang through PreFilter, Reserve and Permit, counting the
// plugin's calls into the group cache. PreFilter reads the View and one
// snapshot of the group (groups.PreFilterFacts), Permit the stored View
// and one snapshot (groups.PermitFacts): whatever the checks, a phase
// decides from at most two calls, so a member added or a minimum changed
// between two of them cannot be counted by one check and not the next.
// Reserve is recorded for the report, not bounded here.
func TestMemberWalkEntersGroupsAtMostTwicePerPhase(t *testing.T) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	h := &drainHandle{waiting: map[types.UID]*recordingWaitingPod{}, informers: informers.NewSharedInformerFactory(fake.NewClientset(), 0)}
	require.NoError(t, h.informers.Core().V1().Nodes().Informer().GetIndexer().Add(node))
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, nodes.Add(node))
	fed := groupcache.NewFed()
	counted := &countingCache{fed: fed}
	args, err := decodeArgs(nil)
	require.NoError(t, err)
	pl := &Gang{handle: h, groups: counted, args: args, verdicts: map[groups.Key]verdict{}}
	pl.shared = &shared{status: &groupstatus.Writer{}, events: newEventDedup(), attempts: newAttempts(), mends: newMends(),
		binds: newBindSlots(1), complete: map[groups.Key]bool{}, capacity: newCapacity(corelisters.NewNodeLister(nodes)),
		drain: NewDrain(), lifetime: ctx, room: newMinRoom()}
	pl.shared.deadlines = newGangDeadlines(args.permitTimeout(), args.permitLimit(), pl.expireGang)
	t.Cleanup(pl.shared.deadlines.stop)
	t.Cleanup(pl.shared.mends.stop)

	members := []*corev1.Pod{gangMember("w", 0, 3), gangMember("w", 1, 3), gangMember("w", 2, 3)}
	for _, m := range members {
		fed.OnPod(m)
	}
	for i, m := range members {
		state := framework.NewCycleState()
		counted.take()

		_, s := pl.PreFilter(ctx, state, m, nil)
		require.True(t, s.IsSuccess(), "member %d: %v", i, s)
		preFilter := counted.take()

		require.Nil(t, pl.Reserve(ctx, state, m, "n"))
		reserve := counted.take()

		s, _ = pl.Permit(ctx, state, m, "n")
		permit := counted.take()
		if i < len(members)-1 {
			require.Equal(t, fwk.Wait, s.Code(), "member %d waits for the gang", i)
			onNode := m.DeepCopy()
			onNode.Spec.NodeName = "n"
			h.waiting[m.UID] = &recordingWaitingPod{pod: onNode}
		} else {
			require.True(t, s.IsSuccess(), "the last member completes the gang: %v", s)
		}
		t.Logf("member %d: PreFilter %d [%s], Reserve %d [%s], Permit %d [%s]", i,
			len(preFilter), strings.Join(preFilter, " "), len(reserve), strings.Join(reserve, " "), len(permit), strings.Join(permit, " "))
		assert.LessOrEqual(t, len(preFilter), 2, "member %d: PreFilter's calls into the group cache: %v", i, preFilter)
		assert.LessOrEqual(t, len(permit), 2, "member %d: Permit's calls into the group cache: %v", i, permit)
	}
	for _, m := range members[:2] {
		assert.True(t, h.waiting[m.UID].allowed, "%s is let through with the last member", m.Name)
	}
}
