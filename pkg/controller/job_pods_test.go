package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestJobPodsAreAttachedAndReleased(t *testing.T) {
	ctx := context.Background()

	t.Run("a gated pod gets the label and loses only the gang gate, in one patch", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		job.Spec.Template.Spec.SchedulingGates = append(job.Spec.Template.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "example.com/quota"})
		w, pg := jobObjects(t, job)
		pod := jobPod(job, "train-abc")
		f := newFixture(t, job, w, pg, pod)
		require.NoError(t, f.c.jobs.syncPod(ctx, key(pod.Name)))

		got := f.pod(pod.Name)
		assert.Equal(t, "train-workers", got.Labels[v1alpha1.PodGroupLabel])
		assert.Equal(t, "train", got.Labels["batch.kubernetes.io/job-name"], "other labels stay")
		assert.Equal(t, []corev1.PodSchedulingGate{{Name: "example.com/quota"}}, got.Spec.SchedulingGates)
		assert.Equal(t, []string{"patch pods"}, writes(f.kube.Actions()))
	})

	t.Run("a pod stays gated until its PodGroup exists", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		w, _ := jobObjects(t, job)
		pod := jobPod(job, "train-abc")
		f := newFixture(t, job, w, pod)
		require.NoError(t, f.c.jobs.syncPod(ctx, key(pod.Name)))
		assert.Empty(t, writes(f.kube.Actions()))
	})

	t.Run("a pod stays gated when the PodGroup of that name is not the Job's", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		w, pg := jobObjects(t, job)
		pg.OwnerReferences = nil
		pod := jobPod(job, "train-abc")
		f := newFixture(t, job, w, pg, pod)
		require.NoError(t, f.c.jobs.syncPod(ctx, key(pod.Name)))
		assert.Empty(t, writes(f.kube.Actions()))
	})

	t.Run("a pod labelled by its template and not gated needs nothing", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		job.Spec.Template.Spec.SchedulingGates = nil
		job.Spec.Template.Labels = map[string]string{v1alpha1.PodGroupLabel: "train-workers"}
		w, pg := jobObjects(t, job)
		pod := jobPod(job, "train-abc")
		pod.Labels[v1alpha1.PodGroupLabel] = "train-workers"
		f := newFixture(t, job, w, pg, pod)
		require.NoError(t, f.c.jobs.syncPod(ctx, key(pod.Name)))
		assert.Empty(t, writes(f.kube.Actions()))
	})

	t.Run("an ungated, unlabelled pod is still labelled", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		job.Spec.Template.Spec.SchedulingGates = nil
		w, pg := jobObjects(t, job)
		pod := jobPod(job, "train-abc")
		f := newFixture(t, job, w, pg, pod)
		require.NoError(t, f.c.jobs.syncPod(ctx, key(pod.Name)))
		assert.Equal(t, "train-workers", f.pod(pod.Name).Labels[v1alpha1.PodGroupLabel])
	})

	t.Run("a pod labelled for another group keeps its gate", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		w, pg := jobObjects(t, job)
		pod := jobPod(job, "train-abc")
		pod.Labels[v1alpha1.PodGroupLabel] = "other"
		f := newFixture(t, job, w, pg, pod)
		require.NoError(t, f.c.jobs.syncPod(ctx, key(pod.Name)))
		assert.Empty(t, writes(f.kube.Actions()))
	})

	t.Run("a pod of an earlier Job with the same name is left alone", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		w, pg := jobObjects(t, job)
		pod := jobPod(job, "train-abc")
		pod.OwnerReferences[0].UID = "uid-of-a-deleted-job"
		f := newFixture(t, job, w, pg, pod)
		require.NoError(t, f.c.jobs.syncPod(ctx, key(pod.Name)))
		assert.Empty(t, writes(f.kube.Actions()))
	})

	t.Run("gated pods of a Job that is not a gang are reported once per Job", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		delete(job.Annotations, v1alpha1.GangAnnotation)
		a, b := jobPod(job, "train-a"), jobPod(job, "train-b")
		f := newFixture(t, job, a, b)
		require.NoError(t, f.c.jobs.syncPod(ctx, key(a.Name)))
		require.NoError(t, f.c.jobs.syncPod(ctx, key(b.Name)))

		assert.Empty(t, writes(f.kube.Actions()), "the gate is the user's to remove")
		events := f.drainEvents()
		assert.Len(t, events, 1)
		assert.True(t, hasEvent(events, "Warning", EventGatedWithoutGang, v1alpha1.GangAnnotation))
	})

	t.Run("finished and terminating pods are not touched", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		w, pg := jobObjects(t, job)
		done := jobPod(job, "train-done")
		done.Status.Phase = corev1.PodSucceeded
		leaving := jobPod(job, "train-leaving")
		leaving.DeletionTimestamp = &metav1.Time{}
		f := newFixture(t, job, w, pg, done, leaving)
		require.NoError(t, f.c.jobs.syncPod(ctx, key(done.Name)))
		require.NoError(t, f.c.jobs.syncPod(ctx, key(leaving.Name)))
		assert.Empty(t, writes(f.kube.Actions()))
	})
}
