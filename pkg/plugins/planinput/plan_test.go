package planinput

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func testPod(name string, cpu string, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		}}},
	}
}

func TestPlanInputGroupsPodsByShapeAndFixesPlacedMembers(t *testing.T) {
	tree := &groups.Tree{
		Info: groups.Info{Key: groups.Key{Kind: groups.CompositeKind, Namespace: "ns", Name: "root"}, Gang: true, MinGroupCount: 1, TopologyKey: "zone"},
		Children: []*groups.Tree{{
			Info: groups.Info{Key: groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "leaf"}, Gang: true, MinCount: 3, TopologyKey: "rack"},
			Members: []groups.Member{
				{Pod: testPod("a", "1", ""), State: groups.Pending},
				{Pod: testPod("b", "1", ""), State: groups.Pending},
				{Pod: testPod("c", "2", ""), State: groups.Pending},
				{Pod: testPod("d", "1", ""), State: groups.Assumed, Node: "n1"},
				{Pod: testPod("e", "1", "n2"), State: groups.Bound, Node: "n2"},
				{Pod: testPod("f", "1", ""), State: groups.Finished},
			},
		}},
	}
	g, uids := PlanInput(tree)
	require.Len(t, g.Children, 1)
	assert.Equal(t, placement.Gang, g.Policy)
	assert.Equal(t, 1, g.MinGroupCount)
	assert.Equal(t, "zone", g.TopologyKey)
	leaf := g.Children[0]
	assert.Equal(t, 3, leaf.MinCount)
	assert.Equal(t, "rack", leaf.TopologyKey)
	assert.Len(t, leaf.Shapes, 2, "1-cpu and 2-cpu pods form two shapes")
	assert.Len(t, leaf.Pending, 3)
	assert.Equal(t, leaf.Pending[0].Shape, leaf.Pending[1].Shape, "identical pods share a shape")
	assert.NotEqual(t, leaf.Pending[0].Shape, leaf.Pending[2].Shape)
	assert.Equal(t, []placement.BoundPod{{Key: "uid-d", Node: "n1"}, {Key: "uid-e", Node: "n2"}}, leaf.Bound)
	assert.Len(t, uids, 6, "every member's own nominations are excluded")
	assert.Equal(t, int64(2000), placement.PodRequests(testPod("x", "2", ""))[corev1.ResourceCPU], "cpu is in millicores")
}

func TestPodsWithAdmissionDefaultTolerationsShareAShape(t *testing.T) {
	// Admission gives every pod its own copy of the not-ready/unreachable
	// tolerations, each with its own TolerationSeconds pointer.
	withDefaults := func(name string) *corev1.Pod {
		p := testPod(name, "1", "")
		for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{
				Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300),
			})
		}
		return p
	}
	tree := &groups.Tree{
		Info:    groups.Info{Key: groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "g"}, Gang: true, MinCount: 3},
		Members: []groups.Member{{Pod: withDefaults("a")}, {Pod: withDefaults("b")}, {Pod: withDefaults("c")}},
	}
	g, _, err := BuildInput(tree, &Constraints{})
	require.NoError(t, err)
	assert.Len(t, g.Shapes, 1, "identical pods are one shape, so a constrained shape is probed once")

	other := withDefaults("d")
	other.Spec.Tolerations[0].TolerationSeconds = ptr.To[int64](60)
	tree.Members = append(tree.Members, groups.Member{Pod: other})
	g, _, err = BuildInput(tree, &Constraints{})
	require.NoError(t, err)
	assert.Len(t, g.Shapes, 2, "a different tolerationSeconds is a different shape")
}

func TestMembersWithSpreadPointersShareAShape(t *testing.T) {
	// Every member decoded from the API has its own minDomains and
	// inclusion-policy pointers.
	member := func(name string, minDomains int32) groups.Member {
		p := testPod(name, "1", "")
		p.Labels = map[string]string{"app": "foo"}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foo"}},
			MinDomains:         ptr.To(minDomains),
			NodeAffinityPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
		}}
		return groups.Member{Pod: p, State: groups.Pending}
	}
	tree := &groups.Tree{
		Info:    groups.Info{Key: groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "g"}, Gang: true, MinCount: 3},
		Members: []groups.Member{member("a", 3), member("b", 3), member("c", 3)},
	}
	g, _, err := BuildInput(tree, &Constraints{})
	require.NoError(t, err)
	assert.Len(t, g.Shapes, 1, "one template is one shape, probed once")

	tree.Members = append(tree.Members, member("d", 4))
	g, _, err = BuildInput(tree, &Constraints{})
	require.NoError(t, err)
	assert.Len(t, g.Shapes, 2, "a different minDomains is a different shape")
}
