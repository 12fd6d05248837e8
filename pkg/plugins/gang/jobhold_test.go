package gang

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestJobHoldReason(t *testing.T) {
	owner := &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "uid-1"}
	job := func(uid types.UID, ann map[string]string) metav1.Object {
		return &metav1.ObjectMeta{Name: "train", UID: uid, Annotations: ann}
	}
	tests := []struct {
		name string
		job  metav1.Object
		want string
	}{
		{name: "a gang Job's pod waits for the controller", job: job("uid-1", map[string]string{v1alpha1.GangAnnotation: "true"}),
			want: "waiting for phalanx-controller to attach the pod to PodGroup train-workers of gang Job train"},
		{name: "a Job the scheduler has not seen yet holds its pod", job: nil,
			want: "waiting for the scheduler to see Job train, to know whether it is a gang"},
		{name: "a Job without the annotation does not", job: job("uid-1", nil)},
		{name: "a Job that opted out does not", job: job("uid-1", map[string]string{v1alpha1.GangAnnotation: "false"})},
		{name: "a pod of an earlier Job of the same name does not", job: job("uid-2", map[string]string{v1alpha1.GangAnnotation: "true"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, jobHoldReason(owner, tc.job))
		})
	}
}

// jobLister is the scheduler's view of Jobs, with jobs in it.
func jobLister(jobs ...*metav1.PartialObjectMetadata) cache.GenericLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, j := range jobs {
		_ = idx.Add(j)
	}
	return cache.NewGenericLister(idx, jobsResource.GroupResource())
}

// jobPod is a pod of Job train, not yet attached to a group.
func jobPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID(name + "-uid"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "uid-1", Controller: ptr.To(true)}},
	}}
}

// A pod whose Job the scheduler never sees (its Job is gone and the
// garbage collector has not yet deleted it, or the Job watch lags) is held,
// and looked at again shortly in case the Job arrived while the queue was
// parking it. Those looks must end: the Job's arrival re-examines its pods
// anyway, and a pod looked at every second until it is collected costs a
// PreEnqueue and a timer each second, per pod.
func TestJobHoldsLookForAnUnseenJobABoundedNumberOfTimes(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	activations := 0
	j := &jobHolds{jobs: jobLister(), clock: clk, activate: func(*corev1.Pod) { activations++ }}
	pod := jobPod("train-0")

	// The queue runs PreEnqueue on every update of a held pod.
	for range 3 {
		require.NotEmpty(t, j.reason(pod), "the pod is held")
	}
	t.Run("a pod PreEnqueue sees several times has one look pending", func(t *testing.T) {
		assert.Equal(t, 1, clk.Waiters())
	})

	// Each look activates the pod, and the queue runs PreEnqueue again.
	steps := 0
	for ; steps < 1000 && clk.HasWaiters(); steps++ {
		before := activations
		clk.Step(time.Hour)
		if activations > before {
			require.NotEmpty(t, j.reason(pod), "the pod is still held")
		}
	}
	t.Run("the looks end, and no timer is left", func(t *testing.T) {
		assert.LessOrEqual(t, activations, 10, "activations of a pod whose Job never appears")
		assert.False(t, clk.HasWaiters(), "a look still pending after %d steps", steps)
	})
	t.Run("the pod stays held", func(t *testing.T) {
		assert.Contains(t, j.reason(pod), "Job train")
	})
}

// When the looks end, the pod says why it is still held, in its
// PreEnqueue message and once in a Warning event, and the Job's arrival
// still releases it.
func TestJobHoldsSayWhyTheyStopLooking(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	var events []string
	j := &jobHolds{jobs: jobLister(), clock: clk, activate: func(*corev1.Pod) {},
		warn: func(_ *corev1.Pod, reason, msg string) { events = append(events, reason+": "+msg) }}
	pod := jobPod("train-0")

	msg := j.reason(pod)
	for steps := 0; steps < 100 && clk.HasWaiters(); steps++ {
		clk.Step(time.Hour)
		msg = j.reason(pod)
	}
	require.False(t, clk.HasWaiters(), "the looks never ended")
	for range 3 {
		msg = j.reason(pod)
	}

	t.Run("the message says the pod now waits for its Job to appear", func(t *testing.T) {
		assert.Contains(t, msg, "waiting for the scheduler to see Job train")
		assert.Contains(t, msg, "not seen after 8 looks")
		assert.Contains(t, msg, "the pod waits for the Job to appear")
	})
	t.Run("one Warning event says so", func(t *testing.T) {
		require.Len(t, events, 1)
		assert.Contains(t, events[0], "JobNotSeen: waiting for the scheduler to see Job train")
		assert.Contains(t, events[0], "the pod waits for the Job to appear")
	})
	t.Run("the Job's arrival decides the pod again", func(t *testing.T) {
		job := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "uid-1", Annotations: map[string]string{v1alpha1.GangAnnotation: "true"}}}
		j.jobs = jobLister(job)
		assert.Equal(t, "waiting for phalanx-controller to attach the pod to PodGroup train-workers of gang Job train", j.reason(pod))
		job.Annotations = nil
		assert.Empty(t, j.reason(pod), "a Job that is no gang releases its pod")
	})
}
