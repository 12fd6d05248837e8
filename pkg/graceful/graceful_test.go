package graceful

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// doneQueue records which pods the scheduling loop handed back.
type doneQueue struct {
	internalqueue.SchedulingQueue
	mu   sync.Mutex
	done []types.UID
}

func (q *doneQueue) Done(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.done = append(q.done, uid)
}

func queued(name string) *framework.QueuedPodInfo {
	return &framework.QueuedPodInfo{PodInfo: &framework.PodInfo{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}}}
}

// TestStopHoldsTheSchedulingLoop: the loop gets pods until the stop
// begins; a pod popped just as it begins is handed back to the queue, not
// scheduled; after that the loop gets nothing, and its calls return only
// once the instance's context has ended, so it does not spin.
func TestStopHoldsTheSchedulingLoop(t *testing.T) {
	pops := make(chan *framework.QueuedPodInfo)
	q := &doneQueue{}
	sched := &scheduler.Scheduler{SchedulingQueue: q, NextEntity: func(klog.Logger) (framework.QueuedEntityInfo, error) {
		return <-pops, nil
	}}
	term, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	l := New(context.Background(), term, time.Second)
	l.Attach(sched)
	logger := klog.Background()

	go func() { pops <- queued("before") }()
	e, err := sched.NextEntity(logger)
	require.NoError(t, err)
	assert.Equal(t, "before", e.(*framework.QueuedPodInfo).Pod.Name, "before the stop the loop gets its pods")

	type result struct {
		e   framework.QueuedEntityInfo
		err error
	}
	got := make(chan result, 1)
	go func() {
		e, err := sched.NextEntity(logger) // waits in the queue's Pop
		got <- result{e, err}
	}()
	time.Sleep(20 * time.Millisecond)
	sigterm()
	<-l.Done() // nothing admitted: the stop ends at once
	pops <- queued("during")
	r := <-got
	require.NoError(t, r.err)
	assert.Nil(t, r.e, "a pod popped as the stop began is not scheduled")
	q.mu.Lock()
	assert.Equal(t, []types.UID{"during"}, q.done, "and the queue no longer counts it in flight")
	q.mu.Unlock()

	e, err = sched.NextEntity(logger)
	assert.NoError(t, err)
	assert.Nil(t, e, "after the stop the loop gets nothing")
	assert.Error(t, l.Context().Err(), "the instance's context ends with the stop")
	assert.Empty(t, l.Stop().Left)
}

// TestKillEndsAtOnce: a kill needs no signal and waits for nothing.
func TestKillEndsAtOnce(t *testing.T) {
	l := New(context.Background(), context.Background(), time.Hour)
	l.Kill()
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is open after Kill")
	}
	assert.Error(t, l.Context().Err())
}
