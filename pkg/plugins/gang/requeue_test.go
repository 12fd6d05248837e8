package gang

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// heldGangs fills fed with n PodGroup gangs of minCount 4 that have 3
// members each, the state of gangs whose pods are still being created:
// every member is held in PreEnqueue. It returns the members, which the
// queue keeps as unschedulable pods, and a fourth member of gang 0.
func heldGangs(fed *groupcache.Fed, n int) (held []*corev1.Pod, completing *corev1.Pod) {
	member := func(g, i int) *corev1.Pod {
		name := fmt.Sprintf("g%d-%d", g, i)
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			Labels: map[string]string{v1alpha1.PodGroupLabel: fmt.Sprintf("g%d", g)}}}
	}
	for g := range n {
		pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("g%d", g), UID: types.UID(fmt.Sprintf("g%d", g))}}
		pg.Spec.SchedulingPolicy.Gang = &v1alpha1.GangSchedulingPolicy{MinCount: 4}
		fed.OnPodGroup(pg)
		for i := range 3 {
			p := member(g, i)
			fed.OnPod(p)
			held = append(held, p)
		}
	}
	return held, member(0, 3)
}

// requeueHints runs, for every held pod, the hints the queue runs for one
// event (as isPodWorthRequeuing does: hints of the events that match, a
// missing hint meaning requeue), and returns how many pods it would move
// back to the active queue, each to be offered to PreEnqueue again.
func requeueHints(t testing.TB, pl *Gang, held []*corev1.Pod, ev fwk.ClusterEvent, oldObj, newObj interface{}) int {
	return requeue(t, pl, held, ev, oldObj, newObj, nil)
}

// requeue is requeueHints that also hands every moved pod to moved.
func requeue(t testing.TB, pl *Gang, held []*corev1.Pod, ev fwk.ClusterEvent, oldObj, newObj interface{}, moved func(*corev1.Pod)) int {
	regs, err := pl.EventsToRegister(context.Background())
	require.NoError(t, err)
	n := 0
	for _, p := range held {
		for _, r := range regs {
			if r.Event.Resource != ev.Resource || r.Event.ActionType&ev.ActionType == 0 {
				continue
			}
			hint := fwk.Queue
			if r.QueueingHintFn != nil {
				if hint, err = r.QueueingHintFn(klog.Background(), p, oldObj, newObj); err != nil {
					t.Fatal(err)
				}
			}
			if hint == fwk.Queue {
				n++
				if moved != nil {
					moved(p)
				}
				break
			}
		}
	}
	return n
}

// TestHeldGangsRequeue: while gangs wait for members, a member of one gang
// arriving requeues only that gang's held members, and a node added
// requeues none of them: nodes cannot bring a member. The group cache
// activates a gang itself once it is complete.
func TestHeldGangsRequeue(t *testing.T) {
	pl, _, fed := newHotPathGang(t)
	held, completing := heldGangs(fed, 50)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new"}}
	require.Equal(t, 3, requeueHints(t, pl, held, fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, nil, completing),
		"a new member requeues its own gang only")
	require.Equal(t, 0, requeueHints(t, pl, held, fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, node),
		"a node cannot complete a gang that waits for members")

	// A complete gang rejected for another reason (too large for the
	// cluster, minResources) is requeued by a node.
	fed.OnPod(completing)
	require.Equal(t, 4, requeueHints(t, pl, append(held, completing), fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, node.DeepCopy()))
}

// BenchmarkRequeueHeldGangs: the queue's cost of 3,000 members of 1,000
// gangs waiting for their fourth member, per event: a member of another
// gang created, a node added. Every pod the event moves is offered to
// PreEnqueue again, which holds it again; moved/op counts them.
func BenchmarkRequeueHeldGangs(b *testing.B) {
	pl, _, fed := newHotPathGang(b)
	held, completing := heldGangs(fed, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	// A writer whose API server never answers: PreEnqueue only queues
	// the held groups' conditions.
	w, err := groupstatus.New(ctx, fed, &restclient.Config{Host: "http://127.0.0.1:1"})
	require.NoError(b, err)
	pl.shared.status = w
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range held {
		require.NoError(b, store.Add(p))
	}
	pl.podLister = corelisters.NewPodLister(store)
	preEnqueue := func(p *corev1.Pod) { pl.PreEnqueue(ctx, p) }
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new"}}
	for _, bc := range []struct {
		name string
		ev   fwk.ClusterEvent
		obj  interface{}
	}{
		{"pod-add", fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, completing},
		{"node-add", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, node},
	} {
		b.Run(bc.name, func(b *testing.B) {
			moved := 0
			for b.Loop() {
				// The informer hands every event a new object.
				var obj interface{}
				switch o := bc.obj.(type) {
				case *corev1.Pod:
					obj = o.DeepCopy()
				case *corev1.Node:
					obj = o.DeepCopy()
				}
				moved = requeue(b, pl, held, bc.ev, nil, obj, preEnqueue)
			}
			b.ReportMetric(float64(moved), "moved/op")
		})
	}
}

// TestStartupAdmitsMembersOfAssemblingGangs: while the scheduler hands the
// queue its informers' first lists, a member whose siblings have not been
// listed yet is let into the active queue instead of being held: no cycle
// runs before the lists are through, and a held member would be weighed
// again for every node listed meanwhile. Once the lists are through (said
// by whoever started the scheduler, or by the first cycle), such a member
// is held as before.
func TestStartupAdmitsMembersOfAssemblingGangs(t *testing.T) {
	pl, _, fed := newHotPathGang(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := groupstatus.New(ctx, fed, &restclient.Config{Host: "http://127.0.0.1:1"})
	require.NoError(t, err)
	pl.shared.status = w
	held, _ := heldGangs(fed, 2)
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range held {
		require.NoError(t, store.Add(p))
	}
	pl.podLister = corelisters.NewPodLister(store)
	admitted := func(rt *pluginrt.Runtime) {
		t.Helper()
		pl.startup = rt
		for _, p := range held {
			require.Nil(t, pl.PreEnqueue(ctx, p), "%s is admitted before the first lists are through", p.Name)
		}
	}
	heldNow := func() {
		t.Helper()
		for _, p := range held {
			st := pl.PreEnqueue(ctx, p)
			require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code(), "%s is held once the first lists are through", p.Name)
			require.Contains(t, st.Message(), "3/4")
		}
	}

	// Whoever starts the scheduler says when its handlers took in the
	// first lists. Pods created afterwards are held, first cycle or not:
	// a cluster that starts empty may see no cycle for a long time.
	rt := pluginrt.New()
	admitted(rt)
	rt.MarkListed()
	heldNow()

	// A scheduler started without it: its first cycle ends the window,
	// and an incomplete gang is refused there.
	rt = pluginrt.New()
	admitted(rt)
	_, st := pl.PreFilter(ctx, framework.NewCycleState(), held[0], nil)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code(), st.Message())
	require.True(t, rt.Listed(), "the first cycle marks the lists through")
	heldNow()
}
