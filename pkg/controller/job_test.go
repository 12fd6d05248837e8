package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestJobIntegrationCreatesTheWorkload(t *testing.T) {
	tests := []struct {
		name         string
		job          *batchv1.Job
		wantMinCount int32
		wantTopology string
	}{
		{name: "minCount defaults to the parallelism", job: gangJob("train", ptr.To[int32](4)), wantMinCount: 4},
		{name: "minCount defaults to 1 when parallelism is unset", job: gangJob("train", nil), wantMinCount: 1},
		{
			name: "minCount is capped by completions, since the Job never runs more pods than it still needs",
			job: func() *batchv1.Job {
				j := gangJob("train", ptr.To[int32](4))
				j.Spec.Completions = ptr.To[int32](2)
				return j
			}(),
			wantMinCount: 2,
		},
		{name: "the min-count annotation overrides the parallelism", job: gangJob("train", ptr.To[int32](4), MinCountAnnotation, "3"), wantMinCount: 3},
		{
			name:         "the topology-key annotation becomes the group's constraint",
			job:          gangJob("train", ptr.To[int32](4), TopologyKeyAnnotation, "topology.phalanx.dev/rack"),
			wantMinCount: 4, wantTopology: "topology.phalanx.dev/rack",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.job)
			require.NoError(t, f.c.jobs.syncJob(context.Background(), key(tc.job.Name)))

			w := f.workload(tc.job.Name)
			assert.Equal(t, []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: tc.job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}}, w.OwnerReferences)
			assert.Equal(t, &v1alpha1.TypedLocalObjectReference{APIGroup: "batch", Kind: "Job", Name: "train"}, w.Spec.ControllerRef)
			require.Len(t, w.Spec.PodGroupTemplates, 1)
			tmpl := w.Spec.PodGroupTemplates[0]
			assert.Equal(t, v1alpha1.JobTemplateName, tmpl.Name)
			require.NotNil(t, tmpl.SchedulingPolicy.Gang)
			assert.Equal(t, tc.wantMinCount, tmpl.SchedulingPolicy.Gang.MinCount)
			if tc.wantTopology == "" {
				assert.Nil(t, tmpl.SchedulingConstraints)
			} else {
				assert.Equal(t, tc.wantTopology, tmpl.SchedulingConstraints.Topology[0].Key)
			}
			assert.True(t, hasEvent(f.drainEvents(), "Normal", EventWorkloadCreated, "PodGroup train-workers"))
		})
	}

	t.Run("the group takes its priority from the pod template", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		job.Spec.Template.Spec.PriorityClassName = "research"
		job.Spec.Template.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
		f := newFixture(t, job)
		require.NoError(t, f.c.jobs.syncJob(context.Background(), key("train")))

		tmpl := f.workload("train").Spec.PodGroupTemplates[0]
		assert.Equal(t, "research", tmpl.PriorityClassName)
		assert.Equal(t, v1alpha1.PreemptNever, *tmpl.PreemptionPolicy)
	})

	t.Run("a Job whose pods are neither gated nor labelled is warned about the race", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		job.Spec.Template.Spec.SchedulingGates = nil
		f := newFixture(t, job)
		require.NoError(t, f.c.jobs.syncJob(context.Background(), key("train")))
		assert.True(t, hasEvent(f.drainEvents(), "Warning", EventGangNotGated, GangSchedulingGate))
	})

	t.Run("a Job that labels its pod template itself needs no gate and gets no warning", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		job.Spec.Template.Spec.SchedulingGates = nil
		job.Spec.Template.Labels = map[string]string{v1alpha1.PodGroupLabel: "train-workers"}
		f := newFixture(t, job)
		require.NoError(t, f.c.jobs.syncJob(context.Background(), key("train")))
		events := f.drainEvents()
		assert.True(t, hasEvent(events, EventWorkloadCreated))
		assert.False(t, hasEvent(events, EventGangNotGated))
	})

	t.Run("a Job without the annotation, or with it set to false, is left alone", func(t *testing.T) {
		plain := gangJob("plain", ptr.To[int32](2))
		delete(plain.Annotations, v1alpha1.GangAnnotation)
		off := gangJob("off", ptr.To[int32](2), v1alpha1.GangAnnotation, "false")
		f := newFixture(t, plain, off)
		require.NoError(t, f.c.jobs.syncJob(context.Background(), key("plain")))
		require.NoError(t, f.c.jobs.syncJob(context.Background(), key("off")))
		assert.Empty(t, writes(f.phalanx.Actions()))
		assert.Empty(t, f.drainEvents())
	})

	t.Run("a Job scaled to zero gets its Workload only once it scales up", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](0))
		f := newFixture(t, job)
		require.NoError(t, f.c.jobs.syncJob(context.Background(), key("train")))
		assert.Empty(t, writes(f.phalanx.Actions()))
		assert.Empty(t, f.drainEvents(), "scaled to zero is not an error")
	})

	t.Run("a Workload of the Job's name that the Job does not control is reported, not touched", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](2))
		foreign, _ := jobObjects(t, job)
		foreign.OwnerReferences = nil
		f := newFixture(t, job, foreign)
		require.NoError(t, f.c.jobs.syncJob(context.Background(), key("train")))
		assert.Empty(t, writes(f.phalanx.Actions()))
		assert.True(t, hasEvent(f.drainEvents(), "Warning", EventWorkloadConflict))
	})
}

func TestJobIntegrationReportsInvalidAnnotationsAtTheirFieldPaths(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(j *batchv1.Job)
		want   string
	}{
		{
			name:   "a min-count that is not a number",
			mutate: func(j *batchv1.Job) { j.Annotations[MinCountAnnotation] = "four" },
			want:   `metadata.annotations[scheduling.phalanx.dev/min-count]: Invalid value: "four": must be a positive integer, such as "4"`,
		},
		{
			name:   "a min-count of zero",
			mutate: func(j *batchv1.Job) { j.Annotations[MinCountAnnotation] = "0" },
			want:   `metadata.annotations[scheduling.phalanx.dev/min-count]: Invalid value: 0: must be greater than or equal to 1`,
		},
		{
			name:   "a min-count above what the Job runs at once",
			mutate: func(j *batchv1.Job) { j.Annotations[MinCountAnnotation] = "5" },
			want:   `metadata.annotations[scheduling.phalanx.dev/min-count]: Invalid value: 5: must not exceed the 4 pods the Job runs at once (spec.parallelism)`,
		},
		{
			name: "a parallelism-derived minCount above completions names spec.completions",
			mutate: func(j *batchv1.Job) {
				j.Spec.Completions = ptr.To[int32](2)
				j.Annotations[MinCountAnnotation] = "3"
			},
			want: `metadata.annotations[scheduling.phalanx.dev/min-count]: Invalid value: 3: must not exceed the 2 pods the Job runs at once (spec.completions)`,
		},
		{
			name:   "an empty topology key",
			mutate: func(j *batchv1.Job) { j.Annotations[TopologyKeyAnnotation] = "" },
			want:   `metadata.annotations[scheduling.phalanx.dev/topology-key]: Required value`,
		},
		{
			name:   "a topology key that is not a label key",
			mutate: func(j *batchv1.Job) { j.Annotations[TopologyKeyAnnotation] = "rack key" },
			want:   `metadata.annotations[scheduling.phalanx.dev/topology-key]: Invalid value: "rack key"`,
		},
		{
			name:   "a gang annotation that is neither true nor false",
			mutate: func(j *batchv1.Job) { j.Annotations[v1alpha1.GangAnnotation] = "yes" },
			want:   `metadata.annotations[scheduling.phalanx.dev/gang]: Unsupported value: "yes": supported values: "true", "false"`,
		},
		{
			name:   "a pod template labelled for another group",
			mutate: func(j *batchv1.Job) { j.Spec.Template.Labels = map[string]string{v1alpha1.PodGroupLabel: "other"} },
			want:   `spec.template.metadata.labels[scheduling.phalanx.dev/pod-group]: Invalid value: "other": a gang Job's pods join the PodGroup "train-workers"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name+" is a Warning on the Job and creates no Workload", func(t *testing.T) {
			job := gangJob("train", ptr.To[int32](4))
			tc.mutate(job)
			f := newFixture(t, job)
			require.NoError(t, f.c.jobs.syncJob(context.Background(), key("train")))
			assert.Empty(t, writes(f.phalanx.Actions()))
			events := f.drainEvents()
			assert.True(t, hasEvent(events, "Warning", EventInvalidGang, tc.want), "events: %v", events)
		})
	}
}

func TestJobIntegrationUpdatesAnExistingGang(t *testing.T) {
	ctx := context.Background()

	// running returns a fixture where job's Workload and PodGroup exist,
	// and then the Job changes to changed.
	running := func(t *testing.T, job, changed *batchv1.Job) *fixture {
		w, pg := jobObjects(t, job)
		f := newFixture(t, job, w, pg)
		changed.Generation = 2
		f.cache(changed)
		return f
	}

	t.Run("the PodGroup's minCount follows the parallelism", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](4))
		scaled := job.DeepCopy()
		scaled.Spec.Parallelism = ptr.To[int32](6)
		f := running(t, job, scaled)
		require.NoError(t, f.c.jobs.syncJob(ctx, key("train")))

		assert.Equal(t, int32(6), f.podGroup("train-workers").Spec.SchedulingPolicy.Gang.MinCount)
		assert.Equal(t, int32(6), f.workload("train").Spec.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount,
			"the Workload's template says the same, for groups made later")
		assert.True(t, hasEvent(f.drainEvents(), "Normal", EventMinCountChanged, "from 4 to 6"))
	})

	t.Run("an explicit min-count is not moved by the parallelism", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](4), MinCountAnnotation, "4")
		scaled := job.DeepCopy()
		scaled.Spec.Parallelism = ptr.To[int32](6)
		f := running(t, job, scaled)
		require.NoError(t, f.c.jobs.syncJob(ctx, key("train")))

		assert.Equal(t, int32(4), f.podGroup("train-workers").Spec.SchedulingPolicy.Gang.MinCount)
		assert.Equal(t, []string{"update workloads/status"}, writes(f.phalanx.Actions()), "only the JobConfigValid condition is written")
	})

	t.Run("a Job scaled to zero keeps its gang size", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](4))
		paused := job.DeepCopy()
		paused.Spec.Parallelism = ptr.To[int32](0)
		f := running(t, job, paused)
		require.NoError(t, f.c.jobs.syncJob(ctx, key("train")))
		assert.Equal(t, int32(4), f.podGroup("train-workers").Spec.SchedulingPolicy.Gang.MinCount)
		assert.Empty(t, writes(f.phalanx.Actions()))
	})

	t.Run("an invalid annotation becomes the Workload's condition and the PodGroup keeps its settings", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](4))
		broken := job.DeepCopy()
		broken.Annotations[MinCountAnnotation] = "0"
		f := running(t, job, broken)
		require.NoError(t, f.c.jobs.syncJob(ctx, key("train")))

		assert.Equal(t, int32(4), f.podGroup("train-workers").Spec.SchedulingPolicy.Gang.MinCount)
		cond := meta.FindStatusCondition(f.workload("train").Status.Conditions, ConditionJobConfigValid)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Equal(t, v1alpha1.ReasonInvalid, cond.Reason)
		want := `metadata.annotations[scheduling.phalanx.dev/min-count]: Invalid value: 0: must be greater than or equal to 1`
		assert.Contains(t, cond.Message, want)
		assert.True(t, hasEvent(f.drainEvents(), "Warning", EventInvalidGang, want))

		// Fixed again: the condition turns True.
		f.cache(f.workload("train"))
		f.cache(job)
		require.NoError(t, f.c.jobs.syncJob(ctx, key("train")))
		cond = meta.FindStatusCondition(f.workload("train").Status.Conditions, ConditionJobConfigValid)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionTrue, cond.Status)
	})

	t.Run("a changed topology key is refused as immutable at the annotation", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](4), TopologyKeyAnnotation, "topology.kubernetes.io/zone")
		moved := job.DeepCopy()
		moved.Annotations[TopologyKeyAnnotation] = "topology.phalanx.dev/rack"
		f := running(t, job, moved)
		require.NoError(t, f.c.jobs.syncJob(ctx, key("train")))

		cond := meta.FindStatusCondition(f.workload("train").Status.Conditions, ConditionJobConfigValid)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Contains(t, cond.Message,
			`metadata.annotations[scheduling.phalanx.dev/topology-key]: Invalid value: "topology.phalanx.dev/rack": schedulingConstraints is immutable`)
		assert.Equal(t, "topology.kubernetes.io/zone", f.workload("train").Spec.PodGroupTemplates[0].SchedulingConstraints.Topology[0].Key)
	})

	t.Run("a removed topology key is refused at the annotation too", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](4), TopologyKeyAnnotation, "topology.kubernetes.io/zone")
		removed := job.DeepCopy()
		delete(removed.Annotations, TopologyKeyAnnotation)
		f := running(t, job, removed)
		require.NoError(t, f.c.jobs.syncJob(ctx, key("train")))

		cond := meta.FindStatusCondition(f.workload("train").Status.Conditions, ConditionJobConfigValid)
		require.NotNil(t, cond)
		assert.Contains(t, cond.Message, `metadata.annotations[scheduling.phalanx.dev/topology-key]: Invalid value: "": schedulingConstraints is immutable`)
	})
}

func TestJobGangShrinksToWhatRemainsToRun(t *testing.T) {
	tests := []struct {
		name                   string
		parallelism, completed *int32
		minCount               string
		succeeded              int32
		want                   int32
	}{
		{name: "completions 5, parallelism 4, 4 succeeded: the fifth pod is a gang of 1",
			parallelism: ptr.To[int32](4), completed: ptr.To[int32](5), succeeded: 4, want: 1},
		{name: "completions 5, parallelism 4, 1 succeeded: 4 still run together",
			parallelism: ptr.To[int32](4), completed: ptr.To[int32](5), succeeded: 1, want: 4},
		{name: "completions = parallelism = 3, 2 succeeded: the retry of the failed pod runs alone",
			parallelism: ptr.To[int32](3), completed: ptr.To[int32](3), succeeded: 2, want: 1},
		{name: "an explicit min-count is capped by what remains",
			parallelism: ptr.To[int32](4), completed: ptr.To[int32](6), minCount: "4", succeeded: 4, want: 2},
		{name: "an explicit min-count below what remains stays",
			parallelism: ptr.To[int32](4), completed: ptr.To[int32](8), minCount: "2", succeeded: 4, want: 2},
		{name: "a work queue (no completions) shrinks by what succeeded",
			parallelism: ptr.To[int32](4), succeeded: 1, want: 3},
		{name: "never below 1 once everything succeeded",
			parallelism: ptr.To[int32](3), completed: ptr.To[int32](3), succeeded: 3, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ann []string
			if tc.minCount != "" {
				ann = []string{MinCountAnnotation, tc.minCount}
			}
			job := gangJob("train", tc.parallelism, ann...)
			job.Spec.Completions = tc.completed
			w, pg := jobObjects(t, job)
			progressed := job.DeepCopy()
			progressed.Status.Succeeded = tc.succeeded
			f := newFixture(t, progressed, w, pg)
			require.NoError(t, f.c.jobs.syncJob(context.Background(), key("train")))

			assert.Equal(t, tc.want, f.podGroup("train-workers").Spec.SchedulingPolicy.Gang.MinCount)
			assert.Equal(t, tc.want, f.workload("train").Spec.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount)
		})
	}

	t.Run("a Job that becomes a gang after some pods succeeded starts with what remains", func(t *testing.T) {
		job := gangJob("train", ptr.To[int32](4))
		job.Spec.Completions = ptr.To[int32](5)
		job.Status.Succeeded = 3
		f := newFixture(t, job)
		require.NoError(t, f.c.jobs.syncJob(context.Background(), key("train")))
		assert.Equal(t, int32(2), f.workload("train").Spec.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount)
		assert.True(t, hasEvent(f.drainEvents(), "Normal", EventWorkloadCreated, "a gang of 2"))
	})
}
