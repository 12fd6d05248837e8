package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestGangJobWorkloadIsTheControllersWorkload(t *testing.T) {
	ctx := context.Background()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", Annotations: map[string]string{
			v1alpha1.GangAnnotation: "true", TopologyKeyAnnotation: "topology.phalanx.dev/rack",
		}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](6)},
	}
	w, ok, err := GangJobWorkload(ctx, job)
	require.NoError(t, err)
	require.True(t, ok)
	g := readJobGang(job)
	want, errs := desiredJobWorkload(ctx, job, g, nil)
	require.Empty(t, errs)
	assert.Equal(t, withJobMinCount(job, want), w)
	minCount, _ := gangMinCount(w)
	assert.Equal(t, int32(4), minCount)

	_, ok, err = GangJobWorkload(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "plain"}})
	assert.NoError(t, err)
	assert.False(t, ok, "a Job without the annotation is no gang Job")

	bad := job.DeepCopy()
	bad.Annotations[MinCountAnnotation] = "9"
	_, ok, err = GangJobWorkload(ctx, bad)
	assert.True(t, ok)
	assert.ErrorContains(t, err, "must not exceed the 4 pods the Job runs at once")
}
