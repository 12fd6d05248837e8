package preemption

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	upstream "k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// evictHandle is the part of the framework handle evict uses.
type evictHandle struct {
	fwk.Handle
	client   kubernetes.Interface
	recorder events.EventRecorderLogger
	// waiting are the pods waiting in Permit, by UID.
	waiting map[types.UID]fwk.WaitingPod
	// nominated are the pods nominated to each node.
	nominated map[string][]*corev1.Pod
}

func (h *evictHandle) ClientSet() kubernetes.Interface           { return h.client }
func (h *evictHandle) EventRecorder() events.EventRecorderLogger { return h.recorder }
func (h *evictHandle) APICacher() fwk.APICacher                  { return nil }

func (h *evictHandle) SharedInformerFactory() informers.SharedInformerFactory {
	return informers.NewSharedInformerFactory(h.client, 0)
}

func (h *evictHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	if w, ok := h.waiting[uid]; ok {
		return w
	}
	return nil
}

func (h *evictHandle) GetPodInPreBind(types.UID) fwk.PodInPreBind { return nil }

func (h *evictHandle) NominatedPodsForNode(node string) []fwk.PodInfo {
	var out []fwk.PodInfo
	for _, p := range h.nominated[node] {
		pi, _ := framework.NewPodInfo(p)
		out = append(out, pi)
	}
	return out
}

// Parallelizer is the default profile's (the framework counts its
// goroutines in the scheduler's metrics, which must be registered).
func (h *evictHandle) Parallelizer() fwk.Parallelizer {
	schedmetrics.Register()
	return parallelize.NewParallelizer(16)
}

// evictor is the plugin as far as evict needs it, over h.
func evictor(h *evictHandle) *Preemption {
	exec := upstream.NewExecutor(h, feature.Features{})
	guardEvictions(h, exec)
	return &Preemption{handle: h, executor: exec, pending: map[groups.Key]*pendingEviction{}}
}

// trainer is the preempting group of the eviction tests, priority 1000.
func trainer() *groupPreemptor {
	return &groupPreemptor{
		pod:  &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "trainer-0", UID: "trainer-0-uid"}},
		root: groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "trainer"},
		prio: 1000,
	}
}

// conflictOnStaleUpdate makes the fake client refuse an update whose
// resourceVersion is not the stored one, as the API server does.
func conflictOnStaleUpdate(client *fake.Clientset) {
	client.PrependReactor("update", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sent := action.(k8stesting.UpdateAction).GetObject().(*corev1.Pod)
		stored, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), sent.Namespace, sent.Name)
		if err != nil {
			return true, nil, err
		}
		if rv := stored.(*corev1.Pod).ResourceVersion; rv != sent.ResourceVersion {
			return true, nil, apierrors.NewConflict(corev1.Resource("pods"), sent.Name, nil)
		}
		return false, nil, nil
	})
}

func TestEvictMarksStaleVictims(t *testing.T) {
	victim := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "batch-0", UID: "batch-0-uid", ResourceVersion: "1"},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
	client := fake.NewClientset(victim.DeepCopy())
	conflictOnStaleUpdate(client)

	// The kubelet moved the pod on after the scheduler's snapshot was taken.
	live := victim.DeepCopy()
	live.ResourceVersion = "2"
	live.Labels = map[string]string{"restarted": "once"}
	live.Status.Conditions = append(live.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
	require.NoError(t, client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), live, "ns"))

	// What the victim looked like when it was deleted.
	var atDeletion *corev1.Pod
	client.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "ns", action.(k8stesting.DeleteAction).GetName())
		if err == nil {
			atDeletion = obj.(*corev1.Pod)
		}
		return false, nil, nil
	})

	recorder := events.NewFakeRecorder(10)
	p := evictor(&evictHandle{client: client, recorder: recorder})
	p.evict(context.Background(), trainer(), []*corev1.Pod{victim}, nil)

	t.Run("the victim's Preempted event names the group", func(t *testing.T) {
		require.Len(t, recorder.Events, 1)
		assert.Equal(t, "Normal Preempted Preempted by group PodGroup ns/trainer on node node-a", <-recorder.Events)
	})
	t.Run("the victim is deleted", func(t *testing.T) {
		_, err := client.CoreV1().Pods("ns").Get(context.Background(), "batch-0", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "victim still exists: %v", err)
	})
	t.Run("the victim carried DisruptionTarget when it was deleted, beside the conditions the scheduler never saw", func(t *testing.T) {
		require.NotNil(t, atDeletion, "the victim was never deleted")
		var types []corev1.PodConditionType
		var target *corev1.PodCondition
		for i, c := range atDeletion.Status.Conditions {
			types = append(types, c.Type)
			if c.Type == corev1.DisruptionTarget {
				target = &atDeletion.Status.Conditions[i]
			}
		}
		require.NotNil(t, target, "conditions at deletion: %v", types)
		assert.Equal(t, corev1.ConditionTrue, target.Status)
		assert.Equal(t, corev1.PodReasonPreemptionByScheduler, target.Reason)
		assert.Contains(t, types, corev1.ContainersReady)
		assert.Equal(t, "once", atDeletion.Labels["restarted"])
	})
}

// A gang that needs many victims gets its room in about the time of one
// eviction, not of all of them one after another: the victims' requests
// are in flight together. Every victim is still marked before it is
// deleted.
func TestEvictVictimsInParallel(t *testing.T) {
	const n = 12
	var victims []*corev1.Pod
	var objs []runtime.Object
	for i := range n {
		v := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("low-%d", i), UID: types.UID(fmt.Sprintf("low-%d-uid", i)), ResourceVersion: "1"},
			Spec:       corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i)},
		}
		victims = append(victims, v)
		objs = append(objs, v.DeepCopy())
	}
	client := fake.NewClientset(objs...)
	// The fake client runs its reactors one at a time, so concurrency is
	// observed in front of it.
	var mu sync.Mutex
	inFlight, most, started := 0, 0, 0
	fourStarted := make(chan struct{})
	hold := func() {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		started++
		if started == 4 {
			close(fourStarted)
		}
		mu.Unlock()
		// Hold each delete until four are in flight (or a second has
		// passed, which is what one-at-a-time eviction would wait).
		select {
		case <-fourStarted:
		case <-time.After(time.Second):
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	}
	var unmarked []string
	client.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		name := action.(k8stesting.DeleteAction).GetName()
		obj, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "ns", name)
		if err == nil && !hasCondition(obj.(*corev1.Pod), corev1.DisruptionTarget) {
			unmarked = append(unmarked, name)
		}
		return false, nil, nil
	})

	p := evictor(&evictHandle{client: heldDeletes{Interface: client, hold: hold}, recorder: events.NewFakeRecorder(100)})
	start := time.Now()
	p.evict(context.Background(), trainer(), victims, nil)

	assert.GreaterOrEqual(t, most, 4, "victims' deletes in flight together")
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Empty(t, unmarked, "every victim carried DisruptionTarget when deleted")
	left, err := client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, left.Items, "every victim deleted")
}

func hasCondition(p *corev1.Pod, c corev1.PodConditionType) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == c && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// heldDeletes calls hold before every pod delete it passes on.
type heldDeletes struct {
	kubernetes.Interface
	hold func()
}

func (c heldDeletes) CoreV1() corev1client.CoreV1Interface {
	return heldCore{CoreV1Interface: c.Interface.CoreV1(), hold: c.hold}
}

type heldCore struct {
	corev1client.CoreV1Interface
	hold func()
}

func (c heldCore) Pods(ns string) corev1client.PodInterface {
	return heldPods{PodInterface: c.CoreV1Interface.Pods(ns), hold: c.hold}
}

type heldPods struct {
	corev1client.PodInterface
	hold func()
}

func (p heldPods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	p.hold()
	return p.PodInterface.Delete(ctx, name, opts)
}

// waitingPod is a pod waiting in Permit that records its preemption.
type waitingPod struct {
	fwk.WaitingPod
	pod       *corev1.Pod
	preempted bool
}

func (w *waitingPod) GetPod() *corev1.Pod { return w.pod }

func (w *waitingPod) Preempt(string, string) bool {
	w.preempted = true
	return true
}

// A victim still waiting in Permit (assumed on its node, never bound) is
// sent back to the queue in the scheduler's memory, not deleted: its group
// keeps its pods and may try again, and the preemptor does not wait for a
// termination that will never come.
func TestEvictRejectsAVictimWaitingInPermit(t *testing.T) {
	waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "batch-0", UID: "batch-0-uid"}}
	bound := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "batch-1", UID: "batch-1-uid"},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
	}
	client := fake.NewClientset(waiting.DeepCopy(), bound.DeepCopy())
	w := &waitingPod{pod: waiting}
	p := evictor(&evictHandle{client: client, recorder: events.NewFakeRecorder(10), waiting: map[types.UID]fwk.WaitingPod{waiting.UID: w}})
	// The informer's view of the pods: the waiting victim stays in the API
	// server.
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, idx.Add(waiting))
	p.pods = corelisters.NewPodLister(idx)

	g := trainer()
	inPermit := waiting.DeepCopy()
	inPermit.Spec.NodeName = "node-a"
	p.remember(g.root, []*corev1.Pod{inPermit, bound}, nil)
	p.evict(context.Background(), g, []*corev1.Pod{inPermit, bound}, nil)

	assert.True(t, w.preempted, "the waiting victim is rejected in Permit")
	_, err := client.CoreV1().Pods("ns").Get(context.Background(), "batch-0", metav1.GetOptions{})
	assert.NoError(t, err, "the waiting victim is not deleted")
	_, err = client.CoreV1().Pods("ns").Get(context.Background(), "batch-1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the bound victim is deleted: %v", err)
	assert.Zero(t, p.victimsLeft(g.root, nil), "the group does not wait for the rejected victim")
}

// Pods of lower priority than the group that were nominated to a victim's
// node lose their nomination, so they look for room elsewhere instead of
// keeping the room the group evicted for. Nominations of the group's own
// members, of pods at or above its priority and to other nodes stay.
func TestEvictClearsLowerPriorityNominationsOnVictimNodes(t *testing.T) {
	victim := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "batch-0", UID: "batch-0-uid"},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
	}
	nominatedTo := func(name, node string, prio int32) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid")},
			Spec:       corev1.PodSpec{Priority: &prio},
			Status:     corev1.PodStatus{NominatedNodeName: node},
		}
	}
	low := nominatedTo("low", "node-a", 10)
	high := nominatedTo("high", "node-a", 2000)
	member := nominatedTo("trainer-1", "node-a", 1000)
	elsewhere := nominatedTo("low-elsewhere", "node-b", 10)
	client := fake.NewClientset(victim.DeepCopy(), low.DeepCopy(), high.DeepCopy(), member.DeepCopy(), elsewhere.DeepCopy())
	p := evictor(&evictHandle{client: client, recorder: events.NewFakeRecorder(10), nominated: map[string][]*corev1.Pod{
		"node-a": {low, high, member},
		"node-b": {elsewhere},
	}})

	p.evict(context.Background(), trainer(), []*corev1.Pod{victim}, []*corev1.Pod{member})

	nominations := map[string]string{}
	for _, name := range []string{"low", "high", "trainer-1", "low-elsewhere"} {
		pod, err := client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		nominations[name] = pod.Status.NominatedNodeName
	}
	assert.Equal(t, map[string]string{"low": "", "high": "node-a", "trainer-1": "node-a", "low-elsewhere": "node-b"}, nominations)
}
