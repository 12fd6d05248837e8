package planinput

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// TestSpreadLimitNamesEvictablePods: for preemption, the spread limit of a
// gang names the running pods it counts that the gang may evict, with the
// domain each is counted in; the room per domain is the same as for a
// plan, and not clamped, so the victim search can read the counts back.
func TestSpreadLimitNamesEvictablePods(t *testing.T) {
	foo := map[string]string{"app": "foo"}
	running := func(name, node string, prio int32) *corev1.Pod {
		p := testPod(name, "1", node)
		p.Labels = foo
		p.Spec.Priority = &prio
		return p
	}
	var infos []fwk.NodeInfo
	pods := map[string][]*corev1.Pod{
		// n1 counts two, one evictable; n2 one, evictable.
		"n1": {running("keep", "n1", 500), running("low-1", "n1", 10)},
		"n2": {running("low-2", "n2", 5)},
	}
	for _, name := range []string{"n1", "n2"} {
		ni := snapshotNode(name, "16")
		ni.Node().Labels[corev1.LabelHostname] = name
		for _, p := range pods[name] {
			ni.AddPod(p)
		}
		infos = append(infos, ni)
	}
	member := func(name string) groups.Member {
		p := testPod(name, "1", "")
		p.Labels = foo
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: foo},
		}}
		return groups.Member{Pod: p, State: groups.Pending}
	}
	tree := &groups.Tree{
		Info:    groups.Info{Key: groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "g"}, Gang: true, MinCount: 2},
		Members: []groups.Member{member("m-0"), member("m-1")},
	}
	limitOf := func(c *Constraints) placement.DomainLimit {
		t.Helper()
		g, _, err := BuildInput(tree, c)
		require.NoError(t, err)
		require.Len(t, g.Shapes, 1)
		require.Len(t, g.Shapes[0].Limits, 1)
		return g.Shapes[0].Limits[0]
	}

	plain := limitOf(&Constraints{Nodes: infos})
	assert.Equal(t, map[string]int{"n1": 0, "n2": 1}, plain.PerDomain, "least loaded domain n2 holds one: n1 is full at two")
	assert.Equal(t, 2, plain.Max)
	assert.Nil(t, plain.Victims)

	preempting := limitOf(&Constraints{Nodes: infos, Evictable: func(p *corev1.Pod) bool { return *p.Spec.Priority < 100 }})
	assert.Equal(t, map[string]string{"uid-low-1": "n1", "uid-low-2": "n2"}, preempting.Victims)
	assert.Equal(t, plain.PerDomain, preempting.PerDomain)
	assert.Equal(t, plain.Max, preempting.Max)
	assert.False(t, preempting.FixedFloor)

	// With more domains required than there are, the floor is zero and
	// stays so: n1 is one past maxSkew 1.
	for i := range tree.Members {
		tree.Members[i].Pod.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To[int32](3)
	}
	floored := limitOf(&Constraints{Nodes: infos, Evictable: func(p *corev1.Pod) bool { return *p.Spec.Priority < 100 }})
	assert.Equal(t, map[string]int{"n1": -1, "n2": 0}, floored.PerDomain)
	assert.True(t, floored.FixedFloor)
}
