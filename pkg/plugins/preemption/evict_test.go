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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"

	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// evictHandle is the part of the framework handle evict uses.
type evictHandle struct {
	fwk.Handle
	client   kubernetes.Interface
	recorder events.EventRecorderLogger
}

func (h *evictHandle) ClientSet() kubernetes.Interface           { return h.client }
func (h *evictHandle) EventRecorder() events.EventRecorderLogger { return h.recorder }

// Parallelizer is the default profile's (the framework counts its
// goroutines in the scheduler's metrics, which must be registered).
func (h *evictHandle) Parallelizer() fwk.Parallelizer {
	schedmetrics.Register()
	return parallelize.NewParallelizer(16)
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

	p := &Preemption{handle: &evictHandle{client: client, recorder: events.NewFakeRecorder(10)}}
	preemptor := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "trainer-0", UID: "trainer-0-uid"}}
	p.evict(context.Background(), preemptor, groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "trainer"}, []*corev1.Pod{victim})

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

	p := &Preemption{handle: &evictHandle{client: heldDeletes{Interface: client, hold: hold}, recorder: events.NewFakeRecorder(100)}}
	preemptor := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "trainer-0", UID: "trainer-0-uid"}}
	start := time.Now()
	p.evict(context.Background(), preemptor, groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "trainer"}, victims)

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
