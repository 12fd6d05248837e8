package workloadbuilder_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	wb "github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

func gangTemplate(name string, minCount int32) v1alpha1.PodGroupTemplate {
	return v1alpha1.PodGroupTemplate{
		Name:             name,
		SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: minCount}},
	}
}

func compositeGangFields(name string, minGroupCount int32, leaves ...v1alpha1.PodGroupTemplate) v1alpha1.CompositePodGroupTemplateFields {
	return v1alpha1.CompositePodGroupTemplateFields{
		Name:              name,
		SchedulingPolicy:  v1alpha1.CompositePodGroupSchedulingPolicy{Gang: &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: minGroupCount}},
		PodGroupTemplates: leaves,
	}
}

func TestBuildWorkloadCompilesTheTree(t *testing.T) {
	never := v1alpha1.PreemptNever
	claimTemplate := "gpu-template"

	cases := []struct {
		name string
		item func() *wb.WorkloadItem
		want v1alpha1.WorkloadSpec
	}{
		{
			name: "a leaf root compiles to one podGroupTemplate carrying every block",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingConstraints.Value = &wb.WorkloadPodGroupSchedulingConstraints{Topology: topology("rack")}
				it.Input.DisruptionMode.Value = allMode()
				it.Input.ResourceClaims.Value = []wb.WorkloadPodGroupResourceClaim{{Name: "gpus", ResourceClaimTemplateName: &claimTemplate}}
				it.Input.Priority.Value = &wb.WorkloadPriority{PriorityClassName: "high", Priority: int32p(7), PreemptionPolicy: &never}
				return it
			},
			want: v1alpha1.WorkloadSpec{PodGroupTemplates: []v1alpha1.PodGroupTemplate{{
				Name:                  "workers",
				SchedulingPolicy:      v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 4}},
				SchedulingConstraints: &v1alpha1.PodGroupSchedulingConstraints{Topology: topology("rack")},
				ResourceClaims:        []v1alpha1.PodGroupResourceClaim{{Name: "gpus", ResourceClaimTemplateName: &claimTemplate}},
				DisruptionMode:        &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}},
				PriorityClassName:     "high",
				Priority:              int32p(7),
				PreemptionPolicy:      &never,
			}}},
		},
		{
			name: "an item with no policy from anyone compiles to basic",
			item: func() *wb.WorkloadItem { it := jobItem(); it.Input.SchedulingPolicy.Value = nil; return it },
			want: v1alpha1.WorkloadSpec{PodGroupTemplates: []v1alpha1.PodGroupTemplate{{
				Name:             "workers",
				SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}},
			}}},
		},
		{
			name: "user input overrides the controller's defaults field by field",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingPolicy.Value = nil
				it.Defaults = &wb.Config{Policy: wb.GangPolicy, MinCount: int32p(3), Topology: topology("rack"), DisruptionMode: wb.SingleMode}
				it.Input.SchedulingConstraints.Value = &wb.WorkloadPodGroupSchedulingConstraints{Topology: topology("zone")}
				return it
			},
			want: v1alpha1.WorkloadSpec{PodGroupTemplates: []v1alpha1.PodGroupTemplate{{
				Name:                  "workers",
				SchedulingPolicy:      v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 3}},
				SchedulingConstraints: &v1alpha1.PodGroupSchedulingConstraints{Topology: topology("zone")},
				DisruptionMode:        &v1alpha1.DisruptionMode{Single: &v1alpha1.SingleDisruptionMode{}},
			}}},
		},
		{
			name: "a user's gang without minCount takes the count from the defaults",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingPolicy.Value.Gang.MinCount = nil
				it.Defaults = &wb.Config{Policy: wb.BasicPolicy, MinCount: int32p(5)}
				return it
			},
			want: v1alpha1.WorkloadSpec{PodGroupTemplates: []v1alpha1.PodGroupTemplate{gangTemplate("workers", 5)}},
		},
		{
			name: "Adjust runs after defaults and input and has the last word",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Defaults = &wb.Config{MinCount: int32p(2)}
				it.Adjust = []wb.AdjustFunc{
					func(c *wb.Config) { *c.MinCount *= 10 },
					nil, // skipped, so a controller may build the list conditionally
					func(c *wb.Config) { c.Topology = topology("rack") },
				}
				return it
			},
			want: v1alpha1.WorkloadSpec{PodGroupTemplates: []v1alpha1.PodGroupTemplate{{
				Name:                  "workers",
				SchedulingPolicy:      v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 40}},
				SchedulingConstraints: &v1alpha1.PodGroupSchedulingConstraints{Topology: topology("rack")},
			}}},
		},
		{
			name: "children inherit the root's priority fields",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.Priority.Value = &wb.WorkloadPriority{PriorityClassName: "high", Priority: int32p(100), PreemptionPolicy: &never}
				return it
			},
			want: func() v1alpha1.WorkloadSpec {
				a, b := gangTemplate("a", 4), gangTemplate("b", 4)
				for _, tmpl := range []*v1alpha1.PodGroupTemplate{&a, &b} {
					tmpl.PriorityClassName, tmpl.Priority, tmpl.PreemptionPolicy = "high", int32p(100), &never
				}
				root := compositeGangFields("root", 2, a, b)
				root.PriorityClassName, root.Priority, root.PreemptionPolicy = "high", int32p(100), &never
				return v1alpha1.WorkloadSpec{CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplate{{CompositePodGroupTemplateFields: root}}}
			}(),
		},
		{
			name: "a four-level tree compiles into the three unrolled composite levels",
			item: fourLevels,
			want: v1alpha1.WorkloadSpec{CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplate{{
				CompositePodGroupTemplateFields: compositeGangFields("l1", 1),
				CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplateLevel2{{
					CompositePodGroupTemplateFields: compositeGangFields("l2", 1),
					CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplateLevel3{{
						CompositePodGroupTemplateFields: compositeGangFields("l3", 1, gangTemplate("leaf", 4)),
					}},
				}},
			}}},
		},
		{
			name: "leaf and composite children of one composite go to their own lists in order",
			item: func() *wb.WorkloadItem {
				inner := compositeAt("inner", groupPath(specPath, 1), leafAt("c", groupPath(groupPath(specPath, 1), 0)))
				return compositeAt("root", specPath,
					leafAt("a", groupPath(specPath, 0)), inner, leafAt("b", groupPath(specPath, 2)))
			},
			want: v1alpha1.WorkloadSpec{CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplate{{
				CompositePodGroupTemplateFields: compositeGangFields("root", 3, gangTemplate("a", 4), gangTemplate("b", 4)),
				CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplateLevel2{{
					CompositePodGroupTemplateFields: compositeGangFields("inner", 1, gangTemplate("c", 4)),
				}},
			}}},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := wb.NewBuilder(tc.item(), wb.BuildOptions{Name: "w", Namespace: "ns"}).BuildWorkload()

			require.NoError(t, err)
			assert.Equal(t, tc.want, w.Spec)
		})
	}
}

func TestBuildWorkloadSetsIdentityAndOwner(t *testing.T) {
	controller := true
	cases := []struct {
		name          string
		owner         *metav1.OwnerReference
		wantOwners    []metav1.OwnerReference
		wantControlBy *v1alpha1.TypedLocalObjectReference
	}{
		{
			name:          "an owner in a named API group becomes the ownerReference and the controllerRef",
			owner:         &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "u1", Controller: &controller},
			wantOwners:    []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "u1", Controller: &controller}},
			wantControlBy: &v1alpha1.TypedLocalObjectReference{APIGroup: "batch", Kind: "Job", Name: "train"},
		},
		{
			name:          "an owner in the core group gets an empty apiGroup",
			owner:         &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "launcher", UID: "u2"},
			wantOwners:    []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "launcher", UID: "u2"}},
			wantControlBy: &v1alpha1.TypedLocalObjectReference{Kind: "Pod", Name: "launcher"},
		},
		{
			name: "no owner leaves the Workload unowned",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := wb.NewBuilder(jobItem(), wb.BuildOptions{Name: "train", Namespace: "ml", Owner: tc.owner}).BuildWorkload()

			require.NoError(t, err)
			assert.Equal(t, "train", w.Name)
			assert.Equal(t, "ml", w.Namespace)
			assert.Equal(t, tc.wantOwners, w.OwnerReferences)
			assert.Equal(t, tc.wantControlBy, w.Spec.ControllerRef)
		})
	}
}

func TestBuildWorkloadRefusesTreesItCannotExpress(t *testing.T) {
	cases := []struct {
		name    string
		item    func() *wb.WorkloadItem
		opts    wb.BuildOptions
		wantErr string
	}{
		{
			name:    "a nil root cannot be built",
			item:    func() *wb.WorkloadItem { return nil },
			wantErr: "the root WorkloadItem is nil",
		},
		{
			name:    "a nil child cannot be built",
			item:    func() *wb.WorkloadItem { it := gangOfGangs(); it.Children[0] = nil; return it },
			wantErr: `child 0 of WorkloadItem "root" is nil`,
		},
		{
			name: "a gang without minCount after defaults and adjustments cannot be built",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingPolicy.Value.Gang.MinCount = nil
				return it
			},
			wantErr: "gang policy has no minCount",
		},
		{
			name: "a composite gang without minGroupCount cannot be built",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.CompositeSchedulingPolicy.Value.Gang.MinGroupCount = nil
				return it
			},
			wantErr: "gang policy has no minGroupCount",
		},
		{
			name:    "a template name used twice cannot be built",
			item:    func() *wb.WorkloadItem { it := gangOfGangs(); it.Children[1].Name = "a"; return it },
			wantErr: `template name "a" is used twice`,
		},
		{
			name:    "an item without a name cannot be built",
			item:    func() *wb.WorkloadItem { it := jobItem(); it.Name = ""; return it },
			wantErr: "has no name",
		},
		{
			name: "a composite without children cannot be built",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Children = nil
				return it
			},
			wantErr: `composite template "root" has no child templates`,
		},
		{
			name: "a composite at the fourth level cannot be built",
			item: func() *wb.WorkloadItem {
				it := fourLevels()
				l3 := it.Children[0].Children[0]
				l3.Children = []*wb.WorkloadItem{compositeAt("l4", nil, leafAt("leaf", nil))}
				return it
			},
			wantErr: wb.MsgMaxDepth,
		},
		{
			name:    "an owner with a malformed apiVersion cannot be built",
			item:    jobItem,
			opts:    wb.BuildOptions{Owner: &metav1.OwnerReference{APIVersion: "a/b/c", Kind: "Job", Name: "j"}},
			wantErr: `owner apiVersion "a/b/c"`,
		},
		{
			name: "a policy an Adjust callback made up cannot be built",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Adjust = []wb.AdjustFunc{func(c *wb.Config) { c.Policy = "elastic" }}
				return it
			},
			wantErr: `unknown scheduling policy "elastic"`,
		},
		{
			name: "a disruption mode an Adjust callback made up cannot be built",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Adjust = []wb.AdjustFunc{func(c *wb.Config) { c.DisruptionMode = "some" }}
				return it
			},
			wantErr: `unknown disruption mode "some"`,
		},
		{
			name: "resource claims defaulted onto a composite cannot be built",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Defaults = &wb.Config{ResourceClaims: []v1alpha1.PodGroupResourceClaim{{Name: "gpus"}}}
				return it
			},
			wantErr: "a composite template cannot hold resource claims",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := wb.NewBuilder(tc.item(), tc.opts).BuildWorkload()

			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Nil(t, w)
		})
	}
}

func TestBuildWorkloadCompilesOnceAndCaches(t *testing.T) {
	compiles := 0
	it := jobItem()
	it.Adjust = []wb.AdjustFunc{func(*wb.Config) { compiles++ }}
	b := wb.NewBuilder(it, wb.BuildOptions{Name: "w"})

	first, err := b.BuildWorkload()
	require.NoError(t, err)
	require.Equal(t, 1, compiles)

	second, err := b.BuildWorkload()
	require.NoError(t, err)
	_, err = b.NewPodGroup("w-workers", "workers")
	require.NoError(t, err)
	_, _, err = b.Groups()
	require.NoError(t, err)

	assert.Same(t, first, second, "the second call returns the cached object")
	assert.Equal(t, 1, compiles, "neither BuildWorkload nor the group constructors recompile")
}

func TestBuildWorkloadKeepsTheCallersInputsIntact(t *testing.T) {
	it := jobItem()
	it.Input.SchedulingPolicy.Value.Gang.MinCount = nil
	it.Defaults = &wb.Config{MinCount: int32p(4), Topology: topology("rack")}
	it.Input.Priority.Value = &wb.WorkloadPriority{Priority: int32p(10)}
	it.Adjust = []wb.AdjustFunc{func(c *wb.Config) {
		*c.MinCount = 99
		c.Topology[0].Key = "zone"
		*c.Priority = 20
	}}

	w, err := wb.NewBuilder(it, wb.BuildOptions{Name: "w"}).BuildWorkload()
	require.NoError(t, err)

	assert.Equal(t, int32(99), w.Spec.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount)
	assert.Equal(t, int32(4), *it.Defaults.MinCount, "Adjust works on a copy of the defaults")
	assert.Equal(t, "rack", it.Defaults.Topology[0].Key)
	assert.Equal(t, int32(10), *it.Input.Priority.Value.Priority, "Adjust works on a copy of the input")
}

func TestNewBuilderFromExistingWorkload(t *testing.T) {
	t.Run("it returns the supplied Workload untouched instead of compiling", func(t *testing.T) {
		w := &v1alpha1.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"},
			Spec:       v1alpha1.WorkloadSpec{PodGroupTemplates: []v1alpha1.PodGroupTemplate{gangTemplate("workers", 3)}},
		}
		before := w.DeepCopy()
		b, err := wb.NewBuilderFromExistingWorkload(w, wb.BuildOptions{})
		require.NoError(t, err)

		got, err := b.BuildWorkload()
		require.NoError(t, err)
		pg, err := b.NewPodGroup("w-workers", "workers")
		require.NoError(t, err)

		assert.Same(t, w, got)
		assert.Equal(t, before, w, "the stored Workload is not modified")
		assert.Equal(t, int32(3), pg.Spec.SchedulingPolicy.Gang.MinCount)
	})

	t.Run("it does not second-guess a stored Workload the builder would refuse to compile", func(t *testing.T) {
		// minCount 0 and a basic+all template would fail Validate; the
		// stored object is taken as the API server accepted it.
		w := &v1alpha1.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: "w"},
			Spec: v1alpha1.WorkloadSpec{PodGroupTemplates: []v1alpha1.PodGroupTemplate{{
				Name:             "odd",
				SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}},
				DisruptionMode:   &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}},
			}}},
		}
		b, err := wb.NewBuilderFromExistingWorkload(w, wb.BuildOptions{})
		require.NoError(t, err)

		pg, err := b.NewPodGroup("w-odd", "odd")

		require.NoError(t, err)
		assert.NotNil(t, pg.Spec.DisruptionMode.All)
	})

	t.Run("it refuses a nil Workload", func(t *testing.T) {
		b, err := wb.NewBuilderFromExistingWorkload(nil, wb.BuildOptions{})

		assert.Error(t, err)
		assert.Nil(t, b)
	})
}
