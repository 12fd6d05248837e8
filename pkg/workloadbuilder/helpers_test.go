package workloadbuilder_test

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	wb "github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

// Fixtures shared by the tests. Items put their blocks at the conventional
// paths under Path unless a test is about paths.

var (
	jobPath  = field.NewPath("spec", "scheduling")
	specPath = field.NewPath("spec")
)

func int32p(v int32) *int32 { return &v }

func basic() *wb.WorkloadPodGroupSchedulingPolicy {
	return &wb.WorkloadPodGroupSchedulingPolicy{Basic: &wb.WorkloadPodGroupBasicSchedulingPolicy{}}
}

func compositeGang(n int32) *wb.WorkloadCompositePodGroupSchedulingPolicy {
	return &wb.WorkloadCompositePodGroupSchedulingPolicy{Gang: &wb.WorkloadCompositePodGroupGangSchedulingPolicy{MinGroupCount: &n}}
}

func compositeBasic() *wb.WorkloadCompositePodGroupSchedulingPolicy {
	return &wb.WorkloadCompositePodGroupSchedulingPolicy{Basic: &wb.WorkloadCompositePodGroupBasicSchedulingPolicy{}}
}

func allMode() *wb.WorkloadPodGroupDisruptionMode {
	return &wb.WorkloadPodGroupDisruptionMode{All: &wb.WorkloadPodGroupAllDisruptionMode{}}
}

func topology(keys ...string) []v1alpha1.TopologyConstraint {
	var out []v1alpha1.TopologyConstraint
	for _, k := range keys {
		out = append(out, v1alpha1.TopologyConstraint{Key: k})
	}
	return out
}

// jobItem is a Job's single gang of 4 at spec.scheduling.
func jobItem() *wb.WorkloadItem {
	return &wb.WorkloadItem{
		Name:  "workers",
		Path:  jobPath,
		Input: wb.Input{SchedulingPolicy: wb.Block[*wb.WorkloadPodGroupSchedulingPolicy]{Value: gangOf(4)}},
	}
}

// leafAt is a gang-of-4 leaf whose blocks live at path.
func leafAt(name string, path *field.Path) *wb.WorkloadItem {
	it := jobItem()
	it.Name, it.Path = name, path
	return it
}

// groupPath is where child i of the item at parent lives.
func groupPath(parent *field.Path, i int) *field.Path {
	return parent.Child("groups").Index(i)
}

// compositeAt is a composite gang over children, needing all of them.
func compositeAt(name string, path *field.Path, children ...*wb.WorkloadItem) *wb.WorkloadItem {
	return &wb.WorkloadItem{
		Name: name,
		Path: path,
		Input: wb.Input{CompositeSchedulingPolicy: wb.Block[*wb.WorkloadCompositePodGroupSchedulingPolicy]{
			Value: compositeGang(int32(max(len(children), 1))),
		}},
		Children: children,
	}
}

// gangOfGangs is a root composite at spec with two gang leaves a and b at
// spec.groups[0] and spec.groups[1].
func gangOfGangs() *wb.WorkloadItem {
	return compositeAt("root", specPath,
		leafAt("a", groupPath(specPath, 0)),
		leafAt("b", groupPath(specPath, 1)))
}

// fourLevels is the deepest tree allowed: three composites and a leaf.
func fourLevels() *wb.WorkloadItem {
	l2 := groupPath(specPath, 0)
	l3 := groupPath(l2, 0)
	return compositeAt("l1", specPath,
		compositeAt("l2", l2,
			compositeAt("l3", l3,
				leafAt("leaf", groupPath(l3, 0)))))
}
