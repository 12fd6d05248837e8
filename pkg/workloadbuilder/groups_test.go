package workloadbuilder_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	wb "github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

func strp(s string) *string { return &s }

func TestNewPodGroup(t *testing.T) {
	never := v1alpha1.PreemptNever
	owner := jobOwner("train")

	// fullJob is a Job gang with every field set.
	fullJob := func() *wb.WorkloadItem {
		it := jobItem()
		it.Input.SchedulingConstraints.Value = &wb.WorkloadPodGroupSchedulingConstraints{Topology: topology("rack")}
		it.Input.DisruptionMode.Value = allMode()
		it.Input.ResourceClaims.Value = []wb.WorkloadPodGroupResourceClaim{{Name: "gpus", ResourceClaimName: strp("shared-gpus")}}
		it.Input.Priority.Value = &wb.WorkloadPriority{PriorityClassName: "high", Priority: int32p(7), PreemptionPolicy: &never}
		return it
	}

	cases := []struct {
		name         string
		item         func() *wb.WorkloadItem
		workloadName string
		groupName    string
		template     string
		want         *v1alpha1.PodGroup
		wantErr      string
	}{
		{
			name:         "a PodGroup copies every scheduling field of its template and points at its workload",
			item:         fullJob,
			workloadName: "train",
			groupName:    "train-workers",
			template:     "workers",
			want: &v1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: "train-workers", Namespace: "ml", OwnerReferences: []metav1.OwnerReference{*owner}},
				Spec: v1alpha1.PodGroupSpec{
					WorkloadRef:           &v1alpha1.WorkloadReference{WorkloadName: "train", TemplateName: "workers"},
					SchedulingPolicy:      v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 4}},
					SchedulingConstraints: &v1alpha1.PodGroupSchedulingConstraints{Topology: topology("rack")},
					ResourceClaims:        []v1alpha1.PodGroupResourceClaim{{Name: "gpus", ResourceClaimName: strp("shared-gpus")}},
					DisruptionMode:        &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}},
					PriorityClassName:     "high",
					Priority:              int32p(7),
					PreemptionPolicy:      &never,
				},
			},
		},
		{
			name:         "a PodGroup under a composite names its parent <workload>-<parent template>, whatever it is called itself",
			item:         gangOfGangs,
			workloadName: "llm",
			groupName:    "custom-name",
			template:     "b",
			want: &v1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: "custom-name", Namespace: "ml", OwnerReferences: []metav1.OwnerReference{*owner}},
				Spec: v1alpha1.PodGroupSpec{
					ParentCompositePodGroupName: strp("llm-root"),
					WorkloadRef:                 &v1alpha1.WorkloadReference{WorkloadName: "llm", TemplateName: "b"},
					SchedulingPolicy:            v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 4}},
				},
			},
		},
		{
			name:         "an unknown template is an error that lists the templates there are",
			item:         gangOfGangs,
			workloadName: "llm",
			groupName:    "llm-c",
			template:     "c",
			wantErr:      `workload "llm" has no template "c"; its templates are: a, b, root`,
		},
		{
			name:         "a composite template cannot make a PodGroup",
			item:         gangOfGangs,
			workloadName: "llm",
			groupName:    "llm-root",
			template:     "root",
			wantErr:      "is a compositePodGroupTemplate: use NewCompositePodGroup",
		},
		{
			name:         "a group name that is not a valid object name is an error",
			item:         jobItem,
			workloadName: "train",
			groupName:    "Train_Workers",
			template:     "workers",
			wantErr:      `group name "Train_Workers"`,
		},
		{
			name:         "a workload name too long to prefix the parent's name is an error",
			item:         gangOfGangs,
			workloadName: strings.Repeat("w", 250),
			groupName:    "short",
			template:     "a",
			wantErr:      "parent group name",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := wb.NewBuilder(tc.item(), options(tc.workloadName, owner))

			pg, err := b.NewPodGroup(tc.groupName, tc.template)

			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, pg)
		})
	}
}

func TestNewCompositePodGroup(t *testing.T) {
	t.Run("a nested composite copies its own fields, not its children, and links to its parent", func(t *testing.T) {
		it := fourLevels()
		l2 := it.Children[0]
		l2.Input.CompositeSchedulingConstraints.Value = &wb.WorkloadCompositePodGroupSchedulingConstraints{Topology: topology("zone")}
		l2.Input.CompositeDisruptionMode.Value = &wb.WorkloadCompositePodGroupDisruptionMode{All: &wb.WorkloadCompositePodGroupAllDisruptionMode{}}
		b := wb.NewBuilder(it, options("sim", nil))

		cpg, err := b.NewCompositePodGroup("sim-l2", "l2")

		require.NoError(t, err)
		assert.Equal(t, &v1alpha1.CompositePodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "sim-l2", Namespace: "ml"},
			Spec: v1alpha1.CompositePodGroupSpec{
				ParentCompositePodGroupName: strp("sim-l1"),
				WorkloadRef:                 &v1alpha1.WorkloadReference{WorkloadName: "sim", TemplateName: "l2"},
				SchedulingPolicy:            v1alpha1.CompositePodGroupSchedulingPolicy{Gang: &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: 1}},
				SchedulingConstraints:       &v1alpha1.CompositePodGroupSchedulingConstraints{Topology: topology("zone")},
				DisruptionMode:              &v1alpha1.CompositeDisruptionMode{All: &v1alpha1.AllCompositeDisruptionMode{}},
			},
		}, cpg)
	})

	t.Run("a leaf template cannot make a CompositePodGroup", func(t *testing.T) {
		b := wb.NewBuilder(gangOfGangs(), options("llm", nil))

		_, err := b.NewCompositePodGroup("llm-a", "a")

		require.Error(t, err)
		assert.Contains(t, err.Error(), "is a podGroupTemplate: use NewPodGroup")
	})

	t.Run("a tree the builder cannot compile surfaces the compile error", func(t *testing.T) {
		b := wb.NewBuilder(nil, options("llm", nil))

		_, err := b.NewCompositePodGroup("llm-root", "root")

		require.Error(t, err)
		assert.Contains(t, err.Error(), "the root WorkloadItem is nil")
	})
}

func TestGroups(t *testing.T) {
	t.Run("every template becomes one group named <workload>-<template>, parents first", func(t *testing.T) {
		it := fourLevels()
		it.Children = append(it.Children, leafAt("side", groupPath(specPath, 1)))
		b := wb.NewBuilder(it, options("sim", nil))

		pgs, cpgs, err := b.Groups()
		require.NoError(t, err)

		type link struct{ name, parent, template string }
		summary := func(name string, parent *string, ref *v1alpha1.WorkloadReference) link {
			p := ""
			if parent != nil {
				p = *parent
			}
			require.NotNil(t, ref)
			require.Equal(t, "sim", ref.WorkloadName)
			return link{name, p, ref.TemplateName}
		}
		var gotComposites, gotLeaves []link
		for _, g := range cpgs {
			gotComposites = append(gotComposites, summary(g.Name, g.Spec.ParentCompositePodGroupName, g.Spec.WorkloadRef))
		}
		for _, g := range pgs {
			gotLeaves = append(gotLeaves, summary(g.Name, g.Spec.ParentCompositePodGroupName, g.Spec.WorkloadRef))
		}
		assert.Equal(t, []link{{"sim-l1", "", "l1"}, {"sim-l2", "sim-l1", "l2"}, {"sim-l3", "sim-l2", "l3"}}, gotComposites)
		assert.Equal(t, []link{{"sim-side", "sim-l1", "side"}, {"sim-leaf", "sim-l3", "leaf"}}, gotLeaves)
	})

	t.Run("a Workload without a name has no group names to give", func(t *testing.T) {
		b := wb.NewBuilder(jobItem(), everything)

		_, _, err := b.Groups()

		require.Error(t, err)
		assert.Contains(t, err.Error(), "set BuildOptions.Name")
	})

	t.Run("changing a returned group leaves the cached templates alone", func(t *testing.T) {
		it := jobItem()
		it.Input.SchedulingConstraints.Value = &wb.WorkloadPodGroupSchedulingConstraints{Topology: topology("rack")}
		it.Input.Priority.Value = &wb.WorkloadPriority{Priority: int32p(5)}
		b := wb.NewBuilder(it, options("train", nil))
		pgs, _, err := b.Groups()
		require.NoError(t, err)
		require.Len(t, pgs, 1)

		pgs[0].Spec.SchedulingPolicy.Gang.MinCount = 100
		pgs[0].Spec.SchedulingConstraints.Topology[0].Key = "zone"
		*pgs[0].Spec.Priority = 50
		again, err := b.NewPodGroup("train-workers", "workers")

		require.NoError(t, err)
		assert.Equal(t, int32(4), again.Spec.SchedulingPolicy.Gang.MinCount)
		assert.Equal(t, "rack", again.Spec.SchedulingConstraints.Topology[0].Key)
		assert.Equal(t, int32(5), *again.Spec.Priority)
	})

	t.Run("groups of an existing Workload owned by it carry a controller reference to it", func(t *testing.T) {
		w := &v1alpha1.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", UID: "uid-w"},
			Spec:       v1alpha1.WorkloadSpec{PodGroupTemplates: []v1alpha1.PodGroupTemplate{gangTemplate("workers", 2)}},
		}
		owner := wb.WorkloadOwnerReference(w)
		b, err := wb.NewBuilderFromExistingWorkload(w, wb.BuildOptions{Owner: &owner})
		require.NoError(t, err)

		pgs, cpgs, err := b.Groups()

		require.NoError(t, err)
		assert.Empty(t, cpgs)
		require.Len(t, pgs, 1)
		assert.Equal(t, "w-workers", pgs[0].Name)
		assert.Equal(t, "ns", pgs[0].Namespace)
		require.Len(t, pgs[0].OwnerReferences, 1)
		ref := pgs[0].OwnerReferences[0]
		assert.Equal(t, "scheduling.phalanx.dev/v1alpha1", ref.APIVersion)
		assert.Equal(t, "Workload", ref.Kind)
		assert.Equal(t, "uid-w", string(ref.UID))
		require.NotNil(t, ref.Controller)
		assert.True(t, *ref.Controller)
	})
}
