package topology

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// nominatingHandle is planHandle with an API server (a fake clientset) and
// the scheduler's in-memory nominations, by pod name.
type nominatingHandle struct {
	planHandle
	client    *fake.Clientset
	mu        sync.Mutex
	nominated map[string]string
}

func (h *nominatingHandle) ClientSet() kubernetes.Interface { return h.client }
func (h *nominatingHandle) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nominated[pi.GetPod().Name] = ni.NominatedNodeName
}
func (h *nominatingHandle) DeleteNominatedPodIfExists(p *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.nominated, p.Name)
}
func (h *nominatingHandle) nominationOf(name string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.nominated[name]
	return n, ok
}

// nominationFixture: one node of two cpu and a label gang of three one-cpu
// members with a minimum of two, which an earlier preemption nominated in
// the API: g-0 to a node that is gone since, g-1 and g-2 to n. A plan
// places two of them on n and leaves one out.
func nominationFixture(t *testing.T) (*Topology, *nominatingHandle, []*corev1.Pod) {
	return nominationFixtureWith(t, "2", "2", []string{"gone", "n", "n"})
}

// nominationFixtureWith is nominationFixture with node n's cpu, the gang's
// minimum and the members' nominations in the API given.
func nominationFixtureWith(t *testing.T, cpu, minAvailable string, nominations []string) (*Topology, *nominatingHandle, []*corev1.Pod) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	client := fake.NewSimpleClientset()
	h := &nominatingHandle{
		planHandle: planHandle{snapshot: cache.NewSnapshot(nil, []*corev1.Node{node}), informers: informers.NewSharedInformerFactory(client, 0)},
		client:     client, nominated: map[string]string{},
	}
	fed := groupcache.NewFed()
	tp := &Topology{handle: h, groups: fed, status: &groupstatus.Writer{}, args: pluginArgs{PlanTTLSeconds: 30},
		plans: map[groups.Key]*plan{}, rejected: map[groups.Key]map[string]map[string]rejection{},
		prober: probe.New(h), unknownFilters: func() []string { return nil }, runCtx: context.Background()}
	var members []*corev1.Pod
	for i, nominated := range nominations {
		p := testPod(fmt.Sprintf("g-%d", i), "1", "")
		p.Namespace = "ns"
		p.UID = types.UID(p.Name)
		p.Labels = map[string]string{v1alpha1.LightweightNameLabel: "g", v1alpha1.LightweightMinAvailableLabel: minAvailable}
		p.Status.NominatedNodeName = nominated
		_, err := client.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{})
		require.NoError(t, err)
		fed.OnPod(p)
		members = append(members, p)
	}
	return tp, h, members
}

// TestPlanCorrectsStaleStatusNominations: the queue refiles a pod's
// nomination from its status at every update, so after the plan every
// member's nominatedNodeName in the API must say what the plan says: its
// planned node, or none for the member the plan leaves out. Otherwise the
// left-out member takes its old node back from a planned sibling at its
// next failed attempt.
func TestPlanCorrectsStaleStatusNominations(t *testing.T) {
	tp, h, members := nominationFixture(t)
	_, st := tp.PreFilter(context.Background(), framework.NewCycleState(), members[0], nil)
	require.True(t, st.IsSuccess() || st.Code() == fwk.Unschedulable, "%v", st)

	planned := 0
	for _, m := range members {
		want, ok := h.nominationOf(m.Name)
		if ok {
			planned++
			assert.Equal(t, "n", want)
		}
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			got, err := h.client.CoreV1().Pods("ns").Get(context.Background(), m.Name, metav1.GetOptions{})
			require.NoError(c, err)
			assert.Equal(c, want, got.Status.NominatedNodeName, "%s's nominatedNodeName in the API (planned: %v)", m.Name, ok)
		}, 5*time.Second, 20*time.Millisecond)
	}
	assert.Equal(t, 2, planned, "the plan places two members")
}

// TestPlanPlacesTheNominatedMemberOnItsNode: members of one shape are
// interchangeable to the planner, which would give the node to whichever
// sorts first. A member that holds a nomination in the API (its group
// preempted for it there) must get that node: the framework's Filter counts
// the nomination against any sibling put there instead, and a host port or
// one-per-node anti-affinity then refuses the sibling on a node that is
// free for the gang.
func TestPlanPlacesTheNominatedMemberOnItsNode(t *testing.T) {
	tp, h, members := nominationFixtureWith(t, "1", "1", []string{"", "", "n"})
	_, st := tp.PreFilter(context.Background(), framework.NewCycleState(), members[0], nil)
	require.True(t, st.IsSuccess() || st.Code() == fwk.Unschedulable, "%v", st)
	for _, m := range members[:2] {
		_, ok := h.nominationOf(m.Name)
		assert.False(t, ok, "%s must not take the node its sibling was nominated to", m.Name)
	}
	got, ok := h.nominationOf("g-2")
	assert.True(t, ok, "g-2 keeps its node")
	assert.Equal(t, "n", got)
}

// framework nominations, as the queue holds them, for the Filter's view.
type queueNominations struct {
	*nominatingHandle
	pods map[string]*corev1.Pod
}

func (h queueNominations) NominatedPodsForNode(node string) []fwk.PodInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []fwk.PodInfo
	for name, n := range h.nominated {
		if n == node {
			pi, _ := framework.NewPodInfo(h.pods[name])
			out = append(out, pi)
		}
	}
	return out
}

// TestRefusalCountsSiblingsTheQueueNominatedThere: the framework's Filter
// judged a refused member with every sibling the queue has nominated to the
// node, including one a preemption nominated that the plan left out. The
// remembered cap must count that sibling, or the next plan treats the node
// as unable to hold even one member of the shape.
func TestRefusalCountsSiblingsTheQueueNominatedThere(t *testing.T) {
	tp, h, members := nominationFixtureWith(t, "1", "1", []string{"", "", ""})
	pods := map[string]*corev1.Pod{}
	for _, m := range members {
		pods[m.Name] = m
	}
	qh := queueNominations{nominatingHandle: h, pods: pods}
	tp.handle = qh
	state := framework.NewCycleState()
	_, st := tp.PreFilter(context.Background(), state, members[0], nil)
	require.True(t, st.IsSuccess(), "%v", st)
	root, ok := tp.rootOf(state, members[0])
	require.True(t, ok)
	tp.mu.Lock()
	p := tp.plans[root]
	tp.mu.Unlock()
	require.NotNil(t, p)
	node := p.assignments[string(members[0].UID)]
	require.Equal(t, "n", node)
	require.Len(t, p.assignments, 1, "n has room for one member")
	// A sibling the plan left out is still nominated to n.
	h.mu.Lock()
	h.nominated["g-2"] = "n"
	h.mu.Unlock()
	statuses := framework.NewDefaultNodeToStatus()
	statuses.Set("n", fwk.NewStatus(fwk.Unschedulable, "node(s) didn't have free ports for the requested pod ports").WithPlugin("NodePorts"))
	tp.PostFilter(context.Background(), state, members[0], statuses)
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var caps []int
	for _, byNode := range tp.rejected[root] {
		if r, ok := byNode["n"]; ok {
			caps = append(caps, r.Cap)
		}
	}
	assert.Equal(t, []int{1}, caps, "the node held g-2 when it refused g-0")
}

// TestPlannedMemberFiledLateKeepsItsNode: the group cache can see a member
// before the scheduling queue does, and a plan made in between nominates
// it; the queue then files the member with the nomination its status
// carries (none) and the room is free for any pod. The plan therefore
// promises the node to every member the queue had not filed, and the next
// scheduling cycle nominates it again; the promise ends once the queue has
// filed the member. Members the queue had filed get no promise.
func TestPlannedMemberFiledLateKeepsItsNode(t *testing.T) {
	tp, h, members := nominationFixtureWith(t, "3", "3", []string{"", "", ""})
	tp.promises = &pluginrt.Promises{}
	late := members[2]
	for _, m := range members[:2] {
		tp.groups.MarkQueued(m.UID)
	}
	_, st := tp.PreFilter(context.Background(), framework.NewCycleState(), members[0], nil)
	require.True(t, st.IsSuccess(), "%v", st)
	node, ok := h.nominationOf(late.Name)
	require.True(t, ok, "the plan nominates the late member")
	// The queue drops every nomination; the next cycle nominates again
	// only the member the queue had not filed, which holds a promise.
	for _, m := range members {
		h.DeleteNominatedPodIfExists(m)
	}
	tp.promises.Keep(klog.Background(), h, tp.groups)
	for _, m := range members[:2] {
		_, ok := h.nominationOf(m.Name)
		assert.False(t, ok, "%s was filed: it holds no promise", m.Name)
	}
	got, ok := h.nominationOf(late.Name)
	require.True(t, ok, "the late member holds a promise")
	assert.Equal(t, node, got)

	// The queue files the late member: its nomination goes, and PreEnqueue
	// marks it filed.
	h.DeleteNominatedPodIfExists(late)
	tp.groups.MarkQueued(late.UID)
	// The next cycle, before any Filter.
	tp.promises.Keep(klog.Background(), h, tp.groups)
	got, ok = h.nominationOf(late.Name)
	assert.True(t, ok, "the late member is nominated again")
	assert.Equal(t, node, got)
	h.DeleteNominatedPodIfExists(late)
	tp.promises.Keep(klog.Background(), h, tp.groups)
	_, ok = h.nominationOf(late.Name)
	assert.False(t, ok, "the promise ends once the queue has filed the member")

	// A later drop of the plan withdraws its nominations for good.
	tp.drop(groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: "g"})
	tp.promises.Keep(klog.Background(), h, tp.groups)
	_, ok = h.nominationOf(late.Name)
	assert.False(t, ok)
}

// TestStoredPlanKeepsMembersByIdentity: a plan is kept until its group is
// deleted, long after its members bound, so it keeps the members it
// nominated by identity (not the pending versions of their objects, beside
// the informer's bound ones), and dropping it must still withdraw every
// nomination it made.
func TestStoredPlanKeepsMembersByIdentity(t *testing.T) {
	tp, h, members := nominationFixture(t)
	_, st := tp.PreFilter(context.Background(), framework.NewCycleState(), members[0], nil)
	require.True(t, st.IsSuccess() || st.Code() == fwk.Unschedulable, "%v", st)
	require.Len(t, tp.plans, 1)
	var root groups.Key
	var p *plan
	for k, v := range tp.plans {
		root, p = k, v
	}
	require.Len(t, p.nominated, 2, "the plan nominated two members")
	for _, m := range p.nominated {
		assert.Equal(t, "ns", m.namespace)
		assert.Equal(t, types.UID(m.name), m.uid)
		_, nominated := h.nominationOf(m.name)
		assert.True(t, nominated, m.name)
	}

	tp.drop(root)
	for _, m := range members {
		_, nominated := h.nominationOf(m.Name)
		assert.False(t, nominated, "%s's nomination withdrawn with the plan", m.Name)
	}
}
