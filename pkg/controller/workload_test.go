package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func gangTemplate(name string, minCount int32, topologyKey string) v1alpha1.PodGroupTemplate {
	t := v1alpha1.PodGroupTemplate{
		Name:             name,
		SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: minCount}},
	}
	if topologyKey != "" {
		t.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: []v1alpha1.TopologyConstraint{{Key: topologyKey}}}
	}
	return t
}

// multilevel mirrors manifests/samples/workload-multilevel.yaml, plus a
// second top-level template, and sets every field a group copies.
func multilevel() *v1alpha1.Workload {
	never := v1alpha1.PreemptNever
	workers := gangTemplate("workers", 8, "topology.phalanx.dev/rack")
	workers.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
	workers.PriorityClassName = "training"
	workers.MinRuntimeSeconds = ptr.To[int32](600)
	return &v1alpha1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "multilevel", Namespace: ns, UID: "uid-multilevel", Generation: 1},
		Spec: v1alpha1.WorkloadSpec{
			PodGroupTemplates: []v1alpha1.PodGroupTemplate{{
				Name:             "monitor",
				SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}},
				Priority:         ptr.To[int32](5),
			}},
			CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplate{{
				CompositePodGroupTemplateFields: v1alpha1.CompositePodGroupTemplateFields{
					Name:                  "root",
					SchedulingPolicy:      v1alpha1.CompositePodGroupSchedulingPolicy{Gang: &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
					SchedulingConstraints: &v1alpha1.CompositePodGroupSchedulingConstraints{Topology: []v1alpha1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}}},
					DisruptionMode:        &v1alpha1.CompositeDisruptionMode{All: &v1alpha1.AllCompositeDisruptionMode{}},
					PriorityClassName:     "training",
					PreemptionPolicy:      &never,
					PodGroupTemplates:     []v1alpha1.PodGroupTemplate{workers, gangTemplate("driver", 1, "topology.phalanx.dev/rack")},
				},
			}},
		},
	}
}

func TestWorkloadController(t *testing.T) {
	ctx := context.Background()

	t.Run("a Workload gets one group per template, linked to its parent, its template and its Workload", func(t *testing.T) {
		w := multilevel()
		f := newFixture(t, w)
		require.NoError(t, f.c.workloads.sync(ctx, key(w.Name)))

		root, err := f.phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Get(ctx, "multilevel-root", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, root.Spec.ParentCompositePodGroupName, "the root has no parent")
		assert.Equal(t, &v1alpha1.WorkloadReference{WorkloadName: "multilevel", TemplateName: "root"}, root.Spec.WorkloadRef)
		assert.Equal(t, int32(2), root.Spec.SchedulingPolicy.Gang.MinGroupCount)
		assert.Equal(t, "topology.kubernetes.io/zone", root.Spec.SchedulingConstraints.Topology[0].Key)
		assert.NotNil(t, root.Spec.DisruptionMode.All)
		assert.Equal(t, "training", root.Spec.PriorityClassName)
		assert.Equal(t, v1alpha1.PreemptNever, *root.Spec.PreemptionPolicy)

		tests := []struct {
			name     string
			template string
			parent   *string
			check    func(t *testing.T, pg *v1alpha1.PodGroup)
		}{
			{"multilevel-workers", "workers", ptr.To("multilevel-root"), func(t *testing.T, pg *v1alpha1.PodGroup) {
				assert.Equal(t, int32(8), pg.Spec.SchedulingPolicy.Gang.MinCount)
				assert.Equal(t, "topology.phalanx.dev/rack", pg.Spec.SchedulingConstraints.Topology[0].Key)
				assert.NotNil(t, pg.Spec.DisruptionMode.All)
				assert.Equal(t, "training", pg.Spec.PriorityClassName)
				assert.Equal(t, ptr.To[int32](600), pg.Spec.MinRuntimeSeconds)
			}},
			{"multilevel-driver", "driver", ptr.To("multilevel-root"), func(t *testing.T, pg *v1alpha1.PodGroup) {
				assert.Equal(t, int32(1), pg.Spec.SchedulingPolicy.Gang.MinCount)
				assert.Nil(t, pg.Spec.DisruptionMode)
				assert.Nil(t, pg.Spec.MinRuntimeSeconds, "a template without one leaves the PriorityClass's and the profile's defaults")
			}},
			{"multilevel-monitor", "monitor", nil, func(t *testing.T, pg *v1alpha1.PodGroup) {
				assert.NotNil(t, pg.Spec.SchedulingPolicy.Basic)
				assert.Equal(t, int32(5), *pg.Spec.Priority)
			}},
		}
		for _, tc := range tests {
			pg := f.podGroup(tc.name)
			assert.Equal(t, tc.parent, pg.Spec.ParentCompositePodGroupName, tc.name)
			assert.Equal(t, &v1alpha1.WorkloadReference{WorkloadName: "multilevel", TemplateName: tc.template}, pg.Spec.WorkloadRef, tc.name)
			tc.check(t, pg)
		}

		wantOwner := metav1.OwnerReference{
			APIVersion: "scheduling.phalanx.dev/v1alpha1", Kind: "Workload", Name: "multilevel", UID: types.UID("uid-multilevel"),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}
		assert.Equal(t, []metav1.OwnerReference{wantOwner}, root.OwnerReferences)
		for _, tc := range tests {
			assert.Equal(t, []metav1.OwnerReference{wantOwner}, f.podGroup(tc.name).OwnerReferences, tc.name)
		}
		assert.Equal(t, []string{
			"create compositepodgroups", "create podgroups", "create podgroups", "create podgroups", "update workloads/status",
		}, writes(f.phalanx.Actions()), "composites are created before the PodGroups that name them")

		cond := meta.FindStatusCondition(f.workload("multilevel").Status.Conditions, ConditionGroupsCreated)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionTrue, cond.Status)
		assert.Equal(t, ReasonCreated, cond.Reason)
		assert.Contains(t, cond.Message, "4 groups exist")
		assert.True(t, hasEvent(f.drainEvents(), "Normal", "GroupsCreated"))
	})

	t.Run("existing groups are never rewritten when the template changes", func(t *testing.T) {
		w := multilevel()
		f := newFixture(t, w)
		require.NoError(t, f.c.workloads.sync(ctx, key(w.Name)))
		for _, name := range []string{"multilevel-workers", "multilevel-driver", "multilevel-monitor"} {
			f.cache(f.podGroup(name))
		}
		root, err := f.phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Get(ctx, "multilevel-root", metav1.GetOptions{})
		require.NoError(t, err)
		f.cache(root)

		changed := f.workload("multilevel")
		changed.Spec.CompositePodGroupTemplates[0].PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount = 16
		changed.Generation = 2
		f.cache(changed)
		f.phalanx.ClearActions()
		require.NoError(t, f.c.workloads.sync(ctx, key(w.Name)))

		assert.Equal(t, int32(8), f.podGroup("multilevel-workers").Spec.SchedulingPolicy.Gang.MinCount,
			"the Workload controller does not propagate a template's minCount to an existing PodGroup")
		assert.Equal(t, []string{"update workloads/status"}, writes(f.phalanx.Actions()),
			"only the condition's observedGeneration moves")
	})

	t.Run("a deleted group is re-created from the current template", func(t *testing.T) {
		w := multilevel()
		f := newFixture(t, w)
		require.NoError(t, f.c.workloads.sync(ctx, key(w.Name)))
		for _, name := range []string{"multilevel-driver", "multilevel-monitor"} {
			f.cache(f.podGroup(name))
		}
		root, err := f.phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Get(ctx, "multilevel-root", metav1.GetOptions{})
		require.NoError(t, err)
		f.cache(root)
		require.NoError(t, f.phalanx.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, "multilevel-workers", metav1.DeleteOptions{}))

		changed := f.workload("multilevel")
		changed.Spec.CompositePodGroupTemplates[0].PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount = 16
		changed.Generation = 2
		f.cache(changed)
		f.phalanx.ClearActions()
		require.NoError(t, f.c.workloads.sync(ctx, key(w.Name)))

		assert.Equal(t, int32(16), f.podGroup("multilevel-workers").Spec.SchedulingPolicy.Gang.MinCount)
		assert.Equal(t, []string{"create podgroups", "update workloads/status"}, writes(f.phalanx.Actions()),
			"only the missing group is created")
	})

	t.Run("a group of the same name that belongs to someone else is a conflict, not overwritten", func(t *testing.T) {
		w := multilevel()
		foreign := &v1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "multilevel-driver", Namespace: ns, UID: "uid-foreign"},
			Spec:       v1alpha1.PodGroupSpec{SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 3}}},
		}
		f := newFixture(t, w, foreign)
		require.NoError(t, f.c.workloads.sync(ctx, key(w.Name)))

		assert.Empty(t, f.podGroup("multilevel-driver").OwnerReferences, "the foreign group is left alone")
		cond := meta.FindStatusCondition(f.workload("multilevel").Status.Conditions, ConditionGroupsCreated)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Equal(t, ReasonConflict, cond.Reason)
		assert.Contains(t, cond.Message, "PodGroup multilevel-driver already exists and is not controlled by this Workload")
		assert.True(t, hasEvent(f.drainEvents(), "Warning", ReasonConflict, "multilevel-driver"))
	})
}

func TestWorkloadControllerRejectsInvalidWorkloads(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(w *v1alpha1.Workload)
		want   string
	}{
		{
			name: "the all disruption mode on a basic composite is reported at its path",
			mutate: func(w *v1alpha1.Workload) {
				root := &w.Spec.CompositePodGroupTemplates[0]
				root.SchedulingPolicy = v1alpha1.CompositePodGroupSchedulingPolicy{Basic: &v1alpha1.CompositeBasicSchedulingPolicy{}}
			},
			want: "spec.compositePodGroupTemplates[0].disruptionMode: Invalid value: \"all\": the disruptionMode `all` is not supported with the Basic scheduling policy",
		},
		{
			name: "a child named like its parent is a duplicate",
			mutate: func(w *v1alpha1.Workload) {
				w.Spec.CompositePodGroupTemplates[0].PodGroupTemplates[1].Name = "root"
			},
			want: `spec.compositePodGroupTemplates[0].podGroupTemplates[1].name: Duplicate value: "root"`,
		},
		{
			name: "a name used in two top-level trees is a duplicate",
			mutate: func(w *v1alpha1.Workload) {
				w.Spec.PodGroupTemplates[0].Name = "driver"
			},
			want: `spec.compositePodGroupTemplates[0].podGroupTemplates[1].name: Duplicate value: "driver"`,
		},
		{
			name: "a child whose priority class differs from the root's is reported at the child",
			mutate: func(w *v1alpha1.Workload) {
				w.Spec.CompositePodGroupTemplates[0].PodGroupTemplates[1].PriorityClassName = "batch-low"
			},
			want: `spec.compositePodGroupTemplates[0].podGroupTemplates[1].priorityClassName: Invalid value: "batch-low": all priority and priorityClassName values must be identical`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := multilevel()
			tc.mutate(w)
			f := newFixture(t, w)
			require.NoError(t, f.c.workloads.sync(context.Background(), key(w.Name)))

			assert.Equal(t, []string{"update workloads/status"}, writes(f.phalanx.Actions()), "no group is created")
			cond := meta.FindStatusCondition(f.workload(w.Name).Status.Conditions, ConditionGroupsCreated)
			require.NotNil(t, cond)
			assert.Equal(t, metav1.ConditionFalse, cond.Status)
			assert.Equal(t, v1alpha1.ReasonInvalid, cond.Reason)
			assert.Contains(t, cond.Message, tc.want)
			assert.True(t, hasEvent(f.drainEvents(), "Warning", v1alpha1.ReasonInvalid, tc.want))

			// A second reconcile finds the same condition: no write, no Event.
			f.cache(f.workload(w.Name))
			f.phalanx.ClearActions()
			require.NoError(t, f.c.workloads.sync(context.Background(), key(w.Name)))
			assert.Empty(t, writes(f.phalanx.Actions()))
			assert.Empty(t, f.drainEvents())
		})
	}
}
