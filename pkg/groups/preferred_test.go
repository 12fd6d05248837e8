package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

const (
	rack  = "topology.phalanx.dev/rack"
	block = "topology.phalanx.dev/block"
	zone  = "topology.kubernetes.io/zone"
)

// Every dialect's preferred topology levels reach the one Spec, narrowest
// first, next to the required key.
func TestPreferredLevelsInEveryDialect(t *testing.T) {
	phalanx := podGroup("a", 4, "")
	phalanx.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{
		Topology:          []v1alpha1.TopologyConstraint{{Key: zone}},
		PreferredTopology: []v1alpha1.TopologyConstraint{{Key: rack}, {Key: block}},
	}
	native := &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{PreferredTopologyAnnotation: rack + ", " + block}},
		Spec: schedv1beta1.PodGroupSpec{
			SchedulingPolicy:      schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 4}},
			SchedulingConstraints: &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: zone}}},
		},
	}
	x := &xv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{XTopologyKeyAnnotation: zone, PreferredTopologyAnnotation: rack + "," + block}},
		Spec:       xv1alpha1.PodGroupSpec{MinMember: 4},
	}
	for name, s := range map[string]Spec{"phalanx": SpecOfPodGroup(phalanx), "upstream": SpecOfNativePodGroup(native), "scheduler-plugins": SpecOfXPodGroup(x)} {
		assert.Equal(t, zone, s.TopologyKey, name)
		assert.Equal(t, []string{rack, block}, s.PreferredKeys, name)
		assert.Empty(t, s.Invalid, name)
	}

	c := NewCache()
	c.SetPodGroup(phalanx)
	info, _ := c.Get(pgKey("a"))
	assert.Equal(t, []string{rack, block}, info.PreferredKeys, "the cache keeps them")
}

// The annotation is checked as the Phalanx schema checks the field, and a
// mistake is an Invalid reason naming the annotation.
func TestPreferredAnnotationValidation(t *testing.T) {
	x := func(ann map[string]string) Spec {
		return SpecOfXPodGroup(&xv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: ann}, Spec: xv1alpha1.PodGroupSpec{MinMember: 2}})
	}
	native := func(ann map[string]string) Spec {
		return SpecOfNativePodGroup(&schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: ann},
			Spec: schedv1beta1.PodGroupSpec{SchedulingConstraints: &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: zone}}}}})
	}
	for name, tc := range map[string]struct {
		spec Spec
		want string
	}{
		"an empty level":        {x(map[string]string{PreferredTopologyAnnotation: rack + ",,"}), `annotation scheduling.phalanx.dev/preferred-topology="topology.phalanx.dev/rack,,": level 2 is empty`},
		"not a label key":       {x(map[string]string{PreferredTopologyAnnotation: "not a key!"}), `"not a key!" is not a valid node label key`},
		"a level twice":         {x(map[string]string{PreferredTopologyAnnotation: rack + "," + rack}), "appears twice"},
		"the required key":      {native(map[string]string{PreferredTopologyAnnotation: rack + "," + zone}), `"topology.kubernetes.io/zone" is the required topology key`},
		"the x required key":    {x(map[string]string{XTopologyKeyAnnotation: rack, PreferredTopologyAnnotation: rack}), "is the required topology key"},
		"too many":              {x(map[string]string{PreferredTopologyAnnotation: "a,b,c,d,e"}), "5 levels, at most 4"},
		"on a native composite": {SpecOfNativeComposite(&schedv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{PreferredTopologyAnnotation: rack}}}), "belong on PodGroups"},
	} {
		assert.Contains(t, tc.spec.Invalid, tc.want, name)
		assert.Empty(t, tc.spec.PreferredKeys, name)
	}
	// An earlier problem of a scheduler-plugins group is not hidden by a
	// well-formed annotation.
	s := x(map[string]string{PreferredTopologyAnnotation: rack, XParentAnnotation: "Not_A_Name"})
	assert.Contains(t, s.Invalid, XParentAnnotation)
	annotated := &xv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{PreferredTopologyAnnotation: rack}}, Spec: xv1alpha1.PodGroupSpec{MinMember: 2}}
	plain := annotated.DeepCopy()
	plain.Annotations = nil
	assert.False(t, SameSpec(SpecOfXPodGroup(plain), SpecOfXPodGroup(annotated)), "adding levels is a change of the group")
}
