package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	phfake "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned/fake"
)

// TestControllersWorkTogether runs the controllers with their informers
// over fake clientsets, so the event handlers are exercised: a gang Job
// leads to a Workload, the Workload to a PodGroup, the PodGroup to the
// release of the Job's gated pods, and the pods to the group's counters.
func TestControllersWorkTogether(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kubefake.NewClientset()
	ph := phfake.NewSimpleClientset()
	c, err := New(kube, ph, Options{EventRecorder: record.NewFakeRecorder(100), StatusDelay: -1})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	require.True(t, c.HasSynced())

	job := gangJob("train", ptr.To[int32](2))
	_, err = kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range []string{"train-a", "train-b"} {
		pod := jobPod(job, name)
		pod.Spec.NodeName = "node-1"
		_, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// The fake API serves no scheduler: the pods are created with a node so
	// that "scheduled" has something to count.
	assert.Eventually(t, func() bool {
		pg, err := ph.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train-workers", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false
		}
		require.NoError(t, err)
		return pg.Status.Members == 2 && pg.Status.Scheduled == 2
	}, 30*time.Second, 20*time.Millisecond, "the PodGroup exists and counts both pods")

	for _, name := range []string{"train-a", "train-b"} {
		pod, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "train-workers", pod.Labels[v1alpha1.PodGroupLabel], name)
		assert.Empty(t, pod.Spec.SchedulingGates, name)
	}
	pod, err := kube.CoreV1().Pods(ns).Get(ctx, "train-a", metav1.GetOptions{})
	require.NoError(t, err)
	pod.Status.Phase = corev1.PodRunning
	_, err = kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool {
		pg, err := ph.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train-workers", metav1.GetOptions{})
		require.NoError(t, err)
		return pg.Status.Running == 1
	}, 30*time.Second, 20*time.Millisecond, "a pod turning Running is counted")
}
