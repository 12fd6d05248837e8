package topology

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// refusalWorld is one node n holding a running pod, and a one-member gang
// whose plan puts the member on n.
type refusalWorld struct {
	tp      *Topology
	h       *planHandle
	node    *corev1.Node
	blocker *corev1.Pod
	member  *corev1.Pod
}

func newRefusalWorld(t *testing.T) *refusalWorld {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "1", Labels: map[string]string{"kubernetes.io/hostname": "n"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
		}},
	}
	blocker := testPod("blocker", "1", "n")
	blocker.Labels = map[string]string{"app": "web"}
	blocker.ResourceVersion = "1"
	h := &planHandle{snapshot: cache.NewSnapshot([]*corev1.Pod{blocker}, []*corev1.Node{node}), informers: informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)}
	fed := groupcache.NewFed()
	tp := &Topology{handle: h, groups: fed, status: &groupstatus.Writer{}, args: pluginArgs{PlanTTLSeconds: 30},
		plans: map[groups.Key]*plan{}, rejected: map[groups.Key]map[string]map[string]rejection{},
		prober: probe.New(h), unknownFilters: func() []string { return nil }}
	member := testPod("g-0", "1", "")
	member.Labels = map[string]string{v1alpha1.LightweightNameLabel: "g", v1alpha1.LightweightMinAvailableLabel: "1"}
	fed.OnPod(member)
	return &refusalWorld{tp: tp, h: h, node: node, blocker: blocker, member: member}
}

// plan runs the member's PreFilter and returns the node its group's plan
// gives it, or "" when the plan has no node for it.
func (w *refusalWorld) plan(t *testing.T) (fwk.CycleState, string) {
	t.Helper()
	state := framework.NewCycleState()
	res, st := w.tp.PreFilter(context.Background(), state, w.member, nil)
	if !st.IsSuccess() {
		require.Equal(t, fwk.Unschedulable, st.Code(), "%v", st)
		return state, ""
	}
	require.NotNil(t, res)
	require.Equal(t, 1, res.NodeNames.Len())
	return state, res.NodeNames.UnsortedList()[0]
}

// refuse is the profile's Filter refusing the member on its planned node.
func (w *refusalWorld) refuse(t *testing.T, state fwk.CycleState, plugin string) {
	t.Helper()
	statuses := framework.NewDefaultNodeToStatus()
	statuses.Set("n", fwk.NewStatus(fwk.Unschedulable, "refused by "+plugin).WithPlugin(plugin))
	w.tp.PostFilter(context.Background(), state, w.member, statuses)
}

// update replaces the scheduler's snapshot with one built from nodes and
// pods, as the next cycle would see them: every NodeInfo generation moves.
func (w *refusalWorld) update(nodes []*corev1.Node, pods ...*corev1.Pod) {
	w.h.snapshot = cache.NewSnapshot(pods, nodes)
}

// TestRefusalLastsWhileItsCauseDoes: a planned node the profile's Filter
// refused a member on stays out of the group's next plans while the node
// looks the same to the refusing filter, and comes back as soon as what
// could have caused the refusal changes, without waiting for the memory to
// expire.
func TestRefusalLastsWhileItsCauseDoes(t *testing.T) {
	tests := []struct {
		name   string
		plugin string
		// before sets the node up before the refusal; change changes it
		// after.
		before func(w *refusalWorld)
		change func(w *refusalWorld)
		// age moves the refusal into the past.
		age      time.Duration
		wantNode bool
	}{
		{
			name:   "a refusal holds while nothing on the node changed",
			plugin: names.NodePorts,
			change: func(*refusalWorld) {},
		},
		{
			name:   "a refusal holds while nothing changed, even after a new snapshot",
			plugin: names.NodePorts,
			change: func(w *refusalWorld) { w.update([]*corev1.Node{w.node}, w.blocker) },
		},
		{
			name:   "the blocking pod deleted lets the next plan use the node",
			plugin: names.NodePorts,
			change: func(w *refusalWorld) {
				w.update([]*corev1.Node{w.node})
			},
			wantNode: true,
		},
		{
			name:   "a pod bound to the node since cannot lift a ports refusal",
			plugin: names.NodePorts,
			change: func(w *refusalWorld) {
				w.update([]*corev1.Node{w.node}, w.blocker, testPod("other", "1", "n"))
			},
		},
		{
			name:   "a pod bound to the node since can satisfy a pod affinity the node was refused for",
			plugin: names.InterPodAffinity,
			change: func(w *refusalWorld) {
				w.update([]*corev1.Node{w.node}, w.blocker, testPod("other", "1", "n"))
			},
			wantNode: true,
		},
		{
			name:   "the blocking pod's labels changed lets the next plan use the node",
			plugin: names.InterPodAffinity,
			change: func(w *refusalWorld) {
				relabelled := w.blocker.DeepCopy()
				relabelled.Labels = map[string]string{"app": "db"}
				relabelled.ResourceVersion = "2"
				w.update([]*corev1.Node{w.node}, relabelled)
			},
			wantNode: true,
		},
		{
			name:   "a status update of the blocking pod does not lift the refusal",
			plugin: names.NodePorts,
			change: func(w *refusalWorld) {
				running := w.blocker.DeepCopy()
				running.Status.Phase = corev1.PodRunning
				running.ResourceVersion = "2"
				w.update([]*corev1.Node{w.node}, running)
			},
		},
		{
			name:   "a taint removed from the node lets the next plan use it",
			plugin: names.TaintToleration,
			before: func(w *refusalWorld) {
				w.node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule}}
			},
			change: func(w *refusalWorld) {
				untainted := w.node.DeepCopy()
				untainted.Spec.Taints = nil
				untainted.ResourceVersion = "2"
				w.update([]*corev1.Node{untainted}, w.blocker)
			},
			wantNode: true,
		},
		{
			name:   "a node label changed lets the next plan use the node",
			plugin: names.NodeAffinity,
			change: func(w *refusalWorld) {
				relabelled := w.node.DeepCopy()
				relabelled.Labels["pool"] = "gpu"
				relabelled.ResourceVersion = "2"
				w.update([]*corev1.Node{relabelled}, w.blocker)
			},
			wantNode: true,
		},
		{
			name:   "a node heartbeat does not lift the refusal",
			plugin: names.NodePorts,
			before: func(w *refusalWorld) {
				w.node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			},
			change: func(w *refusalWorld) {
				beat := w.node.DeepCopy()
				beat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
				beat.ResourceVersion = "2"
				w.update([]*corev1.Node{beat}, w.blocker)
			},
		},
		{
			name:   "any change of the node lifts a refusal by a filter Phalanx does not know",
			plugin: "ExampleFilter",
			change: func(w *refusalWorld) {
				running := w.blocker.DeepCopy()
				running.Status.Phase = corev1.PodRunning
				running.ResourceVersion = "2"
				w.update([]*corev1.Node{w.node}, running)
			},
			wantNode: true,
		},
		{
			name:   "a refusal by a filter Phalanx does not know holds while nothing changed",
			plugin: "ExampleFilter",
			change: func(*refusalWorld) {},
		},
		{
			name:   "a refusal by a filter Phalanx does not know holds over a new snapshot of the same objects",
			plugin: "ExampleFilter",
			change: func(w *refusalWorld) { w.update([]*corev1.Node{w.node}, w.blocker) },
		},
		{
			name:     "an unchanged node is planned again once the memory expires",
			plugin:   names.NodePorts,
			change:   func(*refusalWorld) {},
			age:      rejectionTTL + time.Second,
			wantNode: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newRefusalWorld(t)
			if tc.before != nil {
				tc.before(w)
			}
			w.update([]*corev1.Node{w.node}, w.blocker)

			state, node := w.plan(t)
			require.Equal(t, "n", node, "the first plan uses the only node")
			w.refuse(t, state, tc.plugin)
			_, node = w.plan(t)
			require.Empty(t, node, "the refused node is out of the next plan")

			tc.change(w)
			if tc.age > 0 {
				w.tp.mu.Lock()
				for _, p := range w.tp.plans {
					p.created = p.created.Add(-tc.age)
				}
				for _, byShape := range w.tp.rejected {
					for _, byNode := range byShape {
						for n, r := range byNode {
							r.at = r.at.Add(-tc.age)
							byNode[n] = r
						}
					}
				}
				w.tp.mu.Unlock()
			}
			_, node = w.plan(t)
			if tc.wantNode {
				assert.Equal(t, "n", node, "the next plan may use the node again")
			} else {
				assert.Empty(t, node, "the refusal still holds")
			}
		})
	}
}

// TestRefusalCapOutlivesTheSiblingsItCounts: the cap a refusal leaves
// counts the members of the shape the node held. A counted member leaving
// the node (its gang released it when the refused sibling failed) is no
// change to the refusal: the node still holds no more than that many, and
// forgetting the cap would plan the refused member there again.
func TestRefusalCapOutlivesTheSiblingsItCounts(t *testing.T) {
	w := newRefusalWorld(t)
	sibling := testPod("g-1", "1", "n")
	sibling.Labels = w.member.Labels
	w.tp.groups.OnPod(sibling)
	w.update([]*corev1.Node{w.node}, w.blocker, sibling)

	state, node := w.plan(t)
	require.Equal(t, "n", node)
	w.refuse(t, state, names.NodePorts)
	root, ok := w.tp.rootOf(state, w.member)
	require.True(t, ok)

	caps := func() map[string]int {
		infos, err := w.h.snapshot.NodeInfos().List()
		require.NoError(t, err)
		c := w.tp.constraintsFor(context.Background(), w.h, w.tp.prober, root, infos)
		w.tp.mu.Lock()
		var shapes []string
		for shape := range w.tp.rejected[root] {
			shapes = append(shapes, shape)
		}
		w.tp.mu.Unlock()
		out := map[string]int{}
		for _, shape := range shapes {
			for n, r := range c.Rejected(shape) {
				out[n] = r.Cap
			}
		}
		return out
	}
	require.Equal(t, map[string]int{"n": 1}, caps(), "the node held one member of the shape")

	w.update([]*corev1.Node{w.node}, w.blocker)
	assert.Equal(t, map[string]int{"n": 1}, caps(), "the counted member left: the cap stands")

	w.update([]*corev1.Node{w.node})
	assert.Empty(t, caps(), "the other pod on the node left: the refusal is lifted")
}
