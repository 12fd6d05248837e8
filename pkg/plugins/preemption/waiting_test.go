package preemption

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// snapshotHandle serves a fixed snapshot; anything else panics on the nil
// embedded interface.
type snapshotHandle struct {
	fwk.Handle
	snapshot *cache.Snapshot
}

func (h *snapshotHandle) SnapshotSharedLister() fwk.SharedLister { return h.snapshot }

// TestMembersWaitingForVictimsKeepTheirPlannedNodes: a gang preempted and
// its victim is still terminating. Each member that fails meanwhile must
// come out of PostFilter with the node the preemption planned for it
// nominated: a failed attempt without one makes the queue take the
// member's nomination from its status, which only the preemptor has, and
// a lower-priority pod (the victim's Job replacing it) could take the room.
// A member the plan left out gets no nomination.
func TestMembersWaitingForVictimsKeepTheirPlannedNodes(t *testing.T) {
	nodes := []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}}
	h := &snapshotHandle{snapshot: cache.NewSnapshot(nil, nodes)}
	factory := informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "victim"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	require.NoError(t, factory.Core().V1().Pods().Informer().GetIndexer().Add(victim))

	fed := groupcache.NewFed()
	p := &Preemption{handle: h, groups: fed, status: &groupstatus.Writer{}, pods: factory.Core().V1().Pods().Lister(),
		pending: map[groups.Key]*pendingEviction{}, prober: probe.New(nil)}
	var members []*corev1.Pod
	for _, name := range []string{"g-0", "g-1", "g-2"} {
		m := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			Labels: map[string]string{v1alpha1.LightweightNameLabel: "g", v1alpha1.LightweightMinAvailableLabel: "2"}},
			Spec: corev1.PodSpec{Priority: ptr.To[int32](100)}}
		fed.OnPod(m)
		members = append(members, m)
	}
	root := groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: "g"}
	p.remember(root, []*corev1.Pod{victim}, map[string]string{
		planinput.PodKey(members[0]): "n1", planinput.PodKey(members[1]): "n2",
	})

	for i, want := range []string{"n1", "n2", ""} {
		res, st := p.PostFilter(context.Background(), framework.NewCycleState(), members[i], nil)
		assert.Contains(t, st.Message(), "waiting for 1 preempted pods to terminate", members[i].Name)
		if want == "" {
			assert.Equal(t, fwk.Unschedulable, st.Code(), "%s was left out of the plan", members[i].Name)
			assert.Nil(t, res)
			continue
		}
		assert.True(t, st.IsSuccess(), "%s: %v", members[i].Name, st)
		require.NotNil(t, res, members[i].Name)
		assert.Equal(t, fwk.ModeOverride, res.Mode())
		assert.Equal(t, want, res.NominatedNodeName, members[i].Name)
	}
}

// searchHandle is snapshotHandle for a victim search: no pod is
// nominated, and the profile runs only filters Phalanx models.
type searchHandle struct {
	snapshotHandle
	factory informers.SharedInformerFactory
}

func (h *searchHandle) NominatedPodsForNode(string) []fwk.PodInfo              { return nil }
func (h *searchHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.factory }
func (h *searchHandle) ListPlugins() *config.Plugins                           { return nil }

// TestMemberClearsItsNominationWhenPreemptionCannotHelp: a member keeps the
// nominatedNodeName of an earlier preemption in its status, but its group
// no longer fits even with evictions. The queue refiles a nomination from
// the status at every failed attempt without one in its result, so the
// member would hold the node's room against every pod of lower priority
// for good. As upstream's preemption does, PostFilter clears it.
func TestMemberClearsItsNominationWhenPreemptionCannotHelp(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10"),
	}}}
	factory := informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	h := &searchHandle{snapshotHandle: snapshotHandle{snapshot: cache.NewSnapshot(nil, []*corev1.Node{node})}, factory: factory}
	fed := groupcache.NewFed()
	p := &Preemption{handle: h, groups: fed, status: &groupstatus.Writer{}, pods: factory.Core().V1().Pods().Lister(),
		pending: map[groups.Key]*pendingEviction{}, prober: probe.New(nil)}
	var members []*corev1.Pod
	for _, name := range []string{"g-0", "g-1"} {
		m := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			Labels: map[string]string{v1alpha1.LightweightNameLabel: "g", v1alpha1.LightweightMinAvailableLabel: "2"}},
			Spec: corev1.PodSpec{Priority: ptr.To[int32](100), Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
		m.Status.NominatedNodeName = "n1"
		fed.OnPod(m)
		members = append(members, m)
	}
	res, st := p.PostFilter(context.Background(), framework.NewCycleState(), members[1], nil)
	assert.Equal(t, fwk.Unschedulable, st.Code(), "%v", st)
	require.NotNil(t, res, "a result that clears the nomination: %v", st)
	assert.Equal(t, fwk.ModeOverride, res.Mode())
	assert.Equal(t, "", res.NominatedNodeName)
}
